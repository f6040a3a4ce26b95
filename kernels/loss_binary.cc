// Element-wise classification and robust losses and their gradients:
// aten::binary_cross_entropy (+ backward), binary_cross_entropy_with_logits, huber_loss
// (+ backward), soft_margin_loss (+ backward). The formulas are torch's CPU kernels':
// * bce: (t - 1) * max(log1p(-x), -100) - t * max(log(x), -100), times weight;
//   backward: g * (x - t) / max((1 - x) * x, 1e-12), times weight, / numel for mean.
//   Input and target must lie in [0, 1] (ValueError otherwise, as torch raises).
// * bce with logits: (1 - t) * x - log_sigmoid(x) * (1 + (pos_weight - 1) * t), times weight.
// * huber with delta: |d| < delta ? 0.5 d^2 : delta * (|d| - 0.5 delta);
//   backward: clamp(d, -delta, delta) * g (/ numel for mean).
// * soft margin: log1p(exp(-t * x)); backward: -t * e / (1 + e) * g (e = exp(-t x), / numel).
// Reduction 0 returns the element losses, 1 their mean and 2 their sum (the table's
// aten::mean / aten::sum).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "dispatch/op_call.h"
#include "dispatch/op_table.h"
#include "kernels/dtype_internal.h"
#include "kernels/layout.h"
#include "kernels/loss_internal.h"
#include "kernels/promote_broadcast.h"

namespace tb {
namespace {

using namespace kernels::loss;  // NOLINT(build/namespaces): Reduction, CheckReduction, Reduce

// Up to four operands (input, target, gradient, extra weight), contiguous, in the common
// floating dtype and broadcast shape. Absent operands stay undefined.
struct Operands {
  Tensor v[4];
};

Operands Prepare(const char* op, int64_t reduction, std::vector<const Tensor*> ts,
                 bool same_shape_target) {
  for (const Tensor* t : ts) {
    if (t == nullptr) continue;
    TB_CHECK_SUPPORTED(t->device().is_host_accessible())
        << op << ": tensors on " << DeviceString(t->device())
        << " are not supported; tensorbridge computes on the CPU";
    TB_CHECK(IsFloatingPoint(t->dtype()), TypeError)
        << op << ": expected floating-point tensors, got " << DTypeName(t->dtype());
  }
  CheckReduction(op, reduction);
  if (same_shape_target) {
    TB_CHECK(ts[0]->shape() == ts[1]->shape(), ValueError)
        << op << ": using a target size (" << ShapeString(ts[1]->shape())
        << ") that is different to the input size (" << ShapeString(ts[0]->shape())
        << ") is not supported; please ensure they have the same size";
  }
  std::vector<IntArrayRef> shapes;
  DType dt = ts[0]->dtype();
  for (const Tensor* t : ts) {
    if (t == nullptr) continue;
    shapes.push_back(t->shape());
    dt = PromoteTypes(dt, t->dtype());
  }
  const Dims shape = BroadcastShapes(shapes, op);
  Operands o;
  for (size_t i = 0; i < ts.size() && i < 4; ++i) {
    if (ts[i] != nullptr) o.v[i] = Cast(*ts[i], dt).expand(shape).contiguous();
  }
  return o;
}

// y[i] = f(a, b, c, d, r) in T's opmath type (absent operands read as 1); r(v) rounds v to T
// and back, for the steps torch's float16 / bfloat16 kernels round (identity otherwise).
template <typename F>
Tensor Pointwise(const char* op, const Operands& o, F f) {
  Tensor out = Tensor::Empty(o.v[0].shape(), o.v[0].dtype());
  TB_DISPATCH(o.v[0].dtype(), op, TB_TYPES_FLOAT, [&] {
    using T = scalar_t;
    using Acc = kernels::opmath_t<T>;
    const T* p[4];
    for (int k = 0; k < 4; ++k) p[k] = o.v[k].defined() ? o.v[k].data_as<const T>() : nullptr;
    T* y = out.data_as<T>();
    const int64_t n = out.numel();
    auto get = [&](int k, int64_t i) {
      return p[k] != nullptr ? static_cast<Acc>(p[k][i]) : Acc(1);
    };
    auto r = [](Acc v) { return static_cast<Acc>(static_cast<T>(v)); };
    for (int64_t i = 0; i < n; ++i) {
      y[i] = static_cast<T>(f(get(0, i), get(1, i), get(2, i), get(3, i), r));
    }
  });
  return out;
}

// ValueError unless every element of the contiguous `t` lies in [0, 1] (NaN fails too).
void CheckUnitRange(const Tensor& t, const char* what, const char* op) {
  bool ok = true;
  TB_DISPATCH(t.dtype(), op, TB_TYPES_FLOAT, [&] {
    const scalar_t* p = t.data_as<const scalar_t>();
    for (int64_t i = 0; ok && i < t.numel(); ++i) {
      const double v = kernels::Convert<double>(p[i]);
      ok = v >= 0.0 && v <= 1.0;
    }
  });
  TB_CHECK(ok, ValueError) << op << ": all elements of " << what << " should be between 0 and 1";
}

Tensor Weighted(const Tensor& loss, const std::optional<Tensor>& weight) {
  static const OpRef mul("aten::mul.Tensor");
  return weight ? mul(loss, *weight).tensor() : loss;
}

Tensor BinaryCrossEntropy(const Tensor& self, const Tensor& target,
                          const std::optional<Tensor>& weight, int64_t reduction) {
  constexpr const char* kOp = "aten::binary_cross_entropy";
  Operands o = Prepare(kOp, reduction, {&self, &target}, /*same_shape_target=*/true);
  CheckUnitRange(o.v[0], "input", kOp);
  CheckUnitRange(o.v[1], "target", kOp);
  auto f = [](auto x, auto t, auto, auto, auto r) {
    using Acc = decltype(x);
    const Acc a = r(r(t - Acc(1)) * std::max(r(std::log1p(-x)), Acc(-100)));
    return a - r(t * std::max(r(std::log(x)), Acc(-100)));
  };
  return Reduce(Weighted(Pointwise(kOp, o, f), weight), reduction);
}

Tensor BinaryCrossEntropyBackward(const Tensor& grad, const Tensor& self, const Tensor& target,
                                  const std::optional<Tensor>& weight, int64_t reduction) {
  constexpr const char* kOp = "aten::binary_cross_entropy_backward";
  Operands o = Prepare(kOp, reduction, {&self, &target, &grad}, /*same_shape_target=*/true);
  auto f = [](auto x, auto t, auto g, auto, auto r) {
    using Acc = decltype(x);
    return r(g * r(x - t)) / std::max(r(r(Acc(1) - x) * x), r(static_cast<Acc>(1e-12)));
  };
  Tensor gi = Weighted(Pointwise(kOp, o, f), weight);
  if (reduction == kMean) {
    static const OpRef div("aten::div.Scalar");
    gi = div(gi, Scalar(static_cast<double>(self.numel()))).tensor();
  }
  return gi;
}

Tensor BceWithLogits(const Tensor& self, const Tensor& target, const std::optional<Tensor>& weight,
                     const std::optional<Tensor>& pos_weight, int64_t reduction) {
  constexpr const char* kOp = "aten::binary_cross_entropy_with_logits";
  const Tensor* pw = pos_weight ? &*pos_weight : nullptr;
  Operands o = Prepare(kOp, reduction, {&self, &target, nullptr, pw}, false);
  const bool has_pw = pw != nullptr;
  auto f = [has_pw](auto x, auto t, auto, auto w, auto r) {
    using Acc = decltype(x);
    Acc ls = r(std::min(x, Acc(0)) - static_cast<Acc>(std::log1p(std::exp(-std::abs(x)))));
    if (has_pw) ls = r(ls * r(r(r(w - Acc(1)) * t) + Acc(1)));
    return r(r(Acc(1) - t) * x) - ls;
  };
  return Reduce(Weighted(Pointwise(kOp, o, f), weight), reduction);
}

Tensor HuberLoss(const Tensor& self, const Tensor& target, int64_t reduction, double delta) {
  constexpr const char* kOp = "aten::huber_loss";
  TB_CHECK(delta > 0, ValueError) << kOp << ": huber_loss does not support non-positive values "
                                  << "for delta, got " << delta;
  Operands o = Prepare(kOp, reduction, {&self, &target}, false);
  auto f = [delta](auto a, auto b, auto, auto, auto) {
    using Acc = decltype(a);
    const Acc z = std::abs(a - b), d = static_cast<Acc>(delta);
    return z < d ? Acc(0.5) * z * z : d * (z - Acc(0.5) * d);
  };
  return Reduce(Pointwise(kOp, o, f), reduction);
}

Tensor HuberLossBackward(const Tensor& grad, const Tensor& self, const Tensor& target,
                         int64_t reduction, double delta) {
  constexpr const char* kOp = "aten::huber_loss_backward";
  const double norm = reduction == kMean ? 1.0 / static_cast<double>(self.numel()) : 1.0;
  Operands o = Prepare(kOp, reduction, {&self, &target, &grad}, false);
  auto f = [norm, delta](auto a, auto b, auto g, auto, auto) {
    using Acc = decltype(a);
    const Acc x = a - b, nrm = static_cast<Acc>(norm), d = static_cast<Acc>(delta);
    if (x < -d) return -nrm * g * d;
    if (x > d) return nrm * g * d;
    return nrm * x * g;
  };
  return LaidOutElementwise(Pointwise(kOp, o, f), {&self, &target, &grad});
}

Tensor SoftMarginLoss(const Tensor& self, const Tensor& target, int64_t reduction) {
  constexpr const char* kOp = "aten::soft_margin_loss";
  Operands o = Prepare(kOp, reduction, {&self, &target}, false);
  auto f = [](auto x, auto t, auto, auto, auto r) {
    using Acc = decltype(x);
    return static_cast<Acc>(std::log1p(r(std::exp(r(-x * t)))));
  };
  return Reduce(Pointwise(kOp, o, f), reduction);
}

Tensor SoftMarginLossBackward(const Tensor& grad, const Tensor& self, const Tensor& target,
                              int64_t reduction) {
  constexpr const char* kOp = "aten::soft_margin_loss_backward";
  const double norm = reduction == kMean ? 1.0 / static_cast<double>(self.numel()) : 1.0;
  Operands o = Prepare(kOp, reduction, {&self, &target, &grad}, false);
  auto f = [norm](auto x, auto t, auto g, auto, auto r) {
    using Acc = decltype(x);
    const Acc z = r(std::exp(r(-t * x)));
    return r(r(r(-static_cast<Acc>(norm) * t) * z) / r(Acc(1) + z)) * g;
  };
  return LaidOutElementwise(Pointwise(kOp, o, f), {&self, &target, &grad});
}

}  // namespace

TB_REGISTER_KERNELS(loss_binary) {
  const DeviceType cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::binary_cross_entropy", cpu, Boxed<&BinaryCrossEntropy>(), TB_HERE);
  table.RegisterKernel("aten::binary_cross_entropy_backward", cpu,
                       Boxed<&BinaryCrossEntropyBackward>(), TB_HERE);
  table.RegisterKernel("aten::binary_cross_entropy_with_logits", cpu, Boxed<&BceWithLogits>(),
                       TB_HERE);
  table.RegisterKernel("aten::huber_loss", cpu, Boxed<&HuberLoss>(), TB_HERE);
  table.RegisterKernel("aten::huber_loss_backward", cpu, Boxed<&HuberLossBackward>(), TB_HERE);
  table.RegisterKernel("aten::soft_margin_loss", cpu, Boxed<&SoftMarginLoss>(), TB_HERE);
  table.RegisterKernel("aten::soft_margin_loss_backward", cpu, Boxed<&SoftMarginLossBackward>(),
                       TB_HERE);
}

}  // namespace tb
