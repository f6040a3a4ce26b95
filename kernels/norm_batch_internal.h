// Private to kernels/norm_batch*.cc: the float32 / float64 loops of batch norm on contiguous
// tensors (kernels/cpu/norm_batch_fast.cc).
#pragma once

#include <cstdint>

#include "bridge/tensor.h"
#include "kernels/norm_internal.h"

namespace tb::kernels::norm {

struct BnDims {
  int64_t n, c, s;  // batch, channels, elements per (batch, channel)
};

// Training forward of a contiguous float32 / float64 `x` into `out` (same shape and dtype):
// per channel the mean and biased variance (accumulated in double), then
// out = (x - mean) / sqrt(var + eps) * w + b as x * scale + shift in x's dtype. False, with
// nothing written, when these loops do not take it.
bool BatchNormTrainFast(const Tensor& x, const BnDims& sh, const Vec& w, const Vec& b, double eps,
                        const Tensor& out, Vec* mean, Vec* var);

// Backward of a contiguous float32 / float64 `x` with gradient `dy` (same shape and dtype):
// per channel *sum_dy = sum of dy and *dotp = sum of dy * (x - mean) (in double), and, when
// `dx` is given, dx = (dy - sum_dy / cnt - (x - mean) * dotp / cnt * invstd^2) * invstd * w
// in training, dy * invstd * w in evaluation. False, with nothing written, when these loops
// do not take it.
bool BatchNormBackwardFast(const Tensor& x, const Tensor& dy, const BnDims& sh, const Vec& w,
                           const Vec& mean, const Vec& invstd, bool train, const Tensor* dx,
                           Vec* sum_dy, Vec* dotp);

}  // namespace tb::kernels::norm
