// Element types. Every type a DLPack producer can hand us has a DType; the ones kernels
// compute on are those for which IsComputable() is true, the rest are storage only
// (they can be wrapped, viewed, copied and exported back, not computed on).
#pragma once

#include <cstdint>
#include <string_view>

#include "bridge/api.h"

namespace tb {

enum class DType : uint8_t {
  kBool,
  kUInt8,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kUInt16,
  kUInt32,
  kUInt64,
  kFloat16,
  kBFloat16,
  kFloat32,
  kFloat64,
  kComplex64,
  kComplex128,
  // Storage-only types (DLPack float8/6/4 codes).
  kFloat8_e3m4,
  kFloat8_e4m3,
  kFloat8_e4m3b11fnuz,
  kFloat8_e4m3fn,
  kFloat8_e4m3fnuz,
  kFloat8_e5m2,
  kFloat8_e5m2fnuz,
  kFloat8_e8m0fnu,
  kFloat6_e2m3fn,
  kFloat6_e3m2fn,
  kFloat4_e2m1fn,
};

inline constexpr int kNumDTypes = static_cast<int>(DType::kFloat4_e2m1fn) + 1;

// Bits one element takes in packed storage (6 and 4 for the sub-byte float types).
TB_API int DTypeBits(DType dtype);
// Bytes one element takes when it is byte-addressable; sub-byte types report 1 (padded).
inline int DTypeSize(DType dtype) { return (DTypeBits(dtype) + 7) / 8; }
// PyTorch-style name: "float32", "bfloat16", "bool", "float8_e4m3fn", ...
TB_API std::string_view DTypeName(DType dtype);
// Parses a DTypeName() result; returns false when the name is unknown.
TB_API bool DTypeFromName(std::string_view name, DType* out);

inline bool IsFloatingPoint(DType t) {
  return t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kFloat32 ||
         t == DType::kFloat64;
}
inline bool IsComplex(DType t) { return t == DType::kComplex64 || t == DType::kComplex128; }
inline bool IsIntegral(DType t, bool include_bool) {
  return (t >= DType::kUInt8 && t <= DType::kUInt64) || (include_bool && t == DType::kBool);
}
inline bool IsStorageOnly(DType t) { return t >= DType::kFloat8_e3m4; }
inline bool IsSubByte(DType t) { return DTypeBits(t) < 8; }

}  // namespace tb
