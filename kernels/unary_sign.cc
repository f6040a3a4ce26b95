// Sign-related unary ops: abs, neg, sign, sgn (with their in-place forms) and signbit.
//
// abs / neg / sign / sgn keep the input dtype. Integers wrap as two's complement
// (abs(-128) == -128 in int8, neg of uint8 is 256 - x). abs and neg reject bool as torch does
// ("use logical_not"); sign of bool is the value itself. signbit returns bool.
#include <cmath>
#include <type_traits>

#include "dispatch/op_table.h"
#include "kernels/unary_internal.h"

namespace tb {
namespace {

using kernels::unary::PredicateUnary;
using kernels::unary::SameTypeUnary;
using kernels::unary::WrapNeg;

struct AbsOp : SameTypeUnary<AbsOp> {
  static constexpr const char* kName = "aten::abs";
  static constexpr bool kBool = false;
  template <typename T>
  T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) {
      return std::abs(x);
    } else if constexpr (std::is_signed_v<T>) {
      return x < 0 ? WrapNeg(x) : x;
    } else {
      return x;
    }
  }
};

struct NegOp {
  static constexpr const char* kName = "aten::neg";
  static DType Result(const char* op, DType t) {
    kernels::unary::CheckReal(op, t);
    TB_CHECK(t != DType::kBool, TypeError)
        << op << ": negation, the `-` operator, on a bool tensor is not supported; use "
        << "logical_not() or `~` to invert a mask";
    return t;
  }
  static void Run(const char* op, const Tensor& out, const Tensor& self) {
    TB_DISPATCH(self.dtype(), op, TB_TYPES_NUMERIC,
                [&] { kernels::unary::Apply<scalar_t, scalar_t>(out, self, NegOp{}); });
  }
  template <typename T>
  T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) {
      return -x;
    } else {
      return WrapNeg(x);
    }
  }
};

// (0 < x) - (x < 0): NaN and -0.0 give 0, as torch.
template <typename T>
T SignOf(T x) {
  if constexpr (std::is_same_v<T, bool>) {
    return x;
  } else if constexpr (std::is_unsigned_v<T>) {
    return static_cast<T>(x > 0);
  } else {
    return static_cast<T>((T(0) < x) - (x < T(0)));
  }
}

struct SignOp : SameTypeUnary<SignOp> {
  static constexpr const char* kName = "aten::sign";
  static constexpr bool kBool = true;
  template <typename T>
  T operator()(T x) const {
    return SignOf(x);
  }
};

// sgn is sign for real dtypes (x / |x| for complex, which we do not compute on).
struct SgnOp : SameTypeUnary<SgnOp> {
  static constexpr const char* kName = "aten::sgn";
  static constexpr bool kBool = true;
  template <typename T>
  T operator()(T x) const {
    return SignOf(x);
  }
};

struct SignbitOp : PredicateUnary<SignbitOp> {
  static constexpr const char* kName = "aten::signbit";
  template <typename T>
  bool operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) {
      return std::signbit(x);
    } else if constexpr (std::is_signed_v<T>) {
      return x < 0;
    } else {
      return false;
    }
  }
};

}  // namespace

TB_REGISTER_KERNELS(unary_sign) {
  TB_REGISTER_UNARY_PAIR("abs", AbsOp);
  TB_REGISTER_UNARY_PAIR("neg", NegOp);
  TB_REGISTER_UNARY_PAIR("sign", SignOp);
  TB_REGISTER_UNARY_PAIR("sgn", SgnOp);
  table.RegisterKernel("aten::signbit", DeviceType::kCPU,
                       Boxed<&kernels::unary::Unary<SignbitOp, false>>(), TB_HERE);
}

}  // namespace tb
