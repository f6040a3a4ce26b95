// Devices. The numbering follows DLPack's device codes, so that conversion is a cast.
// Kernels compute on kCPU; other devices can be wrapped, viewed and exported back.
#pragma once

#include <cstdint>
#include <string>

#include "bridge/api.h"

namespace tb {

enum class DeviceType : int32_t {
  kCPU = 1,
  kCUDA = 2,
  kCUDAHost = 3,
  kOpenCL = 4,
  kVulkan = 7,
  kMetal = 8,
  kVPI = 9,
  kROCM = 10,
  kROCMHost = 11,
  kExtDev = 12,
  kCUDAManaged = 13,
  kOneAPI = 14,
  kWebGPU = 15,
  kHexagon = 16,
  kMAIA = 17,
  kTrn = 18,
};

struct Device {
  DeviceType type = DeviceType::kCPU;
  int32_t index = 0;

  bool is_cpu() const { return type == DeviceType::kCPU; }
  // Memory the CPU can read and write directly.
  bool is_host_accessible() const {
    return type == DeviceType::kCPU || type == DeviceType::kCUDAHost ||
           type == DeviceType::kROCMHost || type == DeviceType::kCUDAManaged;
  }
  friend bool operator==(Device a, Device b) { return a.type == b.type && a.index == b.index; }
  friend bool operator!=(Device a, Device b) { return !(a == b); }
};

// "cpu", "cuda", "cuda_host", ...; codes tensorbridge does not know print as "device(<code>)".
TB_API const char* DeviceTypeName(DeviceType type);
// "cpu", "cuda:0", ...
TB_API std::string DeviceString(Device device);
// True when `code` is a device code tensorbridge knows.
TB_API bool IsKnownDeviceType(int32_t code);

}  // namespace tb
