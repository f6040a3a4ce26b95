// Element-wise regression losses and their gradients: aten::mse_loss / mse_loss_backward and
// aten::smooth_l1_loss / smooth_l1_loss_backward, on floating-point input and target that
// broadcast together (torch warns about differing sizes on its side; the table follows the
// broadcast).
//
// As torch's CPU kernels, per element d = input - target:
// * mse: d * d;  backward: norm * d * grad (norm = 2 / numel for mean, else 2);
// * smooth_l1 with beta: |d| < beta ? 0.5 * d * d / beta : |d| - 0.5 * beta (beta = 0: |d|);
//   backward: d <= -beta ? -norm * grad : d >= beta ? norm * grad : norm * d * grad / beta
//   (norm = 1 / numel for mean, else 1).
// Steps are rounded to the tensors' type where torch's kernels round them (mse's difference
// and backward; every step of float16 smooth_l1): element losses and gradients are torch's bits.
// Reduction 0 returns the element losses, 1 their mean and 2 their sum (aten::mean / aten::sum
// of the table). Sums are the reduction kernels' own, so the reduced values may differ from
// torch's in the last bits.
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "dispatch/op_call.h"
#include "dispatch/op_table.h"
#include "kernels/common_internal.h"
#include "kernels/dtype_internal.h"
#include "kernels/layout.h"
#include "kernels/loss_internal.h"
#include "kernels/promote_broadcast.h"

namespace tb {
namespace {

using namespace kernels::loss;  // NOLINT(build/namespaces): Reduction, CheckReduction, Reduce

struct Operands {
  Tensor a, b, g;  // contiguous, the common dtype and broadcast shape (g: the gradient, if any)
};

Operands Prepare(const char* op, const Tensor& input, const Tensor& target, int64_t reduction,
                 const Tensor* grad = nullptr) {
  kernels::CheckHost(op, input, target);
  TB_CHECK(IsFloatingPoint(input.dtype()) && IsFloatingPoint(target.dtype()), TypeError)
      << op << ": input and target must be floating point, got " << DTypeName(input.dtype())
      << " and " << DTypeName(target.dtype());
  CheckReduction(op, reduction);
  std::vector<IntArrayRef> shapes{input.shape(), target.shape()};
  if (grad != nullptr) shapes.push_back(grad->shape());
  const Dims shape = BroadcastShapes(shapes, op);
  const DType dt = PromoteTypes(input.dtype(), target.dtype());
  auto prepare = [&](const Tensor& t) { return Cast(t, dt).expand(shape).contiguous(); };
  return {prepare(input), prepare(target), grad != nullptr ? prepare(*grad) : Tensor()};
}

// y[i] = f(a[i], b[i], g[i] (0 without a gradient), T()) over the operands, computed in T's
// opmath type; the last argument tells f the tensors' type.
template <typename F>
Tensor Pointwise(const char* op, const Operands& o, F f) {
  Tensor out = Tensor::Empty(o.a.shape(), o.a.dtype());
  TB_DISPATCH(o.a.dtype(), op, TB_TYPES_FLOAT, [&] {
    using T = scalar_t;
    using Acc = kernels::opmath_t<T>;
    const T* a = o.a.data_as<const T>();
    const T* b = o.b.data_as<const T>();
    const T* g = o.g.defined() ? o.g.data_as<const T>() : nullptr;
    T* y = out.data_as<T>();
    const int64_t n = out.numel();
    for (int64_t i = 0; i < n; ++i) {
      const Acc gi = g != nullptr ? static_cast<Acc>(g[i]) : Acc(0);
      y[i] = static_cast<T>(f(static_cast<Acc>(a[i]), static_cast<Acc>(b[i]), gi, T()));
    }
  });
  return out;
}

Tensor MseLoss(const Tensor& self, const Tensor& target, int64_t reduction) {
  constexpr const char* kOp = "aten::mse_loss";
  auto f = [](auto a, auto b, auto, auto type) {
    // d rounded to the tensors' type first, as torch's kernel
    using T = decltype(type);
    using Acc = decltype(a);
    const Acc d = static_cast<Acc>(static_cast<T>(a - b));
    return d * d;
  };
  return Reduce(Pointwise(kOp, Prepare(kOp, self, target, reduction), f), reduction);
}

Tensor MseLossBackward(const Tensor& grad, const Tensor& self, const Tensor& target,
                       int64_t reduction) {
  constexpr const char* kOp = "aten::mse_loss_backward";
  const double norm = reduction == kMean ? 2.0 / static_cast<double>(self.numel()) : 2.0;
  auto f = [norm](auto a, auto b, auto g, auto type) {
    // each step rounded to the tensors' type, as torch's kernel computes in it
    using T = decltype(type);
    using Acc = decltype(a);
    auto r = [](Acc v) { return static_cast<Acc>(static_cast<T>(v)); };
    return r(r(static_cast<Acc>(static_cast<T>(norm)) * r(a - b)) * g);
  };
  // Laid out as torch's decomposition, norm * (self - target) * grad, lays it out.
  return LaidOutElementwise(Pointwise(kOp, Prepare(kOp, self, target, reduction, &grad), f),
                            {&self, &target, &grad});
}

Tensor SmoothL1Loss(const Tensor& self, const Tensor& target, int64_t reduction, double beta) {
  constexpr const char* kOp = "aten::smooth_l1_loss";
  TB_CHECK(beta >= 0, ValueError) << kOp << ": beta must be non-negative, got " << beta;
  auto f = [beta](auto a, auto b, auto, auto type) {
    using T = decltype(type);
    using Acc = decltype(a);
    const Acc bt = static_cast<Acc>(beta);
    if constexpr (std::is_same_v<T, kernels::Half>) {
      // torch's float16 kernel rounds each step to half
      auto r = [](Acc v) { return static_cast<Acc>(static_cast<T>(v)); };
      const Acc z = r(std::abs(r(a - b)));
      if (beta == 0) return z;
      return z < bt ? r(r(r(Acc(0.5) * z) * z) / bt) : r(z - r(Acc(0.5) * bt));
    } else {
      const Acc z = std::abs(a - b);
      if (beta == 0) return z;
      return z < bt ? Acc(0.5) * z * z / bt : z - Acc(0.5) * bt;
    }
  };
  return Reduce(Pointwise(kOp, Prepare(kOp, self, target, reduction), f), reduction);
}

Tensor SmoothL1LossBackward(const Tensor& grad, const Tensor& self, const Tensor& target,
                            int64_t reduction, double beta) {
  constexpr const char* kOp = "aten::smooth_l1_loss_backward";
  TB_CHECK(beta >= 0, ValueError) << kOp << ": beta must be non-negative, got " << beta;
  const double norm = reduction == kMean ? 1.0 / static_cast<double>(self.numel()) : 1.0;
  auto f = [norm, beta](auto a, auto b, auto g, auto) {
    using Acc = decltype(a);
    const Acc x = a - b, nrm = static_cast<Acc>(norm), bt = static_cast<Acc>(beta);
    if (x <= -bt) return -nrm * g;
    if (x >= bt) return nrm * g;
    return nrm * x * g / bt;
  };
  return LaidOutElementwise(Pointwise(kOp, Prepare(kOp, self, target, reduction, &grad), f),
                            {&self, &target, &grad});
}

}  // namespace

TB_REGISTER_KERNELS(loss_pointwise) {
  const DeviceType cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::mse_loss", cpu, Boxed<&MseLoss>(), TB_HERE);
  table.RegisterKernel("aten::mse_loss_backward", cpu, Boxed<&MseLossBackward>(), TB_HERE);
  table.RegisterKernel("aten::smooth_l1_loss", cpu, Boxed<&SmoothL1Loss>(), TB_HERE);
  table.RegisterKernel("aten::smooth_l1_loss_backward", cpu, Boxed<&SmoothL1LossBackward>(),
                       TB_HERE);
}

}  // namespace tb
