// aten::grid_sampler_2d (torch.nn.functional.grid_sample on 4-D input): samples input
// (N, C, H, W) at the normalized (x, y) locations of grid (N, Ho, Wo, 2) into (N, C, Ho, Wo).
//
// interpolation_mode 0 bilinear, 1 nearest (round half to even), 2 bicubic (A = -0.75);
// padding_mode 0 zeros, 1 border, 2 reflection; align_corners maps -1/1 to the corner pixels'
// centres (true) or edges (false). Coordinates and weights are computed as torch's CPU kernel
// does, in the element type (for bfloat16/float16: in float, rounded to the type each step).
#include <cmath>
#include <vector>

#include "dispatch/op_table.h"
#include "kernels/common_internal.h"
#include "kernels/dtype_internal.h"
#include "kernels/loops_internal.h"

namespace tb {
namespace {

using kernels::Convert;
using kernels::opmath_t;
using kernels::ParallelFor;

enum Interp : int64_t { kBilinear = 0, kNearest = 1, kBicubic = 2 };
enum Padding : int64_t { kZeros = 0, kBorder = 1, kReflection = 2 };

// Rounds to T after each step when T is a 16-bit float, as torch's CPU kernel computes in T.
template <typename T, typename A>
A Rnd(A v) {
  if constexpr (kernels::kIsReducedFloat<T>) {
    return Convert<A>(Convert<T>(v));
  } else {
    return v;
  }
}

template <typename T, typename A>
struct Axis {
  static A R(A v) { return Rnd<T, A>(v); }

  int64_t size;
  Padding padding;
  bool align;
  A scale;

  Axis(int64_t n, Padding pad, bool align_corners)
      : size(n),
        padding(pad),
        align(align_corners),
        scale(R(align_corners ? static_cast<A>(n - 1) / 2 : static_cast<A>(n) / 2)) {}

  A Unnormalize(A v) const {
    const A u = R(R(v + 1) * scale);
    return align ? u : R(u - A(0.5));
  }

  // Clamps to [0, size - 1]; NaN stays NaN.
  A Clip(A v) const {
    if (std::isnan(v)) return v;
    return std::fmin(static_cast<A>(size - 1), std::fmax(v, A(0)));
  }

  // torch's reflect_coordinates over [twice_low / 2, twice_high / 2].
  static A Reflect(A v, int64_t twice_low, int64_t twice_high) {
    if (twice_low == twice_high) return A(0);
    const A lo = static_cast<A>(twice_low) / 2;
    const A span = static_cast<A>(twice_high - twice_low) / 2;
    v = std::fabs(R(v - lo));
    const A extra = R(std::fmod(v, span));
    const int64_t flips = static_cast<int64_t>(std::floor(R(v / span)));
    return flips % 2 == 0 ? R(extra + lo) : R(R(span - extra) + lo);
  }

  // The source coordinate after padding (torch's compute_coordinates).
  A Pad(A v) const {
    if (padding == kBorder) return Clip(v);
    if (padding == kReflection) {
      v = align ? Reflect(v, 0, 2 * (size - 1)) : Reflect(v, -1, 2 * size - 1);
      return Clip(v);
    }
    return v;
  }
};

// ((a + 2) * x - (a + 3)) * x * x + 1, each step rounded as Rnd.
template <typename T, typename A>
A Cubic1(A x, A a) {
  const auto R = Rnd<T, A>;
  return R(R(R(R(R(R(a + 2) * x) - R(a + 3)) * x) * x) + 1);
}
// ((a * x - 5 * a) * x + 8 * a) * x - 4 * a, each step rounded as Rnd.
template <typename T, typename A>
A Cubic2(A x, A a) {
  const auto R = Rnd<T, A>;
  return R(R(R(R(R(R(a * x) - R(5 * a)) * x) + R(8 * a)) * x) - R(4 * a));
}
template <typename T, typename A>
void CubicCoeffs(A c[4], A t) {
  const auto R = Rnd<T, A>;
  const A a = A(-0.75);
  c[0] = Cubic2<T, A>(R(t + 1), a);
  c[1] = Cubic1<T, A>(t, a);
  const A t2 = R(1 - t);
  c[2] = Cubic1<T, A>(t2, a);
  c[3] = Cubic2<T, A>(R(t2 + 1), a);
}

Tensor GridSampler2d(const Tensor& input, const Tensor& grid, int64_t interpolation_mode,
                     int64_t padding_mode, bool align_corners) {
  constexpr const char* kOp = "aten::grid_sampler_2d";
  TB_CHECK(input.dtype() == grid.dtype(), ValueError)
      << kOp << ": expected input and grid to have the same dtype, got " << DTypeName(input.dtype())
      << " and " << DTypeName(grid.dtype());
  TB_CHECK(input.ndim() == 4 && grid.ndim() == 4, ValueError)
      << kOp << ": expected 4-D input and grid, got shapes " << ShapeString(input.shape())
      << " and " << ShapeString(grid.shape());
  TB_CHECK(input.size(0) == grid.size(0), ValueError)
      << kOp << ": expected grid and input to have the same batch size, got shapes "
      << ShapeString(input.shape()) << " and " << ShapeString(grid.shape());
  TB_CHECK(grid.size(3) == 2, ValueError)
      << kOp << ": expected grid to have size 2 in its last dimension, got shape "
      << ShapeString(grid.shape());
  TB_CHECK(input.size(2) > 0 && input.size(3) > 0, ValueError)
      << kOp << ": expected input to have non-empty spatial dimensions, got shape "
      << ShapeString(input.shape());
  TB_CHECK(interpolation_mode >= 0 && interpolation_mode <= 2, ValueError)
      << kOp << ": interpolation_mode must be 0 (bilinear), 1 (nearest) or 2 (bicubic), got "
      << interpolation_mode;
  TB_CHECK(padding_mode >= 0 && padding_mode <= 2, ValueError)
      << kOp << ": padding_mode must be 0 (zeros), 1 (border) or 2 (reflection), got "
      << padding_mode;
  TB_CHECK_SUPPORTED(IsFloatingPoint(input.dtype()))
      << kOp << ": dtype " << DTypeName(input.dtype()) << " is not supported";
  const int64_t n = input.size(0), c = input.size(1), h = input.size(2), w = input.size(3);
  const int64_t ho = grid.size(1), wo = grid.size(2);
  Tensor out = Tensor::Empty({n, c, ho, wo}, input.dtype());
  if (out.numel() == 0) return out;
  const Tensor x = input.contiguous();
  const Tensor g = grid.contiguous();
  const auto interp = static_cast<Interp>(interpolation_mode);
  const auto pad = static_cast<Padding>(padding_mode);
  TB_DISPATCH(input.dtype(), kOp, TB_TYPES_FLOAT, [&] {
    using T = scalar_t;
    using A = opmath_t<T>;
    const T* px = x.data_as<const T>();
    const T* pg = g.data_as<const T>();
    T* po = static_cast<T*>(out.mutable_data());
    const auto R = Rnd<T, A>;
    const Axis<T, A> ax(w, pad, align_corners), ay(h, pad, align_corners);
    const int64_t plane = h * w, oplane = ho * wo;
    ParallelFor(n * oplane, out.numel() > kernels::kGrain / 4, [&](int64_t job) {
      const int64_t b = job / oplane, pos = job % oplane;
      const A gx = Convert<A>(pg[job * 2]), gy = Convert<A>(pg[job * 2 + 1]);
      const T* img = px + b * c * plane;
      T* o = po + b * c * oplane + pos;
      // The value at integer (ix, iy) of channel ch, zero outside the image.
      auto at = [&](int64_t ch, int64_t ix, int64_t iy) -> A {
        if (ix < 0 || ix >= w || iy < 0 || iy >= h) return A(0);
        return Convert<A>(img[ch * plane + iy * w + ix]);
      };
      if (interp == kBicubic) {
        const A fx = ax.Unnormalize(gx), fy = ay.Unnormalize(gy);
        const A x0 = std::floor(fx), y0 = std::floor(fy);
        A cx[4], cy[4];
        CubicCoeffs<T, A>(cx, R(fx - x0));
        CubicCoeffs<T, A>(cy, R(fy - y0));
        // Neighbour coordinates after padding, as torch's get_value_bounded (-1: outside).
        int64_t nx[4], ny[4];
        for (int i = 0; i < 4; ++i) {
          const A px_ = ax.Pad(R(x0 - 1 + i)), py_ = ay.Pad(R(y0 - 1 + i));
          nx[i] = std::isfinite(px_) ? static_cast<int64_t>(px_) : -1;
          ny[i] = std::isfinite(py_) ? static_cast<int64_t>(py_) : -1;
        }
        for (int64_t ch = 0; ch < c; ++ch) {
          A acc = 0;
          for (int i = 0; i < 4; ++i) {
            A row = 0;
            for (int j = 0; j < 4; ++j) row = R(row + R(at(ch, nx[j], ny[i]) * cx[j]));
            acc = R(acc + R(row * cy[i]));
          }
          o[ch * oplane] = Convert<T>(acc);
        }
        return;
      }
      const A fx = ax.Pad(ax.Unnormalize(gx)), fy = ay.Pad(ay.Unnormalize(gy));
      if (interp == kNearest) {
        const A rx = std::nearbyint(fx), ry = std::nearbyint(fy);
        const bool in = rx > -1 && rx < w && ry > -1 && ry < h;
        for (int64_t ch = 0; ch < c; ++ch) {
          o[ch * oplane] =
              in ? img[ch * plane + static_cast<int64_t>(ry) * w + static_cast<int64_t>(rx)]
                 : Convert<T>(A(0));
        }
        return;
      }
      const A xw = std::floor(fx), yn = std::floor(fy);
      const A we = R(fx - xw), wn = R(fy - yn);
      const A e = R(1 - we), s = R(1 - wn);
      const A nw = R(s * e), ne = R(s * we), sw_ = R(wn * e), se = R(wn * we);
      const bool finite = std::isfinite(xw) && std::isfinite(yn);
      const int64_t ix = finite ? static_cast<int64_t>(xw) : -2;
      const int64_t iy = finite ? static_cast<int64_t>(yn) : -2;
      for (int64_t ch = 0; ch < c; ++ch) {
        A r = R(at(ch, ix, iy) * nw);
        r = R(r + R(at(ch, ix + 1, iy) * ne));
        r = R(r + R(at(ch, ix, iy + 1) * sw_));
        r = R(r + R(at(ch, ix + 1, iy + 1) * se));
        o[ch * oplane] = Convert<T>(r);
      }
    });
  });
  return out;
}

}  // namespace

TB_REGISTER_KERNELS(grid_sample) {
  table.RegisterKernel("aten::grid_sampler_2d", DeviceType::kCPU, Boxed<&GridSampler2d>(), TB_HERE);
}

}  // namespace tb
