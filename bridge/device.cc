#include "bridge/device.h"

#include <array>

namespace tb {

const char* DeviceTypeName(DeviceType type) {
  switch (type) {
    case DeviceType::kCPU: return "cpu";
    case DeviceType::kCUDA: return "cuda";
    case DeviceType::kCUDAHost: return "cuda_host";
    case DeviceType::kOpenCL: return "opencl";
    case DeviceType::kVulkan: return "vulkan";
    case DeviceType::kMetal: return "metal";
    case DeviceType::kVPI: return "vpi";
    case DeviceType::kROCM: return "rocm";
    case DeviceType::kROCMHost: return "rocm_host";
    case DeviceType::kExtDev: return "ext_dev";
    case DeviceType::kCUDAManaged: return "cuda_managed";
    case DeviceType::kOneAPI: return "oneapi";
    case DeviceType::kWebGPU: return "webgpu";
    case DeviceType::kHexagon: return "hexagon";
    case DeviceType::kMAIA: return "maia";
    case DeviceType::kTrn: return "trn";
  }
  static const std::array<std::string, 64>* unknown = [] {
    auto* names = new std::array<std::string, 64>();
    for (int i = 0; i < 64; ++i) (*names)[i] = "device(" + std::to_string(i) + ")";
    return names;
  }();
  const int code = static_cast<int>(type);
  return code >= 0 && code < 64 ? (*unknown)[code].c_str() : "device(?)";
}

bool IsKnownDeviceType(int32_t code) {
  return (code >= 1 && code <= 4) || (code >= 7 && code <= 18);
}

std::string DeviceString(Device device) {
  std::string s = DeviceTypeName(device.type);
  if (device.type != DeviceType::kCPU) s += ":" + std::to_string(device.index);
  return s;
}

}  // namespace tb
