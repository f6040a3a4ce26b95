// The convolution forward shared by aten::convolution (conv.cc) and the fused
// tensorbridge::convolution_relu (fused.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "bridge/tensor.h"

namespace tb::kernels {

// aten::convolution's result (errors name `op`). With `relu`, relu is applied by oneDNN as a
// post-op where the pass runs there (float32 / bfloat16, not transposed): *relu_applied tells
// whether it was; when false, the caller applies relu itself.
Tensor ConvolutionAct(const char* op, const Tensor& input, const Tensor& weight,
                      const std::optional<Tensor>& bias, const std::vector<int64_t>& stride,
                      const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation,
                      bool transposed, const std::vector<int64_t>& output_padding, int64_t groups,
                      bool relu, bool* relu_applied);

}  // namespace tb::kernels
