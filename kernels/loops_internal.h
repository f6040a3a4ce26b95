// Private to kernels/: the strided N-d loop every element-wise kernel runs on.
//
// ForEachRow walks a shape over N operands given by data pointer and byte strides. It first
// orders the dimensions by the first operand's strides (the output is written in memory
// order, whatever its layout) and merges dimensions that are contiguous for every operand (so
// a dense tensor is one long row), then calls `row(ptrs, inner_strides, n)` per row, splitting
// rows across threads when the work is large. Map<Out, In...> builds the usual out[i] = f(in[i]...)
// on it, with a unit-stride inner loop the compiler vectorises.
#pragma once

#include <array>
#include <cstdint>
#include <tuple>
#include <utility>

#include "bridge/tensor.h"
#include "kernels/common_internal.h"

namespace tb::kernels {

inline constexpr int64_t kGrain = 32768;  // elements below which a loop stays on one thread

template <size_t N>
struct LoopShape {
  Dims shape;                   // merged dims, innermost last
  std::array<Dims, N> strides;  // byte strides per operand, same dims
};

template <size_t N>
LoopShape<N> Coalesce(IntArrayRef shape, const std::array<Dims, N>& byte_strides) {
  LoopShape<N> out;
  const int64_t nd = static_cast<int64_t>(shape.size());
  for (int64_t d = 0; d < nd; ++d) {
    if (shape[d] == 1) continue;  // size-1 dims never move a pointer
    bool merge = !out.shape.empty();
    if (merge) {
      for (size_t k = 0; k < N; ++k) {
        // The previous (outer) dim steps exactly over this one.
        if (out.strides[k][out.shape.size() - 1] != byte_strides[k][d] * shape[d]) merge = false;
      }
    }
    if (merge) {
      out.shape[out.shape.size() - 1] *= shape[d];
      for (size_t k = 0; k < N; ++k) out.strides[k][out.shape.size() - 1] = byte_strides[k][d];
    } else {
      out.shape.push_back(shape[d]);
      for (size_t k = 0; k < N; ++k) out.strides[k].push_back(byte_strides[k][d]);
    }
  }
  if (out.shape.empty()) {  // 0-d or all ones: one element
    out.shape.push_back(1);
    for (size_t k = 0; k < N; ++k) out.strides[k].push_back(0);
  }
  return out;
}

// The dimensions in walking order, outermost first: by decreasing stride magnitude of the
// first operand (the output), later operands deciding where it has equal or zero strides;
// dimensions no operand orders keep their places. Identity when the first operand's strides
// already decrease.
template <size_t N>
Dims WalkOrder(IntArrayRef shape, const std::array<Dims, N>& byte_strides) {
  const size_t nd = shape.size();
  Dims order(nd);
  for (size_t d = 0; d < nd; ++d) order[d] = static_cast<int64_t>(d);
  int64_t prev = -1;
  bool sorted = true;
  for (size_t d = 0; d < nd && sorted; ++d) {
    if (shape[d] == 1) continue;
    const int64_t s = byte_strides[0][d] < 0 ? -byte_strides[0][d] : byte_strides[0][d];
    if (prev >= 0 && s > prev) sorted = false;
    prev = s;
  }
  if (sorted) return order;
  // a goes outside b when the first operand with two nonzero, unequal strides says so.
  auto outside = [&](int64_t a, int64_t b) {
    for (size_t k = 0; k < N; ++k) {
      int64_t sa = byte_strides[k][a], sb = byte_strides[k][b];
      sa = sa < 0 ? -sa : sa;
      sb = sb < 0 ? -sb : sb;
      if (sa == 0 || sb == 0 || sa == sb) continue;
      return sa > sb;
    }
    return false;
  };
  for (size_t i = 1; i < nd; ++i) {
    for (size_t j = i; j > 0 && outside(order[j], order[j - 1]); --j) {
      std::swap(order[j], order[j - 1]);
    }
  }
  return order;
}

// row(std::array<char*, N>& ptrs, const std::array<int64_t, N>& inner_strides, int64_t n):
// called over rows that cover the shape once each, in no particular order (across threads for
// large work); the dimensions are walked in WalkOrder, so that the output is written in the
// order of its memory.
template <size_t N, typename Row>
void ForEachRow(IntArrayRef shape, const std::array<char*, N>& data,
                const std::array<Dims, N>& byte_strides, Row&& row) {
  int64_t numel = 1;
  for (int64_t s : shape) numel *= s;
  if (numel == 0) return;
  const Dims order = WalkOrder<N>(shape, byte_strides);
  bool identity = true;
  for (size_t i = 0; i < order.size(); ++i) identity &= order[i] == static_cast<int64_t>(i);
  LoopShape<N> ls;
  if (identity) {
    ls = Coalesce<N>(shape, byte_strides);
  } else {
    Dims walk_shape(order.size());
    std::array<Dims, N> walk_strides;
    for (size_t k = 0; k < N; ++k) walk_strides[k] = Dims(order.size());
    for (size_t i = 0; i < order.size(); ++i) {
      walk_shape[i] = shape[order[i]];
      for (size_t k = 0; k < N; ++k) walk_strides[k][i] = byte_strides[k][order[i]];
    }
    ls = Coalesce<N>(walk_shape, walk_strides);
  }
  const int64_t nd = static_cast<int64_t>(ls.shape.size());
  const int64_t inner = ls.shape[nd - 1];
  const int64_t rows = numel / inner;
  std::array<int64_t, N> inner_strides;
  for (size_t k = 0; k < N; ++k) inner_strides[k] = ls.strides[k][nd - 1];
  auto run = [&](int64_t r0, int64_t r1, int64_t e0, int64_t e1) {
    // Rows [r0, r1); within the first and last row only elements [e0, ...) and [..., e1).
    // The first row's index over the outer dims is found once, then counted up row by row.
    Dims idx(static_cast<size_t>(nd - 1));
    std::array<char*, N> base = data;
    for (int64_t d = nd - 2, rem = r0; d >= 0; --d) {
      idx[d] = rem % ls.shape[d];
      rem /= ls.shape[d];
      for (size_t k = 0; k < N; ++k) base[k] += idx[d] * ls.strides[k][d];
    }
    for (int64_t r = r0; r < r1; ++r) {
      std::array<char*, N> p = base;
      int64_t b = r == r0 ? e0 : 0, e = r == r1 - 1 ? e1 : inner;
      for (size_t k = 0; k < N; ++k) p[k] += b * inner_strides[k];
      row(p, inner_strides, e - b);
      if (r + 1 == r1) break;
      for (int64_t d = nd - 2; d >= 0; --d) {
        for (size_t k = 0; k < N; ++k) base[k] += ls.strides[k][d];
        if (++idx[d] < ls.shape[d]) break;
        for (size_t k = 0; k < N; ++k) base[k] -= ls.shape[d] * ls.strides[k][d];
        idx[d] = 0;
      }
    }
  };
  if (numel < 2 * kGrain) {
    run(0, rows, 0, inner);
    return;
  }
  // Split the flat element range evenly; a chunk may start and end inside a row.
  ForEachThreadShare(numel, [&](int64_t begin, int64_t end) {
    if (begin < end) {
      int64_t r0 = begin / inner, r1 = (end - 1) / inner + 1;
      run(r0, r1, begin - r0 * inner, end - (r1 - 1) * inner);
    }
  });
}

template <size_t N>
std::array<Dims, N> ByteStrides(const std::array<const Tensor*, N>& ts) {
  std::array<Dims, N> out;
  for (size_t k = 0; k < N; ++k) {
    out[k] = Dims(ts[k]->strides());
    for (auto& s : out[k]) s *= ts[k]->element_size();
  }
  return out;
}

namespace detail {
template <typename Out, typename... In, typename F, size_t... I>
void MapRow(F& f, std::array<char*, 1 + sizeof...(In)>& p,
            const std::array<int64_t, 1 + sizeof...(In)>& s, int64_t n, std::index_sequence<I...>) {
  Out* o = reinterpret_cast<Out*>(p[0]);
  const bool unit = s[0] == sizeof(Out) && ((s[I + 1] == sizeof(In)) && ...);
  if (unit) {
    [[maybe_unused]] auto in = std::make_tuple(reinterpret_cast<const In*>(p[I + 1])...);
    for (int64_t i = 0; i < n; ++i) o[i] = f(std::get<I>(in)[i]...);
    return;
  }
  if constexpr (sizeof...(In) == 1) {
    if (s[0] == sizeof(Out) && s[1] == 0) {  // one input, broadcast along the row: held
      using In0 = std::tuple_element_t<0, std::tuple<In...>>;
      const In0 v = *reinterpret_cast<const In0*>(p[1]);
      for (int64_t i = 0; i < n; ++i) o[i] = f(v);
      return;
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    *reinterpret_cast<Out*>(p[0] + i * s[0]) =
        f(*reinterpret_cast<const In*>(p[I + 1] + i * s[I + 1])...);
  }
}
}  // namespace detail

// out[i] = f(in[i]...) over out's shape. Inputs must already have out's shape (expand them)
// and hold the C++ types In...; out holds Out.
template <typename Out, typename... In, typename F>
void Map(const Tensor& out, F f, const std::conditional_t<true, Tensor, In>&... in) {
  constexpr size_t N = 1 + sizeof...(In);
  std::array<const Tensor*, N> ts = {&out, &in...};
  std::array<char*, N> data = {static_cast<char*>(out.mutable_data()),
                               static_cast<char*>(in.data())...};
  ForEachRow<N>(out.shape(), data, ByteStrides<N>(ts),
                [&](std::array<char*, N>& p, const std::array<int64_t, N>& s, int64_t n) {
                  detail::MapRow<Out, In...>(f, p, s, n, std::index_sequence_for<In...>{});
                });
}

}  // namespace tb::kernels
