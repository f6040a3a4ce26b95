// Activations (forward): aten::relu, relu_, threshold, threshold_, elu, elu_, leaky_relu,
// leaky_relu_, hardtanh, hardtanh_, hardsigmoid, hardsigmoid_, hardswish, hardswish_, softplus,
// gelu, gelu_, silu, silu_, mish, mish_, log_sigmoid_forward, glu, celu, celu_, hardshrink,
// softshrink.
//
// Contiguous float32 gelu and silu run on the fused pointwise loop (kernels/fused_pointwise.cc,
// vectorised exp / erf / tanh). Large contiguous float32 / bfloat16 tensors go to oneDNN's
// eltwise primitives where oneDNN has the function (relu, leaky_relu, elu, gelu, silu,
// hardswish, mish), but contiguous float32 / float64 relu runs on threshold_backward's row
// loop and contiguous float32 / bfloat16 hardtanh on kernels/cpu/simd.cc's clamp row (in place
// for hardtanh_); everything else runs on element loops in the opmath type, following torch's
// formulas. The in-place variants compute a new tensor and copy it back into `self`.
#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>

#include "dispatch/op_table.h"
#include "kernels/activation_internal.h"
#include "kernels/common_internal.h"
#include "kernels/complex_internal.h"
#include "kernels/cpu/simd_internal.h"
#include "kernels/fused_pointwise_internal.h"

namespace tb {
namespace {

using dnnl::algorithm;
using kernels::CheckFloat;
using kernels::EltwiseOr;
using kernels::MapFloat;
using kernels::MapNumeric;

template <typename A>
bool IsNan(A x) {
  if constexpr (std::is_floating_point_v<A>) return std::isnan(x);
  return false;
}

// In-place variants: `value` written into `self`, which is returned.
Tensor Assign(const Tensor& self, const Tensor& value) {
  self.copy_from(value);
  return self;
}

Tensor Relu(const Tensor& self) {
  constexpr const char* kOp = "aten::relu";
  TB_CHECK_SUPPORTED(self.dtype() != DType::kBool) << kOp << ": dtype bool is not supported";
  // Contiguous float32 / float64: x <= 0 ? 0 : x on threshold_backward's row loop with
  // grad = x (NaN stays NaN, as in torch; oneDNN's relu gives 0).
  Tensor out;
  if (kernels::ThresholdRows(self, self, 0.0, &out)) return out;
  return EltwiseOr(self, algorithm::eltwise_relu, 0.f, 0.f, [&] {
    return MapNumeric(kOp, self, [](auto x) {
      using A = decltype(x);
      return x > A(0) || IsNan(x) ? x : A(0);
    });
  });
}
Tensor Relu_(const Tensor& self) { return Assign(self, Relu(self)); }

Tensor Threshold(const Tensor& self, const Scalar& threshold, const Scalar& value) {
  constexpr const char* kOp = "aten::threshold";
  TB_CHECK_SUPPORTED(self.dtype() != DType::kBool) << kOp << ": dtype bool is not supported";
  // The forward compares in opmath: float for the 16-bit floats (its backward in their own type).
  const DType dt = self.dtype();
  const bool half = dt == DType::kFloat16 || dt == DType::kBFloat16;
  const double th = kernels::ThresholdIn(half ? DType::kFloat32 : dt, threshold.to_double());
  const double v = value.to_double();
  return MapNumeric(kOp, self, [th, v](auto x) {
    using A = decltype(x);
    return static_cast<double>(x) <= th ? static_cast<A>(v) : x;
  });
}
Tensor Threshold_(const Tensor& self, const Scalar& threshold, const Scalar& value) {
  return Assign(self, Threshold(self, threshold, value));
}

Tensor Elu(const Tensor& self, const Scalar& alpha, const Scalar& scale,
           const Scalar& input_scale) {
  constexpr const char* kOp = "aten::elu";
  CheckFloat(kOp, self);
  const double a = alpha.to_double(), s = scale.to_double(), is = input_scale.to_double();
  auto loops = [&] {
    return MapFloat(kOp, self, [a, s, is](auto x) {
      using A = decltype(x);
      return x <= A(0) ? static_cast<A>(std::expm1(x * static_cast<A>(is)) * static_cast<A>(a * s))
                       : static_cast<A>(x * static_cast<A>(s));
    });
  };
  if (s != 1.0 || is != 1.0) return loops();
  return EltwiseOr(self, algorithm::eltwise_elu, static_cast<float>(a), 0.f, loops);
}
Tensor Elu_(const Tensor& self, const Scalar& alpha, const Scalar& scale,
            const Scalar& input_scale) {
  return Assign(self, Elu(self, alpha, scale, input_scale));
}

// celu(x, alpha) = elu(x, alpha, scale 1, input_scale 1 / alpha), as torch computes it.
Tensor Celu(const Tensor& self, const Scalar& alpha) {
  return Elu(self, alpha, Scalar(1.0), Scalar(1.0 / alpha.to_double()));
}
Tensor Celu_(const Tensor& self, const Scalar& alpha) { return Assign(self, Celu(self, alpha)); }

// hardshrink: x outside [-lambd, lambd], else 0; softshrink moves x lambd towards 0 (NaN
// stays NaN). lambd is compared in the compute type.
Tensor Hardshrink(const Tensor& self, const Scalar& lambd) {
  const char* op = "aten::hardshrink";
  CheckFloat(op, self);
  const double l = lambd.to_double();
  return MapFloat(op, self, [l](auto x) {
    using A = decltype(x);
    const A lm = static_cast<A>(l);
    return (x >= -lm && x <= lm) ? A(0) : x;
  });
}
Tensor Softshrink(const Tensor& self, const Scalar& lambd) {
  const char* op = "aten::softshrink";
  CheckFloat(op, self);
  const double l = lambd.to_double();
  TB_CHECK(l >= 0, ValueError) << op << ": lambda must be greater or equal to 0, but found to be "
                               << l;
  return MapFloat(op, self, [l](auto x) {
    using A = decltype(x);
    const A lm = static_cast<A>(l);
    return x > lm ? A(x - lm) : (x < -lm ? A(x + lm) : A(x * A(0)));
  });
}

Tensor LeakyRelu(const Tensor& self, const Scalar& negative_slope) {
  constexpr const char* kOp = "aten::leaky_relu";
  CheckFloat(kOp, self);
  const double slope = negative_slope.to_double();
  return EltwiseOr(self, algorithm::eltwise_relu, static_cast<float>(slope), 0.f, [&] {
    return MapFloat(kOp, self, [slope](auto x) {
      using A = decltype(x);
      return x > A(0) ? x : static_cast<A>(x * static_cast<A>(slope));
    });
  });
}
Tensor LeakyRelu_(const Tensor& self, const Scalar& negative_slope) {
  return Assign(self, LeakyRelu(self, negative_slope));
}

// Contiguous float32 / bfloat16 hardtanh into `out` (same shape and dtype, contiguous; may be
// self) on kernels/cpu/simd.cc's clamp row, bfloat16 widened a chunk at a time; false for other
// dtypes and layouts.
bool HardtanhRows(const Tensor& self, const Tensor& out, double lo, double hi) {
  const DType dt = self.dtype();
  if ((dt != DType::kFloat32 && dt != DType::kBFloat16) || !self.is_contiguous()) return false;
  const float flo = static_cast<float>(lo), fhi = static_cast<float>(hi);
  const int64_t n = self.numel();
  const void* in = self.data();
  void* dst = n > 0 ? out.mutable_data() : nullptr;  // throws for read-only memory
  kernels::ForEachBlock(n, kernels::kGrain, n > 16 * kernels::kGrain, [&](int64_t b, int64_t e) {
    if (dt == DType::kFloat32) {
      kernels::simd::ClampRow(static_cast<const float*>(in) + b, static_cast<float*>(dst) + b,
                              e - b, flo, fhi);
    } else {
      kernels::simd::Bf16Chunks(
          static_cast<const uint16_t*>(in) + b, static_cast<uint16_t*>(dst) + b, e - b,
          [&](float* row, int64_t len) { kernels::simd::ClampRow(row, row, len, flo, fhi); });
    }
  });
  return true;
}

Tensor Hardtanh(const Tensor& self, const Scalar& min_val, const Scalar& max_val) {
  constexpr const char* kOp = "aten::hardtanh";
  TB_CHECK_SUPPORTED(self.dtype() != DType::kBool) << kOp << ": dtype bool is not supported";
  const double lo = min_val.to_double(), hi = max_val.to_double();
  if (self.is_contiguous()) {
    Tensor out = Tensor::Empty(self.shape(), self.dtype());
    if (HardtanhRows(self, out, lo, hi)) return out;
  }
  return MapNumeric(kOp, self, [lo, hi](auto x) {
    using A = decltype(x);
    if (IsNan(x)) return x;
    return std::min(std::max(x, static_cast<A>(lo)), static_cast<A>(hi));
  });
}
Tensor Hardtanh_(const Tensor& self, const Scalar& min_val, const Scalar& max_val) {
  if (HardtanhRows(self, self, min_val.to_double(), max_val.to_double())) return self;
  return Assign(self, Hardtanh(self, min_val, max_val));
}

Tensor Hardsigmoid(const Tensor& self) {
  constexpr const char* kOp = "aten::hardsigmoid";
  CheckFloat(kOp, self);
  return MapFloat(kOp, self, [](auto x) {
    using A = decltype(x);
    return std::min(std::max(x + A(3), A(0)), A(6)) / A(6);
  });
}
Tensor Hardsigmoid_(const Tensor& self) { return Assign(self, Hardsigmoid(self)); }

Tensor Hardswish(const Tensor& self) {
  constexpr const char* kOp = "aten::hardswish";
  CheckFloat(kOp, self);
  return EltwiseOr(self, algorithm::eltwise_hardswish, 1.f / 6.f, 0.5f, [&] {
    return MapFloat(kOp, self, [](auto x) {
      using A = decltype(x);
      return x * std::min(std::max(x + A(3), A(0)), A(6)) / A(6);
    });
  });
}
Tensor Hardswish_(const Tensor& self) { return Assign(self, Hardswish(self)); }

Tensor Softplus(const Tensor& self, const Scalar& beta, const Scalar& threshold) {
  constexpr const char* kOp = "aten::softplus";
  CheckFloat(kOp, self);
  const double b = beta.to_double(), th = threshold.to_double();
  return MapFloat(kOp, self, [b, th](auto x) {
    using A = decltype(x);
    const A xb = x * static_cast<A>(b);
    return xb > static_cast<A>(th) ? x
                                   : static_cast<A>(std::log1p(std::exp(xb)) / static_cast<A>(b));
  });
}

Tensor GeluLoops(const char* op, const Tensor& self, bool tanh_approx) {
  if (tanh_approx) {
    return MapFloat(op, self, [](auto x) {
      using A = decltype(x);
      const A k_beta = static_cast<A>(M_SQRT2 * M_2_SQRTPI * 0.5), k_kappa = A(0.044715);
      const A inner = k_beta * (x + k_kappa * x * x * x);
      return static_cast<A>(A(0.5) * x * (A(1) + std::tanh(inner)));
    });
  }
  return MapFloat(op, self, [](auto x) {
    using A = decltype(x);
    return static_cast<A>(x * A(0.5) * (A(1) + std::erf(x * static_cast<A>(M_SQRT1_2))));
  });
}

bool TanhApprox(const char* op, const std::string& approximate) {
  if (approximate == "none") return false;
  if (approximate == "tanh") return true;
  TB_THROW(ValueError) << op << ": approximate must be 'none' or 'tanh', got '" << approximate
                       << "'";
}

Tensor Gelu(const Tensor& self, const std::string& approximate) {
  constexpr const char* kOp = "aten::gelu";
  CheckFloat(kOp, self);
  const bool t = TanhApprox(kOp, approximate);
  Tensor fused = fused_pointwise::Float32Activation(t ? "gelu_tanh" : "gelu", {&self});
  if (fused.defined()) return fused;
  return EltwiseOr(self, t ? algorithm::eltwise_gelu_tanh : algorithm::eltwise_gelu_erf, 0.f, 0.f,
                   [&] { return GeluLoops(kOp, self, t); });
}
Tensor Gelu_(const Tensor& self, const std::string& approximate) {
  return Assign(self, Gelu(self, approximate));
}

Tensor Silu(const Tensor& self) {
  constexpr const char* kOp = "aten::silu";
  if (IsComplex(self.dtype())) return kernels::complex::Unary(kOp, kOp, self, false);
  CheckFloat(kOp, self);
  Tensor fused = fused_pointwise::Float32Activation("silu", {&self});
  if (fused.defined()) return fused;
  return EltwiseOr(self, algorithm::eltwise_swish, 1.f, 0.f, [&] {
    return MapFloat(kOp, self, [](auto x) {
      using A = decltype(x);
      return static_cast<A>(x / (A(1) + std::exp(-x)));
    });
  });
}
Tensor Silu_(const Tensor& self) { return Assign(self, Silu(self)); }

Tensor Mish(const Tensor& self) {
  constexpr const char* kOp = "aten::mish";
  CheckFloat(kOp, self);
  return EltwiseOr(self, algorithm::eltwise_mish, 0.f, 0.f, [&] {
    return MapFloat(kOp, self, [](auto x) {
      using A = decltype(x);
      return static_cast<A>(x * std::tanh(std::log1p(std::exp(x))));
    });
  });
}
Tensor Mish_(const Tensor& self) { return Assign(self, Mish(self)); }

std::tuple<Tensor, Tensor> LogSigmoidForward(const Tensor& self) {
  constexpr const char* kOp = "aten::log_sigmoid_forward";
  CheckFloat(kOp, self);
  Tensor out = MapFloat(kOp, self, [](auto x) {
    using A = decltype(x);
    return static_cast<A>(std::min(x, A(0)) - std::log1p(std::exp(-std::abs(x))));
  });
  Tensor buffer = MapFloat(kOp, self, [](auto x) { return std::exp(-std::abs(x)); });
  return {out, buffer};
}

Tensor Glu(const Tensor& self, int64_t dim) {
  constexpr const char* kOp = "aten::glu";
  CheckFloat(kOp, self);
  const kernels::GluHalves h = kernels::SplitGlu(kOp, self, dim);
  return kernels::MapBinary(kOp, h.a, h.b, [](auto x, auto y) {
    using A = decltype(x);
    return static_cast<A>(x * (A(1) / (A(1) + std::exp(-y))));
  });
}

}  // namespace

TB_REGISTER_KERNELS(activation) {
  const auto cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::relu", cpu, Boxed<&Relu>(), TB_HERE);
  table.RegisterKernel("aten::relu_", cpu, Boxed<&Relu_>(), TB_HERE);
  table.RegisterKernel("aten::threshold", cpu, Boxed<&Threshold>(), TB_HERE);
  table.RegisterKernel("aten::threshold_", cpu, Boxed<&Threshold_>(), TB_HERE);
  table.RegisterKernel("aten::elu", cpu, Boxed<&Elu>(), TB_HERE);
  table.RegisterKernel("aten::elu_", cpu, Boxed<&Elu_>(), TB_HERE);
  table.RegisterKernel("aten::celu", cpu, Boxed<&Celu>(), TB_HERE);
  table.RegisterKernel("aten::celu_", cpu, Boxed<&Celu_>(), TB_HERE);
  table.RegisterKernel("aten::hardshrink", cpu, Boxed<&Hardshrink>(), TB_HERE);
  table.RegisterKernel("aten::softshrink", cpu, Boxed<&Softshrink>(), TB_HERE);
  table.RegisterKernel("aten::leaky_relu", cpu, Boxed<&LeakyRelu>(), TB_HERE);
  table.RegisterKernel("aten::leaky_relu_", cpu, Boxed<&LeakyRelu_>(), TB_HERE);
  table.RegisterKernel("aten::hardtanh", cpu, Boxed<&Hardtanh>(), TB_HERE);
  table.RegisterKernel("aten::hardtanh_", cpu, Boxed<&Hardtanh_>(), TB_HERE);
  table.RegisterKernel("aten::hardsigmoid", cpu, Boxed<&Hardsigmoid>(), TB_HERE);
  table.RegisterKernel("aten::hardsigmoid_", cpu, Boxed<&Hardsigmoid_>(), TB_HERE);
  table.RegisterKernel("aten::hardswish", cpu, Boxed<&Hardswish>(), TB_HERE);
  table.RegisterKernel("aten::hardswish_", cpu, Boxed<&Hardswish_>(), TB_HERE);
  table.RegisterKernel("aten::softplus", cpu, Boxed<&Softplus>(), TB_HERE);
  table.RegisterKernel("aten::gelu", cpu, Boxed<&Gelu>(), TB_HERE);
  table.RegisterKernel("aten::gelu_", cpu, Boxed<&Gelu_>(), TB_HERE);
  table.RegisterKernel("aten::silu", cpu, Boxed<&Silu>(), TB_HERE);
  table.RegisterKernel("aten::silu_", cpu, Boxed<&Silu_>(), TB_HERE);
  table.RegisterKernel("aten::mish", cpu, Boxed<&Mish>(), TB_HERE);
  table.RegisterKernel("aten::mish_", cpu, Boxed<&Mish_>(), TB_HERE);
  table.RegisterKernel("aten::log_sigmoid_forward", cpu, Boxed<&LogSigmoidForward>(), TB_HERE);
  table.RegisterKernel("aten::glu", cpu, Boxed<&Glu>(), TB_HERE);
}

}  // namespace tb
