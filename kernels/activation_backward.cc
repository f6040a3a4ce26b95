// Activation gradients: aten::threshold_backward, elu_backward, leaky_relu_backward,
// hardtanh_backward, hardshrink_backward, softshrink_backward, hardsigmoid_backward,
// hardswish_backward, softplus_backward, gelu_backward, silu_backward, mish_backward,
// log_sigmoid_backward, glu_backward.
//
// threshold_backward on contiguous same-shape float32 / float64 operands runs on a row loop
// of kernels/cpu/simd.cc. Contiguous float32 gradients of gelu and silu run on the fused
// pointwise loop (kernels/fused_pointwise.cc). Large contiguous float32 / bfloat16 gradients of
// gelu, silu, hardswish, mish, elu and leaky_relu run on oneDNN's eltwise backward primitives;
// everything else is an element loop over (grad_output, self) in the opmath type with torch's
// formula, operands broadcast and promoted as torch's TensorIterator does.
#include <cmath>
#include <string>

#include "dispatch/op_table.h"
#include "kernels/activation_internal.h"
#include "kernels/fused_pointwise_internal.h"
#include "kernels/layout.h"

namespace tb {
namespace {

using dnnl::algorithm;
using kernels::MapBinary;
using kernels::OneDnnEltwiseBackward;

Tensor ThresholdBackward(const Tensor& grad_output, const Tensor& self, const Scalar& threshold) {
  const double th =
      kernels::ThresholdIn(PromoteTypes(grad_output.dtype(), self.dtype()), threshold.to_double());
  Tensor fast;
  if (kernels::ThresholdRows(grad_output, self, th, &fast)) return fast;
  return MapBinary<true>("aten::threshold_backward", grad_output, self, [th](auto g, auto x) {
    using A = decltype(g);
    return static_cast<double>(x) <= th ? A(0) : g;
  });
}

Tensor EluBackward(const Tensor& grad_output, const Scalar& alpha, const Scalar& scale,
                   const Scalar& input_scale, bool is_result, const Tensor& self_or_result) {
  const double a = alpha.to_double(), s = scale.to_double(), is = input_scale.to_double();
  const double negcoef = a * s;
  if (!is_result && s == 1.0 && is == 1.0) {
    Tensor r = OneDnnEltwiseBackward(grad_output, self_or_result, algorithm::eltwise_elu,
                                     static_cast<float>(a));
    if (r.defined()) return r;
  }
  return MapBinary("aten::elu_backward", grad_output, self_or_result, [=](auto g, auto x) {
    using A = decltype(g);
    if (x > A(0)) return static_cast<A>(g * static_cast<A>(s));
    if (is_result) {
      return static_cast<A>(g * static_cast<A>(is) * (x + static_cast<A>(negcoef)));
    }
    return static_cast<A>(g * static_cast<A>(is) * static_cast<A>(negcoef) *
                          std::exp(x * static_cast<A>(is)));
  });
}

// The gradient of hardshrink and softshrink: grad outside [-lambd, lambd], else 0.
template <bool kSoft>
Tensor ShrinkBackward(const Tensor& grad_output, const Tensor& self, const Scalar& lambd) {
  const double l = lambd.to_double();
  return MapBinary(kSoft ? "aten::softshrink_backward" : "aten::hardshrink_backward", grad_output,
                   self, [l](auto g, auto x) {
                     using A = decltype(g);
                     const A lm = static_cast<A>(l);
                     return (x >= -lm && x <= lm) ? A(0) : g;
                   });
}

Tensor LeakyReluBackward(const Tensor& grad_output, const Tensor& self,
                         const Scalar& negative_slope, bool self_is_result) {
  const double slope = negative_slope.to_double();
  Tensor r =
      OneDnnEltwiseBackward(grad_output, self, algorithm::eltwise_relu, static_cast<float>(slope));
  if (r.defined()) return r;
  return MapBinary("aten::leaky_relu_backward", grad_output, self, [slope](auto g, auto x) {
    using A = decltype(g);
    return x > A(0) ? g : static_cast<A>(g * static_cast<A>(slope));
  });
}

Tensor HardtanhBackward(const Tensor& grad_output, const Tensor& self, const Scalar& min_val,
                        const Scalar& max_val) {
  const double lo = min_val.to_double(), hi = max_val.to_double();
  return MapBinary<true>("aten::hardtanh_backward", grad_output, self, [lo, hi](auto g, auto x) {
    using A = decltype(g);
    const double v = static_cast<double>(x);
    return v <= lo || v >= hi ? A(0) : g;
  });
}

Tensor HardsigmoidBackward(const Tensor& grad_output, const Tensor& self) {
  return MapBinary("aten::hardsigmoid_backward", grad_output, self, [](auto g, auto x) {
    using A = decltype(g);
    return x > A(-3) && x < A(3) ? static_cast<A>(g / A(6)) : A(0);
  });
}

Tensor HardswishBackward(const Tensor& grad_output, const Tensor& self) {
  Tensor r =
      OneDnnEltwiseBackward(grad_output, self, algorithm::eltwise_hardswish, 1.f / 6.f, 0.5f);
  if (r.defined()) return r;
  return MapBinary("aten::hardswish_backward", grad_output, self, [](auto g, auto x) {
    using A = decltype(g);
    if (x < A(-3)) return A(0);
    if (x <= A(3)) return static_cast<A>(g * (x / A(3) + A(0.5)));
    return g;
  });
}

Tensor SoftplusBackward(const Tensor& grad_output, const Tensor& self, const Scalar& beta,
                        const Scalar& threshold) {
  const double b = beta.to_double(), th = threshold.to_double();
  return MapBinary("aten::softplus_backward", grad_output, self, [b, th](auto g, auto x) {
    using A = decltype(g);
    const A xb = x * static_cast<A>(b);
    if (xb > static_cast<A>(th)) return g;
    const A z = std::exp(xb);
    return static_cast<A>(g * z / (z + A(1)));
  });
}

Tensor GeluBackward(const Tensor& grad_output, const Tensor& self, const std::string& approximate) {
  constexpr const char* kOp = "aten::gelu_backward";
  if (approximate == "tanh" || approximate == "none") {
    Tensor fused = fused_pointwise::Float32Activation(
        approximate == "tanh" ? "gelu_tanh_bw" : "gelu_bw", {&grad_output, &self});
    if (fused.defined()) return fused;
    Tensor r = OneDnnEltwiseBackward(
        grad_output, self,
        approximate == "tanh" ? algorithm::eltwise_gelu_tanh : algorithm::eltwise_gelu_erf);
    if (r.defined()) return r;
  }
  if (approximate == "tanh") {
    return MapBinary(kOp, grad_output, self, [](auto g, auto x) {
      using A = decltype(g);
      const A k_beta = static_cast<A>(M_SQRT2 * M_2_SQRTPI * 0.5), k_kappa = A(0.044715);
      const A x_sq = x * x, x_cube = x_sq * x;
      const A t = std::tanh(k_beta * (x + k_kappa * x_cube));
      const A left = A(0.5) * x, right = A(1) + t;
      const A left_derivative = A(0.5) * right;
      const A right_derivative = left * (A(1) - t * t) * k_beta * (A(1) + A(3) * k_kappa * x_sq);
      return static_cast<A>(g * (left_derivative + right_derivative));
    });
  }
  TB_CHECK(approximate == "none", ValueError)
      << kOp << ": approximate must be 'none' or 'tanh', got '" << approximate << "'";
  return MapBinary(kOp, grad_output, self, [](auto g, auto x) {
    using A = decltype(g);
    const A k_alpha = static_cast<A>(M_SQRT1_2),
            k_beta = static_cast<A>(M_2_SQRTPI * M_SQRT1_2 * 0.5);
    const A cdf = A(0.5) * (A(1) + std::erf(x * k_alpha));
    const A pdf = k_beta * std::exp(x * x * A(-0.5));
    return static_cast<A>(g * (cdf + x * pdf));
  });
}

Tensor SiluBackward(const Tensor& grad_output, const Tensor& self) {
  Tensor fused = fused_pointwise::Float32Activation("silu_bw", {&grad_output, &self});
  if (fused.defined()) return fused;
  Tensor r = OneDnnEltwiseBackward(grad_output, self, algorithm::eltwise_swish, 1.f);
  if (r.defined()) return r;
  return MapBinary("aten::silu_backward", grad_output, self, [](auto g, auto x) {
    using A = decltype(g);
    const A s = A(1) / (A(1) + std::exp(-x));
    return static_cast<A>(g * s * (A(1) + x * (A(1) - s)));
  });
}

Tensor MishBackward(const Tensor& grad_output, const Tensor& self) {
  Tensor r = OneDnnEltwiseBackward(grad_output, self, algorithm::eltwise_mish);
  if (r.defined()) return r;
  return MapBinary("aten::mish_backward", grad_output, self, [](auto g, auto x) {
    using A = decltype(g);
    const A sig = A(1) / (A(1) + std::exp(-x));
    const A tsp = std::tanh(std::log1p(std::exp(x)));
    return static_cast<A>(g * (tsp + x * sig * (A(1) - tsp * tsp)));
  });
}

// `buffer` holds exp(-|self|) from log_sigmoid_forward; it is recomputed from self here.
Tensor LogSigmoidBackward(const Tensor& grad_output, const Tensor& self, const Tensor& buffer) {
  return MapBinary("aten::log_sigmoid_backward", grad_output, self, [](auto g, auto x) {
    using A = decltype(g);
    const bool neg = x < A(0);
    const A z = std::exp(-std::abs(x));
    const A max_deriv = neg ? A(1) : A(0), sign = neg ? A(1) : A(-1);
    return static_cast<A>((max_deriv - sign * (z / (A(1) + z))) * g);
  });
}

Tensor GluBackward(const Tensor& grad_output, const Tensor& self, int64_t dim) {
  constexpr const char* kOp = "aten::glu_backward";
  const kernels::GluHalves h = kernels::SplitGlu(kOp, self, dim);
  const Tensor &a = h.a, &b = h.b;
  const int64_t d = h.d, n = 2 * h.half;
  TB_CHECK(grad_output.shape() == a.shape(), ValueError)
      << kOp << ": grad_output of shape " << ShapeString(grad_output.shape())
      << " does not match half of self " << ShapeString(a.shape());
  auto sig = [](auto y) {
    using A = decltype(y);
    return A(1) / (A(1) + std::exp(-y));
  };
  Tensor ga = MapBinary(kOp, grad_output, b, [sig](auto g, auto y) { return g * sig(y); });
  Tensor gs = MapBinary(kOp, grad_output, b, [sig](auto g, auto y) {
    using A = decltype(g);
    const A s = sig(y);
    return g * s * (A(1) - s);
  });
  Tensor gb = MapBinary(kOp, gs, a, [](auto g, auto x) { return g * x; });
  Tensor out = Tensor::Empty(self.shape(), ga.dtype());
  out.slice(d, 0, n / 2).copy_from(ga);
  out.slice(d, n / 2, n).copy_from(gb);
  // torch concatenates the halves' gradients: the input's suggested memory format.
  return InFormat(out, SuggestMemoryFormat(self));
}

}  // namespace

TB_REGISTER_KERNELS(activation_backward) {
  const auto cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::threshold_backward", cpu, Boxed<&ThresholdBackward>(), TB_HERE);
  table.RegisterKernel("aten::elu_backward", cpu, Boxed<&EluBackward>(), TB_HERE);
  table.RegisterKernel("aten::leaky_relu_backward", cpu, Boxed<&LeakyReluBackward>(), TB_HERE);
  table.RegisterKernel("aten::hardshrink_backward", cpu, Boxed<&ShrinkBackward<false>>(), TB_HERE);
  table.RegisterKernel("aten::softshrink_backward", cpu, Boxed<&ShrinkBackward<true>>(), TB_HERE);
  table.RegisterKernel("aten::hardtanh_backward", cpu, Boxed<&HardtanhBackward>(), TB_HERE);
  table.RegisterKernel("aten::hardsigmoid_backward", cpu, Boxed<&HardsigmoidBackward>(), TB_HERE);
  table.RegisterKernel("aten::hardswish_backward", cpu, Boxed<&HardswishBackward>(), TB_HERE);
  table.RegisterKernel("aten::softplus_backward", cpu, Boxed<&SoftplusBackward>(), TB_HERE);
  table.RegisterKernel("aten::gelu_backward", cpu, Boxed<&GeluBackward>(), TB_HERE);
  table.RegisterKernel("aten::silu_backward", cpu, Boxed<&SiluBackward>(), TB_HERE);
  table.RegisterKernel("aten::mish_backward", cpu, Boxed<&MishBackward>(), TB_HERE);
  table.RegisterKernel("aten::log_sigmoid_backward", cpu, Boxed<&LogSigmoidBackward>(), TB_HERE);
  table.RegisterKernel("aten::glu_backward", cpu, Boxed<&GluBackward>(), TB_HERE);
}

}  // namespace tb
