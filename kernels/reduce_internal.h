// Private to kernels/: the reduction driver shared by reduce.cc, reduce_minmax.cc and
// reduce_stats.cc.
//
// A reduction is planned as a strided 3-d view [O, R, I] of its input: R elements reduce into
// each of the O * I outputs (output o * I + i, C order over the kept dims). Two layouts run
// without a copy:
//  - rows (I == 1, R at unit stride): each output reduces one contiguous row with kLanes
//    independent accumulators, which the compiler vectorises;
//  - columns (I at unit stride): blocks of kColBlock outputs are reduced side by side, one
//    input row at a time, a vectorisable loop over the block.
// Any other layout is copied to contiguous first. Sums split long ranges in halves (pairwise
// summation), which keeps float accumulation within a few ulps on long rows. Work is
// parallelised over outputs, or over chunks of R when there are few outputs.
//
// A reducer tells the driver what to do:
//   struct Reducer {
//     using In = ...;                          // element type read
//     using Acc = ...;                         // accumulator
//     static constexpr bool kPairwise = ...;   // split long ranges in halves
//     Acc Init(int64_t out) const;
//     Acc Step(Acc a, In x, int64_t r) const;  // r: position along the reduction
//     Acc Merge(Acc a, Acc b) const;           // any grouping and order
//     void Write(int64_t out, Acc a) const;
//   };
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "bridge/tensor.h"
#include "kernels/dtype_internal.h"
#include "kernels/promote_broadcast.h"

namespace tb::kernels {

inline constexpr int kLanes = 16;               // accumulators per row
inline constexpr int64_t kRowLeaf = 1024;       // row length summed without splitting
inline constexpr int64_t kColLeaf = 32;         // rows summed without splitting (columns)
inline constexpr int64_t kColBlock = 64;        // outputs reduced side by side (columns)
inline constexpr int64_t kReduceGrain = 32768;  // elements below which one thread works

inline int MaxThreads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

// x converted to the accumulator type A; bfloat16 widens by a shift the compiler vectorises
// (Eigen's conversion does not).
template <typename A, typename T>
inline A Widen(T x) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    const uint32_t bits = static_cast<uint32_t>(x.value) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    return static_cast<A>(f);
  } else {
    return static_cast<A>(x);
  }
}

// x != 0 (NaN counts as nonzero, as in torch).
template <typename T>
inline bool NonZero(T x) {
  if constexpr (kIsReducedFloat<T>) {
    return Widen<float>(x) != 0.0f;
  } else {
    return x != T(0);
  }
}

// a + b and a * b on accumulators; integers wrap around on overflow as in torch (computed
// unsigned, where wrapping is defined behaviour).
template <typename A>
inline A AddWrap(A a, A b) {
  if constexpr (std::is_integral_v<A> && !std::is_same_v<A, bool>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}
template <typename A>
inline A MulWrap(A a, A b) {
  if constexpr (std::is_integral_v<A> && !std::is_same_v<A, bool>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

// The accumulator of a sum or product: int64 for integers and bool, float for the 16-bit
// floating types, the type itself for float and double.
template <typename T>
using sum_acc_t = std::conditional_t<kIsFloating<T>, opmath_t<T>, int64_t>;

// The dims of a reduction, parsed.
struct ReduceDims {
  std::vector<bool> reduced;  // per input dim
  Dims out_shape;             // keepdim applied
  int64_t count = 1;          // elements reduced into each output
};

// `dims` empty means every dim. Negative dims wrap; a repeated dim raises RuntimeError.
inline ReduceDims ParseReduceDims(const char* op, const Tensor& self, IntArrayRef dims,
                                  bool keepdim) {
  const int64_t nd = self.ndim();
  ReduceDims r;
  r.reduced.assign(static_cast<size_t>(nd), dims.empty());
  for (int64_t d : dims) {
    int64_t w = WrapDim(d, nd, op);
    if (nd == 0) continue;
    TB_CHECK(!r.reduced[w], RuntimeError)
        << op << ": dim " << w << " appears multiple times in the list of dims";
    r.reduced[w] = true;
  }
  for (int64_t d = 0; d < nd; ++d) {
    if (r.reduced[d]) {
      r.count *= self.shape()[d];
      if (keepdim) r.out_shape.push_back(1);
    } else {
      r.out_shape.push_back(self.shape()[d]);
    }
  }
  return r;
}

inline ReduceDims ParseReduceDims(const char* op, const Tensor& self,
                                  const std::optional<std::vector<int64_t>>& dims, bool keepdim) {
  return ParseReduceDims(op, self, dims ? IntArrayRef(*dims) : IntArrayRef(), keepdim);
}

// The 3-d plan of a reduction (see the file comment).
struct Geometry {
  Tensor x;  // what is read: a view of the input or a contiguous copy
  int64_t O = 1, R = 1, I = 1;
  int64_t so = 0, sr = 0, si = 0;  // element strides
  bool column = false;
};

inline Geometry PlanReduce(const Tensor& self, const std::vector<bool>& reduced) {
  Geometry g;
  const int64_t nd = self.ndim();
  std::vector<int64_t> red, kept;
  for (int64_t d = 0; d < nd; ++d) (reduced[d] ? red : kept).push_back(d);
  const bool range =
      red.empty() || red.back() - red.front() + 1 == static_cast<int64_t>(red.size());
  Tensor t = self;
  if (range) {
    const int64_t a = red.empty() ? nd : red.front(), b = red.empty() ? nd - 1 : red.back();
    for (int64_t d = 0; d < nd; ++d) {
      (d < a ? g.O : d <= b ? g.R : g.I) *= self.shape()[d];
    }
  } else {
    // Kept dims first, then the reduced ones: R in logical order, one output per row.
    std::vector<int64_t> perm = kept;
    perm.insert(perm.end(), red.begin(), red.end());
    t = self.permute(perm);
    for (int64_t d : kept) g.O *= self.shape()[d];
    for (int64_t d : red) g.R *= self.shape()[d];
  }
  if (g.O * g.R * g.I == 0) {
    g.x = self;
    return g;
  }
  g.x = t.reshape({g.O, g.R, g.I});
  for (int attempt = 0; attempt < 2; ++attempt) {
    g.so = g.x.stride(0), g.sr = g.x.stride(1), g.si = g.x.stride(2);
    if (g.I == 1 && (g.sr == 1 || g.R == 1)) {
      g.column = false;
      return g;
    }
    if (g.I == 1 && g.so == 1) {  // outputs adjacent in memory: reduce them side by side
      g.I = g.O, g.si = 1, g.O = 1, g.so = 0;
      g.column = true;
      return g;
    }
    if (g.si == 1 || (g.I == 1 && g.O == 1)) {
      g.column = true;
      return g;
    }
    g.x = g.x.contiguous();
  }
  TB_ICHECK(false) << "reduction plan";
  return g;
}

// ---- the driver -------------------------------------------------------------------------------

// A reducer may bring its own kernel for a contiguous row: `static constexpr bool kRowKernel
// = true;` and `Acc Row(const In* x, int64_t n, int64_t out) const`, called on whole rows
// (or the chunks of a row split across threads).
template <typename Red, typename = void>
struct HasRowKernel : std::false_type {};
template <typename Red>
struct HasRowKernel<Red, std::enable_if_t<Red::kRowKernel>> : std::true_type {};

template <typename Red>
typename Red::Acc RowLeaf(const Red& red, const typename Red::In* x, int64_t r0, int64_t r1,
                          int64_t out) {
  using Acc = typename Red::Acc;
  if (r1 - r0 < kLanes) {
    // A short row adds in the order of PyTorch's scalar row_sum: four chains over the
    // elements (x[4i + k] into chain k), the tail into chain 0, then the chains left to right.
    // Floating sums then round alike (one ulp shows where a result cancels, e.g. cov).
    Acc c[4] = {red.Init(out), red.Init(out), red.Init(out), red.Init(out)};
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4) {
      for (int k = 0; k < 4; ++k) c[k] = red.Step(c[k], x[r + k], r + k);
    }
    for (; r < r1; ++r) c[0] = red.Step(c[0], x[r], r);
    return red.Merge(red.Merge(red.Merge(c[0], c[1]), c[2]), c[3]);
  }
  if constexpr (HasRowKernel<Red>::value) return red.Row(x + r0, r1 - r0, out);
  Acc l[kLanes];
  for (int k = 0; k < kLanes; ++k) l[k] = red.Init(out);
  int64_t r = r0;
  for (; r + kLanes <= r1; r += kLanes) {
    for (int k = 0; k < kLanes; ++k) l[k] = red.Step(l[k], x[r + k], r + k);
  }
  for (int k = 0; r < r1; ++r, ++k) l[k] = red.Step(l[k], x[r], r);
  for (int w = kLanes / 2; w > 0; w /= 2) {
    for (int k = 0; k < w; ++k) l[k] = red.Merge(l[k], l[k + w]);
  }
  return l[0];
}

// Reduces x[r0, r1) (unit stride).
template <typename Red>
typename Red::Acc RowReduce(const Red& red, const typename Red::In* x, int64_t r0, int64_t r1,
                            int64_t out) {
  // A reducer's own row kernel takes the whole range (and does its own pairing); rows shorter
  // than kLanes keep PyTorch's order (RowLeaf).
  if constexpr (HasRowKernel<Red>::value) {
    if (r1 - r0 < kLanes) return RowLeaf(red, x, r0, r1, out);
    return red.Row(x + r0, r1 - r0, out);
  }
  if (!Red::kPairwise || r1 - r0 <= kRowLeaf) return RowLeaf(red, x, r0, r1, out);
  const int64_t mid = r0 + ((r1 - r0) / 2 + kLanes - 1) / kLanes * kLanes;
  return red.Merge(RowReduce(red, x, r0, mid, out), RowReduce(red, x, mid, r1, out));
}

// Reduces rows [r0, r1) of w side-by-side outputs (x: column 0 of row 0; rows sr apart) into
// acc[0, w); out0: the output index of column 0.
template <typename Red>
void ColReduce(const Red& red, const typename Red::In* x, int64_t sr, int64_t r0, int64_t r1,
               int64_t w, typename Red::Acc* acc, int64_t out0) {
  using Acc = typename Red::Acc;
  if (Red::kPairwise && r1 - r0 > kColLeaf) {
    const int64_t mid = r0 + (r1 - r0) / 2;
    ColReduce(red, x, sr, r0, mid, w, acc, out0);
    Acc tmp[kColBlock];
    for (int64_t j = 0; j < w; ++j) tmp[j] = red.Init(out0 + j);
    ColReduce(red, x, sr, mid, r1, w, tmp, out0);
    for (int64_t j = 0; j < w; ++j) acc[j] = red.Merge(acc[j], tmp[j]);
    return;
  }
  for (int64_t r = r0; r < r1; ++r) {
    const typename Red::In* p = x + r * sr;
    for (int64_t j = 0; j < w; ++j) acc[j] = red.Step(acc[j], p[j], r);
  }
}

template <typename Red>
void RunReduce(const Geometry& g, const Red& red) {
  using In = typename Red::In;
  using Acc = typename Red::Acc;
  const int64_t outputs = g.O * g.I;
  if (outputs == 0) return;
  if (g.R == 0) {
    for (int64_t o = 0; o < outputs; ++o) red.Write(o, red.Init(o));
    return;
  }
  const In* x = g.x.data_as<const In>();
  const int nt = MaxThreads();
  const bool par = outputs * g.R >= 2 * kReduceGrain && nt > 1;
  // Splits of R when there are too few outputs to keep the threads busy.
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(nt, g.R / 1024));
  if (!g.column) {
    if (!par || g.O >= nt || chunks == 1) {
#pragma omp parallel for if (par) schedule(static)
      for (int64_t o = 0; o < g.O; ++o) red.Write(o, RowReduce(red, x + o * g.so, 0, g.R, o));
      return;
    }
    for (int64_t o = 0; o < g.O; ++o) {
      std::unique_ptr<Acc[]> part(new Acc[chunks]);  // not vector: Acc may be bool
#pragma omp parallel for schedule(static)
      for (int64_t c = 0; c < chunks; ++c) {
        part[c] = RowReduce(red, x + o * g.so, g.R * c / chunks, g.R * (c + 1) / chunks, o);
      }
      Acc a = part[0];
      for (int64_t c = 1; c < chunks; ++c) a = red.Merge(a, part[c]);
      red.Write(o, a);
    }
    return;
  }
  const int64_t blocks = (g.I + kColBlock - 1) / kColBlock, tasks = g.O * blocks;
  auto run_task = [&](int64_t t, int64_t r0, int64_t r1, Acc* acc) {
    const int64_t o = t / blocks, i0 = (t % blocks) * kColBlock;
    const int64_t w = std::min(kColBlock, g.I - i0), out0 = o * g.I + i0;
    for (int64_t j = 0; j < w; ++j) acc[j] = red.Init(out0 + j);
    ColReduce(red, x + o * g.so + i0 * g.si, g.sr, r0, r1, w, acc, out0);
    return w;
  };
  if (!par || tasks >= nt || chunks == 1) {
#pragma omp parallel for if (par) schedule(static)
    for (int64_t t = 0; t < tasks; ++t) {
      Acc acc[kColBlock];
      const int64_t w = run_task(t, 0, g.R, acc);
      const int64_t out0 = (t / blocks) * g.I + (t % blocks) * kColBlock;
      for (int64_t j = 0; j < w; ++j) red.Write(out0 + j, acc[j]);
    }
    return;
  }
  // Few output blocks over many rows: each chunk of rows reduces into its own partials.
  std::unique_ptr<Acc[]> part(new Acc[chunks * tasks * kColBlock]);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    for (int64_t t = 0; t < tasks; ++t) {
      run_task(t, g.R * c / chunks, g.R * (c + 1) / chunks, &part[(c * tasks + t) * kColBlock]);
    }
  }
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t w = std::min(kColBlock, g.I - (t % blocks) * kColBlock);
    const int64_t out0 = (t / blocks) * g.I + (t % blocks) * kColBlock;
    for (int64_t j = 0; j < w; ++j) {
      Acc a = part[t * kColBlock + j];
      for (int64_t c = 1; c < chunks; ++c) {
        a = red.Merge(a, part[(c * tasks + t) * kColBlock + j]);
      }
      red.Write(out0 + j, a);
    }
  }
}

// Plans and runs a reduction of `self` over `dims`.
template <typename Red>
void Reduce(const Tensor& self, const ReduceDims& dims, const Red& red) {
  RunReduce(PlanReduce(self, dims.reduced), red);
}

// The dtype a sum or product of `t` gives: `dtype` when given, int64 for integers and bool.
inline DType SumDType(const Tensor& t, const std::optional<DType>& dtype) {
  if (dtype) return *dtype;
  return IsIntegral(t.dtype(), /*include_bool=*/true) ? DType::kInt64 : t.dtype();
}

}  // namespace tb::kernels
