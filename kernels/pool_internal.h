// Private to kernels/: the geometry of a pooling call (kernels/pool.cc, kernels/pool_max.cc).
//
// One description for 2-d and 3-d pooling: a 2-d input is a 3-d one of depth 1, over
// (batch * channel) planes. The checks and output sizes follow torch's pooling_shape_check /
// pooling_output_shape.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "bridge/tensor.h"
#include "kernels/common_internal.h"

namespace tb::kernels::pool {

using kernels::ParallelFor;

using Arr3 = std::array<int64_t, 3>;

// A pooling call in 3-d terms.
struct PoolGeom {
  int64_t planes = 0;  // batch * channels
  Arr3 in{1, 1, 1}, out{1, 1, 1}, k{1, 1, 1}, s{1, 1, 1}, p{0, 0, 0}, d{1, 1, 1};
  Dims out_shape;  // the call's output shape
  int64_t isz() const { return in[0] * in[1] * in[2]; }
  int64_t osz() const { return out[0] * out[1] * out[2]; }
};

// A list argument of a pooling op: one value for every spatial dim, or one per dim.
inline Arr3 Param(const char* op, const char* name, const std::vector<int64_t>& v, int64_t nsp,
                  int64_t fill, std::optional<Arr3> if_empty = std::nullopt) {
  Arr3 r{fill, fill, fill};
  if (v.empty() && if_empty) return *if_empty;
  TB_CHECK(v.size() == 1 || static_cast<int64_t>(v.size()) == nsp, ValueError)
      << op << ": " << name << " must be a single int or a tuple of " << nsp << " ints";
  for (int64_t i = 0; i < nsp; ++i) r[3 - nsp + i] = v.size() == 1 ? v[0] : v[i];
  return r;
}

// torch's pooling_output_shape.
inline int64_t PooledSize(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil,
                          bool ceil) {
  const int64_t num = in + 2 * pad - dil * (k - 1) - 1 + (ceil ? stride - 1 : 0);
  // floor division (num may be negative)
  int64_t out = (num >= 0 ? num / stride : -((-num + stride - 1) / stride)) + 1;
  if (ceil && (out - 1) * stride >= in + pad) --out;
  return out;
}

// Checks the input of a pooling op with `nsp` spatial dims and fills the sizes in `g`.
inline void InputGeom(const char* op, const Tensor& self, int64_t nsp, PoolGeom* g) {
  const int64_t nd = self.ndim();
  TB_CHECK(nd == nsp + 1 || nd == nsp + 2, ValueError)
      << op << ": expected a " << nsp + 1 << "-D or " << nsp + 2 << "-D (batched) input, got shape "
      << ShapeString(self.shape());
  for (int64_t i = 1; i < nd; ++i) {
    TB_CHECK(self.size(i) > 0, ValueError)
        << op << ": expected input with non-zero sizes except the batch dim, got "
        << ShapeString(self.shape());
  }
  g->planes = 1;
  for (int64_t i = 0; i < nd - nsp; ++i) g->planes *= self.size(i);
  for (int64_t i = 0; i < nsp; ++i) g->in[3 - nsp + i] = self.size(nd - nsp + i);
  g->out_shape = Dims(self.shape());
}

inline PoolGeom WindowGeom(const char* op, const Tensor& self, int64_t nsp,
                           const std::vector<int64_t>& kernel_size,
                           const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                           const std::vector<int64_t>& dilation, bool ceil_mode) {
  PoolGeom g;
  InputGeom(op, self, nsp, &g);
  TB_CHECK(!kernel_size.empty(), ValueError) << op << ": kernel_size must not be empty";
  g.k = Param(op, "kernel_size", kernel_size, nsp, 1);
  g.s = Param(op, "stride", stride, nsp, 1, g.k);
  g.p = Param(op, "padding", padding, nsp, 0);
  g.d = Param(op, "dilation", dilation, nsp, 1);
  const int64_t nd = self.ndim();
  for (int i = 3 - nsp; i < 3; ++i) {
    TB_CHECK(g.k[i] > 0, ValueError) << op << ": kernel_size must be greater than zero";
    TB_CHECK(g.s[i] > 0, ValueError) << op << ": stride must be greater than zero";
    TB_CHECK(g.d[i] > 0, ValueError) << op << ": dilation must be greater than zero";
    TB_CHECK(g.p[i] >= 0 && g.p[i] <= g.k[i] / 2, ValueError)
        << op << ": pad should be at most half of kernel size, got padding " << g.p[i]
        << " for kernel size " << g.k[i];
    g.out[i] = PooledSize(g.in[i], g.k[i], g.p[i], g.s[i], g.d[i], ceil_mode);
    TB_CHECK(g.out[i] > 0, ValueError)
        << op << ": output size is too small for input of shape " << ShapeString(self.shape());
    g.out_shape[nd - 3 + i] = g.out[i];
  }
  return g;
}

// ---- vector loops of 2-d max pooling (kernels/cpu/pool_max_vec.cc), float32 / float64 --------
// Their results are the scalar loop's: per lane, a value replaces the maximum when greater or
// NaN. Positions are flat within a plane, which must have fewer than 2^31 elements.

// Interior output columns [ow, ow_end) of one output row of a row-major W-wide plane `in`:
// window rows h0, h0 + dh, ... < h1 (h0 < h1), columns ow * sw - pw + [0, kw), all in the
// plane. Writes out[ow...] and idx[ow...] for the columns it does and returns the first
// column left undone (the caller finishes the row).
template <typename T>
struct RowArgs {
  const T* in;
  int64_t W, h0, h1, dh, kw, sw, pw, ow, ow_end;
  T* out;
  int64_t* idx;
};
int64_t MaxPoolRowVec(const RowArgs<float>& a);
int64_t MaxPoolRowVec(const RowArgs<double>& a);

// One output pixel of a channels-last image `x` (H x W x C): the window's taps are rows
// h0, h0 + dh, ... < h1 and columns w0, w0 + dw, ... < w1 (a non-empty window). Writes the
// channels [0, c) of out and idx and returns c (the caller finishes the channels).
template <typename T>
struct PixelArgs {
  const T* x;
  int64_t W, C, h0, h1, dh, w0, w1, dw;
  T* out;
  int64_t* idx;
};
int64_t MaxPoolPixelVec(const PixelArgs<float>& a);
int64_t MaxPoolPixelVec(const PixelArgs<double>& a);

}  // namespace tb::kernels::pool
