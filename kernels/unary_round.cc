// Rounding: ceil, floor, round (half to even; .decimals), trunc and frac, with their in-place
// forms. Integer dtypes keep their values (ceil / floor / round / trunc of an integer is the
// integer); bool is rejected as torch does; frac and round.decimals are floating-only.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "dispatch/op_table.h"
#include "kernels/unary_internal.h"

namespace tb {
namespace {

using kernels::unary::SameTypeUnary;

// Contiguous float32 rows: Eigen's packet floor / ceil / rint are exact (SSE2 emulation) and
// about 4x faster than the C library's, but drop the sign of zero results (ceil(-0.5) is -0.0).
// Every rounding result carries its input's sign, so the sign is copied back. Works in blocks
// through a buffer, so y may alias a.
template <typename Y, typename A, typename VecFn>
void SignedRoundingVec(Y& y, const A& a, VecFn vec) {
  constexpr Eigen::Index kBlock = 1024;
  alignas(16) float buf[kBlock];
  const Eigen::Index n = a.size();
  for (Eigen::Index b = 0; b < n; b += kBlock) {
    const Eigen::Index m = std::min(kBlock, n - b);
    const float* x = a.data() + b;
    float* o = y.data() + b;
    Eigen::Map<Eigen::ArrayXf> t(buf, m);
    vec(t, Eigen::Map<const Eigen::ArrayXf>(x, m));
    for (Eigen::Index i = 0; i < m; ++i) o[i] = std::copysign(buf[i], x[i]);
  }
}

// A rounding function: FN on floating values (VEC on contiguous float32 rows), the identity on
// integers.
#define TB_ROUNDING_OP(Struct, NAME, FN, VEC)                           \
  struct Struct : SameTypeUnary<Struct> {                               \
    static constexpr const char* kName = "aten::" NAME;                 \
    static constexpr bool kBool = false;                                \
    static constexpr bool kVec = true;                                  \
    template <typename T>                                               \
    T operator()(T x) const {                                           \
      if constexpr (std::is_integral_v<T>) {                            \
        return x;                                                       \
      } else {                                                          \
        return FN(x);                                                   \
      }                                                                 \
    }                                                                   \
    template <typename Y, typename A>                                   \
    void Vec(Y& y, const A& a) const {                                  \
      SignedRoundingVec(y, a, [](auto& t, const auto& v) { t = VEC; }); \
    }                                                                   \
  }

TB_ROUNDING_OP(CeilOp, "ceil", std::ceil, v.ceil());
TB_ROUNDING_OP(FloorOp, "floor", std::floor, v.floor());
TB_ROUNDING_OP(TruncOp, "trunc", std::trunc, v.abs().floor());  // sign restored after
// Round half to even under the default rounding mode, as torch (std::nearbyint).
TB_ROUNDING_OP(RoundOp, "round", std::nearbyint, v.rint());

#undef TB_ROUNDING_OP

// x - trunc(x): floating dtypes only.
struct FracOp {
  static constexpr const char* kName = "aten::frac";
  static DType Result(const char* op, DType t) {
    kernels::unary::CheckReal(op, t);
    TB_CHECK_SUPPORTED(IsFloatingPoint(t))
        << op << ": dtype " << DTypeName(t) << " is not supported (floating dtypes only)";
    return t;
  }
  static void Run(const char* op, const Tensor& out, const Tensor& self) {
    TB_DISPATCH(self.dtype(), op, TB_TYPES_FLOAT,
                [&] { kernels::unary::Apply<scalar_t, scalar_t>(out, self, FracOp{}); });
  }
  template <typename T>
  T operator()(T x) const {
    return x - std::trunc(x);
  }
};

// round(x, decimals): scales by 10^|decimals|, rounds half to even, scales back (torch's
// formula, so that e.g. round(0.125, 2) agrees bit for bit). Floating dtypes only, even for
// decimals == 0, as torch.
Tensor RoundDecimalsImpl(const char* op, const Tensor& self, int64_t decimals, bool inplace) {
  kernels::unary::CheckReal(op, self.dtype());
  TB_CHECK_SUPPORTED(IsFloatingPoint(self.dtype()))
      << op << ": dtype " << DTypeName(self.dtype()) << " is not supported (floating dtypes only)";
  return kernels::unary::RunUnary(
      op, self, self.dtype(), inplace, [&](const Tensor& out, const Tensor& in) {
        TB_DISPATCH(in.dtype(), op, TB_TYPES_FLOAT, [&] {
          using T = scalar_t;
          using C = kernels::opmath_t<T>;
          if (decimals == 0) {
            kernels::unary::Apply<T, T>(out, in, RoundOp{});
            return;
          }
          const bool neg = decimals < 0;
          const C ten_pow =
              static_cast<C>(std::pow(10.0, static_cast<double>(neg ? -decimals : decimals)));
          kernels::Map<T, T>(
              out,
              [neg, ten_pow](T v) {
                const C x = static_cast<C>(v);
                const C r = neg ? std::nearbyint(x / ten_pow) * ten_pow
                                : std::nearbyint(x * ten_pow) / ten_pow;
                return kernels::Convert<T>(r);
              },
              in);
        });
      });
}

Tensor RoundDecimals(const Tensor& self, int64_t decimals) {
  return RoundDecimalsImpl("aten::round.decimals", self, decimals, false);
}
Tensor RoundDecimals_(const Tensor& self, int64_t decimals) {
  return RoundDecimalsImpl("aten::round_.decimals", self, decimals, true);
}

}  // namespace

TB_REGISTER_KERNELS(unary_round) {
  TB_REGISTER_UNARY_PAIR("ceil", CeilOp);
  TB_REGISTER_UNARY_PAIR("floor", FloorOp);
  TB_REGISTER_UNARY_PAIR("trunc", TruncOp);
  TB_REGISTER_UNARY_PAIR("round", RoundOp);
  TB_REGISTER_UNARY_PAIR("frac", FracOp);
  table.RegisterKernel("aten::round.decimals", DeviceType::kCPU, Boxed<&RoundDecimals>(), TB_HERE);
  table.RegisterKernel("aten::round_.decimals", DeviceType::kCPU, Boxed<&RoundDecimals_>(),
                       TB_HERE);
}

}  // namespace tb
