// Private to kernels/unary_*.cc: the shared machinery of the unary element-wise kernels.
//
// A unary op is described by a small functor struct:
//   struct TanhOp : FloatingUnary<TanhOp> {
//     static constexpr const char* kName = "aten::tanh";
//     template <typename T> T operator()(T x) const { return std::tanh(x); }
//     // Optional: a vectorised body for contiguous float32 rows (Eigen arrays), for functions
//     // where Eigen's packet math is both faster than the C library and within torch's
//     // float32 tolerances (exp, log, sigmoid, tanh, erf; see VecBlocks for range guards).
//     static constexpr bool kVec = true;
//     template <typename Y, typename A> void Vec(Y& y, const A& a) const { y = a.tanh(); }
//   };
// and registered for both forms with Unary<TanhOp, false> (aten::tanh) and Unary<TanhOp, true>
// (aten::tanh_), e.g. by TB_REGISTER_UNARY_PAIR("tanh", TanhOp). The base classes give the
// dtype rules:
//   FloatingUnary  - integer / bool inputs compute in float32 (torch's default dtype),
//                    float16 / bfloat16 compute in float and round once.
//   SameTypeUnary  - the result keeps the input dtype (abs, neg, floor, ...).
//   PredicateUnary - the result is bool (isnan, signbit, ...).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include <Eigen/Core>

#include "bridge/tensor.h"
#include "kernels/complex_internal.h"
#include "kernels/dtype_internal.h"
#include "kernels/layout.h"
#include "kernels/loops_internal.h"
#include "kernels/promote_broadcast.h"

namespace tb::kernels::unary {

// ---- dtype rules --------------------------------------------------------------------------

// torch's canCast: no complex -> real, no floating -> integral, no non-bool -> bool.
inline bool CanCast(DType from, DType to) {
  if (IsComplex(from) && !IsComplex(to)) return false;
  if (IsFloatingPoint(from) && IsIntegral(to, /*include_bool=*/true)) return false;
  if (from != DType::kBool && to == DType::kBool) return false;
  return true;
}

// Unary kernels compute on real dtypes only.
inline void CheckReal(const char* op, DType t) {
  TB_CHECK_SUPPORTED(!IsComplex(t) && !IsStorageOnly(t))
      << op << ": dtype " << DTypeName(t) << " is not supported";
}

// The result dtype of a floating function of `t` (torch's promote_integer_inputs_to_float).
inline DType FloatingResult(const char* op, DType t) {
  CheckReal(op, t);
  return IsFloatingPoint(t) ? t : DType::kFloat32;
}

// In-place writes need a castable result and no two elements sharing memory.
inline void CheckInplace(const char* op, const Tensor& self, DType result) {
  TB_CHECK(CanCast(result, self.dtype()), TypeError)
      << op << ": result type " << DTypeName(result) << " can't be cast to the desired output type "
      << DTypeName(self.dtype()) << " of self";
  for (int64_t d = 0; d < self.ndim(); ++d) {
    TB_CHECK(!(self.shape()[d] > 1 && self.strides()[d] == 0), ValueError)
        << op << ": unsupported operation: more than one element of self (shape "
        << ShapeString(self.shape()) << ", stride 0 in dim " << d
        << ") refers to a single memory location; clone() it first";
  }
}

// Runs body(out, self) into a new tensor of dtype `result`, or in place into `self` (through
// a temporary and a converting copy when the result dtype differs from self's). A new result
// is laid out like self (dense, in self's stride order, as torch's); body sees both permuted
// to that order, so the loops walk memory in order.
template <typename Body>
Tensor RunUnary(const char* op, const Tensor& self, DType result, bool inplace, Body&& body) {
  const ElementwiseLayout layout(self.shape(), {&self});
  if (inplace) CheckInplace(op, self, result);
  if (!layout.permuted()) {
    if (!inplace) {
      Tensor out = Tensor::Empty(self.shape(), result);
      body(out, self);
      return out;
    }
    if (result == self.dtype()) {
      body(self, self);
      return self;
    }
    Tensor tmp = Tensor::Empty(self.shape(), result);
    body(tmp, self);
    CopyCast(self, tmp);
    return self;
  }
  const Tensor src = layout.In(self);
  if (!inplace) {
    Tensor out = layout.NewResult(result);
    body(out, src);
    return layout.Out(out);
  }
  if (result == self.dtype()) {
    body(src, src);
    return self;
  }
  Tensor tmp = layout.NewResult(result);
  body(tmp, src);
  CopyCast(src, tmp);
  return self;
}

// ---- the element loop ---------------------------------------------------------------------

template <typename F, typename = void>
struct HasVec : std::false_type {};
template <typename F>
struct HasVec<F, std::void_t<decltype(F::kVec)>> : std::bool_constant<F::kVec> {};

// out[i] = f(in[i]) over out's shape; `in` has out's shape and holds In, out holds Out.
// f takes and returns opmath values (float for the 16-bit floating types). Contiguous float32
// rows of float32 operands use f.Vec on Eigen arrays when F provides it (in place too: the
// array functions are coefficient-wise, so out may alias in).
template <typename Out, typename In, typename F>
void Apply(const Tensor& out, const Tensor& in, const F& f) {
  if (out.numel() == 0) return;
  std::array<const Tensor*, 2> ts = {&out, &in};
  std::array<char*, 2> data = {static_cast<char*>(out.mutable_data()),
                               static_cast<char*>(in.data())};
  using C = opmath_t<In>;
  ForEachRow<2>(
      out.shape(), data, ByteStrides<2>(ts),
      [&](std::array<char*, 2>& p, const std::array<int64_t, 2>& s, int64_t n) {
        Out* o = reinterpret_cast<Out*>(p[0]);
        const In* x = reinterpret_cast<const In*>(p[1]);
        if (s[0] == static_cast<int64_t>(sizeof(Out)) && s[1] == static_cast<int64_t>(sizeof(In))) {
          if constexpr (HasVec<F>::value && std::is_same_v<Out, float> &&
                        std::is_same_v<In, float>) {
            using A = Eigen::Array<In, Eigen::Dynamic, 1>;
            Eigen::Map<A> y(o, n);
            Eigen::Map<const A> a(x, n);
            f.Vec(y, a);
          } else {
            for (int64_t i = 0; i < n; ++i) {
              o[i] = Convert<Out>(f(Convert<C>(x[i])));
            }
          }
          return;
        }
        for (int64_t i = 0; i < n; ++i) {
          const In v = *reinterpret_cast<const In*>(p[1] + i * s[1]);
          *reinterpret_cast<Out*>(p[0] + i * s[0]) = Convert<Out>(f(Convert<C>(v)));
        }
      });
}

// For Vec bodies: runs vec(y_block, a_block) over blocks of a contiguous float32 row, except in
// blocks holding an input for which bad(x) is true (inputs where the vectorised function is
// inexact, e.g. exp's underflow to denormals), which run scalar(x) per element instead. The
// check reads each block before anything of it is written, so y may alias a.
template <typename Y, typename A, typename Bad, typename VecFn, typename ScalarFn>
void VecBlocks(Y& y, const A& a, Bad bad, VecFn vec, ScalarFn scalar) {
  constexpr Eigen::Index kBlock = 2048;
  const Eigen::Index n = a.size();
  for (Eigen::Index b = 0; b < n; b += kBlock) {
    const Eigen::Index m = std::min(kBlock, n - b);
    const float* x = a.data() + b;
    float* o = y.data() + b;
    int any = 0;
    for (Eigen::Index i = 0; i < m; ++i) any |= static_cast<int>(bad(x[i]));
    if (any) {
      for (Eigen::Index i = 0; i < m; ++i) o[i] = scalar(x[i]);
    } else {
      Eigen::Map<Eigen::ArrayXf> yb(o, m);
      Eigen::Map<const Eigen::ArrayXf> ab(x, m);
      vec(yb, ab);
    }
  }
}

// ---- op kinds -----------------------------------------------------------------------------

// Floating functions: exp, sin, sqrt, ... (int / bool inputs are first cast to float32).
template <typename Derived>
struct FloatingUnary {
  static DType Result(const char* op, DType t) { return FloatingResult(op, t); }
  static void Run(const char* op, const Tensor& out, const Tensor& self) {
    Tensor src = Cast(self, out.dtype());
    TB_DISPATCH(out.dtype(), op, TB_TYPES_FLOAT,
                [&] { Apply<scalar_t, scalar_t>(out, src, Derived{}); });
  }
};

// Functions that keep the dtype (abs, neg, floor, ...), for every real dtype but bool;
// Derived::kBool makes bool allowed (Derived's operator() then sees bool values).
template <typename Derived>
struct SameTypeUnary {
  static DType Result(const char* op, DType t) {
    CheckReal(op, t);
    if constexpr (!Derived::kBool) {
      TB_CHECK_SUPPORTED(t != DType::kBool) << op << ": dtype bool is not supported";
    }
    return t;
  }
  static void Run(const char* op, const Tensor& out, const Tensor& self) {
    TB_DISPATCH(self.dtype(), op, TB_TYPES_ALL,
                [&] { Apply<scalar_t, scalar_t>(out, self, Derived{}); });
  }
};

// Predicates with a bool result (isnan, signbit, ...), for every real dtype.
template <typename Derived>
struct PredicateUnary {
  static DType Result(const char* op, DType t) {
    CheckReal(op, t);
    return DType::kBool;
  }
  static void Run(const char* op, const Tensor& out, const Tensor& self) {
    TB_DISPATCH(self.dtype(), op, TB_TYPES_ALL,
                [&] { Apply<bool, scalar_t>(out, self, Derived{}); });
  }
};

// The kernel for Op's functional form (kInplace false) or its in-place form (true).
template <typename Op, bool kInplace>
Tensor Unary(const Tensor& self) {
  static const std::string name = std::string(Op::kName) + (kInplace ? "_" : "");
  const char* op = name.c_str();
  if (IsComplex(self.dtype())) return complex::Unary(Op::kName, op, self, kInplace);
  return RunUnary(op, self, Op::Result(op, self.dtype()), kInplace,
                  [&](const Tensor& out, const Tensor& src) { Op::Run(op, out, src); });
}

// ---- small helpers for the functors -------------------------------------------------------

// -x with two's complement wrap-around (no signed-overflow UB), for integral T.
template <typename T>
inline T WrapNeg(T x) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(0) - static_cast<U>(x));
}

template <typename T>
inline constexpr T kPi = static_cast<T>(3.14159265358979323846264338327950288);

}  // namespace tb::kernels::unary

// Registers Op for aten::NAME and its in-place form aten::NAME_.
#define TB_REGISTER_UNARY_PAIR(NAME, OP)                                             \
  do {                                                                               \
    table.RegisterKernel("aten::" NAME, DeviceType::kCPU,                            \
                         Boxed<&::tb::kernels::unary::Unary<OP, false>>(), TB_HERE); \
    table.RegisterKernel("aten::" NAME "_", DeviceType::kCPU,                        \
                         Boxed<&::tb::kernels::unary::Unary<OP, true>>(), TB_HERE);  \
  } while (0)

// Registers Op for its functional form only (the special_* ops have no in-place form).
#define TB_REGISTER_UNARY_FUNCTIONAL(OP)            \
  table.RegisterKernel(OP::kName, DeviceType::kCPU, \
                       Boxed<&::tb::kernels::unary::Unary<OP, false>>(), TB_HERE)
