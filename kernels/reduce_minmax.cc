// Extremum reductions: aten::amax, aten::amin, aten::max, aten::min (whole tensor and .dim with
// indices), aten::argmax, aten::argmin and aten::aminmax, on the shared reduction driver.
//
// As torch: NaN propagates (the first NaN wins the index), ties keep the first index, values
// keep the input dtype, indices are int64, and reducing an empty dim raises (no identity).
#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <tuple>
#include <type_traits>
#include <vector>

#include "dispatch/op_table.h"
#include "kernels/reduce_internal.h"

namespace tb {
namespace {

using kernels::ReduceDims;

// The type values are compared in: float for the 16-bit floating types, T otherwise.
template <typename T>
using cmp_t = kernels::opmath_t<T>;

// x strictly better than y for a max (kMax) or min; NaN beats everything but NaN.
template <typename V, bool kMax>
inline bool Better(V x, V y) {
  if constexpr (std::is_floating_point_v<V>) {
    if (x != x) return y == y;
  }
  return kMax ? x > y : x < y;
}

// The value a max (kMax) or min starts from.
template <typename V, bool kMax>
inline V Identity() {
  if constexpr (std::is_floating_point_v<V>) {
    return kMax ? -std::numeric_limits<V>::infinity() : std::numeric_limits<V>::infinity();
  } else {
    return kMax ? std::numeric_limits<V>::lowest() : std::numeric_limits<V>::max();
  }
}

// NaN-propagating max (kMax) or min of two values.
template <typename V, bool kMax>
inline V Pick(V a, V x) {
  if constexpr (std::is_floating_point_v<V>) {
    // Bitwise |, not ||: no branch (column loops vectorise to compare-and-blend).
    const bool take = (kMax ? x > a : x < a) | (x != x);
    return take ? x : a;
  } else {
    return kMax ? (x > a ? x : a) : (x < a ? x : a);
  }
}

// NaN-propagating max (kMax) or min of x[0, n), on GCC vector extensions: 16-byte vectors,
// four independent compare-and-select chains, NaN seen kept as a mask (the auto-vectoriser
// does not manage Pick's combined test).
template <typename V, bool kMax>
V VecExtremum(const V* x, int64_t n) {
  constexpr int kW = 16 / sizeof(V), kU = 4;
  typedef V Vec __attribute__((vector_size(16)));
  typedef decltype(Vec{} != Vec{}) Mask;
  Vec m[kU];
  Mask nan[kU];
  for (int u = 0; u < kU; ++u) m[u] = Vec{} + Identity<V, kMax>(), nan[u] = Mask{};
  int64_t i = 0;
  for (; i + kU * kW <= n; i += kU * kW) {
    for (int u = 0; u < kU; ++u) {
      Vec v;
      std::memcpy(&v, x + i + u * kW, sizeof(v));
      m[u] = kMax ? (v > m[u] ? v : m[u]) : (v < m[u] ? v : m[u]);
      if constexpr (std::is_floating_point_v<V>) nan[u] |= v != v;
    }
  }
  V r = Identity<V, kMax>();
  bool any_nan = false;
  for (int u = 0; u < kU; ++u) {
    for (int k = 0; k < kW; ++k) r = Pick<V, kMax>(r, m[u][k]), any_nan |= nan[u][k] != 0;
  }
  for (; i < n; ++i) r = Pick<V, kMax>(r, x[i]);
  if constexpr (std::is_floating_point_v<V>) {
    if (any_nan) return std::numeric_limits<V>::quiet_NaN();
  }
  return r;
}

template <typename T, bool kMax>
struct ExtremumReducer {
  using In = T;
  using Acc = cmp_t<T>;
  static constexpr bool kPairwise = false;
  // Contiguous rows take VecExtremum (16-bit floats widened to float a block at a time);
  // 64-bit integers stay on the lanes (SSE2 has no 64-bit compare) and bool is cheap anyway.
  static constexpr bool kRowKernel =
      kernels::kIsReducedFloat<T> || std::is_floating_point_v<T> ||
      (std::is_integral_v<T> && sizeof(T) < 8 && !std::is_same_v<T, bool>);
  T* out;
  Acc Init(int64_t) const { return Identity<Acc, kMax>(); }
  Acc Step(Acc a, In x, int64_t) const { return Pick<Acc, kMax>(a, kernels::Widen<Acc>(x)); }
  Acc Row(const In* x, int64_t n, int64_t) const {
    if constexpr (kernels::kIsReducedFloat<T>) {
      constexpr int64_t kBlock = 512;
      float buf[kBlock];
      float r = Identity<float, kMax>();
      for (int64_t i = 0; i < n; i += kBlock) {
        const int64_t len = std::min(kBlock, n - i);
        for (int64_t j = 0; j < len; ++j) buf[j] = kernels::Widen<float>(x[i + j]);
        r = Pick<float, kMax>(r, VecExtremum<float, kMax>(buf, len));
      }
      return r;
    } else {
      return VecExtremum<T, kMax>(x, n);
    }
  }
  Acc Merge(Acc a, Acc b) const { return Pick<Acc, kMax>(a, b); }
  void Write(int64_t o, Acc a) const { out[o] = kernels::Convert<T>(a); }
};

template <typename T>
struct MinMaxReducer {
  using In = T;
  struct Acc {
    cmp_t<T> lo, hi;
  };
  static constexpr bool kPairwise = false;
  T* min;
  T* max;
  Acc Init(int64_t) const { return {Identity<cmp_t<T>, false>(), Identity<cmp_t<T>, true>()}; }
  Acc Step(Acc a, In x, int64_t) const {
    auto v = kernels::Widen<cmp_t<T>>(x);
    return {Pick<cmp_t<T>, false>(a.lo, v), Pick<cmp_t<T>, true>(a.hi, v)};
  }
  Acc Merge(Acc a, Acc b) const {
    return {Pick<cmp_t<T>, false>(a.lo, b.lo), Pick<cmp_t<T>, true>(a.hi, b.hi)};
  }
  void Write(int64_t o, Acc a) const {
    min[o] = kernels::Convert<T>(a.lo);
    max[o] = kernels::Convert<T>(a.hi);
  }
};

// Value and index of the max (kMax) or min; `values` may be null (argmax, argmin).
template <typename T, bool kMax>
struct ArgReducer {
  using In = T;
  using V = cmp_t<T>;
  struct Acc {
    V v;
    int64_t i;  // -1: nothing seen yet
  };
  static constexpr bool kPairwise = false;
  T* values;
  int64_t* indices;
  Acc Init(int64_t) const { return {V(), -1}; }
  Acc Step(Acc a, In x, int64_t r) const {
    V v = kernels::Widen<V>(x);
    return a.i < 0 || Better<V, kMax>(v, a.v) ? Acc{v, r} : a;
  }
  Acc Merge(Acc a, Acc b) const {
    if (b.i < 0) return a;
    if (a.i < 0) return b;
    if (Better<V, kMax>(b.v, a.v)) return b;
    if (Better<V, kMax>(a.v, b.v)) return a;
    return a.i <= b.i ? a : b;
  }
  void Write(int64_t o, Acc a) const {
    if (values) values[o] = kernels::Convert<T>(a.v);
    indices[o] = a.i;
  }
};

// Raises, as torch, when a reduction without identity meets an empty dim.
void CheckNonEmpty(const char* name, const Tensor& self, const ReduceDims& rd, bool dims_given) {
  if (self.numel() != 0) return;
  TB_CHECK(dims_given && self.ndim() > 0, RuntimeError)
      << name << "(): Expected reduction dim to be specified for input.numel() == 0. Specify "
      << "the reduction dim with the 'dim' argument.";
  for (int64_t d = 0; d < self.ndim(); ++d) {
    TB_CHECK(!rd.reduced[d] || self.shape()[d] != 0, IndexError)
        << name << "(): Expected reduction dim " << d << " to have non-zero size.";
  }
}

template <bool kMax>
Tensor Extremum(const char* op, const char* name, const Tensor& self, IntArrayRef dims,
                bool keepdim) {
  auto rd = kernels::ParseReduceDims(op, self, dims, keepdim);
  CheckNonEmpty(name, self, rd, !dims.empty());
  Tensor out = Tensor::Empty(rd.out_shape, self.dtype());
  TB_DISPATCH(self.dtype(), op, TB_TYPES_ALL, [&] {
    using T = scalar_t;
    kernels::Reduce(self, rd, ExtremumReducer<T, kMax>{out.data_as<T>()});
  });
  return out;
}

Tensor Amax(const Tensor& self, const std::vector<int64_t>& dim, bool keepdim) {
  return Extremum<true>("aten::amax", "amax", self, dim, keepdim);
}
Tensor Amin(const Tensor& self, const std::vector<int64_t>& dim, bool keepdim) {
  return Extremum<false>("aten::amin", "amin", self, dim, keepdim);
}
Tensor MaxAll(const Tensor& self) {
  return Extremum<true>("aten::max", "max", self, IntArrayRef(), false);
}
Tensor MinAll(const Tensor& self) {
  return Extremum<false>("aten::min", "min", self, IntArrayRef(), false);
}

// Values (when `with_values`) and indices of the max/min over one dim, or over the flattened
// tensor when `dim` is empty.
template <bool kMax>
std::tuple<Tensor, Tensor> ArgExtremum(const char* op, const char* name, const Tensor& self,
                                       const std::optional<int64_t>& dim, bool keepdim,
                                       bool with_values) {
  ReduceDims rd;
  if (dim) {
    rd = kernels::ParseReduceDims(op, self, IntArrayRef({*dim}), keepdim);
  } else {
    rd = kernels::ParseReduceDims(op, self, IntArrayRef(), keepdim);
    if (!keepdim) rd.out_shape = Dims();
  }
  TB_CHECK(with_values || self.dtype() != DType::kBool, RuntimeError)
      << name << "(): does not support bool input";
  CheckNonEmpty(name, self, rd, dim.has_value());
  Tensor values = with_values ? Tensor::Empty(rd.out_shape, self.dtype()) : Tensor();
  Tensor indices = Tensor::Empty(rd.out_shape, DType::kInt64);
  TB_DISPATCH(self.dtype(), op, TB_TYPES_ALL, [&] {
    using T = scalar_t;
    T* v = with_values ? values.data_as<T>() : nullptr;
    kernels::Reduce(self, rd, ArgReducer<T, kMax>{v, indices.data_as<int64_t>()});
  });
  return {values, indices};
}

std::tuple<Tensor, Tensor> MaxDim(const Tensor& self, int64_t dim, bool keepdim) {
  return ArgExtremum<true>("aten::max.dim", "max", self, dim, keepdim, true);
}
std::tuple<Tensor, Tensor> MinDim(const Tensor& self, int64_t dim, bool keepdim) {
  return ArgExtremum<false>("aten::min.dim", "min", self, dim, keepdim, true);
}
Tensor Argmax(const Tensor& self, const std::optional<int64_t>& dim, bool keepdim) {
  return std::get<1>(ArgExtremum<true>("aten::argmax", "argmax", self, dim, keepdim, false));
}
Tensor Argmin(const Tensor& self, const std::optional<int64_t>& dim, bool keepdim) {
  return std::get<1>(ArgExtremum<false>("aten::argmin", "argmin", self, dim, keepdim, false));
}

std::tuple<Tensor, Tensor> Aminmax(const Tensor& self, const std::optional<int64_t>& dim,
                                   bool keepdim) {
  constexpr const char* kOp = "aten::aminmax";
  ReduceDims rd = dim ? kernels::ParseReduceDims(kOp, self, IntArrayRef({*dim}), keepdim)
                      : kernels::ParseReduceDims(kOp, self, IntArrayRef(), keepdim);
  if (self.numel() == 0) {
    bool empty_dim = !dim || self.ndim() == 0;
    for (int64_t d = 0; d < self.ndim(); ++d) empty_dim |= rd.reduced[d] && self.shape()[d] == 0;
    TB_CHECK(!empty_dim, RuntimeError)
        << "aminmax(): cannot compute aminmax over an empty dimension as the operation has no "
        << "identity.";
  }
  Tensor lo = Tensor::Empty(rd.out_shape, self.dtype());
  Tensor hi = Tensor::Empty(rd.out_shape, self.dtype());
  TB_DISPATCH(self.dtype(), kOp, TB_TYPES_ALL, [&] {
    using T = scalar_t;
    kernels::Reduce(self, rd, MinMaxReducer<T>{lo.data_as<T>(), hi.data_as<T>()});
  });
  return {lo, hi};
}

}  // namespace

TB_REGISTER_KERNELS(reduce_minmax) {
  table.RegisterKernel("aten::amax", DeviceType::kCPU, Boxed<&Amax>(), TB_HERE);
  table.RegisterKernel("aten::amin", DeviceType::kCPU, Boxed<&Amin>(), TB_HERE);
  table.RegisterKernel("aten::max", DeviceType::kCPU, Boxed<&MaxAll>(), TB_HERE);
  table.RegisterKernel("aten::min", DeviceType::kCPU, Boxed<&MinAll>(), TB_HERE);
  table.RegisterKernel("aten::max.dim", DeviceType::kCPU, Boxed<&MaxDim>(), TB_HERE);
  table.RegisterKernel("aten::min.dim", DeviceType::kCPU, Boxed<&MinDim>(), TB_HERE);
  table.RegisterKernel("aten::argmax", DeviceType::kCPU, Boxed<&Argmax>(), TB_HERE);
  table.RegisterKernel("aten::argmin", DeviceType::kCPU, Boxed<&Argmin>(), TB_HERE);
  table.RegisterKernel("aten::aminmax", DeviceType::kCPU, Boxed<&Aminmax>(), TB_HERE);
}

}  // namespace tb
