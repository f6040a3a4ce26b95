// Upsampling: aten::upsample_nearest{1,2,3}d, _upsample_nearest_exact{1,2,3}d,
// upsample_linear1d, upsample_bilinear2d, upsample_trilinear3d, each with its .vec overload.
//
// Source indices and interpolation weights are computed per output coordinate exactly as in
// torch's CPU kernels (float scales for nearest, opmath scales for linear, identity when the
// size does not change), then an N-d gather / weighted sum runs over (batch * channel)
// planes in parallel.
#include <algorithm>
#include <cmath>
#include <optional>
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

enum class Mode { kNearest, kNearestExact, kLinear };

// Per spatial dim: source indices and weights for each output coordinate.
struct Axis {
  int64_t in = 1, out = 1;
  std::vector<int64_t> i0, i1;
  std::vector<double> l0, l1;
};

// torch's compute_scales_value<float>. `scale`: the scale given, or 0 for none.
float ScaleValue(double scale, int64_t in, int64_t out) {
  return scale > 0. ? static_cast<float>(1.0 / scale)
                    : static_cast<float>(in) / static_cast<float>(out);
}

// torch's area_pixel_compute_scale<A> and area_pixel_compute_source_index<A>.
template <typename A>
A AreaScale(int64_t in, int64_t out, bool align_corners, double scale) {
  if (align_corners) {
    return out > 1 ? static_cast<A>(in - 1) / static_cast<A>(out - 1) : A(0);
  }
  return scale > 0. ? static_cast<A>(1.0 / scale) : static_cast<A>(in) / static_cast<A>(out);
}

template <typename A>
A SourceIndex(A scale, int64_t dst, bool align_corners) {
  if (align_corners) return scale * static_cast<A>(dst);
  const A src = static_cast<A>(scale * (dst + 0.5) - 0.5);
  return src < A(0) ? A(0) : src;
}

template <typename T, typename A>
Axis MakeAxis(Mode mode, int64_t in, int64_t out, bool align_corners, double scale,
              bool round_weights) {
  Axis a;
  a.in = in;
  a.out = out;
  a.i0.resize(out);
  a.i1.resize(out);
  a.l0.assign(out, 1.0);
  a.l1.assign(out, 0.0);
  for (int64_t o = 0; o < out; ++o) {
    if (mode == Mode::kNearest || mode == Mode::kNearestExact) {
      int64_t i;
      if (mode == Mode::kNearest && out == in) {
        i = o;
      } else if (mode == Mode::kNearest && out % 2 == 0 && out / 2 == in) {
        i = o >> 1;
      } else {
        const float s = ScaleValue(scale, in, out);
        const float pos = mode == Mode::kNearest
                              ? static_cast<float>(o) * s
                              : static_cast<float>((o + 0.5) * static_cast<double>(s));
        i = std::min(static_cast<int64_t>(std::floor(pos)), in - 1);
      }
      a.i0[o] = a.i1[o] = i;
      continue;
    }
    if (out == in) {
      a.i0[o] = a.i1[o] = o;
      continue;
    }
    const A ratio = AreaScale<A>(in, out, align_corners, scale);
    const A real = SourceIndex<A>(ratio, o, align_corners);
    const int64_t i0 = std::min(static_cast<int64_t>(std::floor(real)), in - 1);
    const A l1 = std::min(std::max(static_cast<A>(real - static_cast<A>(i0)), A(0)), A(1));
    a.i0[o] = i0;
    a.i1[o] = i0 + (i0 < in - 1 ? 1 : 0);
    // torch's generic kernel (1-d and 3-d) stores the weights in the input's dtype: for
    // float16 / bfloat16 they are rounded to it (the second computed from the rounded first).
    // Its 2-d kernels keep them in float.
    const A w1 = round_weights ? static_cast<A>(Convert<T>(l1)) : l1;
    a.l1[o] = static_cast<double>(w1);
    a.l0[o] =
        static_cast<double>(round_weights ? static_cast<A>(Convert<T>(A(1) - w1)) : A(1) - w1);
  }
  return a;
}

// The weighted sum over dims [d, nsp) at input offset `off` for output coordinates `o`.
template <typename T, typename A>
A Interp(const T* in, const std::vector<Axis>& ax, const std::vector<int64_t>& stride,
         const int64_t* o, size_t d, int64_t off) {
  if (d == ax.size()) return Convert<A>(in[off]);
  const Axis& a = ax[d];
  const A t0 = Interp<T, A>(in, ax, stride, o, d + 1, off + a.i0[o[d]] * stride[d]);
  const A t1 = Interp<T, A>(in, ax, stride, o, d + 1, off + a.i1[o[d]] * stride[d]);
  A r = t0 * static_cast<A>(a.l0[o[d]]);
  r += t1 * static_cast<A>(a.l1[o[d]]);
  return r;
}

Tensor Upsample(const char* op, Mode mode, int64_t nsp, const Tensor& input,
                const std::vector<int64_t>& output_size, bool align_corners,
                const std::vector<std::optional<double>>& scales) {
  TB_CHECK(input.ndim() == nsp + 2, ValueError)
      << op << ": expected a " << nsp + 2 << "-D input, got shape " << ShapeString(input.shape());
  TB_CHECK(static_cast<int64_t>(output_size.size()) == nsp, ValueError)
      << op << ": output_size must have " << nsp << " elements, got " << output_size.size();
  for (int64_t i = 0; i < nsp; ++i) {
    TB_CHECK(input.size(2 + i) > 0 && output_size[i] > 0, ValueError)
        << op << ": input and output sizes should be greater than 0, got input of shape "
        << ShapeString(input.shape()) << " and output_size " << ShapeString(output_size);
  }
  TB_CHECK_SUPPORTED(mode != Mode::kLinear || IsFloatingPoint(input.dtype()))
      << op << ": dtype " << DTypeName(input.dtype()) << " is not supported";
  Dims shape{input.size(0), input.size(1)};
  for (auto s : output_size) shape.push_back(s);
  Tensor x = input.contiguous();
  Tensor out = Tensor::Empty(shape, input.dtype());
  if (out.numel() == 0) return out;
  const int64_t planes = input.size(0) * input.size(1);
  TB_DISPATCH(input.dtype(), op, TB_TYPES_NUMERIC, [&] {
    using T = scalar_t;
    using A = opmath_t<T>;
    std::vector<Axis> ax;
    std::vector<int64_t> stride(nsp, 1);
    int64_t isz = 1, osz = 1;
    for (int64_t i = 0; i < nsp; ++i) {
      // 0: no scale given (the optional unpacked here: GCC 12 misreads copies of it as
      // maybe uninitialized).
      const double sc =
          i < static_cast<int64_t>(scales.size()) && scales[i].has_value() ? *scales[i] : 0.;
      ax.push_back(
          MakeAxis<T, A>(mode, input.size(2 + i), output_size[i], align_corners, sc, nsp != 2));
      isz *= input.size(2 + i);
      osz *= output_size[i];
    }
    for (int64_t i = nsp - 2; i >= 0; --i) stride[i] = stride[i + 1] * input.size(3 + i);
    const T* px = x.data_as<const T>();
    T* po = static_cast<T*>(out.mutable_data());
    ParallelFor(planes, out.numel() > kernels::kGrain, [&](int64_t p) {
      const T* in = px + p * isz;
      T* o = po + p * osz;
      std::vector<int64_t> idx(nsp, 0);
      for (int64_t k = 0; k < osz; ++k) {
        if (mode == Mode::kLinear) {
          o[k] = Convert<T>(Interp<T, A>(in, ax, stride, idx.data(), 0, 0));
        } else {
          int64_t off = 0;
          for (int64_t d = 0; d < nsp; ++d) off += ax[d].i0[idx[d]] * stride[d];
          o[k] = in[off];
        }
        for (int64_t d = nsp - 1; d >= 0; --d) {  // next output coordinate
          if (++idx[d] < output_size[d]) break;
          idx[d] = 0;
        }
      }
    });
  });
  return out;
}

// The .vec overloads: output_size or scale_factors (exactly one).
Tensor UpsampleVec(const char* op, Mode mode, int64_t nsp, const Tensor& input,
                   const std::optional<std::vector<int64_t>>& output_size, bool align_corners,
                   const std::optional<std::vector<double>>& scale_factors) {
  TB_CHECK(output_size.has_value() != scale_factors.has_value(), ValueError)
      << op << ": must specify exactly one of output_size and scale_factors";
  TB_CHECK(input.ndim() == nsp + 2, ValueError)
      << op << ": expected a " << nsp + 2 << "-D input, got shape " << ShapeString(input.shape());
  if (output_size) return Upsample(op, mode, nsp, input, *output_size, align_corners, {});
  TB_CHECK(static_cast<int64_t>(scale_factors->size()) == nsp, ValueError)
      << op << ": scale_factors must have " << nsp << " elements, got " << scale_factors->size();
  std::vector<int64_t> size;
  std::vector<std::optional<double>> scales;
  for (int64_t i = 0; i < nsp; ++i) {
    const double s = (*scale_factors)[i];
    size.push_back(static_cast<int64_t>(std::floor(static_cast<double>(input.size(2 + i)) * s)));
    scales.push_back(s);
  }
  return Upsample(op, mode, nsp, input, size, align_corners, scales);
}

using OptSize = std::optional<std::vector<int64_t>>;
using OptScales = std::optional<std::vector<double>>;
using OptD = std::optional<double>;
using IntVec = std::vector<int64_t>;

Tensor Nearest1d(const Tensor& self, const IntVec& size, OptD s) {
  return Upsample("aten::upsample_nearest1d", Mode::kNearest, 1, self, size, false, {s});
}
Tensor Nearest2d(const Tensor& self, const IntVec& size, OptD sh, OptD sw) {
  return Upsample("aten::upsample_nearest2d", Mode::kNearest, 2, self, size, false, {sh, sw});
}
Tensor Nearest3d(const Tensor& self, const IntVec& size, OptD sd, OptD sh, OptD sw) {
  return Upsample("aten::upsample_nearest3d", Mode::kNearest, 3, self, size, false, {sd, sh, sw});
}
Tensor NearestExact1d(const Tensor& self, const IntVec& size, OptD s) {
  return Upsample("aten::_upsample_nearest_exact1d", Mode::kNearestExact, 1, self, size, false,
                  {s});
}
Tensor NearestExact2d(const Tensor& self, const IntVec& size, OptD sh, OptD sw) {
  return Upsample("aten::_upsample_nearest_exact2d", Mode::kNearestExact, 2, self, size, false,
                  {sh, sw});
}
Tensor NearestExact3d(const Tensor& self, const IntVec& size, OptD sd, OptD sh, OptD sw) {
  return Upsample("aten::_upsample_nearest_exact3d", Mode::kNearestExact, 3, self, size, false,
                  {sd, sh, sw});
}
Tensor Linear1d(const Tensor& self, const IntVec& size, bool align_corners, OptD s) {
  return Upsample("aten::upsample_linear1d", Mode::kLinear, 1, self, size, align_corners, {s});
}
Tensor Bilinear2d(const Tensor& self, const IntVec& size, bool align_corners, OptD sh, OptD sw) {
  return Upsample("aten::upsample_bilinear2d", Mode::kLinear, 2, self, size, align_corners,
                  {sh, sw});
}
Tensor Trilinear3d(const Tensor& self, const IntVec& size, bool align_corners, OptD sd, OptD sh,
                   OptD sw) {
  return Upsample("aten::upsample_trilinear3d", Mode::kLinear, 3, self, size, align_corners,
                  {sd, sh, sw});
}

Tensor Nearest1dVec(const Tensor& input, const OptSize& size, const OptScales& scales) {
  return UpsampleVec("aten::upsample_nearest1d.vec", Mode::kNearest, 1, input, size, false, scales);
}
Tensor Nearest2dVec(const Tensor& input, const OptSize& size, const OptScales& scales) {
  return UpsampleVec("aten::upsample_nearest2d.vec", Mode::kNearest, 2, input, size, false, scales);
}
Tensor Nearest3dVec(const Tensor& input, const OptSize& size, const OptScales& scales) {
  return UpsampleVec("aten::upsample_nearest3d.vec", Mode::kNearest, 3, input, size, false, scales);
}
Tensor NearestExact1dVec(const Tensor& input, const OptSize& size, const OptScales& scales) {
  return UpsampleVec("aten::_upsample_nearest_exact1d.vec", Mode::kNearestExact, 1, input, size,
                     false, scales);
}
Tensor NearestExact2dVec(const Tensor& input, const OptSize& size, const OptScales& scales) {
  return UpsampleVec("aten::_upsample_nearest_exact2d.vec", Mode::kNearestExact, 2, input, size,
                     false, scales);
}
Tensor NearestExact3dVec(const Tensor& input, const OptSize& size, const OptScales& scales) {
  return UpsampleVec("aten::_upsample_nearest_exact3d.vec", Mode::kNearestExact, 3, input, size,
                     false, scales);
}
Tensor Linear1dVec(const Tensor& input, const OptSize& size, bool align_corners,
                   const OptScales& scales) {
  return UpsampleVec("aten::upsample_linear1d.vec", Mode::kLinear, 1, input, size, align_corners,
                     scales);
}
Tensor Bilinear2dVec(const Tensor& input, const OptSize& size, bool align_corners,
                     const OptScales& scales) {
  return UpsampleVec("aten::upsample_bilinear2d.vec", Mode::kLinear, 2, input, size, align_corners,
                     scales);
}
Tensor Trilinear3dVec(const Tensor& input, const OptSize& size, bool align_corners,
                      const OptScales& scales) {
  return UpsampleVec("aten::upsample_trilinear3d.vec", Mode::kLinear, 3, input, size, align_corners,
                     scales);
}

}  // namespace

TB_REGISTER_KERNELS(upsample) {
  const auto cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::upsample_nearest1d", cpu, Boxed<&Nearest1d>(), TB_HERE);
  table.RegisterKernel("aten::upsample_nearest2d", cpu, Boxed<&Nearest2d>(), TB_HERE);
  table.RegisterKernel("aten::upsample_nearest3d", cpu, Boxed<&Nearest3d>(), TB_HERE);
  table.RegisterKernel("aten::_upsample_nearest_exact1d", cpu, Boxed<&NearestExact1d>(), TB_HERE);
  table.RegisterKernel("aten::_upsample_nearest_exact2d", cpu, Boxed<&NearestExact2d>(), TB_HERE);
  table.RegisterKernel("aten::_upsample_nearest_exact3d", cpu, Boxed<&NearestExact3d>(), TB_HERE);
  table.RegisterKernel("aten::upsample_linear1d", cpu, Boxed<&Linear1d>(), TB_HERE);
  table.RegisterKernel("aten::upsample_bilinear2d", cpu, Boxed<&Bilinear2d>(), TB_HERE);
  table.RegisterKernel("aten::upsample_trilinear3d", cpu, Boxed<&Trilinear3d>(), TB_HERE);
  table.RegisterKernel("aten::upsample_nearest1d.vec", cpu, Boxed<&Nearest1dVec>(), TB_HERE);
  table.RegisterKernel("aten::upsample_nearest2d.vec", cpu, Boxed<&Nearest2dVec>(), TB_HERE);
  table.RegisterKernel("aten::upsample_nearest3d.vec", cpu, Boxed<&Nearest3dVec>(), TB_HERE);
  table.RegisterKernel("aten::_upsample_nearest_exact1d.vec", cpu, Boxed<&NearestExact1dVec>(),
                       TB_HERE);
  table.RegisterKernel("aten::_upsample_nearest_exact2d.vec", cpu, Boxed<&NearestExact2dVec>(),
                       TB_HERE);
  table.RegisterKernel("aten::_upsample_nearest_exact3d.vec", cpu, Boxed<&NearestExact3dVec>(),
                       TB_HERE);
  table.RegisterKernel("aten::upsample_linear1d.vec", cpu, Boxed<&Linear1dVec>(), TB_HERE);
  table.RegisterKernel("aten::upsample_bilinear2d.vec", cpu, Boxed<&Bilinear2dVec>(), TB_HERE);
  table.RegisterKernel("aten::upsample_trilinear3d.vec", cpu, Boxed<&Trilinear3dVec>(), TB_HERE);
}

}  // namespace tb
