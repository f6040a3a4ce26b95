// aten::nll_loss_forward / nll_loss_backward and aten::nll_loss2d_forward / nll_loss2d_backward:
// the negative log-likelihood loss that cross_entropy ends in, on an input of log-probabilities
// [N, C] (or [C]) with class targets [N] (or []), or [N, C, H, W] with targets [N, H, W].
// A "row" below is one target: a sample, or one pixel (n, h, w) of the spatial form.
//
// As torch's CPU kernels:
// * reduction none on a 2-D or 4-D input: one loss per row, -weight[t] * input[row, t] (0 for
//   a target equal to ignore_index), and total_weight 0;
// * otherwise (sum, mean, or a 1-D input): one scalar, summed over the rows in torch's cascade
//   (partial sums in levels of 2^k rows, k >= 4), in the input's type; total_weight is the sum
//   of the weights of the counted rows (without weights: their number); mean divides by it
//   (0 / 0 = NaN when every row is ignored).
// The backward writes -weight[t] * g (g = grad_output, divided by total_weight for mean) into
// a zero gradient at each row's target. A target outside [0, C) other than ignore_index is an
// IndexError naming it.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <tuple>

#include "dispatch/op_table.h"
#include "kernels/common_internal.h"
#include "kernels/dtype_internal.h"
#include "kernels/layout.h"
#include "kernels/loss_internal.h"
#include "kernels/promote_broadcast.h"

namespace tb {
namespace {

using namespace kernels::loss;  // NOLINT(build/namespaces): Reduction, CheckReduction

struct NllArgs {
  Tensor input;     // contiguous: [C], [N, C] or [N, C, H, W]
  Tensor target_t;  // int64, contiguous
  const int64_t* target = nullptr;
  Tensor weight;  // contiguous, input's dtype, or undefined
  int64_t batch = 1, classes = 0;
  int64_t map = 1;                // rows per sample: H * W in the spatial form, else 1
  Dims per_row_shape;             // reduction none's output: [N] or [N, H, W]
  bool per_row_possible = false;  // reduction none gives one loss per row (not a 1-D input)
  int64_t rows() const { return batch * map; }
  // f(row, base) for each row in order; the input's offset of the row's class t is
  // base + t * map.
  template <typename F>
  void ForEachRow(F&& f) const {
    int64_t r = 0;
    for (int64_t n = 0; n < batch; ++n) {
      const int64_t base = n * classes * map;
      for (int64_t e = 0; e < map; ++e) f(r++, base + e);
    }
  }
};

NllArgs Check(const char* op, bool spatial, const Tensor& self, const Tensor& target,
              const std::optional<Tensor>& weight, int64_t reduction, int64_t ignore_index) {
  kernels::CheckHost(op, self, target);
  TB_CHECK(IsFloatingPoint(self.dtype()), TypeError)
      << op << ": input must be a floating-point tensor, got " << DTypeName(self.dtype());
  if (spatial) {
    TB_CHECK(self.ndim() == 4, ValueError)
        << op << ": input must be 4-D [N, C, H, W], got shape " << ShapeString(self.shape());
  } else {
    TB_CHECK(self.ndim() == 1 || self.ndim() == 2, ValueError)
        << op << ": input must be 1-D or 2-D, got shape " << ShapeString(self.shape());
  }
  TB_CHECK(target.dtype() == DType::kInt64 || target.dtype() == DType::kInt32 ||
               target.dtype() == DType::kUInt8,
           TypeError)
      << op << ": target must be int64 (or int32, uint8), got " << DTypeName(target.dtype());
  CheckReduction(op, reduction);
  NllArgs a;
  if (spatial) {
    a.batch = self.size(0);
    a.classes = self.size(1);
    a.map = self.size(2) * self.size(3);
    a.per_row_shape = {self.size(0), self.size(2), self.size(3)};
    a.per_row_possible = true;
    TB_CHECK(target.ndim() == 3 && target.size(0) == self.size(0) &&
                 target.size(1) == self.size(2) && target.size(2) == self.size(3),
             ValueError)
        << op << ": target must be [N, H, W] " << ShapeString(a.per_row_shape) << " for input "
        << ShapeString(self.shape()) << ", got shape " << ShapeString(target.shape());
  } else {
    TB_CHECK(target.ndim() <= 1, ValueError)
        << op << ": target must be 0-D or 1-D, got shape " << ShapeString(target.shape());
    a.batch = self.ndim() == 2 ? self.size(0) : 1;
    a.classes = self.size(self.ndim() - 1);
    a.per_row_shape = {a.batch};
    a.per_row_possible = self.ndim() == 2;
    const int64_t target_batch = target.ndim() == 1 ? target.size(0) : 1;
    TB_CHECK((self.ndim() == 1 && target.ndim() == 0) ||
                 (self.ndim() == 2 && target.ndim() == 1 && target_batch == a.batch),
             ValueError)
        << op << ": expected input batch_size (" << a.batch << ") to match target batch_size ("
        << target_batch << "): input " << ShapeString(self.shape()) << ", target "
        << ShapeString(target.shape());
  }
  if (weight && weight->defined()) {
    TB_CHECK(weight->numel() == a.classes, ValueError)
        << op << ": weight must hold one value per class (" << a.classes << "), got shape "
        << ShapeString(weight->shape());
    a.weight = Cast(*weight, self.dtype()).contiguous();
  }
  a.input = self.contiguous();
  a.target_t = Cast(target, DType::kInt64).contiguous();
  a.target = a.target_t.data_as<const int64_t>();
  for (int64_t i = 0; i < a.target_t.numel(); ++i) {
    const int64_t v = a.target[i];
    TB_CHECK(v == ignore_index || (v >= 0 && v < a.classes), IndexError)
        << op << ": target " << v << " is out of bounds for " << a.classes << " classes";
  }
  return a;
}

template <bool kSpatial>
std::tuple<Tensor, Tensor> NllLossForward(const Tensor& self, const Tensor& target,
                                          const std::optional<Tensor>& weight, int64_t reduction,
                                          int64_t ignore_index) {
  const char* kOp = kSpatial ? "aten::nll_loss2d_forward" : "aten::nll_loss_forward";
  NllArgs a = Check(kOp, kSpatial, self, target, weight, reduction, ignore_index);
  const bool per_row = reduction == kNone && a.per_row_possible;
  Tensor output = Tensor::Empty(per_row ? a.per_row_shape : Dims{}, self.dtype());
  Tensor total_weight = Tensor::Empty({}, self.dtype());
  TB_DISPATCH(self.dtype(), kOp, TB_TYPES_FLOAT, [&] {
    using T = scalar_t;
    const T* x = a.input.data_as<const T>();
    const T* w = a.weight.defined() ? a.weight.data_as<const T>() : nullptr;
    const int64_t rows = a.rows(), map = a.map;
    if (per_row) {
      T* o = output.data_as<T>();
      a.ForEachRow([&](int64_t i, int64_t base) {
        const int64_t t = a.target[i];
        const T v = t == ignore_index ? T(0) : x[base + t * map];
        o[i] = t == ignore_index ? T(0) : static_cast<T>(-(w ? w[t] * v : v));
      });
      *total_weight.data_as<T>() = T(0);
      return;
    }
    // torch's cascade: level 0 takes each row; every 2^k rows a level is added into the next.
    constexpr int kLevels = 8;
    int64_t log2 = 0;
    while ((int64_t{1} << log2) < rows) ++log2;
    const int64_t power = std::max<int64_t>(4, log2 / kLevels);
    const int64_t mask = (int64_t{1} << power) - 1;
    T loss[kLevels] = {}, wsum[kLevels] = {};
    int64_t ignored = 0;
    a.ForEachRow([&](int64_t b, int64_t base) {
      const int64_t t = a.target[b];
      if (t == ignore_index) {
        ++ignored;
        return;
      }
      const T v = x[base + t * map];
      if (w) {
        loss[0] = static_cast<T>(loss[0] - v * w[t]);
        wsum[0] = static_cast<T>(wsum[0] + w[t]);
      } else {
        loss[0] = static_cast<T>(loss[0] - v);
      }
      for (int j = 0; j + 1 < kLevels; ++j) {
        if ((b & (mask << (j * power))) != 0) break;
        wsum[j + 1] = static_cast<T>(wsum[j + 1] + wsum[j]);
        loss[j + 1] = static_cast<T>(loss[j + 1] + loss[j]);
        wsum[j] = T(0);
        loss[j] = T(0);
      }
    });
    T total = T(0), out = T(0);
    for (int j = 0; j < kLevels; ++j) {
      total = static_cast<T>(total + wsum[j]);
      out = static_cast<T>(out + loss[j]);
    }
    if (!w) total = static_cast<T>(rows - ignored);
    if (reduction == kMean) out = static_cast<T>(out / total);
    *output.data_as<T>() = out;
    *total_weight.data_as<T>() = total;
  });
  // Per-pixel losses laid out like the target, as torch's.
  if (per_row && kSpatial && output.shape() == target.shape()) output = LaidOutLike(output, target);
  return {output, total_weight};
}

template <bool kSpatial>
Tensor NllLossBackward(const Tensor& grad_output, const Tensor& self, const Tensor& target,
                       const std::optional<Tensor>& weight, int64_t reduction, int64_t ignore_index,
                       const Tensor& total_weight) {
  const char* kOp = kSpatial ? "aten::nll_loss2d_backward" : "aten::nll_loss_backward";
  NllArgs a = Check(kOp, kSpatial, self, target, weight, reduction, ignore_index);
  const bool per_row = reduction == kNone && a.per_row_possible;
  TB_CHECK(per_row ? grad_output.numel() == a.rows() : grad_output.numel() == 1, ValueError)
      << kOp << ": grad_output of shape " << ShapeString(grad_output.shape())
      << " does not match the loss of input " << ShapeString(self.shape()) << " (reduction "
      << reduction << ")";
  TB_CHECK(total_weight.numel() == 1, ValueError)
      << kOp << ": total_weight must hold one value, got shape "
      << ShapeString(total_weight.shape());
  Tensor g = Cast(grad_output, self.dtype()).contiguous();
  Tensor tw = Cast(total_weight, self.dtype()).contiguous();
  Tensor grad_input = Tensor::Zeros(self.shape(), self.dtype());
  TB_DISPATCH(self.dtype(), kOp, TB_TYPES_FLOAT, [&] {
    using T = scalar_t;
    const T* gp = g.data_as<const T>();
    const T* w = a.weight.defined() ? a.weight.data_as<const T>() : nullptr;
    T* o = grad_input.data_as<T>();
    const int64_t map = a.map;
    if (per_row) {
      a.ForEachRow([&](int64_t i, int64_t base) {
        const int64_t t = a.target[i];
        if (t != ignore_index) o[base + t * map] = static_cast<T>(-(w ? w[t] : T(1)) * gp[i]);
      });
      return;
    }
    const T scale = static_cast<T>(
        -(reduction == kMean ? static_cast<T>(gp[0] / *tw.data_as<const T>()) : gp[0]));
    a.ForEachRow([&](int64_t i, int64_t base) {
      const int64_t t = a.target[i];
      if (t != ignore_index) o[base + t * map] = w ? static_cast<T>(w[t] * scale) : scale;
    });
  });
  return grad_input;
}

}  // namespace

TB_REGISTER_KERNELS(loss_nll) {
  const DeviceType cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::nll_loss_forward", cpu, Boxed<&NllLossForward<false>>(), TB_HERE);
  table.RegisterKernel("aten::nll_loss_backward", cpu, Boxed<&NllLossBackward<false>>(), TB_HERE);
  table.RegisterKernel("aten::nll_loss2d_forward", cpu, Boxed<&NllLossForward<true>>(), TB_HERE);
  table.RegisterKernel("aten::nll_loss2d_backward", cpu, Boxed<&NllLossBackward<true>>(), TB_HERE);
}

}  // namespace tb
