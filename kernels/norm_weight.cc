// Weight normalization (torch.nn.utils.weight_norm, parametrizations.weight_norm):
// aten::_weight_norm_interface(v, g, dim) -> (w, norms) with w = v * g / ||v||, the norm taken
// over every dimension but `dim`, and its backward. Norms and sums accumulate in double for
// float64 and in float otherwise; norms are float32 for 16-bit inputs, as torch returns them.
#include <cmath>
#include <tuple>
#include <vector>

#include "dispatch/op_table.h"
#include "kernels/binary_internal.h"

namespace tb {
namespace {

using kernels::opmath_t;

// v viewed as [outer, n, inner] around `dim`.
struct Split {
  int64_t outer = 1, n = 1, inner = 1;
};

Split SplitAt(const Tensor& v, int64_t dim) {
  Split s;
  for (int64_t d = 0; d < v.ndim(); ++d) {
    if (d < dim) s.outer *= v.size(d);
    if (d == dim) s.n = v.size(d);
    if (d > dim) s.inner *= v.size(d);
  }
  return s;
}

DType NormDType(DType dt) { return dt == DType::kFloat64 ? dt : DType::kFloat32; }

void CheckArgs(const char* op, const Tensor& v, const Tensor& g, int64_t dim) {
  kernels::CheckHost(op, v, g);
  TB_CHECK(IsFloatingPoint(v.dtype()) && v.dtype() == g.dtype(), TypeError)
      << op << ": v and g must be floating-point tensors of one dtype, got " << DTypeName(v.dtype())
      << " and " << DTypeName(g.dtype());
  TB_CHECK(g.numel() == v.size(dim), ValueError)
      << op << ": g must have one element per slice of v along dim " << dim << " (" << v.size(dim)
      << "), got shape " << ShapeString(g.shape());
}

std::tuple<Tensor, Tensor> WeightNorm(const Tensor& v_in, const Tensor& g_in, int64_t dim_in) {
  constexpr const char* kOp = "aten::_weight_norm_interface";
  TB_CHECK(v_in.ndim() > 0, ValueError) << kOp << ": v must have at least one dimension";
  const int64_t dim = WrapDim(dim_in, v_in.ndim(), kOp);
  CheckArgs(kOp, v_in, g_in, dim);
  const Tensor v = v_in.contiguous(), g = g_in.contiguous();
  const Split s = SplitAt(v, dim);
  Tensor w = Tensor::Empty(v.shape(), v.dtype());
  Tensor norms = Tensor::Empty(g.shape(), NormDType(v.dtype()));
  TB_DISPATCH_T(v.dtype(), kOp, TB_TYPES_FLOAT, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using M = opmath_t<T>;
    using N = std::conditional_t<std::is_same_v<T, double>, double, float>;
    const T* vp = v.data_as<const T>();
    const T* gp = g.data_as<const T>();
    T* wp = w.data_as<T>();
    N* np = norms.data_as<N>();
    std::vector<M> sq(static_cast<size_t>(s.n), M(0));
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t j = 0; j < s.n; ++j) {
        const T* row = vp + (o * s.n + j) * s.inner;
        M acc = 0;
        for (int64_t i = 0; i < s.inner; ++i)
          acc += static_cast<M>(row[i]) * static_cast<M>(row[i]);
        sq[j] += acc;
      }
    }
    for (int64_t j = 0; j < s.n; ++j) np[j] = static_cast<N>(std::sqrt(sq[j]));
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t j = 0; j < s.n; ++j) {
        const M scale = static_cast<M>(gp[j]) / static_cast<M>(np[j]);
        const int64_t base = (o * s.n + j) * s.inner;
        for (int64_t i = 0; i < s.inner; ++i) {
          wp[base + i] = static_cast<T>(static_cast<M>(vp[base + i]) * scale);
        }
      }
    }
  });
  return {w, norms};
}

// grad_g = sum(grad_w * v) / norm; grad_v = g / norm * (grad_w - v * sum(grad_w * v) / norm^2),
// per slice along dim.
std::tuple<Tensor, Tensor> WeightNormBackward(const Tensor& grad_w_in, const Tensor& v_in,
                                              const Tensor& g_in, const Tensor& norms_in,
                                              int64_t dim_in) {
  constexpr const char* kOp = "aten::_weight_norm_interface_backward";
  TB_CHECK(v_in.ndim() > 0, ValueError) << kOp << ": v must have at least one dimension";
  const int64_t dim = WrapDim(dim_in, v_in.ndim(), kOp);
  CheckArgs(kOp, v_in, g_in, dim);
  kernels::CheckHost(kOp, grad_w_in, norms_in);
  TB_CHECK(grad_w_in.shape() == v_in.shape() && grad_w_in.dtype() == v_in.dtype(), ValueError)
      << kOp << ": grad_w must have v's shape and dtype, got " << ShapeString(grad_w_in.shape())
      << " " << DTypeName(grad_w_in.dtype());
  TB_CHECK(norms_in.numel() == v_in.size(dim), ValueError)
      << kOp << ": saved_norms must have one element per slice, got shape "
      << ShapeString(norms_in.shape());
  const Tensor gw = grad_w_in.contiguous(), v = v_in.contiguous(), g = g_in.contiguous();
  const Tensor norms = Cast(norms_in, NormDType(v.dtype())).contiguous();
  const Split s = SplitAt(v, dim);
  Tensor grad_v = Tensor::Empty(v.shape(), v.dtype());
  Tensor grad_g = Tensor::Empty(g.shape(), g.dtype());
  TB_DISPATCH_T(v.dtype(), kOp, TB_TYPES_FLOAT, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using M = opmath_t<T>;
    using N = std::conditional_t<std::is_same_v<T, double>, double, float>;
    const T* gwp = gw.data_as<const T>();
    const T* vp = v.data_as<const T>();
    const T* gp = g.data_as<const T>();
    const N* np = norms.data_as<const N>();
    T* gvp = grad_v.data_as<T>();
    T* ggp = grad_g.data_as<T>();
    std::vector<M> dot(static_cast<size_t>(s.n), M(0));
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t j = 0; j < s.n; ++j) {
        const int64_t base = (o * s.n + j) * s.inner;
        M acc = 0;
        for (int64_t i = 0; i < s.inner; ++i) {
          acc += static_cast<M>(gwp[base + i]) * static_cast<M>(vp[base + i]);
        }
        dot[j] += acc;
      }
    }
    for (int64_t j = 0; j < s.n; ++j) ggp[j] = static_cast<T>(dot[j] / static_cast<M>(np[j]));
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t j = 0; j < s.n; ++j) {
        const M norm = static_cast<M>(np[j]);
        const M a = static_cast<M>(gp[j]) / norm;
        const M b = dot[j] / (norm * norm);
        const int64_t base = (o * s.n + j) * s.inner;
        for (int64_t i = 0; i < s.inner; ++i) {
          gvp[base + i] = static_cast<T>(
              a * (static_cast<M>(gwp[base + i]) - static_cast<M>(vp[base + i]) * b));
        }
      }
    }
  });
  return {grad_v, grad_g};
}

}  // namespace

TB_REGISTER_KERNELS(norm_weight) {
  const auto cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::_weight_norm_interface", cpu, Boxed<&WeightNorm>(), TB_HERE);
  table.RegisterKernel("aten::_weight_norm_interface_backward", cpu, Boxed<&WeightNormBackward>(),
                       TB_HERE);
}

}  // namespace tb
