// Statistical reductions: aten::var, aten::std, aten::var_mean, aten::std_mean (correction,
// dim and unbiased forms), aten::logsumexp, aten::linalg_vector_norm and aten::norm, on the
// shared reduction driver (kernels/reduce_internal.h).
//
// var/std take two passes in double (mean, then the sum of squared deviations), as accurate as
// torch's Welford in double. logsumexp subtracts the max first (0 where the max is infinite,
// as torch). Norms accumulate in float (double for float64).
#include <cmath>
#include <complex>
#include <limits>
#include <optional>
#include <sstream>
#include <tuple>
#include <vector>

#include "dispatch/op_table.h"
#include "kernels/complex_internal.h"
#include "kernels/reduce_internal.h"

namespace tb {
namespace {

using kernels::ReduceDims;

// ---- var / std --------------------------------------------------------------------------------

template <typename T>
struct MeanReducer {
  using In = T;
  using Acc = double;
  static constexpr bool kPairwise = true;
  double* mean;
  int64_t count;
  Acc Init(int64_t) const { return 0.0; }
  Acc Step(Acc a, In x, int64_t) const { return a + kernels::Widen<double>(x); }
  Acc Merge(Acc a, Acc b) const { return a + b; }
  void Write(int64_t o, Acc a) const { mean[o] = a / static_cast<double>(count); }
};

template <typename T>
struct SquaredDeviationReducer {
  using In = T;
  struct Acc {
    double m2, mean;
  };
  static constexpr bool kPairwise = true;
  const double* mean;
  T* var;       // var, or std when take_sqrt
  T* mean_out;  // may be null
  double divisor;
  bool take_sqrt;
  Acc Init(int64_t o) const { return {0.0, mean[o]}; }
  Acc Step(Acc a, In x, int64_t) const {
    double d = kernels::Widen<double>(x) - a.mean;
    return {a.m2 + d * d, a.mean};
  }
  Acc Merge(Acc a, Acc b) const { return {a.m2 + b.m2, a.mean}; }
  void Write(int64_t o, Acc a) const {
    double v = a.m2 / divisor;
    var[o] = kernels::Convert<T>(take_sqrt ? std::sqrt(v) : v);
    if (mean_out) mean_out[o] = kernels::Convert<T>(a.mean);
  }
};

std::tuple<Tensor, Tensor> VarMeanImpl(const char* op, const Tensor& self,
                                       const std::optional<std::vector<int64_t>>& dim,
                                       double correction, bool keepdim, bool take_sqrt,
                                       bool with_mean) {
  if (IsComplex(self.dtype())) {
    // |z - mean|^2 = (re - mean_re)^2 + (im - mean_im)^2: the parts' variances, added.
    const Tensor x = self.ndim() == 0 ? self.unsqueeze(0) : self;
    std::vector<int64_t> dims;
    if (dim && !dim->empty()) {
      for (int64_t d : *dim) dims.push_back(WrapDim(d, x.ndim(), op));
    } else {
      for (int64_t d = 0; d < x.ndim(); ++d) dims.push_back(d);
    }
    auto [var, mean] = VarMeanImpl(op, kernels::complex::AsReal(x), dims, correction,
                                   keepdim && self.ndim() > 0, false, with_mean);
    return {kernels::complex::AddParts(var, take_sqrt),
            with_mean ? kernels::complex::AsComplex(mean) : Tensor()};
  }
  TB_CHECK(IsFloatingPoint(self.dtype()), RuntimeError)
      << op << ": std and var only support floating point and complex dtypes, got "
      << DTypeName(self.dtype());
  ReduceDims rd = kernels::ParseReduceDims(op, self, dim, keepdim);
  Tensor var = Tensor::Empty(rd.out_shape, self.dtype());
  Tensor mean = with_mean ? Tensor::Empty(rd.out_shape, self.dtype()) : Tensor();
  std::vector<double> means(static_cast<size_t>(var.numel()));
  const double divisor = std::max(0.0, static_cast<double>(rd.count) - correction);
  kernels::Geometry g = kernels::PlanReduce(self, rd.reduced);
  TB_DISPATCH(self.dtype(), op, TB_TYPES_FLOAT, [&] {
    using T = scalar_t;
    kernels::RunReduce(g, MeanReducer<T>{means.data(), rd.count});
    T* m = with_mean ? mean.data_as<T>() : nullptr;
    kernels::RunReduce(
        g, SquaredDeviationReducer<T>{means.data(), var.data_as<T>(), m, divisor, take_sqrt});
  });
  return {var, mean};
}

double CorrectionOf(const std::optional<Scalar>& correction) {
  return correction ? correction->to_double() : 1.0;
}

template <bool kStd>
Tensor VarCorrection(const Tensor& self, const std::optional<std::vector<int64_t>>& dim,
                     const std::optional<Scalar>& correction, bool keepdim) {
  const char* op = kStd ? "aten::std.correction" : "aten::var.correction";
  return std::get<0>(VarMeanImpl(op, self, dim, CorrectionOf(correction), keepdim, kStd, false));
}

template <bool kStd>
Tensor VarDim(const Tensor& self, const std::optional<std::vector<int64_t>>& dim, bool unbiased,
              bool keepdim) {
  const char* op = kStd ? "aten::std.dim" : "aten::var.dim";
  return std::get<0>(VarMeanImpl(op, self, dim, unbiased ? 1.0 : 0.0, keepdim, kStd, false));
}

template <bool kStd>
Tensor VarAll(const Tensor& self, bool unbiased) {
  const char* op = kStd ? "aten::std" : "aten::var";
  return std::get<0>(VarMeanImpl(op, self, std::nullopt, unbiased ? 1.0 : 0.0, false, kStd, false));
}

template <bool kStd>
std::tuple<Tensor, Tensor> VarMeanCorrection(const Tensor& self,
                                             const std::optional<std::vector<int64_t>>& dim,
                                             const std::optional<Scalar>& correction,
                                             bool keepdim) {
  const char* op = kStd ? "aten::std_mean.correction" : "aten::var_mean.correction";
  return VarMeanImpl(op, self, dim, CorrectionOf(correction), keepdim, kStd, true);
}

template <bool kStd>
std::tuple<Tensor, Tensor> VarMeanDim(const Tensor& self,
                                      const std::optional<std::vector<int64_t>>& dim, bool unbiased,
                                      bool keepdim) {
  const char* op = kStd ? "aten::std_mean.dim" : "aten::var_mean.dim";
  return VarMeanImpl(op, self, dim, unbiased ? 1.0 : 0.0, keepdim, kStd, true);
}

template <bool kStd>
std::tuple<Tensor, Tensor> VarMeanAll(const Tensor& self, bool unbiased) {
  const char* op = kStd ? "aten::std_mean" : "aten::var_mean";
  return VarMeanImpl(op, self, std::nullopt, unbiased ? 1.0 : 0.0, false, kStd, true);
}

// ---- logsumexp --------------------------------------------------------------------------------

template <typename T>
struct MaxReducer {
  using In = T;
  using Acc = kernels::opmath_t<T>;
  static constexpr bool kPairwise = false;
  Acc* out;
  Acc Init(int64_t) const { return -std::numeric_limits<Acc>::infinity(); }
  Acc Step(Acc a, In x, int64_t) const { return Merge(a, kernels::Widen<Acc>(x)); }
  Acc Merge(Acc a, Acc x) const { return (x > a) | (x != x) ? x : a; }
  void Write(int64_t o, Acc a) const { out[o] = std::isinf(a) ? Acc(0) : a; }
};

// sum(exp(x - shift[out])) with the shift carried in the accumulator.
template <typename T>
struct ShiftedExpReducer {
  using In = T;
  using V = kernels::opmath_t<T>;
  struct Acc {
    V s, shift;
  };
  static constexpr bool kPairwise = true;
  const V* shift;
  T* out;
  Acc Init(int64_t o) const { return {V(0), shift[o]}; }
  Acc Step(Acc a, In x, int64_t) const {
    return {a.s + std::exp(kernels::Widen<V>(x) - a.shift), a.shift};
  }
  Acc Merge(Acc a, Acc b) const { return {a.s + b.s, a.shift}; }
  void Write(int64_t o, Acc a) const { out[o] = kernels::Convert<T>(std::log(a.s) + a.shift); }
};

// Complex logsumexp, as torch's: the shift is the largest real part (0 when infinite), the
// sum of exp(x - shift) and its log in complex128.
template <typename T>
struct ComplexMaxRealReducer {
  using In = T;
  using Acc = double;
  static constexpr bool kPairwise = false;
  double* out;
  Acc Init(int64_t) const { return -std::numeric_limits<double>::infinity(); }
  Acc Step(Acc a, In x, int64_t) const { return Merge(a, static_cast<double>(x.real())); }
  Acc Merge(Acc a, Acc x) const { return (x > a) | (x != x) ? x : a; }
  void Write(int64_t o, Acc a) const { out[o] = std::isinf(a) ? 0.0 : a; }
};

template <typename T>
struct ComplexShiftedExpReducer {
  using In = T;
  using Z = std::complex<double>;
  struct Acc {
    Z s;
    double shift;
  };
  static constexpr bool kPairwise = true;
  const double* shift;
  T* out;
  Acc Init(int64_t o) const { return {Z(0), shift[o]}; }
  Acc Step(Acc a, In x, int64_t) const { return {a.s + std::exp(Z(x) - a.shift), a.shift}; }
  Acc Merge(Acc a, Acc b) const { return {a.s + b.s, a.shift}; }
  void Write(int64_t o, Acc a) const { out[o] = T(std::log(a.s) + a.shift); }
};

template <typename T>
void ComplexLogSumExp(const Tensor& out, const kernels::Geometry& g) {
  std::vector<double> shift(static_cast<size_t>(out.numel()));
  kernels::RunReduce(g, ComplexMaxRealReducer<T>{shift.data()});
  kernels::RunReduce(g, ComplexShiftedExpReducer<T>{shift.data(), out.data_as<T>()});
}

Tensor LogSumExp(const Tensor& self, const std::vector<int64_t>& dim, bool keepdim) {
  constexpr const char* kOp = "aten::logsumexp";
  if (IsComplex(self.dtype())) {
    ReduceDims rd = kernels::ParseReduceDims(kOp, self, IntArrayRef(dim), keepdim);
    Tensor out = Tensor::Empty(rd.out_shape, self.dtype());
    kernels::Geometry g = kernels::PlanReduce(self, rd.reduced);
    if (self.dtype() == DType::kComplex64) {
      ComplexLogSumExp<std::complex<float>>(out, g);
    } else {
      ComplexLogSumExp<std::complex<double>>(out, g);
    }
    return out;
  }
  Tensor in = IsFloatingPoint(self.dtype()) ? self : Cast(self, DType::kFloat32);
  ReduceDims rd = kernels::ParseReduceDims(kOp, in, IntArrayRef(dim), keepdim);
  Tensor out = Tensor::Empty(rd.out_shape, in.dtype());
  kernels::Geometry g = kernels::PlanReduce(in, rd.reduced);
  TB_DISPATCH(in.dtype(), kOp, TB_TYPES_FLOAT, [&] {
    using T = scalar_t;
    using V = kernels::opmath_t<T>;
    std::vector<V> shift(static_cast<size_t>(out.numel()));
    kernels::RunReduce(g, MaxReducer<T>{shift.data()});
    kernels::RunReduce(g, ShiftedExpReducer<T>{shift.data(), out.data_as<T>()});
  });
  return out;
}

// ---- norms ------------------------------------------------------------------------------------

enum class NormKind { kZero, kOne, kTwo, kInf, kNegInf, kP };

template <typename T, NormKind kKind>
struct NormReducer {
  using In = T;
  using Acc = kernels::opmath_t<T>;
  static constexpr bool kPairwise = kKind != NormKind::kInf && kKind != NormKind::kNegInf;
  T* out;
  Acc p;
  Acc Init(int64_t) const {
    if constexpr (kKind == NormKind::kNegInf) return std::numeric_limits<Acc>::infinity();
    return Acc(0);
  }
  Acc Step(Acc a, In x, int64_t) const {
    const Acc v = std::abs(kernels::Widen<Acc>(x));
    switch (kKind) {
      case NormKind::kZero: return a + (v != Acc(0) ? Acc(1) : Acc(0));
      case NormKind::kOne: return a + v;
      case NormKind::kTwo: return a + v * v;
      case NormKind::kP: return a + std::pow(v, p);
      default: return Merge(a, v);
    }
  }
  Acc Merge(Acc a, Acc b) const {
    if constexpr (kKind == NormKind::kInf) return (b > a) | (b != b) ? b : a;
    if constexpr (kKind == NormKind::kNegInf) return (b < a) | (b != b) ? b : a;
    return a + b;
  }
  void Write(int64_t o, Acc a) const {
    if constexpr (kKind == NormKind::kTwo) a = std::sqrt(a);
    if constexpr (kKind == NormKind::kP) a = std::pow(a, Acc(1) / p);
    out[o] = kernels::Convert<T>(a);
  }
};

Tensor VectorNormImpl(const char* op, const Tensor& self, double ord,
                      const std::optional<std::vector<int64_t>>& dim, bool keepdim,
                      const std::optional<DType>& dtype) {
  if (IsComplex(self.dtype())) {
    // The norm of the moduli, in the value type.
    TB_CHECK(!dtype || IsComplex(*dtype), RuntimeError)
        << "linalg.vector_norm: dtype should be complex for a complex input, got "
        << DTypeName(*dtype);
    const Tensor in = dtype ? Cast(self, *dtype) : self;
    const Tensor mod = kernels::complex::Unary("aten::abs", op, in, false);
    return VectorNormImpl(op, mod, ord, dim, keepdim, std::nullopt);
  }
  TB_CHECK(IsFloatingPoint(self.dtype()), RuntimeError)
      << "linalg.vector_norm: Expected a floating point or complex tensor as input. Got "
      << DTypeName(self.dtype());
  if (dtype) {
    TB_CHECK(IsFloatingPoint(*dtype), RuntimeError)
        << "linalg.vector_norm: dtype should be floating point, got " << DTypeName(*dtype);
  }
  const bool no_identity = ord < 0 || ord == std::numeric_limits<double>::infinity();
  if (self.numel() == 0 && no_identity) {
    std::ostringstream p;
    p << ord;
    TB_CHECK(dim && !dim->empty(), RuntimeError)
        << "linalg.vector_norm cannot compute the " << p.str() << " norm on an empty tensor "
        << "because the operation does not have an identity";
    for (int64_t d : *dim) {
      TB_CHECK(self.size(d) != 0, RuntimeError)
          << "linalg.vector_norm expected that the dimensions over which it reduces have "
          << "non-zero size. Dimension " << d << " has size 0.";
    }
  }
  Tensor in = dtype ? Cast(self, *dtype) : self;
  ReduceDims rd = kernels::ParseReduceDims(op, in, dim, keepdim);
  Tensor out = Tensor::Empty(rd.out_shape, in.dtype());
  TB_DISPATCH(in.dtype(), op, TB_TYPES_FLOAT, [&] {
    using T = scalar_t;
    using V = kernels::opmath_t<T>;
    T* o = out.data_as<T>();
    const V p = static_cast<V>(ord);
    if (ord == 0) {
      kernels::Reduce(in, rd, NormReducer<T, NormKind::kZero>{o, p});
    } else if (ord == 1) {
      kernels::Reduce(in, rd, NormReducer<T, NormKind::kOne>{o, p});
    } else if (ord == 2) {
      kernels::Reduce(in, rd, NormReducer<T, NormKind::kTwo>{o, p});
    } else if (std::isinf(ord)) {
      if (ord > 0) {
        kernels::Reduce(in, rd, NormReducer<T, NormKind::kInf>{o, p});
      } else {
        kernels::Reduce(in, rd, NormReducer<T, NormKind::kNegInf>{o, p});
      }
    } else {
      kernels::Reduce(in, rd, NormReducer<T, NormKind::kP>{o, p});
    }
  });
  return out;
}

Tensor LinalgVectorNorm(const Tensor& self, const Scalar& ord,
                        const std::optional<std::vector<int64_t>>& dim, bool keepdim,
                        const std::optional<DType>& dtype) {
  return VectorNormImpl("aten::linalg_vector_norm", self, ord.to_double(), dim, keepdim, dtype);
}

Tensor NormScalar(const Tensor& self, const Scalar& p) {
  return VectorNormImpl("aten::norm.Scalar", self, p.to_double(), std::nullopt, false,
                        std::nullopt);
}

Tensor NormScalarOptDim(const Tensor& self, const std::optional<Scalar>& p,
                        const std::vector<int64_t>& dim, bool keepdim) {
  return VectorNormImpl("aten::norm.ScalarOpt_dim", self, p ? p->to_double() : 2.0, dim, keepdim,
                        std::nullopt);
}

}  // namespace

TB_REGISTER_KERNELS(reduce_stats) {
  using DT = DeviceType;
  table.RegisterKernel("aten::var.correction", DT::kCPU, Boxed<&VarCorrection<false>>(), TB_HERE);
  table.RegisterKernel("aten::std.correction", DT::kCPU, Boxed<&VarCorrection<true>>(), TB_HERE);
  table.RegisterKernel("aten::var.dim", DT::kCPU, Boxed<&VarDim<false>>(), TB_HERE);
  table.RegisterKernel("aten::std.dim", DT::kCPU, Boxed<&VarDim<true>>(), TB_HERE);
  table.RegisterKernel("aten::var", DT::kCPU, Boxed<&VarAll<false>>(), TB_HERE);
  table.RegisterKernel("aten::std", DT::kCPU, Boxed<&VarAll<true>>(), TB_HERE);
  table.RegisterKernel("aten::var_mean.correction", DT::kCPU, Boxed<&VarMeanCorrection<false>>(),
                       TB_HERE);
  table.RegisterKernel("aten::std_mean.correction", DT::kCPU, Boxed<&VarMeanCorrection<true>>(),
                       TB_HERE);
  table.RegisterKernel("aten::var_mean.dim", DT::kCPU, Boxed<&VarMeanDim<false>>(), TB_HERE);
  table.RegisterKernel("aten::std_mean.dim", DT::kCPU, Boxed<&VarMeanDim<true>>(), TB_HERE);
  table.RegisterKernel("aten::var_mean", DT::kCPU, Boxed<&VarMeanAll<false>>(), TB_HERE);
  table.RegisterKernel("aten::std_mean", DT::kCPU, Boxed<&VarMeanAll<true>>(), TB_HERE);
  table.RegisterKernel("aten::logsumexp", DT::kCPU, Boxed<&LogSumExp>(), TB_HERE);
  table.RegisterKernel("aten::linalg_vector_norm", DT::kCPU, Boxed<&LinalgVectorNorm>(), TB_HERE);
  table.RegisterKernel("aten::norm.Scalar", DT::kCPU, Boxed<&NormScalar>(), TB_HERE);
  table.RegisterKernel("aten::norm.ScalarOpt_dim", DT::kCPU, Boxed<&NormScalarOptDim>(), TB_HERE);
}

}  // namespace tb
