// Classification and logical unary ops: isnan, isinf, isfinite, isposinf, isneginf (bool
// results; integers are always finite), nan_to_num (+ in-place), logical_not (+ in-place,
// writing 0 / 1 in self's dtype) and bitwise_not (+ in-place; integers and bool).
#include <cmath>
#include <limits>
#include <optional>
#include <type_traits>

#include "dispatch/op_table.h"
#include "kernels/unary_internal.h"

namespace tb {
namespace {

using kernels::unary::PredicateUnary;

// A predicate that is constant `kIntValue` on integers and bool.
#define TB_FLOAT_PREDICATE(Struct, NAME, EXPR, kIntValue) \
  struct Struct : PredicateUnary<Struct> {                \
    static constexpr const char* kName = "aten::" NAME;   \
    template <typename T>                                 \
    bool operator()(T x) const {                          \
      if constexpr (std::is_floating_point_v<T>) {        \
        return EXPR;                                      \
      } else {                                            \
        return kIntValue;                                 \
      }                                                   \
    }                                                     \
  }

TB_FLOAT_PREDICATE(IsnanOp, "isnan", std::isnan(x), false);
TB_FLOAT_PREDICATE(IsinfOp, "isinf", std::isinf(x), false);
TB_FLOAT_PREDICATE(IsfiniteOp, "isfinite", std::isfinite(x), true);
TB_FLOAT_PREDICATE(IsposinfOp, "isposinf", x == std::numeric_limits<T>::infinity(), false);
TB_FLOAT_PREDICATE(IsneginfOp, "isneginf", x == -std::numeric_limits<T>::infinity(), false);

#undef TB_FLOAT_PREDICATE

struct LogicalNotOp : PredicateUnary<LogicalNotOp> {
  static constexpr const char* kName = "aten::logical_not";
  template <typename T>
  bool operator()(T x) const {
    return !(x != T(0));  // NaN is true, so its negation false
  }
};

struct BitwiseNotOp {
  static constexpr const char* kName = "aten::bitwise_not";
  static DType Result(const char* op, DType t) {
    kernels::unary::CheckReal(op, t);
    TB_CHECK(IsIntegral(t, /*include_bool=*/true), TypeError)
        << op << ": dtype " << DTypeName(t) << " is not supported (integer and bool only)";
    return t;
  }
  static void Run(const char* op, const Tensor& out, const Tensor& self) {
    TB_DISPATCH(self.dtype(), op, TB_TYPES_INT_BOOL,
                [&] { kernels::unary::Apply<scalar_t, scalar_t>(out, self, BitwiseNotOp{}); });
  }
  template <typename T>
  T operator()(T x) const {
    if constexpr (std::is_same_v<T, bool>) {
      return !x;
    } else {
      return static_cast<T>(~x);
    }
  }
};

// ---- nan_to_num ----------------------------------------------------------------------------

// NaN -> nan (0 by default), +inf -> posinf (the dtype's largest finite value by default),
// -inf -> neginf (the lowest). Integers and bool are copied.
Tensor NanToNumImpl(const char* op, const Tensor& self, std::optional<double> nan,
                    std::optional<double> posinf, std::optional<double> neginf, bool inplace) {
  kernels::unary::CheckReal(op, self.dtype());
  return kernels::unary::RunUnary(
      op, self, self.dtype(), inplace, [&](const Tensor& out, const Tensor& in) {
        if (!IsFloatingPoint(in.dtype())) {
          if (out.data() != in.data()) out.copy_from(in);
          return;
        }
        TB_DISPATCH(in.dtype(), op, TB_TYPES_FLOAT, [&] {
          using T = scalar_t;
          using C = kernels::opmath_t<T>;
          // The replacements in T (double -> T rounds; out-of-range values become +-inf).
          const T r_nan = kernels::Convert<T>(nan.value_or(0.0));
          const T r_pos = posinf ? kernels::Convert<T>(*posinf) : std::numeric_limits<T>::max();
          const T r_neg = neginf ? kernels::Convert<T>(*neginf) : std::numeric_limits<T>::lowest();
          kernels::Map<T, T>(
              out,
              [=](T v) {
                const C x = static_cast<C>(v);
                if (std::isnan(x)) return r_nan;
                if (x == std::numeric_limits<C>::infinity()) return r_pos;
                if (x == -std::numeric_limits<C>::infinity()) return r_neg;
                return v;
              },
              in);
        });
      });
}

Tensor NanToNum(const Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                std::optional<double> neginf) {
  return NanToNumImpl("aten::nan_to_num", self, nan, posinf, neginf, false);
}
Tensor NanToNum_(const Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                 std::optional<double> neginf) {
  return NanToNumImpl("aten::nan_to_num_", self, nan, posinf, neginf, true);
}

}  // namespace

TB_REGISTER_KERNELS(unary_predicates) {
  using kernels::unary::Unary;
  table.RegisterKernel("aten::isnan", DeviceType::kCPU, Boxed<&Unary<IsnanOp, false>>(), TB_HERE);
  table.RegisterKernel("aten::isinf", DeviceType::kCPU, Boxed<&Unary<IsinfOp, false>>(), TB_HERE);
  table.RegisterKernel("aten::isfinite", DeviceType::kCPU, Boxed<&Unary<IsfiniteOp, false>>(),
                       TB_HERE);
  table.RegisterKernel("aten::isposinf", DeviceType::kCPU, Boxed<&Unary<IsposinfOp, false>>(),
                       TB_HERE);
  table.RegisterKernel("aten::isneginf", DeviceType::kCPU, Boxed<&Unary<IsneginfOp, false>>(),
                       TB_HERE);
  TB_REGISTER_UNARY_PAIR("logical_not", LogicalNotOp);
  TB_REGISTER_UNARY_PAIR("bitwise_not", BitwiseNotOp);
  table.RegisterKernel("aten::nan_to_num", DeviceType::kCPU, Boxed<&NanToNum>(), TB_HERE);
  table.RegisterKernel("aten::nan_to_num_", DeviceType::kCPU, Boxed<&NanToNum_>(), TB_HERE);
}

}  // namespace tb
