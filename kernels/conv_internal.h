// The convolution forward shared by aten::convolution (conv.cc) and the fused
// tensorbridge::convolution_relu (fused.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "bridge/tensor.h"

namespace tb::kernels {

// aten::convolution's result (errors name `op`).
Tensor Convolution(const char* op, const Tensor& input, const Tensor& weight,
                   const std::optional<Tensor>& bias, const std::vector<int64_t>& stride,
                   const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation,
                   bool transposed, const std::vector<int64_t>& output_padding, int64_t groups);

}  // namespace tb::kernels
