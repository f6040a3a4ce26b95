// The convolution forward shared by aten::convolution (conv.cc) and the fused
// tensorbridge::convolution_relu (fused.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "bridge/tensor.h"

namespace tb::kernels {

// aten::convolution's result (errors name `op`). `extra_padding` (empty, or a (left, right)
// pair per spatial dim, non-transposed only) adds zeros on either side of the input beyond
// `padding`: the convolution of constant_pad_nd(input, ..., 0) without making the padded copy.
Tensor Convolution(const char* op, const Tensor& input, const Tensor& weight,
                   const std::optional<Tensor>& bias, const std::vector<int64_t>& stride,
                   const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation,
                   bool transposed, const std::vector<int64_t>& output_padding, int64_t groups,
                   const std::vector<int64_t>& extra_padding = {});

}  // namespace tb::kernels
