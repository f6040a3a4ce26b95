// Unary floating-point math: exponentials and logarithms, powers and roots, trigonometric and
// hyperbolic functions, sigmoid / logit, angle conversion, and the autograd helpers
// sigmoid_backward, tanh_backward and logit_backward.
//
// Integer and bool inputs compute in float32; float16 / bfloat16 compute in float and round
// once. Contiguous float32 data of exp, log, sigmoid and tanh (erf: unary_special.cc) runs on
// Eigen's vectorised array functions, guarded where they are inexact. sqrt / rsqrt stay on
// the C library: Eigen's float sqrt under EIGEN_FAST_MATH is an rsqrt estimate that flushes
// denormals and returns NaN for inf. float64 stays scalar (glibc is as fast as Eigen's SSE2).
#include <cmath>
#include <limits>
#include <optional>

#include "dispatch/op_table.h"
#include "kernels/fused_pointwise_internal.h"
#include "kernels/unary_internal.h"

namespace tb {
namespace {

using kernels::unary::FloatingUnary;

// A functor for std::NAME, registered as aten::NAME and aten::NAME_.
#define TB_STD_FLOATING_OP(Struct, NAME)                 \
  struct Struct : FloatingUnary<Struct> {                \
    static constexpr const char* kName = "aten::" #NAME; \
    template <typename T>                                \
    T operator()(T x) const {                            \
      return std::NAME(x);                               \
    }                                                    \
  }

TB_STD_FLOATING_OP(Exp2Op, exp2);
TB_STD_FLOATING_OP(Expm1Op, expm1);
TB_STD_FLOATING_OP(Log2Op, log2);
TB_STD_FLOATING_OP(Log10Op, log10);
TB_STD_FLOATING_OP(Log1pOp, log1p);
TB_STD_FLOATING_OP(SinOp, sin);
TB_STD_FLOATING_OP(CosOp, cos);
TB_STD_FLOATING_OP(TanOp, tan);
TB_STD_FLOATING_OP(AsinOp, asin);
TB_STD_FLOATING_OP(AcosOp, acos);
TB_STD_FLOATING_OP(AtanOp, atan);
TB_STD_FLOATING_OP(SinhOp, sinh);
TB_STD_FLOATING_OP(CoshOp, cosh);
TB_STD_FLOATING_OP(AsinhOp, asinh);
TB_STD_FLOATING_OP(AcoshOp, acosh);
TB_STD_FLOATING_OP(AtanhOp, atanh);

#undef TB_STD_FLOATING_OP

// Contiguous float32: Eigen's exp (within 1 ulp, ~1.5x faster than glibc's), except in blocks
// with inputs below -87 where the result is denormal and Eigen's clamping is inexact (it also
// returns 3e-39 for exp(-inf)).
struct ExpOp : FloatingUnary<ExpOp> {
  static constexpr const char* kName = "aten::exp";
  static constexpr bool kVec = true;
  template <typename T>
  T operator()(T x) const {
    return std::exp(x);
  }
  template <typename Y, typename A>
  void Vec(Y& y, const A& a) const {
    kernels::unary::VecBlocks(
        y, a, [](float v) { return v < -87.0f; }, [](auto& yb, const auto& ab) { yb = ab.exp(); },
        [](float v) { return std::exp(v); });
  }
};

// Contiguous float32: Eigen's log (within 1 ulp), except in blocks with denormal inputs, which
// Eigen mishandles.
struct LogOp : FloatingUnary<LogOp> {
  static constexpr const char* kName = "aten::log";
  static constexpr bool kVec = true;
  template <typename T>
  T operator()(T x) const {
    return std::log(x);
  }
  template <typename Y, typename A>
  void Vec(Y& y, const A& a) const {
    kernels::unary::VecBlocks(
        y, a, [](float v) { return v > 0.0f && v < std::numeric_limits<float>::min(); },
        [](auto& yb, const auto& ab) { yb = ab.log(); }, [](float v) { return std::log(v); });
  }
};

struct SqrtOp : FloatingUnary<SqrtOp> {
  static constexpr const char* kName = "aten::sqrt";
  template <typename T>
  T operator()(T x) const {
    return std::sqrt(x);
  }
};

// 1 / sqrt(x), correctly rounded twice as torch computes it (not the hardware estimate).
struct RsqrtOp : FloatingUnary<RsqrtOp> {
  static constexpr const char* kName = "aten::rsqrt";
  template <typename T>
  T operator()(T x) const {
    return T(1) / std::sqrt(x);
  }
};

struct ReciprocalOp : FloatingUnary<ReciprocalOp> {
  static constexpr const char* kName = "aten::reciprocal";
  template <typename T>
  T operator()(T x) const {
    return T(1) / x;
  }
};

// Contiguous float32 rows use Eigen's vectorised tanh (a rational approximation, within 6 ulp
// of std::tanh, about 15x faster); everything else std::tanh.
struct TanhOp : FloatingUnary<TanhOp> {
  static constexpr const char* kName = "aten::tanh";
  static constexpr const char* kFused = "tanh";
  static constexpr bool kVec = true;
  template <typename T>
  T operator()(T x) const {
    return std::tanh(x);
  }
  template <typename Y, typename A>
  void Vec(Y& y, const A& a) const {
    y = a.tanh();
  }
};

// 1 / (1 + exp(-x)), as torch computes it. Contiguous float32 on Eigen's exp: where that is
// inexact (exp(-x) below 1e-38) the sum rounds to 1 either way, so no range guard is needed.
struct SigmoidOp : FloatingUnary<SigmoidOp> {
  static constexpr const char* kName = "aten::sigmoid";
  static constexpr const char* kFused = "sigmoid";
  static constexpr bool kVec = true;
  template <typename T>
  T operator()(T x) const {
    return T(1) / (T(1) + std::exp(-x));
  }
  template <typename Y, typename A>
  void Vec(Y& y, const A& a) const {
    y = (1.0f + (-a).exp()).inverse();
  }
};

// x * (pi / 180), the constant rounded to the compute type as torch's mul by a scalar does.
struct Deg2RadOp : FloatingUnary<Deg2RadOp> {
  static constexpr const char* kName = "aten::deg2rad";
  template <typename T>
  T operator()(T x) const {
    return x * static_cast<T>(3.14159265358979323846 / 180.0);
  }
};

struct Rad2DegOp : FloatingUnary<Rad2DegOp> {
  static constexpr const char* kName = "aten::rad2deg";
  template <typename T>
  T operator()(T x) const {
    return x * static_cast<T>(180.0 / 3.14159265358979323846);
  }
};

// ---- logit ---------------------------------------------------------------------------------

// log(x / (1 - x)), with x clamped to [eps, 1 - eps] when eps is given and not negative.
// float16 / bfloat16 round 1 - x and the quotient to the dtype on the way, as torch's kernel
// (which computes in scalar_t there) does.
template <typename T>
T LogitOf(T v, bool clamp, T lo, T hi) {
  using C = kernels::opmath_t<T>;
  if (clamp) v = v < lo ? lo : (v > hi ? hi : v);  // NaN passes through
  const C x = static_cast<C>(v);
  const T one_minus = kernels::Convert<T>(C(1) - x);
  const T q = kernels::Convert<T>(x / static_cast<C>(one_minus));
  return kernels::Convert<T>(std::log(static_cast<C>(q)));
}

Tensor LogitImpl(const char* op, const Tensor& self, std::optional<double> eps, bool inplace) {
  DType result = kernels::unary::FloatingResult(op, self.dtype());
  const double e = eps.value_or(-1.0);
  return kernels::unary::RunUnary(
      op, self, result, inplace, [&](const Tensor& out, const Tensor& in) {
        Tensor src = Cast(in, out.dtype());
        TB_DISPATCH(out.dtype(), op, TB_TYPES_FLOAT, [&] {
          using T = scalar_t;
          using C = kernels::opmath_t<T>;
          const bool clamp = e >= 0;
          const T lo = kernels::Convert<T>(e);
          const T hi = kernels::Convert<T>(C(1) - static_cast<C>(lo));
          kernels::Map<T, T>(
              out, [clamp, lo, hi](T v) { return LogitOf<T>(v, clamp, lo, hi); }, src);
        });
      });
}

Tensor Logit(const Tensor& self, std::optional<double> eps) {
  return LogitImpl("aten::logit", self, eps, false);
}
Tensor Logit_(const Tensor& self, std::optional<double> eps) {
  return LogitImpl("aten::logit_", self, eps, true);
}

// ---- autograd helpers ----------------------------------------------------------------------

// Broadcasts and promotes (grad, x) to a floating dtype and runs f(grad, x) in opmath.
template <typename F>
Tensor BackwardBinary(const char* op, const Tensor& grad, const Tensor& x, F f) {
  kernels::unary::CheckReal(op, grad.dtype());
  kernels::unary::CheckReal(op, x.dtype());
  DType dt = ResultType({Operand(grad), Operand(x)});
  TB_CHECK(IsFloatingPoint(dt), NotImplementedError)
      << op << ": expected floating-point tensors, got " << DTypeName(grad.dtype()) << " and "
      << DTypeName(x.dtype());
  Dims shape = BroadcastShapes({grad.shape(), x.shape()}, op);
  const ElementwiseLayout layout(shape, {&grad, &x});
  Tensor out = layout.NewResult(dt);
  Tensor g = layout.In(Cast(grad, dt).expand(shape)), y = layout.In(Cast(x, dt).expand(shape));
  TB_DISPATCH(dt, op, TB_TYPES_FLOAT, [&] {
    using T = scalar_t;
    using C = kernels::opmath_t<T>;
    kernels::Map<T, T, T>(
        out,
        [&f](T a, T b) { return kernels::Convert<T>(f(static_cast<C>(a), static_cast<C>(b))); }, g,
        y);
  });
  return layout.Out(out);
}

// grad * (1 - y) * y, y = sigmoid(x).
Tensor SigmoidBackward(const Tensor& grad_output, const Tensor& output) {
  return BackwardBinary("aten::sigmoid_backward", grad_output, output,
                        [](auto g, auto y) { return g * (decltype(y)(1) - y) * y; });
}

// grad * (1 - y * y), y = tanh(x).
Tensor TanhBackward(const Tensor& grad_output, const Tensor& output) {
  return BackwardBinary("aten::tanh_backward", grad_output, output,
                        [](auto g, auto y) { return g * (decltype(y)(1) - y * y); });
}

// grad / (x * (1 - x)); outside [eps, 1 - eps] zero (eps given) or NaN (outside [0, 1]); at
// the poles grad * inf, as torch (the sign of grad, whatever the sign of a zero x).
Tensor LogitBackward(const Tensor& grad_output, const Tensor& self, std::optional<double> eps) {
  const double e = eps.value_or(-1.0);
  return BackwardBinary("aten::logit_backward", grad_output, self, [e](auto g, auto x) {
    using C = decltype(x);
    if (e < 0) {
      if (x < C(0) || x > C(1)) return std::numeric_limits<C>::quiet_NaN();
    } else {
      const C lo = static_cast<C>(e), hi = C(1) - static_cast<C>(e);
      if (x < lo || x > hi) return C(0);
    }
    if (x == C(0) || x == C(1)) return g * std::numeric_limits<C>::infinity();
    return g / (x * (C(1) - x));
  });
}

// Contiguous float32 sigmoid and tanh run on the fused pointwise loop
// (fused_pointwise::Float32Activation), 3-5x faster than the Eigen rows of Op::Vec (the
// in-place forms write its result back, so both give the same bits); everything else on Unary.
template <typename Op, bool kInplace>
Tensor FusedOrUnary(const Tensor& self) {
  Tensor fused = fused_pointwise::Float32Activation(Op::kFused, {&self});
  if (!fused.defined()) return kernels::unary::Unary<Op, kInplace>(self);
  if constexpr (kInplace) {
    self.copy_from(fused);
    return self;
  }
  return fused;
}

}  // namespace

TB_REGISTER_KERNELS(unary_math) {
  TB_REGISTER_UNARY_PAIR("exp", ExpOp);
  TB_REGISTER_UNARY_PAIR("exp2", Exp2Op);
  TB_REGISTER_UNARY_PAIR("expm1", Expm1Op);
  TB_REGISTER_UNARY_PAIR("log", LogOp);
  TB_REGISTER_UNARY_PAIR("log2", Log2Op);
  TB_REGISTER_UNARY_PAIR("log10", Log10Op);
  TB_REGISTER_UNARY_PAIR("log1p", Log1pOp);
  TB_REGISTER_UNARY_PAIR("sqrt", SqrtOp);
  TB_REGISTER_UNARY_PAIR("rsqrt", RsqrtOp);
  TB_REGISTER_UNARY_PAIR("reciprocal", ReciprocalOp);
  TB_REGISTER_UNARY_PAIR("sin", SinOp);
  TB_REGISTER_UNARY_PAIR("cos", CosOp);
  TB_REGISTER_UNARY_PAIR("tan", TanOp);
  TB_REGISTER_UNARY_PAIR("asin", AsinOp);
  TB_REGISTER_UNARY_PAIR("acos", AcosOp);
  TB_REGISTER_UNARY_PAIR("atan", AtanOp);
  TB_REGISTER_UNARY_PAIR("sinh", SinhOp);
  TB_REGISTER_UNARY_PAIR("cosh", CoshOp);
  table.RegisterKernel("aten::tanh", DeviceType::kCPU, Boxed<&FusedOrUnary<TanhOp, false>>(),
                       TB_HERE);
  table.RegisterKernel("aten::tanh_", DeviceType::kCPU, Boxed<&FusedOrUnary<TanhOp, true>>(),
                       TB_HERE);
  TB_REGISTER_UNARY_PAIR("asinh", AsinhOp);
  TB_REGISTER_UNARY_PAIR("acosh", AcoshOp);
  TB_REGISTER_UNARY_PAIR("atanh", AtanhOp);
  table.RegisterKernel("aten::sigmoid", DeviceType::kCPU, Boxed<&FusedOrUnary<SigmoidOp, false>>(),
                       TB_HERE);
  table.RegisterKernel("aten::sigmoid_", DeviceType::kCPU, Boxed<&FusedOrUnary<SigmoidOp, true>>(),
                       TB_HERE);
  TB_REGISTER_UNARY_PAIR("deg2rad", Deg2RadOp);
  TB_REGISTER_UNARY_PAIR("rad2deg", Rad2DegOp);
  table.RegisterKernel("aten::logit", DeviceType::kCPU, Boxed<&Logit>(), TB_HERE);
  table.RegisterKernel("aten::logit_", DeviceType::kCPU, Boxed<&Logit_>(), TB_HERE);
  table.RegisterKernel("aten::sigmoid_backward", DeviceType::kCPU, Boxed<&SigmoidBackward>(),
                       TB_HERE);
  table.RegisterKernel("aten::tanh_backward", DeviceType::kCPU, Boxed<&TanhBackward>(), TB_HERE);
  table.RegisterKernel("aten::logit_backward", DeviceType::kCPU, Boxed<&LogitBackward>(), TB_HERE);
}

}  // namespace tb
