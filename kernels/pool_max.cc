// Max pooling: aten::max_pool2d_with_indices (+ backward) and max_pool3d_with_indices.
//
// The general loop (2-d and 3-d, any layout: inputs are made contiguous) follows torch's CPU
// kernel element for element: windows clipped to the input, a value replaces the maximum when
// greater or NaN (the first maximum, or the last NaN, of a window wins), indices are flat
// positions within a plane (d * H * W + h * W + w). bfloat16 (but channels-last) is pooled as
// float32 (widened and narrowed back: exact). 2-d pooling of all but the 16-bit float
// types takes fast paths with the same results: row-major planes with dilation 1 along W run
// their interior output columns without clipping, float32 / float64 ones on SSE2 / AVX2
// vectors over output columns (kernels/cpu/pool_max_vec.cc); channels-last inputs run on vectors
// over channels and give channels-last outputs, as torch's kernel. The backward zeroes and
// scatters into the gradient one plane (channels-last: one image) per task.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>
#include <type_traits>
#include <vector>

#include "dispatch/op_table.h"
#include "kernels/dtype_internal.h"
#include "kernels/layout.h"
#include "kernels/loops_internal.h"
#include "kernels/pool_internal.h"
#include "kernels/promote_broadcast.h"

namespace tb {
namespace {

using kernels::Convert;
using kernels::opmath_t;
using namespace kernels::pool;  // NOLINT(build/namespaces): PoolGeom and its helpers

// ---- max ----------------------------------------------------------------------------------

// The max pooling step of torch's kernels: a value replaces the running maximum when it is
// greater or NaN (so the first maximum, or the last NaN, of a window wins).
template <typename T>
inline bool MaxTakes(T v, T m) {
  if constexpr (std::is_floating_point_v<T>) {
    return (v > m) | (v != v);
  } else {
    return v > m;
  }
}

template <typename T>
constexpr T MaxInit() {
  return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                              : std::numeric_limits<T>::lowest();
}

// First and one-past-last input position of the window of output `o` along a dim, after
// clipping (the first in-range tap of the dilated window; may be >= hi for an empty window).
inline void WindowRange(int64_t o, int64_t in, int64_t k, int64_t s, int64_t p, int64_t d,
                        int64_t* lo, int64_t* hi) {
  int64_t a = o * s - p;
  *hi = std::min(a + (k - 1) * d + 1, in);
  if (a < 0) a += ((-a + d - 1) / d) * d;
  *lo = a;
}

// One plane of 2-d max pooling of a row-major H x W plane with dilation 1 along W. Output
// columns whose windows lie inside the row run a loop without clipping; the others clip.
template <typename T>
void MaxPoolPlane2d(const PoolGeom& g, const T* in, T* out, int64_t* idx, bool vec) {
  const int64_t H = g.in[1], W = g.in[2], OH = g.out[1], OW = g.out[2];
  const int64_t kw = g.k[2], sw = g.s[2], pw = g.p[2];
  // interior columns: ow * sw - pw >= 0 and ow * sw - pw + kw <= W
  const int64_t ow_lo = std::min(OW, (pw + sw - 1) / sw);
  const int64_t ow_hi =
      W - kw + pw >= 0 ? std::max(ow_lo, std::min(OW, (W - kw + pw) / sw + 1)) : ow_lo;
  for (int64_t oh = 0; oh < OH; ++oh, out += OW, idx += OW) {
    int64_t h0, h1;
    WindowRange(oh, H, g.k[1], g.s[1], g.p[1], g.d[1], &h0, &h1);
    const int64_t dh = g.d[1];
    auto clipped = [&](int64_t ow) {
      int64_t w0, w1;
      WindowRange(ow, W, kw, sw, pw, 1, &w0, &w1);
      T m = MaxInit<T>();
      int64_t best = h0 * W + w0;
      for (int64_t ih = h0; ih < h1; ih += dh) {
        for (int64_t iw = w0; iw < w1; ++iw) {
          const T v = in[ih * W + iw];
          if (MaxTakes(v, m)) {
            m = v;
            best = ih * W + iw;
          }
        }
      }
      out[ow] = m;
      idx[ow] = best;
    };
    for (int64_t ow = 0; ow < ow_lo; ++ow) clipped(ow);
    int64_t ow = ow_lo;
    if constexpr (std::is_floating_point_v<T> && sizeof(T) >= 4) {
      if (vec && h0 < h1) {
        ow = MaxPoolRowVec(RowArgs<T>{in, W, h0, h1, dh, kw, sw, pw, ow, ow_hi, out, idx});
      }
    }
    if (h1 - h0 == 2 && kw == 2 && dh == 1) {
      // The common 2 x 2 window, without inner loops.
      const T* r0 = in + h0 * W;
      const T* r1 = r0 + W;
      for (; ow < ow_hi; ++ow) {
        const int64_t w = ow * sw - pw;
        T m = r0[w];
        int64_t best = h0 * W + w;
        const T v1 = r0[w + 1], v2 = r1[w], v3 = r1[w + 1];
        bool t = MaxTakes(v1, m);
        m = t ? v1 : m;
        best = t ? h0 * W + w + 1 : best;
        t = MaxTakes(v2, m);
        m = t ? v2 : m;
        best = t ? (h0 + 1) * W + w : best;
        t = MaxTakes(v3, m);
        m = t ? v3 : m;
        best = t ? (h0 + 1) * W + w + 1 : best;
        out[ow] = m;
        idx[ow] = best;
      }
    } else {
      for (; ow < ow_hi; ++ow) {
        const int64_t w = ow * sw - pw;
        T m = MaxInit<T>();
        int64_t best = h0 * W + w;
        for (int64_t ih = h0; ih < h1; ih += dh) {
          const T* r = in + ih * W + w;
          for (int64_t j = 0; j < kw; ++j) {
            const bool t = MaxTakes(r[j], m);
            m = t ? r[j] : m;
            best = t ? ih * W + w + j : best;
          }
        }
        out[ow] = m;
        idx[ow] = best;
      }
    }
    for (int64_t ow = ow_hi; ow < OW; ++ow) clipped(ow);
  }
}

// 2-d max pooling of a channels-last (N, H, W, C in memory) input into channels-last outputs:
// one output pixel at a time, the C channels in the inner, unit-stride loop.
template <typename T>
void MaxPoolChannelsLast(const PoolGeom& g, int64_t N, int64_t C, const T* in, T* out, int64_t* idx,
                         bool vec) {
  const int64_t H = g.in[1], W = g.in[2], OH = g.out[1], OW = g.out[2];
  ParallelFor(N * OH, N * OH * OW * C > kernels::kGrain, [&](int64_t row) {
    const int64_t n = row / OH, oh = row % OH;
    int64_t h0, h1;
    WindowRange(oh, H, g.k[1], g.s[1], g.p[1], g.d[1], &h0, &h1);
    const T* x = in + n * H * W * C;
    for (int64_t ow = 0; ow < OW; ++ow) {
      int64_t w0, w1;
      WindowRange(ow, W, g.k[2], g.s[2], g.p[2], g.d[2], &w0, &w1);
      T* __restrict o = out + (row * OW + ow) * C;
      int64_t* __restrict oi = idx + (row * OW + ow) * C;
      const int64_t first = h0 * W + w0;
      int64_t c0 = 0;  // channels [0, c0) done on vectors
      if constexpr (std::is_floating_point_v<T> && sizeof(T) >= 4) {
        if (vec && h0 < h1 && w0 < w1) {
          c0 = MaxPoolPixelVec(PixelArgs<T>{x, W, C, h0, h1, g.d[1], w0, w1, g.d[2], o, oi});
        }
      }
      for (int64_t c = c0; c < C; ++c) {
        o[c] = MaxInit<T>();
        oi[c] = first;
      }
      for (int64_t ih = h0; ih < h1; ih += g.d[1]) {
        for (int64_t iw = w0; iw < w1; iw += g.d[2]) {
          const T* __restrict v = x + (ih * W + iw) * C;
          const int64_t pos = ih * W + iw;
          for (int64_t c = c0; c < C; ++c) {
            const bool t = MaxTakes(v[c], o[c]);
            o[c] = t ? v[c] : o[c];
            oi[c] = t ? pos : oi[c];
          }
        }
      }
    }
  });
}

// Whether torch's max pooling lays a 4-d input's results out channels-last (its
// suggest_memory_format).
bool IsChannelsLast(const Tensor& t) {
  return SuggestMemoryFormat(t) == MemoryFormat::kChannelsLast;
}

// An empty 4-d tensor of `shape` (N, C, H, W) laid out channels-last.
Tensor EmptyChannelsLast(IntArrayRef shape, DType dtype) {
  return Tensor::Empty({shape[0], shape[2], shape[3], shape[1]}, dtype).permute({0, 3, 1, 2});
}

std::tuple<Tensor, Tensor> MaxPool(const char* op, const Tensor& self, int64_t nsp,
                                   const std::vector<int64_t>& kernel_size,
                                   const std::vector<int64_t>& stride,
                                   const std::vector<int64_t>& padding,
                                   const std::vector<int64_t>& dilation, bool ceil_mode) {
  if (self.dtype() == DType::kBFloat16 && self.numel() > 0 && !IsChannelsLast(self)) {
    // Comparisons and maxima are exact in float32: the float32 paths on the widened input, the
    // maxima narrowed back (exactly; NaN quiet, as torch's float-computed kernel gives it).
    auto [out, idx] = MaxPool(op, Cast(self, DType::kFloat32), nsp, kernel_size, stride, padding,
                              dilation, ceil_mode);
    return {Cast(out, DType::kBFloat16), idx};
  }
  PoolGeom g = WindowGeom(op, self, nsp, kernel_size, stride, padding, dilation, ceil_mode);
  // The fast paths run where torch's arithmetic is the element type's own (not half types).
  const bool fast = self.dtype() != DType::kFloat16 && self.dtype() != DType::kBFloat16;
  // A channels-last input gives channels-last outputs, as torch's kernel.
  const bool cl = fast && nsp == 2 && IsChannelsLast(self);
  Tensor x = cl ? InFormat(self, MemoryFormat::kChannelsLast) : self.contiguous();
  Tensor out =
      cl ? EmptyChannelsLast(g.out_shape, self.dtype()) : Tensor::Empty(g.out_shape, self.dtype());
  Tensor idx = cl ? EmptyChannelsLast(g.out_shape, DType::kInt64)
                  : Tensor::Empty(g.out_shape, DType::kInt64);
  TB_DISPATCH(self.dtype(), op, TB_TYPES_NUMERIC, [&] {
    using T = scalar_t;
    using Acc = opmath_t<T>;
    const T* px = x.data_as<const T>();
    T* po = static_cast<T*>(out.mutable_data());
    int64_t* pi = static_cast<int64_t*>(idx.mutable_data());
    const int64_t isz = g.isz(), osz = g.osz();
    const bool vec = isz <= std::numeric_limits<int32_t>::max();  // positions in int32 lanes
    if constexpr (std::is_same_v<T, Acc>) {
      if (cl) {
        MaxPoolChannelsLast<T>(g, self.size(0), self.size(1), px, po, pi, vec);
        return;
      }
      if (g.in[0] == 1 && g.k[0] == 1 && g.d[2] == 1) {  // 2-d, dilation 1 along rows
        ParallelFor(g.planes, g.planes * osz > kernels::kGrain, [&](int64_t plane) {
          MaxPoolPlane2d<T>(g, px + plane * isz, po + plane * osz, pi + plane * osz, vec);
        });
        return;
      }
    }
    ParallelFor(g.planes, g.planes * osz > 4096, [&](int64_t plane) {
      const T* in = px + plane * isz;
      int64_t o = plane * osz;
      for (int64_t od = 0; od < g.out[0]; ++od) {
        int64_t d0 = od * g.s[0] - g.p[0];
        const int64_t d1 = std::min(d0 + (g.k[0] - 1) * g.d[0] + 1, g.in[0]);
        while (d0 < 0) d0 += g.d[0];
        for (int64_t oh = 0; oh < g.out[1]; ++oh) {
          int64_t h0 = oh * g.s[1] - g.p[1];
          const int64_t h1 = std::min(h0 + (g.k[1] - 1) * g.d[1] + 1, g.in[1]);
          while (h0 < 0) h0 += g.d[1];
          for (int64_t ow = 0; ow < g.out[2]; ++ow, ++o) {
            int64_t w0 = ow * g.s[2] - g.p[2];
            const int64_t w1 = std::min(w0 + (g.k[2] - 1) * g.d[2] + 1, g.in[2]);
            while (w0 < 0) w0 += g.d[2];
            int64_t best = (d0 * g.in[1] + h0) * g.in[2] + w0;
            Acc m = std::numeric_limits<Acc>::has_infinity ? -std::numeric_limits<Acc>::infinity()
                                                           : std::numeric_limits<Acc>::lowest();
            for (int64_t id = d0; id < d1; id += g.d[0]) {
              for (int64_t ih = h0; ih < h1; ih += g.d[1]) {
                for (int64_t iw = w0; iw < w1; iw += g.d[2]) {
                  const int64_t i = (id * g.in[1] + ih) * g.in[2] + iw;
                  const Acc v = Convert<Acc>(in[i]);
                  bool nan = false;
                  if constexpr (std::is_floating_point_v<Acc>) nan = std::isnan(v);
                  if (v > m || nan) {
                    m = v;
                    best = i;
                  }
                }
              }
            }
            po[o] = Convert<T>(m);
            pi[o] = best;
          }
        }
      }
    });
  });
  if (!cl && nsp == 2 && IsChannelsLast(self)) {  // the 16-bit floats: computed in C order
    return {InFormat(out, MemoryFormat::kChannelsLast), InFormat(idx, MemoryFormat::kChannelsLast)};
  }
  return {out, idx};
}

std::tuple<Tensor, Tensor> MaxPool2d(const Tensor& self, const std::vector<int64_t>& kernel_size,
                                     const std::vector<int64_t>& stride,
                                     const std::vector<int64_t>& padding,
                                     const std::vector<int64_t>& dilation, bool ceil_mode) {
  return MaxPool("aten::max_pool2d_with_indices", self, 2, kernel_size, stride, padding, dilation,
                 ceil_mode);
}

std::tuple<Tensor, Tensor> MaxPool3d(const Tensor& self, const std::vector<int64_t>& kernel_size,
                                     const std::vector<int64_t>& stride,
                                     const std::vector<int64_t>& padding,
                                     const std::vector<int64_t>& dilation, bool ceil_mode) {
  return MaxPool("aten::max_pool3d_with_indices", self, 3, kernel_size, stride, padding, dilation,
                 ceil_mode);
}

Tensor MaxPoolBackward(const char* op, const Tensor& grad_output, const Tensor& self, int64_t nsp,
                       const std::vector<int64_t>& kernel_size, const std::vector<int64_t>& stride,
                       const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation,
                       bool ceil_mode, const Tensor& indices) {
  PoolGeom g = WindowGeom(op, self, nsp, kernel_size, stride, padding, dilation, ceil_mode);
  TB_CHECK(grad_output.shape() == g.out_shape.ref() && indices.shape() == g.out_shape.ref(),
           ValueError)
      << op << ": expected grad_output and indices of shape " << ShapeString(g.out_shape)
      << ", got " << ShapeString(grad_output.shape()) << " and " << ShapeString(indices.shape());
  TB_CHECK(indices.dtype() == DType::kInt64, TypeError) << op << ": indices must be int64";
  TB_CHECK(grad_output.dtype() == self.dtype(), TypeError)
      << op << ": grad_output and self must have the same dtype";
  // A channels-last input gets a channels-last gradient, as torch's kernel; the scatter then
  // runs per image over (position, channel) with the other operands made channels-last.
  const bool cl = nsp == 2 && IsChannelsLast(self);
  auto layout = [&](const Tensor& t) {
    return cl ? InFormat(t, MemoryFormat::kChannelsLast) : t.contiguous();
  };
  Tensor go = layout(grad_output), ind = layout(indices);
  Tensor gi = cl ? EmptyChannelsLast(self.shape(), self.dtype())
                 : Tensor::Empty(self.shape(), self.dtype());
  TB_DISPATCH(self.dtype(), op, TB_TYPES_NUMERIC, [&] {
    using T = scalar_t;
    using Acc = opmath_t<T>;
    const T* pg = go.data_as<const T>();
    const int64_t* pi = ind.data_as<const int64_t>();
    T* px = static_cast<T*>(gi.mutable_data());
    const uint64_t isz = static_cast<uint64_t>(g.isz());
    const int64_t osz = g.osz();
    // Each task zeroes its part of the gradient, then adds the output gradients into it.
    if (cl) {
      const int64_t N = self.size(0), C = self.size(1);
      ParallelFor(N, N * C * (g.isz() + osz) > kernels::kGrain, [&](int64_t n) {
        T* gin = px + n * g.isz() * C;
        std::memset(static_cast<void*>(gin), 0, g.isz() * C * sizeof(T));
        for (int64_t o = n * osz; o < (n + 1) * osz; ++o) {
          const int64_t* oi = pi + o * C;
          const T* og = pg + o * C;
          for (int64_t c = 0; c < C; ++c) {
            const int64_t i = oi[c];
            if (static_cast<uint64_t>(i) >= isz) continue;  // not an index this op produced
            T& d = gin[i * C + c];
            d = Convert<T>(Convert<Acc>(d) + Convert<Acc>(og[c]));
          }
        }
      });
      return;
    }
    ParallelFor(g.planes, g.planes * (g.isz() + osz) > kernels::kGrain, [&](int64_t plane) {
      T* gin = px + plane * g.isz();
      std::memset(static_cast<void*>(gin), 0, g.isz() * sizeof(T));
      const int64_t* oi = pi + plane * osz;
      const T* og = pg + plane * osz;
      for (int64_t o = 0; o < osz; ++o) {
        const int64_t i = oi[o];
        if (static_cast<uint64_t>(i) >= isz) continue;  // not an index this op produced
        gin[i] = Convert<T>(Convert<Acc>(gin[i]) + Convert<Acc>(og[o]));
      }
    });
  });
  return gi;
}

Tensor MaxPool2dBackward(const Tensor& grad_output, const Tensor& self,
                         const std::vector<int64_t>& kernel_size,
                         const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                         const std::vector<int64_t>& dilation, bool ceil_mode,
                         const Tensor& indices) {
  return MaxPoolBackward("aten::max_pool2d_with_indices_backward", grad_output, self, 2,
                         kernel_size, stride, padding, dilation, ceil_mode, indices);
}

}  // namespace

TB_REGISTER_KERNELS(pool_max) {
  const auto cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::max_pool2d_with_indices", cpu, Boxed<&MaxPool2d>(), TB_HERE);
  table.RegisterKernel("aten::max_pool2d_with_indices_backward", cpu, Boxed<&MaxPool2dBackward>(),
                       TB_HERE);
  table.RegisterKernel("aten::max_pool3d_with_indices", cpu, Boxed<&MaxPool3d>(), TB_HERE);
}

}  // namespace tb
