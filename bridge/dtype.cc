#include "bridge/dtype.h"

#include <array>

namespace tb {
namespace {

struct DTypeInfo {
  std::string_view name;
  int bits;
};

constexpr std::array<DTypeInfo, kNumDTypes> kInfo = {{
    {"bool", 8},           {"uint8", 8},
    {"int8", 8},           {"int16", 16},
    {"int32", 32},         {"int64", 64},
    {"uint16", 16},        {"uint32", 32},
    {"uint64", 64},        {"float16", 16},
    {"bfloat16", 16},      {"float32", 32},
    {"float64", 64},       {"complex64", 64},
    {"complex128", 128},   {"float8_e3m4", 8},
    {"float8_e4m3", 8},    {"float8_e4m3b11fnuz", 8},
    {"float8_e4m3fn", 8},  {"float8_e4m3fnuz", 8},
    {"float8_e5m2", 8},    {"float8_e5m2fnuz", 8},
    {"float8_e8m0fnu", 8}, {"float6_e2m3fn", 6},
    {"float6_e3m2fn", 6},  {"float4_e2m1fn", 4},
}};

}  // namespace

int DTypeBits(DType dtype) { return kInfo[static_cast<int>(dtype)].bits; }

std::string_view DTypeName(DType dtype) { return kInfo[static_cast<int>(dtype)].name; }

bool DTypeFromName(std::string_view name, DType* out) {
  for (int i = 0; i < kNumDTypes; ++i) {
    if (kInfo[i].name == name) {
      *out = static_cast<DType>(i);
      return true;
    }
  }
  return false;
}

}  // namespace tb
