// Multi-class margin losses and their gradients, as torch's CPU kernels compute them:
// * aten::multi_margin_loss (p = 1 or 2, margin, optional per-class weight): per sample,
//   sum over classes d != y of max(0, margin - x[y] + x[d])^p * weight[y], divided by the
//   number of classes; multi_margin_loss_backward.
// * aten::multilabel_margin_loss_forward (returns the loss and is_target): per sample, the
//   targets are target[0..] up to the first -1; sum over targets j and non-target classes d of
//   max(0, 1 - (x[j] - x[d])), divided by the number of classes; multilabel_margin_loss_backward.
// Input is (N, C) or (C,); reduction 0 keeps one loss per sample ((N,), or 0-d for 1-d
// input), 1 averages over samples, 2 sums. Target class indices out of range raise IndexError.
#include <cmath>
#include <cstdint>
#include <optional>
#include <tuple>
#include <vector>

#include "dispatch/op_table.h"
#include "kernels/dtype_internal.h"
#include "kernels/loss_internal.h"
#include "kernels/promote_broadcast.h"

namespace tb {
namespace {

using namespace kernels::loss;  // NOLINT(build/namespaces): Reduction, CheckReduction

struct Frame {
  int64_t n, c;  // samples, classes
  Tensor x;      // contiguous input
  std::vector<int64_t> target;
};

Frame Prepare(const Tensor& self, const Tensor& target, int64_t reduction, bool multilabel,
              const char* op) {
  TB_CHECK_SUPPORTED(self.device().is_host_accessible() && target.device().is_host_accessible())
      << op << ": tensors on " << DeviceString(self.device())
      << " are not supported; tensorbridge computes on the CPU";
  TB_CHECK(IsFloatingPoint(self.dtype()), TypeError)
      << op << ": expected a floating-point input, got " << DTypeName(self.dtype());
  TB_CHECK(target.dtype() == DType::kInt64, TypeError)
      << op << ": expected an int64 target, got " << DTypeName(target.dtype());
  CheckReduction(op, reduction);
  TB_CHECK(self.ndim() <= 2 && (self.ndim() == 0 || self.numel() > 0 || self.ndim() == 2),
           ValueError)
      << op << ": expected a non-empty vector or matrix input, got shape "
      << ShapeString(self.shape());
  Frame f;
  f.n = self.ndim() == 2 ? self.size(0) : 1;
  f.c = self.ndim() == 0 ? 1 : self.size(-1);
  f.x = self.contiguous();
  Tensor t = target.contiguous();
  const int64_t* tp = t.data_as<const int64_t>();
  f.target.assign(tp, tp + t.numel());
  if (multilabel) {
    TB_CHECK(t.numel() == f.n * f.c, ValueError)
        << op << ": inconsistent target size: " << ShapeString(target.shape())
        << " for input of size: " << ShapeString(self.shape());
  } else {
    TB_CHECK(t.numel() == f.n && target.ndim() <= 1, ValueError)
        << op << ": inconsistent target size: " << ShapeString(target.shape())
        << " for input of size: " << ShapeString(self.shape());
  }
  for (int64_t v : f.target) {
    TB_CHECK(v >= (multilabel ? -1 : 0) && v < f.c, IndexError)
        << op << ": target " << v << " is out of range for " << f.c << " classes";
  }
  return f;
}

// The per-sample losses reduced: (N,) (0-d for a 1-d input) for none, else a 0-d sum / mean.
template <typename T>
Tensor Finish(const std::vector<double>& per_sample, int64_t reduction, bool one_d, DType dt) {
  const int64_t n = static_cast<int64_t>(per_sample.size());
  if (reduction == kNone && !one_d) {
    Tensor out = Tensor::Empty({n}, dt);
    for (int64_t i = 0; i < n; ++i) out.data_as<T>()[i] = static_cast<T>(per_sample[i]);
    return out;
  }
  using Acc = kernels::opmath_t<T>;
  Acc sum = 0;
  for (double v : per_sample) sum += static_cast<Acc>(static_cast<T>(v));
  if (reduction == kMean && n > 0) sum /= static_cast<Acc>(n);
  if (reduction == kMean && n == 0) sum = static_cast<Acc>(NAN);
  Tensor out = Tensor::Empty({}, dt);
  *out.data_as<T>() = static_cast<T>(sum);
  return out;
}

Tensor MultiMarginLoss(const Tensor& self, const Tensor& target, const Scalar& p,
                       const Scalar& margin, const std::optional<Tensor>& weight,
                       int64_t reduction) {
  constexpr const char* kOp = "aten::multi_margin_loss";
  const int64_t pv = p.to_int();
  TB_CHECK(!p.is_floating_point() || p.to_double() == pv, ValueError)
      << kOp << ": only p == 1 and p == 2 supported";
  TB_CHECK(pv == 1 || pv == 2, ValueError) << kOp << ": only p == 1 and p == 2 supported";
  Frame f = Prepare(self, target, reduction, false, kOp);
  Tensor w;
  if (weight) {
    TB_CHECK(weight->numel() == f.c, ValueError)
        << kOp << ": expected weight to have " << f.c << " elements, got " << weight->numel();
    w = Cast(*weight, self.dtype()).contiguous();
  }
  Tensor out;
  TB_DISPATCH(self.dtype(), kOp, TB_TYPES_FLOAT, [&] {
    using T = scalar_t;
    using Acc = kernels::opmath_t<T>;
    const T* x = f.x.data_as<const T>();
    const T* wp = w.defined() ? w.data_as<const T>() : nullptr;
    const Acc m = static_cast<Acc>(margin.to_double());
    std::vector<double> loss(static_cast<size_t>(f.n));
    for (int64_t i = 0; i < f.n; ++i) {
      const T* row = x + i * f.c;
      const int64_t y = f.target[i];
      const Acc xy = static_cast<Acc>(row[y]);
      Acc sum = 0;
      for (int64_t d = 0; d < f.c; ++d) {
        if (d == y) continue;
        const Acc z = m - xy + static_cast<Acc>(row[d]);
        if (z > 0) {
          Acc h = pv == 1 ? z : z * z;
          if (wp != nullptr) h *= static_cast<Acc>(wp[y]);
          sum += h;
        }
      }
      loss[i] = static_cast<double>(sum / static_cast<Acc>(f.c));
    }
    out = Finish<T>(loss, reduction, self.ndim() <= 1, self.dtype());
  });
  return out;
}

// grad_output in `dtype`, contiguous, checked to hold `numel` values (one per sample for an
// unreduced 2-D input, else one).
Tensor GradOutput(const Tensor& grad_output, DType dtype, int64_t numel, const char* op) {
  Tensor go = Cast(grad_output, dtype).contiguous();
  TB_CHECK(go.numel() == numel, ValueError)
      << op << ": grad_output of shape " << ShapeString(grad_output.shape())
      << " does not match the loss";
  return go;
}

Tensor MultiMarginLossBackward(const Tensor& grad_output, const Tensor& self, const Tensor& target,
                               const Scalar& p, const Scalar& margin,
                               const std::optional<Tensor>& weight, int64_t reduction) {
  constexpr const char* kOp = "aten::multi_margin_loss_backward";
  const int64_t pv = p.to_int();
  TB_CHECK(pv == 1 || pv == 2, ValueError) << kOp << ": only p == 1 and p == 2 supported";
  Frame f = Prepare(self, target, reduction, false, kOp);
  Tensor w = weight ? Cast(*weight, self.dtype()).contiguous() : Tensor();
  const bool per_sample = reduction == kNone && self.ndim() == 2;
  Tensor go = GradOutput(grad_output, self.dtype(), per_sample ? f.n : 1, kOp);
  Tensor gi = Tensor::Zeros(self.shape(), self.dtype());
  TB_DISPATCH(self.dtype(), kOp, TB_TYPES_FLOAT, [&] {
    using T = scalar_t;
    using Acc = kernels::opmath_t<T>;
    const T* x = f.x.data_as<const T>();
    const T* wp = w.defined() ? w.data_as<const T>() : nullptr;
    const T* g = go.data_as<const T>();
    T* out = gi.data_as<T>();
    const Acc m = static_cast<Acc>(margin.to_double());
    const Acc scale =
        reduction == kMean ? Acc(1) / static_cast<Acc>(f.n * f.c) : Acc(1) / static_cast<Acc>(f.c);
    for (int64_t i = 0; i < f.n; ++i) {
      const T* row = x + i * f.c;
      T* grow = out + i * f.c;
      const int64_t y = f.target[i];
      const Acc xy = static_cast<Acc>(row[y]);
      const Acc go_i = static_cast<Acc>(g[per_sample ? i : 0]);
      Acc gy = 0;
      for (int64_t d = 0; d < f.c; ++d) {
        if (d == y) continue;
        const Acc z = m - xy + static_cast<Acc>(row[d]);
        Acc h = 0;
        if (z > 0) {
          h = pv == 1 ? scale : Acc(2) * scale * z;
          if (wp != nullptr) h *= static_cast<Acc>(wp[y]);
          gy -= h;
        }
        grow[d] = static_cast<T>(h * go_i);
      }
      grow[y] = static_cast<T>(gy * go_i);
    }
  });
  return gi;
}

std::tuple<Tensor, Tensor> MultilabelMarginLossForward(const Tensor& self, const Tensor& target,
                                                       int64_t reduction) {
  constexpr const char* kOp = "aten::multilabel_margin_loss_forward";
  Frame f = Prepare(self, target, reduction, true, kOp);
  TB_CHECK(target.shape() == self.shape() || (self.ndim() <= 1 && target.numel() == f.c),
           ValueError)
      << kOp << ": inconsistent target size: " << ShapeString(target.shape())
      << " for input of size: " << ShapeString(self.shape());
  Tensor is_target = Tensor::Zeros(self.shape(), self.dtype());
  Tensor out;
  TB_DISPATCH(self.dtype(), kOp, TB_TYPES_FLOAT, [&] {
    using T = scalar_t;
    using Acc = kernels::opmath_t<T>;
    const T* x = f.x.data_as<const T>();
    T* it = is_target.data_as<T>();
    std::vector<double> loss(static_cast<size_t>(f.n));
    for (int64_t i = 0; i < f.n; ++i) {
      const T* row = x + i * f.c;
      const int64_t* tg = f.target.data() + i * f.c;
      T* isr = it + i * f.c;
      for (int64_t j = 0; j < f.c && tg[j] >= 0; ++j) isr[tg[j]] = T(1.0f);
      Acc sum = 0;
      for (int64_t j = 0; j < f.c && tg[j] >= 0; ++j) {
        const Acc xt = static_cast<Acc>(row[tg[j]]);
        for (int64_t d = 0; d < f.c; ++d) {
          if (static_cast<float>(isr[d]) != 0.0f) continue;
          const Acc z = Acc(1) - xt + static_cast<Acc>(row[d]);
          if (z > 0) sum += z;
        }
      }
      loss[i] = static_cast<double>(sum / static_cast<Acc>(f.c));
    }
    out = Finish<T>(loss, reduction, self.ndim() <= 1, self.dtype());
  });
  return {out, is_target};
}

Tensor MultilabelMarginLoss(const Tensor& self, const Tensor& target, int64_t reduction) {
  return std::get<0>(MultilabelMarginLossForward(self, target, reduction));
}

Tensor MultilabelMarginLossBackward(const Tensor& grad_output, const Tensor& self,
                                    const Tensor& target, int64_t reduction,
                                    const Tensor& is_target) {
  constexpr const char* kOp = "aten::multilabel_margin_loss_backward";
  Frame f = Prepare(self, target, reduction, true, kOp);
  Tensor isr_t = Cast(is_target, self.dtype()).contiguous();
  const bool per_sample = reduction == kNone && self.ndim() == 2;
  Tensor go = GradOutput(grad_output, self.dtype(), per_sample ? f.n : 1, kOp);
  Tensor gi = Tensor::Zeros(self.shape(), self.dtype());
  TB_DISPATCH(self.dtype(), kOp, TB_TYPES_FLOAT, [&] {
    using T = scalar_t;
    using Acc = kernels::opmath_t<T>;
    const T* x = f.x.data_as<const T>();
    const T* isp = isr_t.data_as<const T>();
    const T* g = go.data_as<const T>();
    T* out = gi.data_as<T>();
    const Acc scale =
        reduction == kMean ? Acc(1) / static_cast<Acc>(f.n * f.c) : Acc(1) / static_cast<Acc>(f.c);
    std::vector<Acc> acc(static_cast<size_t>(f.c));
    for (int64_t i = 0; i < f.n; ++i) {
      const T* row = x + i * f.c;
      const T* isr = isp + i * f.c;
      const int64_t* tg = f.target.data() + i * f.c;
      std::fill(acc.begin(), acc.end(), Acc(0));
      for (int64_t j = 0; j < f.c && tg[j] >= 0; ++j) {
        const Acc xt = static_cast<Acc>(row[tg[j]]);
        for (int64_t d = 0; d < f.c; ++d) {
          if (static_cast<float>(isr[d]) != 0.0f) continue;
          const Acc z = Acc(1) - xt + static_cast<Acc>(row[d]);
          if (z > 0) {
            acc[tg[j]] -= scale;
            acc[d] += scale;
          }
        }
      }
      const Acc go_i = static_cast<Acc>(g[per_sample ? i : 0]);
      for (int64_t d = 0; d < f.c; ++d) out[i * f.c + d] = static_cast<T>(acc[d] * go_i);
    }
  });
  return gi;
}

}  // namespace

TB_REGISTER_KERNELS(loss_margin) {
  const DeviceType cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::multi_margin_loss", cpu, Boxed<&MultiMarginLoss>(), TB_HERE);
  table.RegisterKernel("aten::multi_margin_loss_backward", cpu, Boxed<&MultiMarginLossBackward>(),
                       TB_HERE);
  table.RegisterKernel("aten::multilabel_margin_loss", cpu, Boxed<&MultilabelMarginLoss>(),
                       TB_HERE);
  table.RegisterKernel("aten::multilabel_margin_loss_forward", cpu,
                       Boxed<&MultilabelMarginLossForward>(), TB_HERE);
  table.RegisterKernel("aten::multilabel_margin_loss_backward", cpu,
                       Boxed<&MultilabelMarginLossBackward>(), TB_HERE);
}

}  // namespace tb
