// Bitwise and logical binary ops: aten::bitwise_and/or/xor, bitwise_left_shift/right_shift
// (and the << / >> operators __lshift__ / __rshift__), logical_and/or/xor, with their Scalar,
// in-place and out= overloads.
#include <climits>
#include <type_traits>

#include "dispatch/op_table.h"
#include "kernels/binary_internal.h"

namespace tb {
namespace {

using kernels::BinaryMap;
using kernels::Elementwise;
using kernels::WrapScalar;

using In = std::vector<Tensor>;

// ---- bitwise and / or / xor -----------------------------------------------------------------

enum class Bitwise { kAnd, kOr, kXor };

Tensor BitwiseImpl(const char* op, Bitwise kind, const Tensor& self, const Tensor& other,
                   const Tensor* dest) {
  const DType dt = ResultType({Operand(self), Operand(other)});
  kernels::CheckIntegral(op, dt, /*allow_bool=*/true);
  return Elementwise(op, {{&self, dt}, {&other, dt}}, dt, dest,
                     [&](const Tensor& out, const In& in) {
                       TB_DISPATCH_T(dt, op, TB_TYPES_INT_BOOL, [&](auto tag) {
                         using T = typename decltype(tag)::type;
                         switch (kind) {
                           case Bitwise::kAnd:
                             return BinaryMap<T, T, T>(
                                 out, in[0], in[1], [](T x, T y) { return static_cast<T>(x & y); });
                           case Bitwise::kOr:
                             return BinaryMap<T, T, T>(
                                 out, in[0], in[1], [](T x, T y) { return static_cast<T>(x | y); });
                           case Bitwise::kXor:
                             return BinaryMap<T, T, T>(
                                 out, in[0], in[1], [](T x, T y) { return static_cast<T>(x ^ y); });
                         }
                       });
                     });
}

// One family (and / or / xor): Tensor, Scalar, Scalar_Tensor, in-place and out= overloads.
template <Bitwise kKind>
struct BitwiseOps {
  static constexpr const char* kName = kKind == Bitwise::kAnd  ? "aten::bitwise_and"
                                       : kKind == Bitwise::kOr ? "aten::bitwise_or"
                                                               : "aten::bitwise_xor";
  static Tensor TT(const Tensor& s, const Tensor& o) {
    return BitwiseImpl(kName, kKind, s, o, nullptr);
  }
  static Tensor TS(const Tensor& s, const Scalar& o) {
    return BitwiseImpl(kName, kKind, s, WrapScalar(o), nullptr);
  }
  static Tensor ST(const Scalar& s, const Tensor& o) {
    return BitwiseImpl(kName, kKind, WrapScalar(s), o, nullptr);
  }
  static Tensor TTOut(const Tensor& s, const Tensor& o, const Tensor& out) {
    return BitwiseImpl(kName, kKind, s, o, &out);
  }
  static Tensor TSOut(const Tensor& s, const Scalar& o, const Tensor& out) {
    return BitwiseImpl(kName, kKind, s, WrapScalar(o), &out);
  }
  static Tensor TTInplace(const Tensor& s, const Tensor& o) {
    return BitwiseImpl(kName, kKind, s, o, &s);
  }
  static Tensor TSInplace(const Tensor& s, const Scalar& o) {
    return BitwiseImpl(kName, kKind, s, WrapScalar(o), &s);
  }
};

// ---- shifts ---------------------------------------------------------------------------------

// torch's semantics: a shift by a negative amount or by the bit width or more gives 0 (left)
// or the sign fill (right).
template <typename T>
T ShiftLeft(T a, T b) {
  constexpr int kBits = sizeof(T) * CHAR_BIT;
  using S = std::make_signed_t<T>;
  using U = std::make_unsigned_t<T>;
  if (static_cast<S>(b) < 0 || b >= kBits) return 0;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) << b));
}
template <typename T>
T ShiftRight(T a, T b) {
  constexpr int kMax = sizeof(T) * CHAR_BIT - (std::is_signed_v<T> ? 1 : 0);
  using S = std::make_signed_t<T>;
  if (static_cast<S>(b) < 0 || b >= kMax) return static_cast<T>(a >> kMax);
  return static_cast<T>(a >> b);
}

Tensor ShiftImpl(const char* op, bool left, const Tensor& self, const Tensor& other,
                 const Tensor* dest) {
  const DType dt = ResultType({Operand(self), Operand(other)});
  kernels::CheckIntegral(op, dt, /*allow_bool=*/false);
  return Elementwise(
      op, {{&self, dt}, {&other, dt}}, dt, dest, [&](const Tensor& out, const In& in) {
        TB_DISPATCH_T(dt, op, TB_TYPES_INT, [&](auto tag) {
          using T = typename decltype(tag)::type;
          if (left) {
            BinaryMap<T, T, T>(out, in[0], in[1], [](T x, T y) { return ShiftLeft(x, y); });
          } else {
            BinaryMap<T, T, T>(out, in[0], in[1], [](T x, T y) { return ShiftRight(x, y); });
          }
        });
      });
}

template <bool kLeft>
struct ShiftOps {
  static constexpr const char* kName =
      kLeft ? "aten::bitwise_left_shift" : "aten::bitwise_right_shift";
  static Tensor TT(const Tensor& s, const Tensor& o) {
    return ShiftImpl(kName, kLeft, s, o, nullptr);
  }
  static Tensor TS(const Tensor& s, const Scalar& o) {
    return ShiftImpl(kName, kLeft, s, WrapScalar(o), nullptr);
  }
  static Tensor ST(const Scalar& s, const Tensor& o) {
    return ShiftImpl(kName, kLeft, WrapScalar(s), o, nullptr);
  }
  static Tensor TTOut(const Tensor& s, const Tensor& o, const Tensor& out) {
    return ShiftImpl(kName, kLeft, s, o, &out);
  }
  static Tensor TSOut(const Tensor& s, const Scalar& o, const Tensor& out) {
    return ShiftImpl(kName, kLeft, s, WrapScalar(o), &out);
  }
  static Tensor TTInplace(const Tensor& s, const Tensor& o) {
    return ShiftImpl(kName, kLeft, s, o, &s);
  }
  static Tensor TSInplace(const Tensor& s, const Scalar& o) {
    return ShiftImpl(kName, kLeft, s, WrapScalar(o), &s);
  }
};

// ---- logical and / or / xor -----------------------------------------------------------------

enum class Logical { kAnd, kOr, kXor };

// Inputs of any dtype read as truth values (nonzero; NaN is true); the result is bool.
Tensor LogicalImpl(const char* op, Logical kind, const Tensor& self, const Tensor& other,
                   const Tensor* dest) {
  const DType b = DType::kBool;
  return Elementwise(op, {{&self, b}, {&other, b}}, b, dest, [&](const Tensor& out, const In& in) {
    switch (kind) {
      case Logical::kAnd:
        return BinaryMap<bool, bool, bool>(out, in[0], in[1],
                                           [](bool x, bool y) { return x && y; });
      case Logical::kOr:
        return BinaryMap<bool, bool, bool>(out, in[0], in[1],
                                           [](bool x, bool y) { return x || y; });
      case Logical::kXor:
        return BinaryMap<bool, bool, bool>(out, in[0], in[1],
                                           [](bool x, bool y) { return x != y; });
    }
  });
}

template <Logical kKind>
struct LogicalOps {
  static constexpr const char* kName = kKind == Logical::kAnd  ? "aten::logical_and"
                                       : kKind == Logical::kOr ? "aten::logical_or"
                                                               : "aten::logical_xor";
  static Tensor TT(const Tensor& s, const Tensor& o) {
    return LogicalImpl(kName, kKind, s, o, nullptr);
  }
  static Tensor TTOut(const Tensor& s, const Tensor& o, const Tensor& out) {
    return LogicalImpl(kName, kKind, s, o, &out);
  }
  static Tensor TTInplace(const Tensor& s, const Tensor& o) {
    return LogicalImpl(kName, kKind, s, o, &s);
  }
};

template <Bitwise kKind>
void RegisterBitwise(KernelRegistrar& table, const std::string& base) {
  using O = BitwiseOps<kKind>;
  const DeviceType cpu = DeviceType::kCPU;
  table.RegisterKernel(base + ".Tensor", cpu, Boxed<&O::TT>(), TB_HERE);
  table.RegisterKernel(base + ".Scalar", cpu, Boxed<&O::TS>(), TB_HERE);
  table.RegisterKernel(base + ".Scalar_Tensor", cpu, Boxed<&O::ST>(), TB_HERE);
  table.RegisterKernel(base + ".Tensor_out", cpu, Boxed<&O::TTOut>(), TB_HERE);
  table.RegisterKernel(base + ".Scalar_out", cpu, Boxed<&O::TSOut>(), TB_HERE);
  table.RegisterKernel(base + "_.Tensor", cpu, Boxed<&O::TTInplace>(), TB_HERE);
  table.RegisterKernel(base + "_.Scalar", cpu, Boxed<&O::TSInplace>(), TB_HERE);
}

template <bool kLeft>
void RegisterShift(KernelRegistrar& table, const std::string& base, const std::string& dunder) {
  using O = ShiftOps<kLeft>;
  const DeviceType cpu = DeviceType::kCPU;
  table.RegisterKernel(base + ".Tensor", cpu, Boxed<&O::TT>(), TB_HERE);
  table.RegisterKernel(base + ".Tensor_Scalar", cpu, Boxed<&O::TS>(), TB_HERE);
  table.RegisterKernel(base + ".Scalar_Tensor", cpu, Boxed<&O::ST>(), TB_HERE);
  table.RegisterKernel(base + ".Tensor_out", cpu, Boxed<&O::TTOut>(), TB_HERE);
  table.RegisterKernel(base + ".Tensor_Scalar_out", cpu, Boxed<&O::TSOut>(), TB_HERE);
  table.RegisterKernel(base + "_.Tensor", cpu, Boxed<&O::TTInplace>(), TB_HERE);
  table.RegisterKernel(base + "_.Tensor_Scalar", cpu, Boxed<&O::TSInplace>(), TB_HERE);
  table.RegisterKernel(dunder + ".Tensor", cpu, Boxed<&O::TT>(), TB_HERE);
  table.RegisterKernel(dunder + ".Scalar", cpu, Boxed<&O::TS>(), TB_HERE);
  table.RegisterKernel(dunder + ".Tensor_out", cpu, Boxed<&O::TTOut>(), TB_HERE);
  table.RegisterKernel(dunder + ".Scalar_out", cpu, Boxed<&O::TSOut>(), TB_HERE);
}

template <Logical kKind>
void RegisterLogical(KernelRegistrar& table, const std::string& base) {
  using O = LogicalOps<kKind>;
  const DeviceType cpu = DeviceType::kCPU;
  table.RegisterKernel(base, cpu, Boxed<&O::TT>(), TB_HERE);
  table.RegisterKernel(base + ".out", cpu, Boxed<&O::TTOut>(), TB_HERE);
  table.RegisterKernel(base + "_", cpu, Boxed<&O::TTInplace>(), TB_HERE);
}

}  // namespace

TB_REGISTER_KERNELS(binary_bitwise) {
  RegisterBitwise<Bitwise::kAnd>(table, "aten::bitwise_and");
  RegisterBitwise<Bitwise::kOr>(table, "aten::bitwise_or");
  RegisterBitwise<Bitwise::kXor>(table, "aten::bitwise_xor");
  RegisterShift<true>(table, "aten::bitwise_left_shift", "aten::__lshift__");
  RegisterShift<false>(table, "aten::bitwise_right_shift", "aten::__rshift__");
  RegisterLogical<Logical::kAnd>(table, "aten::logical_and");
  RegisterLogical<Logical::kOr>(table, "aten::logical_or");
  RegisterLogical<Logical::kXor>(table, "aten::logical_xor");
}

}  // namespace tb
