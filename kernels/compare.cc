// Comparisons: aten::eq, ne, lt, le, gt, ge (.Tensor and .Scalar), with their in-place and
// out= overloads. Operands compare in their promoted dtype (Half/BFloat16 as float); the
// result is bool (in-place: converted to self's dtype). aten::equal: same shape and every
// element equal (as eq: NaN is unequal to itself). aten::isin: whether each element equals
// one of a set of test elements (in the promoted dtype; NaN is in no set).
#include <algorithm>
#include <string>

#include "dispatch/op_table.h"
#include "kernels/binary_internal.h"
#include "kernels/complex_internal.h"

namespace tb {
namespace {

using kernels::BinaryMap;
using kernels::opmath_t;
using kernels::WrapScalar;

using In = std::vector<Tensor>;

enum class Cmp { kEq, kNe, kLt, kLe, kGt, kGe };

template <typename T, typename F>
void CompareLoop(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  using M = opmath_t<T>;
  BinaryMap<bool, T, T>(out, a, b,
                        [f](T x, T y) { return f(static_cast<M>(x), static_cast<M>(y)); });
}

Tensor CompareImpl(const char* op, Cmp kind, const Tensor& self, const Tensor& other,
                   const Tensor* dest) {
  const DType dt = ResultType({Operand(self), Operand(other)});
  if (IsComplex(dt) && (kind == Cmp::kEq || kind == Cmp::kNe)) {
    return kernels::complex::Equality(op, kind == Cmp::kEq, dt, self, other, dest);
  }
  return kernels::Elementwise(
      op, {{&self, dt}, {&other, dt}}, DType::kBool, dest, [&](const Tensor& out, const In& in) {
        TB_DISPATCH_T(dt, op, TB_TYPES_ALL, [&](auto tag) {
          using T = typename decltype(tag)::type;
          const Tensor &a = in[0], &b = in[1];
          switch (kind) {
            case Cmp::kEq: return CompareLoop<T>(out, a, b, [](auto x, auto y) { return x == y; });
            case Cmp::kNe: return CompareLoop<T>(out, a, b, [](auto x, auto y) { return x != y; });
            case Cmp::kLt: return CompareLoop<T>(out, a, b, [](auto x, auto y) { return x < y; });
            case Cmp::kLe: return CompareLoop<T>(out, a, b, [](auto x, auto y) { return x <= y; });
            case Cmp::kGt: return CompareLoop<T>(out, a, b, [](auto x, auto y) { return x > y; });
            case Cmp::kGe: return CompareLoop<T>(out, a, b, [](auto x, auto y) { return x >= y; });
          }
        });
      });
}

// The overloads of one comparison.
template <Cmp kKind>
struct CompareOps {
  static constexpr const char* kName = kKind == Cmp::kEq   ? "aten::eq"
                                       : kKind == Cmp::kNe ? "aten::ne"
                                       : kKind == Cmp::kLt ? "aten::lt"
                                       : kKind == Cmp::kLe ? "aten::le"
                                       : kKind == Cmp::kGt ? "aten::gt"
                                                           : "aten::ge";
  static Tensor TT(const Tensor& s, const Tensor& o) {
    return CompareImpl(kName, kKind, s, o, nullptr);
  }
  static Tensor TS(const Tensor& s, const Scalar& o) {
    return CompareImpl(kName, kKind, s, WrapScalar(o), nullptr);
  }
  static Tensor TTOut(const Tensor& s, const Tensor& o, const Tensor& out) {
    return CompareImpl(kName, kKind, s, o, &out);
  }
  static Tensor TSOut(const Tensor& s, const Scalar& o, const Tensor& out) {
    return CompareImpl(kName, kKind, s, WrapScalar(o), &out);
  }
  static Tensor TTInplace(const Tensor& s, const Tensor& o) {
    return CompareImpl(kName, kKind, s, o, &s);
  }
  static Tensor TSInplace(const Tensor& s, const Scalar& o) {
    return CompareImpl(kName, kKind, s, WrapScalar(o), &s);
  }
};

bool Equal(const Tensor& self, const Tensor& other) {
  if (!(self.shape() == other.shape())) return false;
  Tensor eq = CompareImpl("aten::equal", Cmp::kEq, self, other, nullptr).contiguous();
  const bool* p = eq.data_as<const bool>();
  for (int64_t i = 0; i < eq.numel(); ++i) {
    if (!p[i]) return false;
  }
  return true;
}

// isin: the test elements sorted once (NaN dropped: it equals nothing), then a binary search
// per element; O((n + m) log m).
Tensor IsinImpl(const Tensor& elements, const Tensor& test, bool invert) {
  constexpr const char* kOp = "aten::isin";
  kernels::CheckHost(kOp, elements, test);
  const DType dt = ResultType({Operand(elements), Operand(test)});
  TB_CHECK_SUPPORTED(!IsComplex(dt))
      << kOp << ": not implemented for " << DTypeName(dt) << " tensors";
  Tensor out = Tensor::Empty(elements.shape(), DType::kBool);
  if (out.numel() == 0) return out;
  const Tensor e = Cast(elements, dt).contiguous();
  const Tensor t = Cast(test, dt).contiguous();
  bool* o = out.data_as<bool>();
  TB_DISPATCH_T(dt, kOp, TB_TYPES_ALL, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using M = opmath_t<T>;
    std::vector<M> set;
    set.reserve(static_cast<size_t>(t.numel()));
    const T* tp = t.data_as<const T>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      const M v = static_cast<M>(tp[i]);
      if (v == v) set.push_back(v);  // NaN is in no set
    }
    std::sort(set.begin(), set.end());
    const T* ep = e.data_as<const T>();
    for (int64_t i = 0; i < e.numel(); ++i) {
      const M v = static_cast<M>(ep[i]);
      o[i] = (v == v && std::binary_search(set.begin(), set.end(), v)) != invert;
    }
  });
  return out;
}

Tensor IsinTT(const Tensor& elements, const Tensor& test, bool /*assume_unique*/, bool invert) {
  return IsinImpl(elements, test, invert);
}
Tensor IsinTS(const Tensor& elements, const Scalar& test, bool /*assume_unique*/, bool invert) {
  return IsinImpl(elements, WrapScalar(test), invert);
}
Tensor IsinST(const Scalar& element, const Tensor& test, bool /*assume_unique*/, bool invert) {
  return IsinImpl(WrapScalar(element), test, invert);
}

template <Cmp kKind>
void RegisterCompare(KernelRegistrar& table) {
  using O = CompareOps<kKind>;
  const std::string base = O::kName;
  const DeviceType cpu = DeviceType::kCPU;
  table.RegisterKernel(base + ".Tensor", cpu, Boxed<&O::TT>(), TB_HERE);
  table.RegisterKernel(base + ".Scalar", cpu, Boxed<&O::TS>(), TB_HERE);
  table.RegisterKernel(base + ".Tensor_out", cpu, Boxed<&O::TTOut>(), TB_HERE);
  table.RegisterKernel(base + ".Scalar_out", cpu, Boxed<&O::TSOut>(), TB_HERE);
  table.RegisterKernel(base + "_.Tensor", cpu, Boxed<&O::TTInplace>(), TB_HERE);
  table.RegisterKernel(base + "_.Scalar", cpu, Boxed<&O::TSInplace>(), TB_HERE);
}

}  // namespace

TB_REGISTER_KERNELS(compare) {
  RegisterCompare<Cmp::kEq>(table);
  RegisterCompare<Cmp::kNe>(table);
  RegisterCompare<Cmp::kLt>(table);
  RegisterCompare<Cmp::kLe>(table);
  RegisterCompare<Cmp::kGt>(table);
  RegisterCompare<Cmp::kGe>(table);
  table.RegisterKernel("aten::equal", DeviceType::kCPU, Boxed<&Equal>(), TB_HERE);
  table.RegisterKernel("aten::isin.Tensor_Tensor", DeviceType::kCPU, Boxed<&IsinTT>(), TB_HERE);
  table.RegisterKernel("aten::isin.Tensor_Scalar", DeviceType::kCPU, Boxed<&IsinTS>(), TB_HERE);
  table.RegisterKernel("aten::isin.Scalar_Tensor", DeviceType::kCPU, Boxed<&IsinST>(), TB_HERE);
}

}  // namespace tb
