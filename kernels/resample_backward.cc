// Gradients of upsampling and padding, and bicubic upsampling: aten::upsample_nearest{1,2,3}d_
// backward, _upsample_nearest_exact{1,2,3}d_backward, upsample_linear1d_backward,
// upsample_bilinear2d_backward, upsample_trilinear3d_backward, upsample_bicubic2d (+ backward),
// reflection_pad{1,2,3}d_backward and replication_pad{1,2,3}d_backward.
//
// All of these are separable: along each spatial dimension an output position reads a few
// input positions with fixed weights ("taps"), computed as torch's CPU kernels compute them
// (area_pixel_compute_source_index, nearest_idx, cubic convolution with A = -0.75, reflect and
// replicate index maps, negative padding included). A forward applies the taps dimension by
// dimension; a backward applies their transpose, adding each output gradient into the input
// positions it was read from. Intermediate passes run in float64 and the result is rounded
// once to the gradient's dtype.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "dispatch/op_table.h"
#include "kernels/dtype_internal.h"
#include "kernels/promote_broadcast.h"

namespace tb {
namespace {

// Per output position, the (input position, weight) pairs it reads.
using Taps = std::vector<std::vector<std::pair<int64_t, double>>>;

enum class Mode { kNearest, kNearestExact, kLinear, kCubic, kLinearAA };

double AreaScale(int64_t in, int64_t out, bool align_corners, std::optional<double> scale) {
  if (align_corners) return out > 1 ? static_cast<double>(in - 1) / (out - 1) : 0.0;
  return scale && *scale > 0 ? 1.0 / *scale : static_cast<double>(in) / out;
}

double SourceIndex(double scale, int64_t dst, bool align_corners, bool cubic) {
  if (align_corners) return scale * dst;
  const double src = scale * (dst + 0.5) - 0.5;
  return (!cubic && src < 0) ? 0.0 : src;
}

// torch's coefficients are computed in the op's accumulation type: float for float32 and
// the reduced types, double for float64 (`single` says which).
double Round(double v, bool single) {
  return single ? static_cast<double>(static_cast<float>(v)) : v;
}

Taps MakeTaps(Mode mode, int64_t in, int64_t out, bool align_corners, std::optional<double> scale,
              bool single) {
  Taps taps(static_cast<size_t>(out));
  if (mode == Mode::kNearest || mode == Mode::kNearestExact) {
    const float s = scale && *scale > 0 ? static_cast<float>(1.0 / *scale)
                                        : static_cast<float>(in) / static_cast<float>(out);
    for (int64_t o = 0; o < out; ++o) {
      int64_t i;
      if (mode == Mode::kNearest) {
        i = out == in ? o
            : out % 2 == 0 && out / 2 == in
                ? (o >> 1)
                : std::min(static_cast<int64_t>(std::floor(o * s)), in - 1);
      } else {
        i = out == in ? o : std::min(static_cast<int64_t>(std::floor((o + 0.5f) * s)), in - 1);
      }
      taps[o].push_back({i, 1.0});
    }
    return taps;
  }
  const double sc = Round(AreaScale(in, out, align_corners, scale), single);
  if (mode == Mode::kLinearAA) {
    // Antialiased (triangle filter widened by the scale when downsampling), each output's
    // weights normalized to sum 1: torch's _compute_weights_aa.
    const double support = sc >= 1.0 ? sc : 1.0;
    const double invscale = sc >= 1.0 ? 1.0 / sc : 1.0;
    const int64_t max_size = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
    for (int64_t o = 0; o < out; ++o) {
      const double center = Round(sc * (o + 0.5), single);
      // Truncating x + 0.5, as torch's _compute_indices_min_size_weights_aa does.
      // NOLINTNEXTLINE(bugprone-incorrect-roundings)
      const int64_t xmin = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5), 0);
      // NOLINTNEXTLINE(bugprone-incorrect-roundings)
      int64_t xsize = std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), in) - xmin;
      xsize = std::clamp<int64_t>(xsize, 0, max_size);
      double total = 0;
      std::vector<double> w(static_cast<size_t>(xsize));
      for (int64_t j = 0; j < xsize; ++j) {
        const double x = std::abs(Round((j + xmin - center + 0.5) * invscale, single));
        w[j] = Round(x < 1.0 ? 1.0 - x : 0.0, single);
        total = Round(total + w[j], single);
      }
      for (int64_t j = 0; j < xsize; ++j) {
        taps[o].push_back({xmin + j, total != 0.0 ? Round(w[j] / total, single) : w[j]});
      }
    }
    return taps;
  }
  for (int64_t o = 0; o < out; ++o) {
    if (mode == Mode::kLinear) {
      if (in == out) {
        taps[o].push_back({o, 1.0});
        continue;
      }
      const double src = Round(SourceIndex(sc, o, align_corners, false), single);
      const int64_t i0 = std::min(static_cast<int64_t>(std::floor(src)), in - 1);
      const int64_t i1 = i0 + (i0 < in - 1 ? 1 : 0);
      const double l1 = std::clamp(Round(src - i0, single), 0.0, 1.0);
      const double l0 = Round(1.0 - l1, single);
      taps[o].push_back({i0, l0});
      taps[o].push_back({i1, l1});
      continue;
    }
    const double src = Round(SourceIndex(sc, o, align_corners, true), single);
    const int64_t i = static_cast<int64_t>(std::floor(src));
    const double t = Round(src - i, single);
    constexpr double A = -0.75;
    auto c1 = [&](double x) { return Round(((A + 2) * x - (A + 3)) * x * x + 1, single); };
    auto c2 = [&](double x) { return Round(((A * x - 5 * A) * x + 8 * A) * x - 4 * A, single); };
    const double w[4] = {c2(t + 1.0), c1(t), c1(1.0 - t), c2(2.0 - t)};
    for (int64_t k = 0; k < 4; ++k) {
      taps[o].push_back({std::clamp<int64_t>(i - 1 + k, 0, in - 1), w[k]});
    }
  }
  return taps;
}

// x (contiguous float64, [outer, n_in, inner]) through taps along its middle dimension:
// forward gives [outer, taps.size(), inner]; transpose gives [outer, n_in, inner] from
// [outer, taps.size(), inner].
Tensor ApplyTaps(const Tensor& x, int64_t dim, const Taps& taps, int64_t n_in, bool transpose) {
  Dims shape(x.shape());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= shape[d];
  for (int64_t d = dim + 1; d < x.ndim(); ++d) inner *= shape[d];
  const int64_t n_out = static_cast<int64_t>(taps.size());
  shape[dim] = transpose ? n_in : n_out;
  Tensor y = Tensor::Zeros(shape, DType::kFloat64);
  const double* xp = x.data_as<const double>();
  double* yp = y.data_as<double>();
  for (int64_t a = 0; a < outer; ++a) {
    for (int64_t o = 0; o < n_out; ++o) {
      for (const auto& [i, w] : taps[o]) {
        if (transpose) {
          const double* src = xp + (a * n_out + o) * inner;
          double* dst = yp + (a * n_in + i) * inner;
          for (int64_t b = 0; b < inner; ++b) dst[b] += w * src[b];
        } else {
          const double* src = xp + (a * n_in + i) * inner;
          double* dst = yp + (a * n_out + o) * inner;
          for (int64_t b = 0; b < inner; ++b) dst[b] += w * src[b];
        }
      }
    }
  }
  return y;
}

void CheckFloat(const Tensor& t, const char* op) {
  TB_CHECK_SUPPORTED(t.device().is_host_accessible())
      << op << ": tensors on " << DeviceString(t.device())
      << " are not supported; tensorbridge computes on the CPU";
  TB_CHECK(IsFloatingPoint(t.dtype()), TypeError)
      << op << ": expected a floating-point tensor, got " << DTypeName(t.dtype());
}

// The last taps.size() dims of `src` go through their taps (forward or transposed).
Tensor Separable(const Tensor& src, const std::vector<Taps>& taps,
                 const std::vector<int64_t>& in_sizes, bool transpose, const char* op) {
  CheckFloat(src, op);
  const int64_t k = static_cast<int64_t>(taps.size());
  TB_CHECK(src.ndim() >= k, ValueError)
      << op << ": expected at least " << k << " dimensions, got shape " << ShapeString(src.shape());
  Tensor x = Cast(src, DType::kFloat64).contiguous();
  for (int64_t j = 0; j < k; ++j) {
    const int64_t dim = src.ndim() - k + j;
    const int64_t expect = transpose ? static_cast<int64_t>(taps[j].size()) : in_sizes[j];
    TB_CHECK(x.size(dim) == expect, ValueError)
        << op << ": expected size " << expect << " at dimension " << dim << ", got shape "
        << ShapeString(src.shape());
    x = ApplyTaps(x, dim, taps[j], in_sizes[j], transpose);
  }
  return Cast(x, src.dtype()).contiguous();
}

bool Single(DType dt) { return dt != DType::kFloat64; }

std::optional<double> ScaleAt(const std::vector<std::optional<double>>& s, size_t i) {
  return i < s.size() ? s[i] : std::nullopt;
}

// An interpolation backward: grad_output [N, C, out...] -> [N, C, in...].
Tensor InterpBackward(const Tensor& grad, const std::vector<int64_t>& output_size,
                      const std::vector<int64_t>& input_size, Mode mode, bool align_corners,
                      const std::vector<std::optional<double>>& scales, const char* op) {
  const size_t k = output_size.size();
  TB_CHECK(input_size.size() == k + 2, ValueError)
      << op << ": input_size must have " << k + 2 << " elements, got " << input_size.size();
  std::vector<Taps> taps;
  std::vector<int64_t> in(input_size.end() - k, input_size.end());
  for (size_t j = 0; j < k; ++j) {
    taps.push_back(MakeTaps(mode, in[j], output_size[j], align_corners, ScaleAt(scales, j),
                            Single(grad.dtype())));
  }
  return Separable(grad, taps, in, true, op).reshape(input_size);
}

#define TB_NEAREST_BACKWARD_(NAME, MODE, K, ...)                                                \
  Tensor NAME(const Tensor& grad, const std::vector<int64_t>& output_size,                      \
              const std::vector<int64_t>& input_size, __VA_ARGS__) {                            \
    return InterpBackward(grad, output_size, input_size, MODE, false, {SCALES_##K}, OP_##NAME); \
  }

constexpr const char* OP_Nearest1dBackward = "aten::upsample_nearest1d_backward";
constexpr const char* OP_Nearest2dBackward = "aten::upsample_nearest2d_backward";
constexpr const char* OP_Nearest3dBackward = "aten::upsample_nearest3d_backward";
constexpr const char* OP_NearestExact1dBackward = "aten::_upsample_nearest_exact1d_backward";
constexpr const char* OP_NearestExact2dBackward = "aten::_upsample_nearest_exact2d_backward";
constexpr const char* OP_NearestExact3dBackward = "aten::_upsample_nearest_exact3d_backward";
#define SCALES_1 s0
#define SCALES_2 s0, s1
#define SCALES_3 s0, s1, s2
using OptD = std::optional<double>;
TB_NEAREST_BACKWARD_(Nearest1dBackward, Mode::kNearest, 1, OptD s0)
TB_NEAREST_BACKWARD_(Nearest2dBackward, Mode::kNearest, 2, OptD s0, OptD s1)
TB_NEAREST_BACKWARD_(Nearest3dBackward, Mode::kNearest, 3, OptD s0, OptD s1, OptD s2)
TB_NEAREST_BACKWARD_(NearestExact1dBackward, Mode::kNearestExact, 1, OptD s0)
TB_NEAREST_BACKWARD_(NearestExact2dBackward, Mode::kNearestExact, 2, OptD s0, OptD s1)
TB_NEAREST_BACKWARD_(NearestExact3dBackward, Mode::kNearestExact, 3, OptD s0, OptD s1, OptD s2)
#undef TB_NEAREST_BACKWARD_
#undef SCALES_1
#undef SCALES_2
#undef SCALES_3

Tensor Linear1dBackward(const Tensor& grad, const std::vector<int64_t>& output_size,
                        const std::vector<int64_t>& input_size, bool align_corners, OptD s0) {
  return InterpBackward(grad, output_size, input_size, Mode::kLinear, align_corners, {s0},
                        "aten::upsample_linear1d_backward");
}
Tensor Bilinear2dBackward(const Tensor& grad, const std::vector<int64_t>& output_size,
                          const std::vector<int64_t>& input_size, bool align_corners, OptD s0,
                          OptD s1) {
  return InterpBackward(grad, output_size, input_size, Mode::kLinear, align_corners, {s0, s1},
                        "aten::upsample_bilinear2d_backward");
}
Tensor Trilinear3dBackward(const Tensor& grad, const std::vector<int64_t>& output_size,
                           const std::vector<int64_t>& input_size, bool align_corners, OptD s0,
                           OptD s1, OptD s2) {
  return InterpBackward(grad, output_size, input_size, Mode::kLinear, align_corners, {s0, s1, s2},
                        "aten::upsample_trilinear3d_backward");
}
Tensor Bicubic2dBackward(const Tensor& grad, const std::vector<int64_t>& output_size,
                         const std::vector<int64_t>& input_size, bool align_corners, OptD s0,
                         OptD s1) {
  return InterpBackward(grad, output_size, input_size, Mode::kCubic, align_corners, {s0, s1},
                        "aten::upsample_bicubic2d_backward");
}

Tensor BilinearAA2dBackward(const Tensor& grad, const std::vector<int64_t>& output_size,
                            const std::vector<int64_t>& input_size, bool align_corners, OptD s0,
                            OptD s1) {
  return InterpBackward(grad, output_size, input_size, Mode::kLinearAA, align_corners, {s0, s1},
                        "aten::_upsample_bilinear2d_aa_backward");
}

// The checks of torch's 2-d upsampling forwards (a floating 4-D input, two output sizes, all
// sizes positive), then the taps of `mode` along H and W.
std::vector<Taps> Taps2d(const Tensor& self, const std::vector<int64_t>& output_size, Mode mode,
                         bool align_corners, OptD s0, OptD s1, const char* op) {
  CheckFloat(self, op);
  TB_CHECK(self.ndim() == 4 && output_size.size() == 2, ValueError)
      << op << ": expected 4-D input and 2 output sizes, got input of shape "
      << ShapeString(self.shape()) << " and " << output_size.size() << " sizes";
  TB_CHECK(output_size[0] > 0 && output_size[1] > 0 && self.size(2) > 0 && self.size(3) > 0,
           ValueError)
      << op
      << ": input and output sizes should be greater than 0, but got input (H: " << self.size(2)
      << ", W: " << self.size(3) << ") output (H: " << output_size[0] << ", W: " << output_size[1]
      << ")";
  const bool single = Single(self.dtype());
  return {MakeTaps(mode, self.size(2), output_size[0], align_corners, s0, single),
          MakeTaps(mode, self.size(3), output_size[1], align_corners, s1, single)};
}

Tensor BilinearAA2d(const Tensor& self, const std::vector<int64_t>& output_size, bool align_corners,
                    OptD s0, OptD s1) {
  constexpr const char* kOp = "aten::_upsample_bilinear2d_aa";
  std::vector<Taps> taps = Taps2d(self, output_size, Mode::kLinearAA, align_corners, s0, s1, kOp);
  const std::vector<int64_t> in{self.size(2), self.size(3)};
  return Separable(self, taps, in, false, kOp);
}

Tensor Bicubic2d(const Tensor& self, const std::vector<int64_t>& output_size, bool align_corners,
                 OptD s0, OptD s1) {
  constexpr const char* kOp = "aten::upsample_bicubic2d";
  std::vector<Taps> taps = Taps2d(self, output_size, Mode::kCubic, align_corners, s0, s1, kOp);
  const std::vector<int64_t> in{self.size(2), self.size(3)};
  // torch's forward stores the weights in the input's type: float16 / bfloat16 round them.
  for (Taps& t : taps) {
    for (auto& row : t) {
      for (auto& [i, w] : row) {
        if (self.dtype() == DType::kFloat16) {
          w = kernels::Convert<double>(kernels::Convert<kernels::Half>(w));
        } else if (self.dtype() == DType::kBFloat16) {
          w = kernels::Convert<double>(kernels::Convert<kernels::BFloat16>(w));
        }
      }
    }
  }
  return Separable(self, taps, in, false, kOp);
}

// Reflect / replicate index maps for one dimension: output position -> input position.
Taps PadTaps(int64_t in, int64_t pad_l, int64_t pad_r, bool reflect) {
  const int64_t out = in + pad_l + pad_r;
  const int64_t i_start = std::max<int64_t>(0, -pad_l), o_start = std::max<int64_t>(0, pad_l);
  Taps taps(static_cast<size_t>(std::max<int64_t>(out, 0)));
  for (int64_t j = 0; j < out; ++j) {
    int64_t ip;
    if (reflect) {
      ip = j < pad_l ? pad_l * 2 - j : j < in + pad_l ? j : (in + pad_l - 1) * 2 - j;
    } else {
      ip = j < pad_l ? pad_l : j < in + pad_l ? j : in + pad_l - 1;
    }
    taps[j].push_back({ip - o_start + i_start, 1.0});
  }
  return taps;
}

Tensor PadBackward(const Tensor& grad, const Tensor& self, const std::vector<int64_t>& padding,
                   int64_t k, bool reflect, const char* op) {
  CheckFloat(self, op);
  TB_CHECK(static_cast<int64_t>(padding.size()) == 2 * k, ValueError)
      << op << ": padding must have " << 2 * k << " elements, got " << padding.size();
  TB_CHECK(self.ndim() >= k, ValueError) << op << ": expected at least " << k
                                         << " dimensions, got shape " << ShapeString(self.shape());
  std::vector<Taps> taps;
  std::vector<int64_t> in;
  for (int64_t j = 0; j < k; ++j) {
    // padding lists the last dimension first
    const int64_t p = 2 * (k - 1 - j);
    const int64_t n = self.size(self.ndim() - k + j);
    if (reflect) {
      TB_CHECK(padding[p] < n && padding[p + 1] < n, ValueError)
          << op << ": padding size should be less than the corresponding input dimension";
    }
    in.push_back(n);
    taps.push_back(PadTaps(n, padding[p], padding[p + 1], reflect));
  }
  return Separable(grad, taps, in, true, op).reshape(self.shape());
}

#define TB_PAD_BACKWARD_(NAME, K, REFLECT, OP)                                         \
  Tensor NAME(const Tensor& grad, const Tensor& self, const std::vector<int64_t>& p) { \
    return PadBackward(grad, self, p, K, REFLECT, OP);                                 \
  }
TB_PAD_BACKWARD_(Reflection1dBackward, 1, true, "aten::reflection_pad1d_backward")
TB_PAD_BACKWARD_(Reflection2dBackward, 2, true, "aten::reflection_pad2d_backward")
TB_PAD_BACKWARD_(Reflection3dBackward, 3, true, "aten::reflection_pad3d_backward")
TB_PAD_BACKWARD_(Replication1dBackward, 1, false, "aten::replication_pad1d_backward")
TB_PAD_BACKWARD_(Replication2dBackward, 2, false, "aten::replication_pad2d_backward")
TB_PAD_BACKWARD_(Replication3dBackward, 3, false, "aten::replication_pad3d_backward")
#undef TB_PAD_BACKWARD_

}  // namespace

TB_REGISTER_KERNELS(resample_backward) {
  const DeviceType cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::upsample_nearest1d_backward", cpu, Boxed<&Nearest1dBackward>(),
                       TB_HERE);
  table.RegisterKernel("aten::upsample_nearest2d_backward", cpu, Boxed<&Nearest2dBackward>(),
                       TB_HERE);
  table.RegisterKernel("aten::upsample_nearest3d_backward", cpu, Boxed<&Nearest3dBackward>(),
                       TB_HERE);
  table.RegisterKernel("aten::_upsample_nearest_exact1d_backward", cpu,
                       Boxed<&NearestExact1dBackward>(), TB_HERE);
  table.RegisterKernel("aten::_upsample_nearest_exact2d_backward", cpu,
                       Boxed<&NearestExact2dBackward>(), TB_HERE);
  table.RegisterKernel("aten::_upsample_nearest_exact3d_backward", cpu,
                       Boxed<&NearestExact3dBackward>(), TB_HERE);
  table.RegisterKernel("aten::upsample_linear1d_backward", cpu, Boxed<&Linear1dBackward>(),
                       TB_HERE);
  table.RegisterKernel("aten::upsample_bilinear2d_backward", cpu, Boxed<&Bilinear2dBackward>(),
                       TB_HERE);
  table.RegisterKernel("aten::upsample_trilinear3d_backward", cpu, Boxed<&Trilinear3dBackward>(),
                       TB_HERE);
  table.RegisterKernel("aten::upsample_bicubic2d_backward", cpu, Boxed<&Bicubic2dBackward>(),
                       TB_HERE);
  table.RegisterKernel("aten::upsample_bicubic2d", cpu, Boxed<&Bicubic2d>(), TB_HERE);
  table.RegisterKernel("aten::_upsample_bilinear2d_aa", cpu, Boxed<&BilinearAA2d>(), TB_HERE);
  table.RegisterKernel("aten::_upsample_bilinear2d_aa_backward", cpu,
                       Boxed<&BilinearAA2dBackward>(), TB_HERE);
  table.RegisterKernel("aten::reflection_pad1d_backward", cpu, Boxed<&Reflection1dBackward>(),
                       TB_HERE);
  table.RegisterKernel("aten::reflection_pad2d_backward", cpu, Boxed<&Reflection2dBackward>(),
                       TB_HERE);
  table.RegisterKernel("aten::reflection_pad3d_backward", cpu, Boxed<&Reflection3dBackward>(),
                       TB_HERE);
  table.RegisterKernel("aten::replication_pad1d_backward", cpu, Boxed<&Replication1dBackward>(),
                       TB_HERE);
  table.RegisterKernel("aten::replication_pad2d_backward", cpu, Boxed<&Replication2dBackward>(),
                       TB_HERE);
  table.RegisterKernel("aten::replication_pad3d_backward", cpu, Boxed<&Replication3dBackward>(),
                       TB_HERE);
}

}  // namespace tb
