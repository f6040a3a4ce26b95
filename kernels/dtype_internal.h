// Private to kernels/: C++ element types for each DType, the type kernels compute in, and
// dispatch macros that bind `scalar_t` to the C++ type of a runtime DType.
#pragma once

#include <complex>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <Eigen/Core>

#include "bridge/dtype.h"
#include "bridge/error.h"

namespace tb::kernels {

using Half = Eigen::half;
using BFloat16 = Eigen::bfloat16;

// The type arithmetic is done in: float for the 16-bit floating types (as PyTorch does on
// CPU), the type itself otherwise.
template <typename T>
struct OpMath {
  using type = T;
};
template <>
struct OpMath<Half> {
  using type = float;
};
template <>
struct OpMath<BFloat16> {
  using type = float;
};
template <typename T>
using opmath_t = typename OpMath<T>::type;

template <typename T>
inline constexpr bool kIsReducedFloat = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
template <typename T>
inline constexpr bool kIsFloating = std::is_floating_point_v<T> || kIsReducedFloat<T>;

// bfloat16 <-> float32 by their bits: widening shifts them, narrowing rounds to nearest even and
// makes NaN the quiet 0x7fc0 (torch's rounding, and kernels/cpu/simd.cc's rows). Branch-free,
// so element loops over them vectorise.
inline float Bf16ToFloat(BFloat16 v) {
  const uint32_t u = static_cast<uint32_t>(Eigen::numext::bit_cast<uint16_t>(v)) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}
inline BFloat16 FloatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t r = (u & 0x7fffffffu) > 0x7f800000u ? 0x7fc0u : rounded;
  return Eigen::numext::bit_cast<BFloat16>(static_cast<uint16_t>(r));
}

// Converts between element types the way torch does (bool: nonzero; float -> int truncates).
template <typename To, typename From>
inline To Convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    return static_cast<float>(v) != 0.0f || static_cast<double>(v) != 0.0;
  } else if constexpr (kIsReducedFloat<From>) {
    return static_cast<To>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, BFloat16>) {
    return FloatToBf16(static_cast<float>(v));
  } else if constexpr (kIsReducedFloat<To>) {
    return To(static_cast<float>(v));
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace tb::kernels

// ---- dispatch ---------------------------------------------------------------------------------
// TB_DISPATCH(dtype, "aten::op", TB_TYPES_ALL, [&] { using T = scalar_t; ... });
#define TB_DISPATCH_CASE_(ENUM, TYPE, ...) \
  case ::tb::DType::ENUM: {                \
    using scalar_t = TYPE;                 \
    __VA_ARGS__();                         \
    return;                                \
  }

#define TB_CASES_FLOAT_(...)                                         \
  TB_DISPATCH_CASE_(kFloat32, float, __VA_ARGS__)                    \
  TB_DISPATCH_CASE_(kFloat64, double, __VA_ARGS__)                   \
  TB_DISPATCH_CASE_(kBFloat16, ::tb::kernels::BFloat16, __VA_ARGS__) \
  TB_DISPATCH_CASE_(kFloat16, ::tb::kernels::Half, __VA_ARGS__)
#define TB_CASES_INT_(...)                        \
  TB_DISPATCH_CASE_(kInt64, int64_t, __VA_ARGS__) \
  TB_DISPATCH_CASE_(kInt32, int32_t, __VA_ARGS__) \
  TB_DISPATCH_CASE_(kInt16, int16_t, __VA_ARGS__) \
  TB_DISPATCH_CASE_(kInt8, int8_t, __VA_ARGS__)   \
  TB_DISPATCH_CASE_(kUInt8, uint8_t, __VA_ARGS__)
#define TB_CASES_BOOL_(...) TB_DISPATCH_CASE_(kBool, bool, __VA_ARGS__)

#define TB_TYPES_FLOAT(...) TB_CASES_FLOAT_(__VA_ARGS__)
#define TB_TYPES_INT(...) TB_CASES_INT_(__VA_ARGS__)
#define TB_TYPES_INT_BOOL(...) TB_CASES_INT_(__VA_ARGS__) TB_CASES_BOOL_(__VA_ARGS__)
#define TB_TYPES_NUMERIC(...) TB_CASES_FLOAT_(__VA_ARGS__) TB_CASES_INT_(__VA_ARGS__)
#define TB_TYPES_ALL(...) \
  TB_CASES_FLOAT_(__VA_ARGS__) TB_CASES_INT_(__VA_ARGS__) TB_CASES_BOOL_(__VA_ARGS__)
// float32 and float64 only (ops whose torch CPU kernels serve no 16-bit float).
#define TB_TYPES_F32_F64(...)                     \
  TB_DISPATCH_CASE_(kFloat32, float, __VA_ARGS__) \
  TB_DISPATCH_CASE_(kFloat64, double, __VA_ARGS__)

// Runs the lambda (the last argument) with scalar_t bound to DTYPE's C++ type, for the
// dtypes of TYPES; any other dtype is declined (TB_DECLINE: a NotImplementedError naming OP
// that the fallback may serve). Returns nothing: write results through captured references.
#define TB_DISPATCH(DTYPE, OP, TYPES, ...)                                                      \
  [&] {                                                                                         \
    switch (DTYPE) {                                                                            \
      TYPES(__VA_ARGS__)                                                                        \
      default: TB_DECLINE << OP << ": dtype " << ::tb::DTypeName(DTYPE) << " is not supported"; \
    }                                                                                           \
  }()
