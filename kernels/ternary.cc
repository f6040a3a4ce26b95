// Ternary element-wise ops: aten::where, clamp (Scalar and Tensor bounds), clamp_min,
// clamp_max, lerp, addcmul and addcdiv, with their in-place and out= overloads.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>

#include "dispatch/op_table.h"
#include "kernels/binary_internal.h"
#include "kernels/complex_internal.h"

namespace tb {
namespace {

using kernels::BinaryMap;
using kernels::Elementwise;
using kernels::Input;
using kernels::IsScalarLike;
using kernels::kIsFloating;
using kernels::Map;
using kernels::opmath_t;
using kernels::ScalarOperand;
using kernels::WrapScalar;

using In = std::vector<Tensor>;

// ---- where --------------------------------------------------------------------------------

// The unsigned integer of T's size, allowed to alias T: where selects elements as bits.
template <size_t Bytes>
struct BitsOf;
template <>
struct BitsOf<1> {
  using type __attribute__((may_alias)) = uint8_t;
};
template <>
struct BitsOf<2> {
  using type __attribute__((may_alias)) = uint16_t;
};
template <>
struct BitsOf<4> {
  using type __attribute__((may_alias)) = uint32_t;
};
template <>
struct BitsOf<8> {
  using type __attribute__((may_alias)) = uint64_t;
};

// out[i] = c[i] ? x[i] : y[i] over one row, x or y possibly a broadcast scalar (stride 0).
// A dense condition selects with bit masks: a branch per element would be mispredicted on
// about half of a random mask (a ReLU's or a dropout's). A condition constant along the row
// (broadcast, stride 0) copies one side.
template <typename T>
void WhereRow(std::array<char*, 4>& p, const std::array<int64_t, 4>& s, int64_t n) {
  using U = typename BitsOf<sizeof(T)>::type;
  constexpr int64_t kT = sizeof(T);
  char* o = p[0];
  const char* c = p[1];
  if (s[1] == 0) {
    const bool take_x = *c != 0;
    const char* src = take_x ? p[2] : p[3];
    const int64_t ss = take_x ? s[2] : s[3];
    if (s[0] == kT && ss == kT) {
      std::memcpy(o, src, static_cast<size_t>(n * kT));
    } else {
      for (int64_t i = 0; i < n; ++i) std::memcpy(o + i * s[0], src + i * ss, kT);
    }
    return;
  }
  if (s[0] == kT && s[1] == 1 && (s[2] == kT || s[2] == 0) && (s[3] == kT || s[3] == 0)) {
    U* out = reinterpret_cast<U*>(o);
    const auto* cond = reinterpret_cast<const uint8_t*>(c);
    const U* x = reinterpret_cast<const U*>(p[2]);
    const U* y = reinterpret_cast<const U*>(p[3]);
    const auto select = [&](auto xi, auto yi) {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) {
        const U m = static_cast<U>(U{0} - static_cast<U>(cond[i] != 0));
        out[i] = static_cast<U>((xi(i) & m) | (yi(i) & static_cast<U>(~m)));
      }
    };
    const auto dense = [](const U* v) { return [v](int64_t i) { return v[i]; }; };
    const auto held = [](const U* v) { return [u = *v](int64_t) { return u; }; };
    if (s[2] != 0 && s[3] != 0) {
      select(dense(x), dense(y));
    } else if (s[2] != 0) {
      select(dense(x), held(y));
    } else if (s[3] != 0) {
      select(held(x), dense(y));
    } else {
      select(held(x), held(y));
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const char* src = c[i * s[1]] != 0 ? p[2] + i * s[2] : p[3] + i * s[3];
    std::memcpy(o + i * s[0], src, kT);
  }
}

Tensor WhereImpl(const char* op, const Tensor& condition, const Tensor& self, const Tensor& other,
                 const Tensor* dest) {
  // torch still accepts (deprecated) uint8 conditions.
  TB_CHECK(condition.dtype() == DType::kBool || condition.dtype() == DType::kUInt8, TypeError)
      << op << ": expected condition to be a boolean tensor, but got a tensor with dtype "
      << DTypeName(condition.dtype());
  const DType dt = ResultType({Operand(self), Operand(other)});
  if (IsComplex(dt)) return kernels::complex::Where(op, dt, condition, self, other, dest);
  return Elementwise(
      op, {{&condition, DType::kBool}, {&self, dt}, {&other, dt}}, dt, dest,
      [&](const Tensor& out, const In& in) {
        TB_DISPATCH_T(dt, op, TB_TYPES_ALL, [&](auto tag) {
          using T = typename decltype(tag)::type;
          constexpr size_t N = 4;
          std::array<const Tensor*, N> ts = {&out, &in[0], &in[1], &in[2]};
          std::array<char*, N> data = {
              static_cast<char*>(out.mutable_data()), static_cast<char*>(in[0].data()),
              static_cast<char*>(in[1].data()), static_cast<char*>(in[2].data())};
          kernels::ForEachRow<N>(out.shape(), data, kernels::ByteStrides<N>(ts), WhereRow<T>);
        });
      });
}

Tensor Where(const Tensor& condition, const Tensor& self, const Tensor& other) {
  return WhereImpl("aten::where.self", condition, self, other, nullptr);
}
Tensor WhereOut(const Tensor& condition, const Tensor& self, const Tensor& other,
                const Tensor& out) {
  return WhereImpl("aten::where.self_out", condition, self, other, &out);
}
Tensor WhereScalarOther(const Tensor& condition, const Tensor& self, const Scalar& other) {
  return WhereImpl("aten::where.ScalarOther", condition, self, WrapScalar(other), nullptr);
}
Tensor WhereScalarSelf(const Tensor& condition, const Scalar& self, const Tensor& other) {
  return WhereImpl("aten::where.ScalarSelf", condition, WrapScalar(self), other, nullptr);
}
Tensor WhereScalar(const Tensor& condition, const Scalar& self, const Scalar& other) {
  return WhereImpl("aten::where.Scalar", condition, WrapScalar(self), WrapScalar(other), nullptr);
}

// ---- clamp with Scalar bounds ---------------------------------------------------------------

// Any NaN bound makes every element NaN; a NaN element stays NaN; min > max gives max.
Tensor ClampScalarImpl(const char* op, const Tensor& self, const std::optional<Scalar>& min,
                       const std::optional<Scalar>& max, const Tensor* dest) {
  TB_CHECK(min || max, ValueError) << op << ": at least one of 'min' or 'max' must not be None";
  std::vector<PromotionOperand> ops = {Operand(self)};
  if (min) ops.push_back(ScalarOperand(*min));
  if (max) ops.push_back(ScalarOperand(*max));
  const DType dt = IsFloatingPoint(self.dtype()) ? self.dtype() : ResultType(ops);
  kernels::CheckNotBool(op, dt);
  const bool nan_bound =
      (min && std::isnan(min->to_double())) || (max && std::isnan(max->to_double()));
  return Elementwise(op, {{&self, dt}}, dt, dest, [&](const Tensor& out, const In& in) {
    TB_DISPATCH_T(dt, op, TB_TYPES_NUMERIC, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using M = opmath_t<T>;
      auto bound = [&](const Scalar& s, const char* name) {
        return static_cast<M>(kernels::ScalarTo<T>(op, name, s));
      };
      auto run = [&](auto f) {
        Map<T, T>(
            out, [f](T x) { return static_cast<T>(f(static_cast<M>(x))); }, in[0]);
      };
      if constexpr (kIsFloating<T>) {
        if (nan_bound) return run([](M) { return std::numeric_limits<M>::quiet_NaN(); });
      }
      if (min && max) {
        const M lo = bound(*min, "min"), hi = bound(*max, "max");
        run([lo, hi](M x) { return std::min(std::max(x, lo), hi); });
      } else if (min) {
        const M lo = bound(*min, "min");
        run([lo](M x) { return std::max(x, lo); });
      } else {
        const M hi = bound(*max, "max");
        run([hi](M x) { return std::min(x, hi); });
      }
    });
  });
}

Tensor Clamp(const Tensor& self, const std::optional<Scalar>& min,
             const std::optional<Scalar>& max) {
  return ClampScalarImpl("aten::clamp", self, min, max, nullptr);
}
Tensor ClampOut(const Tensor& self, const std::optional<Scalar>& min,
                const std::optional<Scalar>& max, const Tensor& out) {
  return ClampScalarImpl("aten::clamp.out", self, min, max, &out);
}
Tensor ClampInplace(const Tensor& self, const std::optional<Scalar>& min,
                    const std::optional<Scalar>& max) {
  return ClampScalarImpl("aten::clamp_", self, min, max, &self);
}
Tensor ClampMin(const Tensor& self, const Scalar& min) {
  return ClampScalarImpl("aten::clamp_min", self, min, std::nullopt, nullptr);
}
Tensor ClampMinOut(const Tensor& self, const Scalar& min, const Tensor& out) {
  return ClampScalarImpl("aten::clamp_min.out", self, min, std::nullopt, &out);
}
Tensor ClampMinInplace(const Tensor& self, const Scalar& min) {
  return ClampScalarImpl("aten::clamp_min_", self, min, std::nullopt, &self);
}
Tensor ClampMax(const Tensor& self, const Scalar& max) {
  return ClampScalarImpl("aten::clamp_max", self, std::nullopt, max, nullptr);
}
Tensor ClampMaxOut(const Tensor& self, const Scalar& max, const Tensor& out) {
  return ClampScalarImpl("aten::clamp_max.out", self, std::nullopt, max, &out);
}
Tensor ClampMaxInplace(const Tensor& self, const Scalar& max) {
  return ClampScalarImpl("aten::clamp_max_", self, std::nullopt, max, &self);
}

// ---- clamp with Tensor bounds -----------------------------------------------------------------

// Bounds broadcast with self; NaN anywhere (element or bound) gives NaN.
Tensor ClampTensorImpl(const char* op, const Tensor& self, const std::optional<Tensor>& min,
                       const std::optional<Tensor>& max, const Tensor* dest) {
  TB_CHECK(min || max, ValueError) << op << ": at least one of 'min' or 'max' must not be None";
  std::vector<PromotionOperand> ops = {Operand(self)};
  if (min) ops.push_back(Operand(*min));
  if (max) ops.push_back(Operand(*max));
  const DType dt = ResultType(ops);
  std::vector<Input> inputs = {{&self, dt}};
  if (min) inputs.push_back({&*min, dt});
  if (max) inputs.push_back({&*max, dt});
  return Elementwise(op, inputs, dt, dest, [&](const Tensor& out, const In& in) {
    TB_DISPATCH_T(dt, op, TB_TYPES_ALL, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using M = opmath_t<T>;
      auto nan = [](M) {
        if constexpr (kIsFloating<T>) return std::numeric_limits<M>::quiet_NaN();
        return M(0);
      };
      auto is_nan = [](M v) { return v != v; };
      auto cvt = [](M v) { return static_cast<T>(v); };
      if (min && max) {
        Map<T, T, T, T>(
            out,
            [=](T x, T lo, T hi) {
              M a = static_cast<M>(x), l = static_cast<M>(lo), h = static_cast<M>(hi);
              if (is_nan(l) || is_nan(h)) return cvt(nan(a));
              return cvt(std::min(std::max(a, l), h));
            },
            in[0], in[1], in[2]);
      } else if (min) {
        BinaryMap<T, T, T>(out, in[0], in[1], [=](T x, T lo) {
          M a = static_cast<M>(x), l = static_cast<M>(lo);
          return cvt((is_nan(a) || is_nan(l)) ? nan(a) : std::max(a, l));
        });
      } else {
        BinaryMap<T, T, T>(out, in[0], in[1], [=](T x, T hi) {
          M a = static_cast<M>(x), h = static_cast<M>(hi);
          return cvt((is_nan(a) || is_nan(h)) ? nan(a) : std::min(a, h));
        });
      }
    });
  });
}

Tensor ClampT(const Tensor& self, const std::optional<Tensor>& min,
              const std::optional<Tensor>& max) {
  return ClampTensorImpl("aten::clamp.Tensor", self, min, max, nullptr);
}
Tensor ClampTOut(const Tensor& self, const std::optional<Tensor>& min,
                 const std::optional<Tensor>& max, const Tensor& out) {
  return ClampTensorImpl("aten::clamp.Tensor_out", self, min, max, &out);
}
Tensor ClampTInplace(const Tensor& self, const std::optional<Tensor>& min,
                     const std::optional<Tensor>& max) {
  return ClampTensorImpl("aten::clamp_.Tensor", self, min, max, &self);
}
Tensor ClampMinT(const Tensor& self, const Tensor& min) {
  return ClampTensorImpl("aten::clamp_min.Tensor", self, min, std::nullopt, nullptr);
}
Tensor ClampMinTOut(const Tensor& self, const Tensor& min, const Tensor& out) {
  return ClampTensorImpl("aten::clamp_min.Tensor_out", self, min, std::nullopt, &out);
}
Tensor ClampMinTInplace(const Tensor& self, const Tensor& min) {
  return ClampTensorImpl("aten::clamp_min_.Tensor", self, min, std::nullopt, &self);
}
Tensor ClampMaxT(const Tensor& self, const Tensor& max) {
  return ClampTensorImpl("aten::clamp_max.Tensor", self, std::nullopt, max, nullptr);
}
Tensor ClampMaxTOut(const Tensor& self, const Tensor& max, const Tensor& out) {
  return ClampTensorImpl("aten::clamp_max.Tensor_out", self, std::nullopt, max, &out);
}
Tensor ClampMaxTInplace(const Tensor& self, const Tensor& max) {
  return ClampTensorImpl("aten::clamp_max_.Tensor", self, std::nullopt, max, &self);
}

// ---- lerp ---------------------------------------------------------------------------------

// torch's formula: from the nearer end, for accuracy at both ends. Both sides are computed
// and one is picked bitwise, so that the loop stays branch-free and vectorises.
template <typename M>
M Lerp(M a, M b, M w) {
  const M d = b - a;
  const M from_a = a + w * d, from_b = b - d * (M(1) - w);
  using U = std::conditional_t<sizeof(M) == 4, uint32_t, uint64_t>;
  U ua, ub;
  std::memcpy(&ua, &from_a, sizeof(M));
  std::memcpy(&ub, &from_b, sizeof(M));
  const U mask = std::abs(w) < M(0.5) ? ~U(0) : U(0);
  const U bits = (ua & mask) | (ub & ~mask);
  M r;
  std::memcpy(&r, &bits, sizeof(M));
  return r;
}

// self, end (and a weight tensor) must share one floating dtype; a 0-d weight may differ.
DType LerpDType(const char* op, const Tensor& self, const Tensor& end, const Tensor* weight) {
  if (!IsComplex(self.dtype())) kernels::CheckFloating(op, self.dtype());
  TB_CHECK(end.dtype() == self.dtype(), TypeError)
      << op << ": expected dtype " << DTypeName(self.dtype()) << " for `end` but got dtype "
      << DTypeName(end.dtype());
  TB_CHECK(weight == nullptr || weight->ndim() == 0 || weight->dtype() == self.dtype(), TypeError)
      << op << ": expected dtype " << DTypeName(self.dtype()) << " for `weight` but got dtype "
      << DTypeName(weight->dtype());
  return self.dtype();
}

Tensor LerpScalarImpl(const char* op, const Tensor& self, const Tensor& end, const Scalar& weight,
                      const Tensor* dest) {
  const DType dt = LerpDType(op, self, end, nullptr);
  if (IsComplex(dt)) return kernels::complex::Lerp(op, dt, self, end, nullptr, weight, dest);
  return Elementwise(op, {{&self, dt}, {&end, dt}}, dt, dest, [&](const Tensor& out, const In& in) {
    TB_DISPATCH_T(dt, op, TB_TYPES_FLOAT, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using M = opmath_t<T>;
      const M w = kernels::ScalarTo<M>(op, "weight", weight);
      // The formula Lerp would pick, chosen once for the whole tensor.
      if (std::abs(w) < M(0.5)) {
        BinaryMap<T, T, T>(out, in[0], in[1], [w](T a, T b) {
          const M x = static_cast<M>(a);
          return static_cast<T>(x + w * (static_cast<M>(b) - x));
        });
      } else {
        BinaryMap<T, T, T>(out, in[0], in[1], [w](T a, T b) {
          const M y = static_cast<M>(b);
          return static_cast<T>(y - (y - static_cast<M>(a)) * (M(1) - w));
        });
      }
    });
  });
}

Tensor LerpTensorImpl(const char* op, const Tensor& self, const Tensor& end, const Tensor& weight,
                      const Tensor* dest) {
  const DType dt = LerpDType(op, self, end, &weight);
  if (IsComplex(dt)) return kernels::complex::Lerp(op, dt, self, end, &weight, Scalar(), dest);
  return Elementwise(op, {{&self, dt}, {&end, dt}, {&weight, dt}}, dt, dest,
                     [&](const Tensor& out, const In& in) {
                       TB_DISPATCH_T(dt, op, TB_TYPES_FLOAT, [&](auto tag) {
                         using T = typename decltype(tag)::type;
                         using M = opmath_t<T>;
                         Map<T, T, T, T>(
                             out,
                             [](T a, T b, T w) {
                               return static_cast<T>(
                                   Lerp(static_cast<M>(a), static_cast<M>(b), static_cast<M>(w)));
                             },
                             in[0], in[1], in[2]);
                       });
                     });
}

Tensor LerpS(const Tensor& self, const Tensor& end, const Scalar& weight) {
  return LerpScalarImpl("aten::lerp.Scalar", self, end, weight, nullptr);
}
Tensor LerpSOut(const Tensor& self, const Tensor& end, const Scalar& weight, const Tensor& out) {
  return LerpScalarImpl("aten::lerp.Scalar_out", self, end, weight, &out);
}
Tensor LerpSInplace(const Tensor& self, const Tensor& end, const Scalar& weight) {
  return LerpScalarImpl("aten::lerp_.Scalar", self, end, weight, &self);
}
Tensor LerpT(const Tensor& self, const Tensor& end, const Tensor& weight) {
  return LerpTensorImpl("aten::lerp.Tensor", self, end, weight, nullptr);
}
Tensor LerpTOut(const Tensor& self, const Tensor& end, const Tensor& weight, const Tensor& out) {
  return LerpTensorImpl("aten::lerp.Tensor_out", self, end, weight, &out);
}
Tensor LerpTInplace(const Tensor& self, const Tensor& end, const Tensor& weight) {
  return LerpTensorImpl("aten::lerp_.Tensor", self, end, weight, &self);
}

// ---- addcmul / addcdiv ----------------------------------------------------------------------

// self + value * t1 * t2 (or / t2) in the promoted dtype; Half/BFloat16 in float.
Tensor AddcImpl(const char* op, bool divide, const Tensor& self, const Tensor& t1, const Tensor& t2,
                const Scalar& value, const Tensor* dest) {
  if (divide) {
    TB_CHECK(!(IsIntegral(t1.dtype(), true) && IsIntegral(t2.dtype(), true)), TypeError)
        << op << ": integer division with addcdiv is not supported (tensor1 "
        << DTypeName(t1.dtype()) << ", tensor2 " << DTypeName(t2.dtype())
        << "); use (input + value * torch.trunc(tensor1 / tensor2)) for the historic "
        << "behaviour or a floating tensor for true division";
  }
  const DType dt = ResultType({Operand(self), Operand(t1), Operand(t2)});
  kernels::CheckNotBool(op, dt);
  if (IsComplex(dt)) return kernels::complex::Addc(op, divide, dt, self, t1, t2, value, dest);
  TB_CHECK(!value.is_complex(), RuntimeError)
      << op << ": for non-complex input tensors, argument value must not be a complex number";
  return Elementwise(
      op, {{&self, dt}, {&t1, dt}, {&t2, dt}}, dt, dest, [&](const Tensor& out, const In& in) {
        TB_DISPATCH_T(dt, op, TB_TYPES_NUMERIC, [&](auto tag) {
          using T = typename decltype(tag)::type;
          using M = opmath_t<T>;
          if constexpr (std::is_integral_v<T>) {
            const T v = kernels::ScalarTo<T>(op, "value", value);
            Map<T, T, T, T>(
                out,
                [v](T s, T a, T b) {
                  return kernels::WrapAdd(s, kernels::WrapMul(kernels::WrapMul(v, a), b));
                },
                in[0], in[1], in[2]);
          } else {
            // Half/BFloat16: the value at float precision; others: in the tensor type.
            const M v = kernels::kIsReducedFloat<T>
                            ? kernels::ScalarTo<M>(op, "value", value)
                            : static_cast<M>(kernels::ScalarTo<T>(op, "value", value));
            if (divide) {
              Map<T, T, T, T>(
                  out,
                  [v](T s, T a, T b) {
                    return static_cast<T>(static_cast<M>(s) +
                                          v * static_cast<M>(a) / static_cast<M>(b));
                  },
                  in[0], in[1], in[2]);
            } else {
              Map<T, T, T, T>(
                  out,
                  [v](T s, T a, T b) {
                    return static_cast<T>(static_cast<M>(s) +
                                          v * static_cast<M>(a) * static_cast<M>(b));
                  },
                  in[0], in[1], in[2]);
            }
          }
        });
      });
}

Tensor Addcmul(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value) {
  return AddcImpl("aten::addcmul", false, self, t1, t2, value, nullptr);
}
Tensor AddcmulOut(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value,
                  const Tensor& out) {
  return AddcImpl("aten::addcmul.out", false, self, t1, t2, value, &out);
}
Tensor AddcmulInplace(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value) {
  return AddcImpl("aten::addcmul_", false, self, t1, t2, value, &self);
}
Tensor Addcdiv(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value) {
  return AddcImpl("aten::addcdiv", true, self, t1, t2, value, nullptr);
}
Tensor AddcdivOut(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value,
                  const Tensor& out) {
  return AddcImpl("aten::addcdiv.out", true, self, t1, t2, value, &out);
}
Tensor AddcdivInplace(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value) {
  return AddcImpl("aten::addcdiv_", true, self, t1, t2, value, &self);
}

}  // namespace

TB_REGISTER_KERNELS(ternary) {
  const DeviceType cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::where.self", cpu, Boxed<&Where>(), TB_HERE);
  table.RegisterKernel("aten::where.self_out", cpu, Boxed<&WhereOut>(), TB_HERE);
  table.RegisterKernel("aten::where.ScalarOther", cpu, Boxed<&WhereScalarOther>(), TB_HERE);
  table.RegisterKernel("aten::where.ScalarSelf", cpu, Boxed<&WhereScalarSelf>(), TB_HERE);
  table.RegisterKernel("aten::where.Scalar", cpu, Boxed<&WhereScalar>(), TB_HERE);
  table.RegisterKernel("aten::clamp", cpu, Boxed<&Clamp>(), TB_HERE);
  table.RegisterKernel("aten::clamp.out", cpu, Boxed<&ClampOut>(), TB_HERE);
  table.RegisterKernel("aten::clamp_", cpu, Boxed<&ClampInplace>(), TB_HERE);
  table.RegisterKernel("aten::clamp.Tensor", cpu, Boxed<&ClampT>(), TB_HERE);
  table.RegisterKernel("aten::clamp.Tensor_out", cpu, Boxed<&ClampTOut>(), TB_HERE);
  table.RegisterKernel("aten::clamp_.Tensor", cpu, Boxed<&ClampTInplace>(), TB_HERE);
  table.RegisterKernel("aten::clamp_min", cpu, Boxed<&ClampMin>(), TB_HERE);
  table.RegisterKernel("aten::clamp_min.out", cpu, Boxed<&ClampMinOut>(), TB_HERE);
  table.RegisterKernel("aten::clamp_min_", cpu, Boxed<&ClampMinInplace>(), TB_HERE);
  table.RegisterKernel("aten::clamp_min.Tensor", cpu, Boxed<&ClampMinT>(), TB_HERE);
  table.RegisterKernel("aten::clamp_min.Tensor_out", cpu, Boxed<&ClampMinTOut>(), TB_HERE);
  table.RegisterKernel("aten::clamp_min_.Tensor", cpu, Boxed<&ClampMinTInplace>(), TB_HERE);
  table.RegisterKernel("aten::clamp_max", cpu, Boxed<&ClampMax>(), TB_HERE);
  table.RegisterKernel("aten::clamp_max.out", cpu, Boxed<&ClampMaxOut>(), TB_HERE);
  table.RegisterKernel("aten::clamp_max_", cpu, Boxed<&ClampMaxInplace>(), TB_HERE);
  table.RegisterKernel("aten::clamp_max.Tensor", cpu, Boxed<&ClampMaxT>(), TB_HERE);
  table.RegisterKernel("aten::clamp_max.Tensor_out", cpu, Boxed<&ClampMaxTOut>(), TB_HERE);
  table.RegisterKernel("aten::clamp_max_.Tensor", cpu, Boxed<&ClampMaxTInplace>(), TB_HERE);
  table.RegisterKernel("aten::lerp.Scalar", cpu, Boxed<&LerpS>(), TB_HERE);
  table.RegisterKernel("aten::lerp.Scalar_out", cpu, Boxed<&LerpSOut>(), TB_HERE);
  table.RegisterKernel("aten::lerp_.Scalar", cpu, Boxed<&LerpSInplace>(), TB_HERE);
  table.RegisterKernel("aten::lerp.Tensor", cpu, Boxed<&LerpT>(), TB_HERE);
  table.RegisterKernel("aten::lerp.Tensor_out", cpu, Boxed<&LerpTOut>(), TB_HERE);
  table.RegisterKernel("aten::lerp_.Tensor", cpu, Boxed<&LerpTInplace>(), TB_HERE);
  table.RegisterKernel("aten::addcmul", cpu, Boxed<&Addcmul>(), TB_HERE);
  table.RegisterKernel("aten::addcmul.out", cpu, Boxed<&AddcmulOut>(), TB_HERE);
  table.RegisterKernel("aten::addcmul_", cpu, Boxed<&AddcmulInplace>(), TB_HERE);
  table.RegisterKernel("aten::addcdiv", cpu, Boxed<&Addcdiv>(), TB_HERE);
  table.RegisterKernel("aten::addcdiv.out", cpu, Boxed<&AddcdivOut>(), TB_HERE);
  table.RegisterKernel("aten::addcdiv_", cpu, Boxed<&AddcdivInplace>(), TB_HERE);
}

}  // namespace tb
