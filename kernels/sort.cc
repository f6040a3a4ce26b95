// Sorting and selection along one dim: aten::sort (and .stable), aten::topk, aten::kthvalue,
// aten::median and aten::nanmedian (whole tensor and .dim), aten::mode.
//
// Each line along the dim is gathered into (value, index) pairs, processed, and written back;
// lines run in parallel. NaN orders above every number, as in torch. Where torch leaves the
// order of ties to its algorithm (unstable sort, topk, kthvalue, nanmedian of all-NaN lines),
// the same algorithms run with the same comparators on the same initial order, so ties come
// out as torch's do: std::sort / std::stable_sort, std::partial_sort / std::nth_element for
// topk, torch's median-of-three quickselect for kthvalue.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "dispatch/op_table.h"
#include "kernels/dtype_internal.h"
#include "kernels/layout.h"
#include "kernels/promote_broadcast.h"

namespace tb {
namespace {

constexpr int64_t kGrain = 32768;  // elements below which one thread works

template <typename V>
inline bool IsNan(V v) {
  if constexpr (std::is_floating_point_v<V>) {
    return std::isnan(v);
  } else {
    return false;
  }
}

// Ascending with NaN last, and descending with NaN first (torch's KeyValueComp{Asc,Desc}).
template <typename V>
inline bool LessNanLast(V a, V b) {
  return (!IsNan(a) && IsNan(b)) || a < b;
}
template <typename V>
inline bool GreaterNanFirst(V a, V b) {
  return (IsNan(a) && !IsNan(b)) || a > b;
}

// A contiguous tensor as O * I lines of L elements, I apart.
struct Lines {
  int64_t O = 1, L = 1, I = 1;
  int64_t count() const { return O * I; }
  // The offset of line t's first element.
  int64_t base(int64_t t) const { return (t / I) * L * I + t % I; }
};

Lines LinesOf(const Tensor& x, int64_t dim) {
  Lines s;
  for (int64_t d = 0; d < x.ndim(); ++d) {
    (d < dim ? s.O : d == dim ? s.L : s.I) *= x.shape()[d];
  }
  return s;
}

// The shape of a reduction over `dim`: size 1 there with keepdim, removed otherwise.
Dims ReducedShape(const Tensor& self, int64_t dim, bool keepdim) {
  Dims out;
  for (int64_t d = 0; d < self.ndim(); ++d) {
    if (d != dim) {
      out.push_back(self.shape()[d]);
    } else if (keepdim) {
      out.push_back(1);
    }
  }
  return out;
}

// Runs f(q, t) for every line t, q a per-thread buffer of (value, index) pairs holding line t.
template <typename T, typename F>
void ForEachLine(const Tensor& x, const Lines& s, F f) {
  using V = kernels::opmath_t<T>;
  const T* in = x.data_as<const T>();
  const bool par = s.count() * s.L >= kGrain && s.count() > 1;
#pragma omp parallel if (par)
  {
    std::vector<std::pair<V, int64_t>> q(static_cast<size_t>(s.L));
#pragma omp for schedule(static)
    for (int64_t t = 0; t < s.count(); ++t) {
      const T* p = in + s.base(t);
      for (int64_t j = 0; j < s.L; ++j) q[j] = {static_cast<V>(p[j * s.I]), j};
      f(q, t);
    }
  }
}

// Values (self's dtype) and int64 indices of `shape`, written by f(q, t, vo, io, s) for every
// line t of self along `dim`: q holds line t as (value, index) pairs (ForEachLine), vo and io
// are the results' data, vo a T* of self's element type T (f is a generic lambda).
template <typename F>
std::tuple<Tensor, Tensor> PerLine(const char* op, const Tensor& self, int64_t dim,
                                   const Dims& shape, F f) {
  Tensor values = Tensor::Empty(shape, self.dtype());
  Tensor indices = Tensor::Empty(shape, DType::kInt64);
  if (values.numel() == 0) return {values, indices};
  Tensor x = self.contiguous();
  const Lines s = LinesOf(x, dim);
  TB_DISPATCH(self.dtype(), op, TB_TYPES_ALL, [&] {
    using T = scalar_t;
    T* vo = values.data_as<T>();
    int64_t* io = indices.data_as<int64_t>();
    ForEachLine<T>(x, s, [&](auto& q, int64_t t) { f(q, t, vo, io, s); });
  });
  return {values, indices};
}

// ---- sort -------------------------------------------------------------------------------------

std::tuple<Tensor, Tensor> SortImpl(const Tensor& self, bool stable, int64_t dim, bool descending) {
  constexpr const char* kOp = "aten::sort";
  dim = WrapDim(dim, self.ndim(), kOp);
  // torch leaves lines read at stride 0 (all equal) in their order.
  const bool keep_order = self.ndim() > 0 && self.stride(dim) == 0;
  auto [values, indices] = PerLine(
      kOp, self, dim, Dims(self.shape()),
      [&](auto& q, int64_t t, auto* vo, int64_t* io, const Lines& s) {
        using T = std::remove_pointer_t<decltype(vo)>;
        using P = typename std::decay_t<decltype(q)>::value_type;
        auto asc = [](const P& a, const P& b) { return LessNanLast(a.first, b.first); };
        auto desc = [](const P& a, const P& b) { return GreaterNanFirst(a.first, b.first); };
        if (keep_order) {
        } else if (stable) {
          descending ? std::stable_sort(q.begin(), q.end(), desc)
                     : std::stable_sort(q.begin(), q.end(), asc);
        } else {
          descending ? std::sort(q.begin(), q.end(), desc) : std::sort(q.begin(), q.end(), asc);
        }
        const int64_t b = s.base(t);
        for (int64_t j = 0; j < s.L; ++j) {
          vo[b + j * s.I] = kernels::Convert<T>(q[j].first);
          io[b + j * s.I] = q[j].second;
        }
      });
  if (values.numel() == 0) return {values, indices};
  // torch lays values and indices out like self.
  return {LaidOutLike(values, self), LaidOutLike(indices, self)};
}

std::tuple<Tensor, Tensor> Sort(const Tensor& self, int64_t dim, bool descending) {
  return SortImpl(self, false, dim, descending);
}

std::tuple<Tensor, Tensor> SortStable(const Tensor& self, const std::optional<bool>& stable,
                                      int64_t dim, bool descending) {
  return SortImpl(self, stable.value_or(false), dim, descending);
}

// ---- topk -------------------------------------------------------------------------------------

std::tuple<Tensor, Tensor> TopK(const Tensor& self, int64_t k, int64_t dim, bool largest,
                                bool sorted) {
  constexpr const char* kOp = "aten::topk";
  TB_CHECK(self.dtype() != DType::kBool, RuntimeError) << "topk does not support bool dtypes";
  dim = WrapDim(dim, self.ndim(), kOp);
  const int64_t n = self.ndim() == 0 ? 1 : self.shape()[dim];
  TB_CHECK(k >= 0 && k <= n, RuntimeError) << "topk(): selected index k out of range";
  Dims shape(self.shape());
  if (self.ndim() > 0) shape[dim] = k;
  return PerLine(kOp, self, dim, shape,
                 [&](auto& q, int64_t t, auto* vo, int64_t* io, const Lines& s) {
                   using T = std::remove_pointer_t<decltype(vo)>;
                   using P = typename std::decay_t<decltype(q)>::value_type;
                   auto run = [&](auto comp) {
                     if (k * 64 <= s.L) {
                       std::partial_sort(q.begin(), q.begin() + k, q.end(), comp);
                     } else {
                       std::nth_element(q.begin(), q.begin() + k - 1, q.end(), comp);
                       if (sorted) std::sort(q.begin(), q.begin() + k - 1, comp);
                     }
                   };
                   if (largest) {
                     run([](const P& a, const P& b) { return GreaterNanFirst(a.first, b.first); });
                   } else {
                     run([](const P& a, const P& b) { return LessNanLast(a.first, b.first); });
                   }
                   const int64_t b = (t / s.I) * k * s.I + t % s.I;
                   for (int64_t j = 0; j < k; ++j) {
                     vo[b + j * s.I] = kernels::Convert<T>(q[j].first);
                     io[b + j * s.I] = q[j].second;
                   }
                 });
}

// ---- kthvalue, median -------------------------------------------------------------------------

// torch's quick_select_template: puts the k-th element (0-based) in order of gt_or_nan's
// reverse in place, median-of-three pivots.
template <typename P, typename Gt>
void QuickSelect(std::vector<P>& a, int64_t k, Gt gt) {
  int64_t lo = 0, hi = static_cast<int64_t>(a.size()) - 1;
  while (true) {
    if (hi <= lo) return;
    if (hi == lo + 1) {
      if (gt(a[lo], a[hi])) std::swap(a[lo], a[hi]);
      return;
    }
    const int64_t mid = lo + (hi - lo) / 2;
    std::swap(a[mid], a[lo + 1]);
    if (gt(a[lo + 1], a[hi])) std::swap(a[lo + 1], a[hi]);
    if (gt(a[lo], a[hi])) std::swap(a[lo], a[hi]);
    if (gt(a[lo + 1], a[lo])) std::swap(a[lo + 1], a[lo]);
    int64_t i = lo + 1, j = hi;
    const P piv = a[lo];
    while (true) {
      do {
        ++i;
      } while (gt(piv, a[i]));
      do {
        --j;
      } while (gt(a[j], piv));
      if (j < i) break;
      std::swap(a[i], a[j]);
    }
    std::swap(a[lo], a[j]);
    if (j <= k) lo = i;
    if (j >= k) hi = j - 1;
  }
}

// Which order statistic a line reduction takes, and how.
enum class Select { kKth, kMedian, kNanMedian };

std::tuple<Tensor, Tensor> SelectDim(const char* op, const char* name, Select how,
                                     const Tensor& self, int64_t k, int64_t dim, bool keepdim) {
  TB_CHECK(self.dtype() != DType::kBool, RuntimeError) << name << ": not implemented for bool";
  dim = WrapDim(dim, self.ndim(), op);
  const int64_t n = self.ndim() == 0 ? 1 : self.shape()[dim];
  if (how == Select::kKth) {
    TB_CHECK(k >= 1 && k <= n, RuntimeError)
        << "kthvalue(): selected number k out of range for dimension " << dim;
  } else {
    TB_CHECK(n > 0, IndexError) << name << "(): Expected reduction dim " << dim
                                << " to have non-zero size.";
  }
  return PerLine(
      op, self, dim, ReducedShape(self, dim, keepdim),
      [&](auto& q, int64_t t, auto* vo, int64_t* io, const Lines& s) {
        using T = std::remove_pointer_t<decltype(vo)>;
        using P = typename std::decay_t<decltype(q)>::value_type;
        P r;
        if (how == Select::kKth) {
          QuickSelect(q, k - 1,
                      [](const P& a, const P& b) { return GreaterNanFirst(a.first, b.first); });
          r = q[k - 1];
        } else if (how == Select::kMedian) {
          auto nan = std::find_if(q.begin(), q.end(), [](const P& p) { return IsNan(p.first); });
          if (nan != q.end()) {
            r = *nan;
          } else {
            // A total order on (value, index): ties resolve the same way whatever the algorithm.
            std::nth_element(q.begin(), q.begin() + (s.L - 1) / 2, q.end());
            r = q[(s.L - 1) / 2];
          }
        } else {
          const int64_t nans =
              std::count_if(q.begin(), q.end(), [](const P& p) { return IsNan(p.first); });
          const int64_t m = (s.L - nans - 1) / 2;
          std::nth_element(q.begin(), q.begin() + m, q.end(), [](const P& a, const P& b) {
            return a.first < b.first || (a.first == b.first && a.second < b.second) ||
                   (IsNan(b.first) && !IsNan(a.first));
          });
          r = q[m];
        }
        vo[t] = kernels::Convert<T>(r.first);
        io[t] = r.second;
      });
}

std::tuple<Tensor, Tensor> KthValue(const Tensor& self, int64_t k, int64_t dim, bool keepdim) {
  return SelectDim("aten::kthvalue", "kthvalue", Select::kKth, self, k, dim, keepdim);
}

std::tuple<Tensor, Tensor> MedianDim(const Tensor& self, int64_t dim, bool keepdim) {
  return SelectDim("aten::median.dim", "median", Select::kMedian, self, 0, dim, keepdim);
}

std::tuple<Tensor, Tensor> NanMedianDim(const Tensor& self, int64_t dim, bool keepdim) {
  return SelectDim("aten::nanmedian.dim", "nanmedian", Select::kNanMedian, self, 0, dim, keepdim);
}

// The lower median of the whole tensor (NaN when it holds a NaN, unless `ignore_nan`).
Tensor MedianAll(const char* op, const Tensor& self, bool ignore_nan) {
  TB_CHECK(self.dtype() != DType::kBool, RuntimeError) << op << ": not implemented for bool";
  Tensor out = Tensor::Empty({}, self.dtype());
  Tensor x = self.contiguous();
  TB_DISPATCH(self.dtype(), op, TB_TYPES_ALL, [&] {
    using T = scalar_t;
    using V = kernels::opmath_t<T>;
    const T* in = x.data_as<const T>();
    std::vector<V> q(static_cast<size_t>(x.numel()));
    for (int64_t j = 0; j < x.numel(); ++j) q[j] = static_cast<V>(in[j]);
    const int64_t nans = std::count_if(q.begin(), q.end(), [](V v) { return IsNan(v); });
    V r;
    if (q.empty() || (nans > 0 && !ignore_nan)) {
      r = std::numeric_limits<V>::quiet_NaN();
    } else {
      const int64_t m = (x.numel() - (ignore_nan ? nans : 0) - 1) / 2;
      std::nth_element(q.begin(), q.begin() + m, q.end(), LessNanLast<V>);
      r = q[m];
    }
    *out.data_as<T>() = kernels::Convert<T>(r);
  });
  return out;
}

Tensor Median(const Tensor& self) { return MedianAll("aten::median", self, false); }
Tensor NanMedian(const Tensor& self) { return MedianAll("aten::nanmedian", self, true); }

// ---- mode -------------------------------------------------------------------------------------

// The most frequent value of each line and an index where it occurs, as torch's CPU kernel
// finds them: std::sort of the (value, index) pairs by value alone, then the longest run of
// equal values (the first such run, so the smallest value, on ties) and the index its last pair
// holds. std::sort is unstable: the same algorithm on the same initial order and comparator
// gives torch's index among equal values.
std::tuple<Tensor, Tensor> Mode(const Tensor& self, int64_t dim, bool keepdim) {
  constexpr const char* kOp = "aten::mode";
  dim = WrapDim(dim, self.ndim(), kOp);
  const int64_t n = self.ndim() == 0 ? 1 : self.shape()[dim];
  TB_CHECK(n > 0, IndexError) << "mode(): Expected reduction dim " << dim
                              << " to have non-zero size.";
  Dims shape = ReducedShape(self, dim, keepdim);
  Tensor values = Tensor::Empty(shape, self.dtype());
  Tensor indices = Tensor::Empty(shape, DType::kInt64);
  if (values.numel() == 0) return {values, indices};
  Tensor x = self.contiguous();
  Lines s = LinesOf(x, dim);
  TB_DISPATCH(self.dtype(), kOp, TB_TYPES_ALL, [&] {
    using T = scalar_t;
    using P = std::pair<kernels::opmath_t<T>, int64_t>;
    T* vo = values.data_as<T>();
    int64_t* io = indices.data_as<int64_t>();
    ForEachLine<T>(x, s, [&](std::vector<P>& q, int64_t t) {
      std::sort(q.begin(), q.end(), [](const P& a, const P& b) { return a.first < b.first; });
      P best = q[0];
      int64_t run = 0, most = 0;
      for (int64_t j = 0; j < s.L; ++j) {
        ++run;
        if (j == s.L - 1 || q[j].first != q[j + 1].first) {
          if (run > most) {
            best = q[j];
            most = run;
          }
          run = 0;
        }
      }
      vo[t] = kernels::Convert<T>(best.first);
      io[t] = best.second;
    });
  });
  return {values, indices};
}

}  // namespace

TB_REGISTER_KERNELS(sort) {
  table.RegisterKernel("aten::sort", DeviceType::kCPU, Boxed<&Sort>(), TB_HERE);
  table.RegisterKernel("aten::mode", DeviceType::kCPU, Boxed<&Mode>(), TB_HERE);
  table.RegisterKernel("aten::sort.stable", DeviceType::kCPU, Boxed<&SortStable>(), TB_HERE);
  table.RegisterKernel("aten::topk", DeviceType::kCPU, Boxed<&TopK>(), TB_HERE);
  table.RegisterKernel("aten::kthvalue", DeviceType::kCPU, Boxed<&KthValue>(), TB_HERE);
  table.RegisterKernel("aten::median", DeviceType::kCPU, Boxed<&Median>(), TB_HERE);
  table.RegisterKernel("aten::median.dim", DeviceType::kCPU, Boxed<&MedianDim>(), TB_HERE);
  table.RegisterKernel("aten::nanmedian", DeviceType::kCPU, Boxed<&NanMedian>(), TB_HERE);
  table.RegisterKernel("aten::nanmedian.dim", DeviceType::kCPU, Boxed<&NanMedianDim>(), TB_HERE);
}

}  // namespace tb
