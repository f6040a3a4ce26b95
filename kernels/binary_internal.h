// Private to kernels/: what the binary, comparison and ternary element-wise kernels share:
// the Elementwise driver (device checks, broadcasting, casting to the compute dtype, writing
// into out= / in-place destinations), loops with a fast path for scalar operands, wrapping
// integer arithmetic and PyTorch's casting rules.
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <type_traits>
#include <vector>

#include "bridge/tensor.h"
#include "dispatch/value.h"
#include "kernels/common_internal.h"
#include "kernels/dtype_internal.h"
#include "kernels/loops_internal.h"
#include "kernels/promote_broadcast.h"

namespace tb::kernels {

// ---- checks and type rules ----------------------------------------------------------------

// torch.can_cast: no complex -> real, no floating -> integral, nothing but bool -> bool.
bool CanCast(DType from, DType to);
// The dtype a Python number of this kind wraps to: bool, int64 or float64.
DType ScalarDType(const Scalar& s);
// A Scalar argument as a type-promotion operand (a wrapped number).
inline PromotionOperand ScalarOperand(const Scalar& s) { return {ScalarDType(s), true, true}; }
// A Scalar argument as the 0-d wrapped-number tensor torch makes of it.
Tensor WrapScalar(const Scalar& s);
// torch's alpha_check: a bool alpha needs a bool result; integral results need an integral
// alpha. TypeError naming `op` and `name` ("alpha", "value").
void CheckAlpha(const char* op, DType result, const Scalar& alpha, const char* name = "alpha");
// TypeError naming `op` unless `dtype` is one of the integral types (bool included when
// `allow_bool`).
void CheckIntegral(const char* op, DType dtype, bool allow_bool);
// TypeError naming `op` for bool tensors (ops torch does not implement for bool).
void CheckNotBool(const char* op, DType dtype);
// TypeError naming `op` unless `dtype` is floating point.
void CheckFloating(const char* op, DType dtype);
// The dtype true division and the float ops (atan2, copysign, ...) compute in: integral and
// bool results become float32 (torch's default dtype).
inline DType FloatResult(DType t) { return IsIntegral(t, true) ? DType::kFloat32 : t; }

// A Scalar argument (alpha, a clamp bound, ...) as the C++ type T the kernel computes in,
// checked as torch's Scalar::to<T> checks it: ValueError naming `op` and `name` when the value
// does not fit (negative integers may wrap into unsigned types; inf and NaN fit floats).
template <typename T>
T ScalarTo(const char* op, const char* name, const Scalar& s) {
  using L = std::numeric_limits<std::conditional_t<kIsReducedFloat<T>, float, T>>;
  if constexpr (std::is_same_v<T, bool>) {
    return s.to_double() != 0;
  } else if constexpr (std::is_integral_v<T>) {
    if (s.is_floating_point()) {
      const double d = s.to_double();
      // max + 1 is a power of two, exact as a double.
      const bool fits =
          d >= static_cast<double>(L::lowest()) && d < static_cast<double>(L::max()) + 1.0;
      TB_CHECK(fits, ValueError) << op << ": " << name << " = " << d
                                 << " cannot be converted to the tensor type without overflow";
      return static_cast<T>(d);
    }
    const int64_t v = s.to_int();
    bool fits;
    if constexpr (std::is_unsigned_v<T>) {
      const uint64_t mag = v < 0 ? 0ULL - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
      fits = mag <= static_cast<uint64_t>(L::max());
    } else {
      fits = v >= static_cast<int64_t>(L::lowest()) && v <= static_cast<int64_t>(L::max());
    }
    TB_CHECK(fits, ValueError) << op << ": " << name << " = " << v
                               << " cannot be converted to the tensor type without overflow";
    return static_cast<T>(v);
  } else {
    const double d = s.to_double();
    const bool fits = std::isinf(d) || std::isnan(d) ||
                      (d >= static_cast<double>(L::lowest()) && d <= static_cast<double>(L::max()));
    TB_CHECK(fits, ValueError) << op << ": " << name << " = " << d
                               << " cannot be converted to the tensor type without overflow";
    return Convert<T>(d);
  }
}

// ---- the driver -----------------------------------------------------------------------------

// An input of an element-wise op and the dtype the kernel reads it in.
struct Input {
  const Tensor* tensor;
  DType dtype;
};

// body(out, in): `in` holds the inputs converted to their dtypes and broadcast (as views) to
// the result shape; `out` has that shape and the result dtype. Only called for non-empty
// results.
using ElementwiseBody = std::function<void(const Tensor& out, const std::vector<Tensor>& in)>;

// Runs an element-wise op. Without `dest` the result is a new C-contiguous tensor. With
// `dest` (in-place self or out=) the result is written into it and `dest` is returned: its
// shape must equal the broadcast shape (ValueError), the result dtype must cast to its dtype
// (TypeError), it must be writable and have no two elements at one address. When `dest` has
// another dtype, or an input overlaps it other than element for element, the result is
// computed into a temporary and copied in.
Tensor Elementwise(const char* op, const std::vector<Input>& inputs, DType result,
                   const Tensor* dest, const ElementwiseBody& body);

// ---- loops -----------------------------------------------------------------------------------

// True when every element of `t` is the same one (a broadcast scalar).
inline bool IsScalarLike(const Tensor& t) {
  for (int64_t d = 0; d < t.ndim(); ++d) {
    if (t.shape()[d] != 1 && t.strides()[d] != 0) return false;
  }
  return true;
}

// out[i] = f(a[i], b[i]); a broadcast scalar operand is read once and held in a register, so
// `tensor op scalar` runs the same vectorisable flat loop as the contiguous case.
template <typename Out, typename A, typename B, typename F>
void BinaryMap(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  if (IsScalarLike(b)) {
    const B bv = *b.data_as<const B>();
    Map<Out, A>(
        out, [f, bv](A x) { return f(x, bv); }, a);
  } else if (IsScalarLike(a)) {
    const A av = *a.data_as<const A>();
    Map<Out, B>(
        out, [f, av](B y) { return f(av, y); }, b);
  } else {
    Map<Out, A, B>(out, f, a, b);
  }
}

// Wraps f, written on opmath values, into a function on T values: Half/BFloat16 compute in
// float and round once.
template <typename T, typename F>
auto OnOpMath(F f) {
  return [f](T x, T y) -> T {
    using M = opmath_t<T>;
    if constexpr (std::is_same_v<T, BFloat16>) {
      return FloatToBf16(f(Bf16ToFloat(x), Bf16ToFloat(y)));
    } else {
      return static_cast<T>(f(static_cast<M>(x), static_cast<M>(y)));
    }
  };
}

// Set from inside a (possibly parallel) loop; checked after it. Loops must not throw.
class LoopFlag {
 public:
  void Set() const { set_.store(true, std::memory_order_relaxed); }
  bool get() const { return set_.load(std::memory_order_relaxed); }

 private:
  mutable std::atomic<bool> set_{false};
};

// ---- dispatch with a generic body -----------------------------------------------------------

template <typename T>
struct TypeTag {
  using type = T;
};

}  // namespace tb::kernels

// TB_DISPATCH with a generic body: [&](auto tag) { using T = typename decltype(tag)::type; }.
// The body is a template, so `if constexpr` on T drops branches that only compile for other
// types (integer % on floats, ...).
#define TB_DISPATCH_T(DTYPE, OP, TYPES, ...) \
  TB_DISPATCH(DTYPE, OP, TYPES, [&] { (__VA_ARGS__)(::tb::kernels::TypeTag<scalar_t>{}); })

namespace tb::kernels {

// ---- wrapping integer arithmetic (two's complement, as torch's integer tensors wrap) --------

template <typename T>
using WideUnsigned = std::conditional_t<sizeof(T) <= 4, uint32_t, uint64_t>;

template <typename T>
inline T WrapAdd(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using W = WideUnsigned<T>;
    return static_cast<T>(static_cast<W>(a) + static_cast<W>(b));
  } else {
    return a + b;
  }
}
template <typename T>
inline T WrapSub(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using W = WideUnsigned<T>;
    return static_cast<T>(static_cast<W>(a) - static_cast<W>(b));
  } else {
    return a - b;
  }
}
template <typename T>
inline T WrapMul(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return a && b;
  } else if constexpr (std::is_integral_v<T>) {
    using W = WideUnsigned<T>;
    return static_cast<T>(static_cast<W>(a) * static_cast<W>(b));
  } else {
    return a * b;
  }
}

// Integer division that does not trap: the caller has excluded b == 0; MIN / -1 wraps.
template <typename T>
inline T TruncDivInt(T a, T b) {
  if constexpr (std::is_signed_v<T>) {
    if (b == -1) return WrapSub<T>(0, a);
  }
  return static_cast<T>(a / b);
}
template <typename T>
inline T TruncModInt(T a, T b) {
  if constexpr (std::is_signed_v<T>) {
    if (b == -1) return 0;
  }
  return static_cast<T>(a % b);
}
// Python's floor division and modulo on integers (b != 0).
template <typename T>
inline T FloorDivInt(T a, T b) {
  T q = TruncDivInt(a, b);
  if constexpr (std::is_signed_v<T>) {
    if ((a < 0) != (b < 0) && TruncModInt(a, b) != 0) q = static_cast<T>(q - 1);
  }
  return q;
}
template <typename T>
inline T FloorModInt(T a, T b) {
  T r = TruncModInt(a, b);
  if constexpr (std::is_signed_v<T>) {
    if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
  }
  return r;
}

// torch's div_floor_floating: floor(a / b) computed so that it agrees with fmod.
template <typename M>
inline M FloorDivFloat(M a, M b) {
  if (b == 0) return a / b;
  M mod = std::fmod(a, b);
  M div = (a - mod) / b;
  if (mod != 0 && (b < 0) != (mod < 0)) div -= M(1);
  if (div == 0) return std::copysign(M(0), a / b);
  M floordiv = std::floor(div);
  if (div - floordiv > M(0.5)) floordiv += M(1);
  return floordiv;
}
// Python's modulo on floats (the sign of the divisor).
template <typename M>
inline M FloorModFloat(M a, M b) {
  M mod = std::fmod(a, b);
  if (mod != 0 && ((b < 0) != (mod < 0))) mod += b;
  return mod;
}

}  // namespace tb::kernels
