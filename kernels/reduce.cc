// Sum-like reductions: aten::sum, aten::nansum, aten::mean, aten::prod, aten::count_nonzero,
// aten::any and aten::all, on the shared reduction driver (kernels/reduce_internal.h).
//
// Dtypes follow torch: sums and products of integers and bool give int64, a dtype= argument
// casts the input first, mean requires a floating result, any/all give bool (uint8 for uint8
// input). Float sums accumulate in float (double for float64) with pairwise summation.
#include <optional>
#include <vector>

#include "dispatch/op_table.h"
#include "kernels/complex_internal.h"
#include "kernels/cpu/simd_internal.h"
#include "kernels/reduce_internal.h"

namespace tb {
namespace {

using kernels::ReduceDims;

// The natural result type of summing T: int64 for integers and bool, T for floating types.
template <typename T>
using sum_out_t = std::conditional_t<kernels::kIsFloating<T>, T, int64_t>;

enum class SumKind { kSum, kNanSum, kMean };

template <typename T, SumKind kKind>
struct SumReducer {
  using In = T;
  using Acc = kernels::sum_acc_t<T>;
  using Out = sum_out_t<T>;
  static constexpr bool kPairwise = true;
  // float and double rows run on the ISA-dispatched pairwise loop (kernels/cpu/simd.cc).
  static constexpr bool kRowKernel =
      kKind != SumKind::kNanSum && (std::is_same_v<T, float> || std::is_same_v<T, double>);
  Out* out;
  int64_t count;
  Acc Init(int64_t) const { return Acc(0); }
  Acc Row(const In* x, int64_t n, int64_t) const {
    if constexpr (kRowKernel) return kernels::simd::SumRow(x, n);
    return Acc(0);
  }
  Acc Step(Acc a, In x, int64_t) const {
    if constexpr (kKind == SumKind::kNanSum && kernels::kIsFloating<T>) {
      Acc v = kernels::Widen<Acc>(x);
      return v != v ? a : a + v;
    } else {
      return kernels::AddWrap(a, kernels::Widen<Acc>(x));
    }
  }
  Acc Merge(Acc a, Acc b) const { return kernels::AddWrap(a, b); }
  void Write(int64_t o, Acc a) const {
    if constexpr (kKind == SumKind::kMean) a = a / static_cast<Acc>(count);
    out[o] = kernels::Convert<Out>(a);
  }
};

template <typename T>
struct ProdReducer {
  using In = T;
  using Acc = kernels::sum_acc_t<T>;
  using Out = sum_out_t<T>;
  static constexpr bool kPairwise = false;
  Out* out;
  Acc Init(int64_t) const { return Acc(1); }
  Acc Step(Acc a, In x, int64_t) const { return kernels::MulWrap(a, kernels::Widen<Acc>(x)); }
  Acc Merge(Acc a, Acc b) const { return kernels::MulWrap(a, b); }
  void Write(int64_t o, Acc a) const { out[o] = kernels::Convert<Out>(a); }
};

template <typename T>
struct CountNonZeroReducer {
  using In = T;
  using Acc = int64_t;
  static constexpr bool kPairwise = false;
  int64_t* out;
  Acc Init(int64_t) const { return 0; }
  Acc Step(Acc a, In x, int64_t) const { return a + (kernels::NonZero(x) ? 1 : 0); }
  Acc Merge(Acc a, Acc b) const { return a + b; }
  void Write(int64_t o, Acc a) const { out[o] = a; }
};

// any (kAll false) and all (kAll true); Out is bool or uint8.
template <typename T, typename Out, bool kAll>
struct AnyAllReducer {
  using In = T;
  using Acc = bool;
  static constexpr bool kPairwise = false;
  Out* out;
  Acc Init(int64_t) const { return kAll; }
  Acc Step(Acc a, In x, int64_t) const {
    if constexpr (kAll) {
      return a && kernels::NonZero(x);
    } else {
      return a || kernels::NonZero(x);
    }
  }
  Acc Merge(Acc a, Acc b) const { return kAll ? (a && b) : (a || b); }
  void Write(int64_t o, Acc a) const { out[o] = static_cast<Out>(a); }
};

// sum / nansum / mean of `self` over `rd`, result in `out_dtype`.
Tensor SumLike(const char* op, SumKind kind, const Tensor& self, const ReduceDims& rd,
               const std::optional<DType>& dtype) {
  Tensor in = dtype ? Cast(self, *dtype) : self;
  if (IsComplex(in.dtype()) && kind != SumKind::kNanSum) {
    // The real and imaginary parts sum independently: a real sum over the [..., 2] view.
    ReduceDims parts = rd;
    parts.reduced.push_back(false);
    parts.out_shape.push_back(2);
    const Tensor re = SumLike(op, kind, kernels::complex::AsReal(in), parts, std::nullopt);
    return kernels::complex::AsComplex(re);
  }
  DType natural = kernels::SumDType(in, std::nullopt);
  Tensor out = Tensor::Empty(rd.out_shape, natural);
  TB_DISPATCH(in.dtype(), op, TB_TYPES_ALL, [&] {
    using T = scalar_t;
    using Out = sum_out_t<T>;
    Out* o = static_cast<Out*>(out.mutable_data());
    if (kind == SumKind::kMean) {
      if constexpr (kernels::kIsFloating<T>) {
        kernels::Reduce(in, rd, SumReducer<T, SumKind::kMean>{o, rd.count});
      }
    } else if (kind == SumKind::kNanSum) {
      kernels::Reduce(in, rd, SumReducer<T, SumKind::kNanSum>{o, rd.count});
    } else {
      kernels::Reduce(in, rd, SumReducer<T, SumKind::kSum>{o, rd.count});
    }
  });
  DType want = dtype ? *dtype : natural;
  return want == natural ? out : Cast(out, want);
}

Tensor Sum(const Tensor& self, const std::optional<DType>& dtype) {
  auto rd = kernels::ParseReduceDims("aten::sum", self, IntArrayRef(), false);
  return SumLike("aten::sum", SumKind::kSum, self, rd, dtype);
}

Tensor SumDim(const Tensor& self, const std::optional<std::vector<int64_t>>& dim, bool keepdim,
              const std::optional<DType>& dtype) {
  auto rd = kernels::ParseReduceDims("aten::sum.dim_IntList", self, dim, keepdim);
  return SumLike("aten::sum.dim_IntList", SumKind::kSum, self, rd, dtype);
}

Tensor NanSum(const Tensor& self, const std::optional<std::vector<int64_t>>& dim, bool keepdim,
              const std::optional<DType>& dtype) {
  auto rd = kernels::ParseReduceDims("aten::nansum", self, dim, keepdim);
  return SumLike("aten::nansum", SumKind::kNanSum, self, rd, dtype);
}

void CheckMeanDType(const char* op, const Tensor& self, const std::optional<DType>& dtype) {
  DType t = dtype ? *dtype : self.dtype();
  TB_CHECK(IsFloatingPoint(t) || IsComplex(t), RuntimeError)
      << op << ": could not infer output dtype. Input dtype must be either a floating point "
      << "or complex dtype. Got: " << DTypeName(t);
}

Tensor Mean(const Tensor& self, const std::optional<DType>& dtype) {
  CheckMeanDType("aten::mean", self, dtype);
  auto rd = kernels::ParseReduceDims("aten::mean", self, IntArrayRef(), false);
  return SumLike("aten::mean", SumKind::kMean, self, rd, dtype);
}

Tensor MeanDim(const Tensor& self, const std::optional<std::vector<int64_t>>& dim, bool keepdim,
               const std::optional<DType>& dtype) {
  CheckMeanDType("aten::mean.dim", self, dtype);
  auto rd = kernels::ParseReduceDims("aten::mean.dim", self, dim, keepdim);
  return SumLike("aten::mean.dim", SumKind::kMean, self, rd, dtype);
}

Tensor ProdLike(const char* op, const Tensor& self, const ReduceDims& rd,
                const std::optional<DType>& dtype) {
  Tensor in = dtype ? Cast(self, *dtype) : self;
  if (IsComplex(in.dtype())) return kernels::complex::Prod(op, in, rd);
  DType natural = kernels::SumDType(in, std::nullopt);
  Tensor out = Tensor::Empty(rd.out_shape, natural);
  TB_DISPATCH(in.dtype(), op, TB_TYPES_ALL, [&] {
    using T = scalar_t;
    kernels::Reduce(in, rd, ProdReducer<T>{static_cast<sum_out_t<T>*>(out.mutable_data())});
  });
  DType want = dtype ? *dtype : natural;
  return want == natural ? out : Cast(out, want);
}

Tensor Prod(const Tensor& self, const std::optional<DType>& dtype) {
  auto rd = kernels::ParseReduceDims("aten::prod", self, IntArrayRef(), false);
  return ProdLike("aten::prod", self, rd, dtype);
}

Tensor ProdDim(const Tensor& self, int64_t dim, bool keepdim, const std::optional<DType>& dtype) {
  auto rd = kernels::ParseReduceDims("aten::prod.dim_int", self, {dim}, keepdim);
  return ProdLike("aten::prod.dim_int", self, rd, dtype);
}

Tensor CountNonZeroImpl(const char* op, const Tensor& input, IntArrayRef dims) {
  // Complex elements count by their != 0 mask.
  const Tensor self = IsComplex(input.dtype()) ? kernels::complex::NonzeroMask(input) : input;
  auto rd = kernels::ParseReduceDims(op, self, dims, false);
  Tensor out = Tensor::Empty(rd.out_shape, DType::kInt64);
  TB_DISPATCH(self.dtype(), op, TB_TYPES_ALL, [&] {
    kernels::Reduce(self, rd, CountNonZeroReducer<scalar_t>{out.data_as<int64_t>()});
  });
  return out;
}

Tensor CountNonZero(const Tensor& self, const std::optional<int64_t>& dim) {
  if (!dim) return CountNonZeroImpl("aten::count_nonzero", self, IntArrayRef());
  return CountNonZeroImpl("aten::count_nonzero", self, {*dim});
}

Tensor CountNonZeroDims(const Tensor& self, const std::vector<int64_t>& dim) {
  return CountNonZeroImpl("aten::count_nonzero.dim_IntList", self, dim);
}

template <bool kAll>
Tensor AnyAll(const char* op, const Tensor& input, const ReduceDims& rd) {
  const Tensor self = IsComplex(input.dtype()) ? kernels::complex::NonzeroMask(input) : input;
  const bool u8 = self.dtype() == DType::kUInt8;
  Tensor out = Tensor::Empty(rd.out_shape, u8 ? DType::kUInt8 : DType::kBool);
  TB_DISPATCH(self.dtype(), op, TB_TYPES_ALL, [&] {
    using T = scalar_t;
    if (u8) {
      kernels::Reduce(self, rd, AnyAllReducer<T, uint8_t, kAll>{out.data_as<uint8_t>()});
    } else {
      kernels::Reduce(self, rd, AnyAllReducer<T, bool, kAll>{out.data_as<bool>()});
    }
  });
  return out;
}

template <bool kAll>
Tensor AnyAllFull(const Tensor& self) {
  const char* op = kAll ? "aten::all" : "aten::any";
  return AnyAll<kAll>(op, self, kernels::ParseReduceDims(op, self, IntArrayRef(), false));
}

template <bool kAll>
Tensor AnyAllDim(const Tensor& self, int64_t dim, bool keepdim) {
  const char* op = kAll ? "aten::all.dim" : "aten::any.dim";
  return AnyAll<kAll>(op, self, kernels::ParseReduceDims(op, self, {dim}, keepdim));
}

// dim=None reduces every dim; an empty list reduces none (torch's any.dims / all.dims).
template <bool kAll>
Tensor AnyAllDims(const Tensor& self, const std::optional<std::vector<int64_t>>& dim,
                  bool keepdim) {
  const char* op = kAll ? "aten::all.dims" : "aten::any.dims";
  if (dim && dim->empty()) {
    ReduceDims rd;
    rd.reduced.assign(static_cast<size_t>(self.ndim()), false);
    rd.out_shape = Dims(self.shape());
    return AnyAll<kAll>(op, self, rd);
  }
  return AnyAll<kAll>(op, self, kernels::ParseReduceDims(op, self, dim, keepdim));
}

}  // namespace

TB_REGISTER_KERNELS(reduce) {
  table.RegisterKernel("aten::sum", DeviceType::kCPU, Boxed<&Sum>(), TB_HERE);
  table.RegisterKernel("aten::sum.dim_IntList", DeviceType::kCPU, Boxed<&SumDim>(), TB_HERE);
  table.RegisterKernel("aten::nansum", DeviceType::kCPU, Boxed<&NanSum>(), TB_HERE);
  table.RegisterKernel("aten::mean", DeviceType::kCPU, Boxed<&Mean>(), TB_HERE);
  table.RegisterKernel("aten::mean.dim", DeviceType::kCPU, Boxed<&MeanDim>(), TB_HERE);
  table.RegisterKernel("aten::prod", DeviceType::kCPU, Boxed<&Prod>(), TB_HERE);
  table.RegisterKernel("aten::prod.dim_int", DeviceType::kCPU, Boxed<&ProdDim>(), TB_HERE);
  table.RegisterKernel("aten::count_nonzero", DeviceType::kCPU, Boxed<&CountNonZero>(), TB_HERE);
  table.RegisterKernel("aten::count_nonzero.dim_IntList", DeviceType::kCPU,
                       Boxed<&CountNonZeroDims>(), TB_HERE);
  table.RegisterKernel("aten::any", DeviceType::kCPU, Boxed<&AnyAllFull<false>>(), TB_HERE);
  table.RegisterKernel("aten::any.dim", DeviceType::kCPU, Boxed<&AnyAllDim<false>>(), TB_HERE);
  table.RegisterKernel("aten::any.dims", DeviceType::kCPU, Boxed<&AnyAllDims<false>>(), TB_HERE);
  table.RegisterKernel("aten::all", DeviceType::kCPU, Boxed<&AnyAllFull<true>>(), TB_HERE);
  table.RegisterKernel("aten::all.dim", DeviceType::kCPU, Boxed<&AnyAllDim<true>>(), TB_HERE);
  table.RegisterKernel("aten::all.dims", DeviceType::kCPU, Boxed<&AnyAllDims<true>>(), TB_HERE);
}

}  // namespace tb
