// Convolutions: aten::convolution and aten::convolution_backward, 1-d to 3-d, with stride,
// padding, dilation, groups, and transposed convolutions with output_padding.
//
// Everything is phrased as the three passes of a regular convolution X (N, Cin, *in) *
// W (Cout, Cin/G, *k) -> Y (N, Cout, *out): forward, backward-data and backward-weights.
// A transposed convolution is the backward-data pass of the regular convolution whose weight
// has the same memory (its input plays Y, its output X), so its backward is the forward and
// backward-weights passes with roles swapped.
//
// float32 and bfloat16 run on oneDNN (layouts chosen by oneDNN, reordered from and to the
// plain ones); float16 runs as float32, except transposed convolutions, which round as torch's
// float16 kernel does (TransposedHalf); float64 and int64 run on im2col + Eigen GEMM.
#include <algorithm>
#include <array>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <Eigen/Core>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "dispatch/op_table.h"
#include "kernels/common_internal.h"
#include "kernels/conv_internal.h"
#include "kernels/dtype_internal.h"
#include "kernels/layout.h"
#include "kernels/loops_internal.h"
#include "kernels/onednn/onednn_internal.h"
#include "kernels/promote_broadcast.h"

namespace tb {
namespace {

using kernels::Convert;
using kernels::ParallelFor;

// The regular convolution a call is phrased in (see the top comment).
struct ConvParams {
  int64_t nsp = 0;  // spatial dims
  int64_t n = 0, cin = 0, cout = 0, groups = 1;
  std::vector<int64_t> in, out, k, stride, pad_l, pad_r, dil;
};

std::vector<int64_t> Expand(const char* op, const char* name, const std::vector<int64_t>& v,
                            int64_t nsp) {
  if (v.size() == 1) return std::vector<int64_t>(nsp, v[0]);
  TB_CHECK(static_cast<int64_t>(v.size()) == nsp, ValueError)
      << op << ": expected " << name << " to have " << nsp << " elements, got " << v.size();
  return v;
}

// Checks the arguments of a call and returns the regular convolution it amounts to, with
// the shape of the call's output in `out_shape`.
ConvParams MakeParams(const char* op, const Tensor& input, const Tensor& weight,
                      const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                      const std::vector<int64_t>& dilation, bool transposed,
                      const std::vector<int64_t>& output_padding, int64_t groups, Dims* out_shape,
                      const std::vector<int64_t>& extra = {}) {
  const int64_t nd = input.ndim();
  TB_CHECK(nd >= 3 && nd <= 5, ValueError)
      << op << ": expected a 3-D, 4-D or 5-D (batched) input, got shape "
      << ShapeString(input.shape());
  TB_CHECK(weight.ndim() == nd, ValueError)
      << op << ": weight of shape " << ShapeString(weight.shape())
      << " does not match input of shape " << ShapeString(input.shape());
  TB_CHECK(input.dtype() == weight.dtype(), TypeError)
      << op << ": input (" << DTypeName(input.dtype()) << ") and weight ("
      << DTypeName(weight.dtype()) << ") must have the same dtype";
  TB_CHECK(groups > 0, ValueError) << op << ": groups must be positive, got " << groups;
  ConvParams p;
  p.nsp = nd - 2;
  p.groups = groups;
  auto s = Expand(op, "stride", stride, p.nsp), pad = Expand(op, "padding", padding, p.nsp);
  auto dil = Expand(op, "dilation", dilation, p.nsp);
  auto opad = transposed ? Expand(op, "output_padding", output_padding, p.nsp)
                         : std::vector<int64_t>(p.nsp, 0);
  for (int64_t i = 0; i < p.nsp; ++i) {
    TB_CHECK(s[i] > 0, ValueError) << op << ": stride must be positive";
    TB_CHECK(dil[i] > 0, ValueError) << op << ": dilation must be positive";
    TB_CHECK(pad[i] >= 0, ValueError) << op << ": padding must be non-negative";
    TB_CHECK(opad[i] >= 0 && (opad[i] < s[i] || opad[i] < dil[i]), ValueError)
        << op << ": output padding must be smaller than either stride or dilation, got " << opad[i];
  }
  // Zeros beyond `padding` on either side ((left, right) per spatial dim; see Convolution).
  std::vector<int64_t> left(p.nsp, 0), right(p.nsp, 0);
  if (!extra.empty()) {
    TB_CHECK(!transposed, ValueError) << op << ": extra padding of a transposed convolution";
    TB_CHECK(static_cast<int64_t>(extra.size()) == 2 * p.nsp, ValueError)
        << op << ": expected " << 2 * p.nsp << " extra padding values, got " << extra.size();
    for (int64_t i = 0; i < p.nsp; ++i) {
      left[i] = extra[2 * i];
      right[i] = extra[2 * i + 1];
      TB_CHECK(left[i] >= 0 && right[i] >= 0, ValueError)
          << op << ": extra padding must be non-negative";
    }
  }
  const int64_t c_in = input.size(1);
  for (int64_t i = 0; i < p.nsp; ++i) p.k.push_back(weight.size(2 + i));
  p.n = input.size(0);
  Dims shape;
  shape.push_back(p.n);
  if (!transposed) {
    TB_CHECK(weight.size(0) % groups == 0 && weight.size(1) * groups == c_in, ValueError)
        << op << ": input of shape " << ShapeString(input.shape()) << " and weight of shape "
        << ShapeString(weight.shape()) << " do not fit with groups=" << groups;
    p.cin = c_in;
    p.cout = weight.size(0);
    shape.push_back(p.cout);
    for (int64_t i = 0; i < p.nsp; ++i) {
      const int64_t len = input.size(2 + i), ext = dil[i] * (p.k[i] - 1) + 1;
      const int64_t padded = len + 2 * pad[i] + left[i] + right[i];
      TB_CHECK(padded >= ext, ValueError)
          << op << ": padded input size " << padded << " in spatial dim " << i
          << " is smaller than the (dilated) kernel size " << ext;
      p.in.push_back(len);
      p.out.push_back((padded - ext) / s[i] + 1);
      shape.push_back(p.out.back());
    }
  } else {
    TB_CHECK(weight.size(0) == c_in && c_in % groups == 0, ValueError)
        << op << ": input of shape " << ShapeString(input.shape()) << " and weight of shape "
        << ShapeString(weight.shape()) << " do not fit with groups=" << groups << " (transposed)";
    p.cout = c_in;
    p.cin = weight.size(1) * groups;
    shape.push_back(p.cin);
    for (int64_t i = 0; i < p.nsp; ++i) {
      const int64_t len = input.size(2 + i);
      const int64_t o = (len - 1) * s[i] - 2 * pad[i] + dil[i] * (p.k[i] - 1) + opad[i] + 1;
      TB_CHECK(o > 0, ValueError) << op << ": computed output size " << o << " in spatial dim " << i
                                  << " is not positive";
      p.out.push_back(len);
      p.in.push_back(o);
      shape.push_back(o);
    }
  }
  for (int64_t i = 0; i < p.nsp; ++i) {
    p.stride.push_back(s[i]);
    p.dil.push_back(dil[i]);
    p.pad_l.push_back(pad[i] + left[i]);
    if (!transposed) {
      p.pad_r.push_back(pad[i] + right[i]);
      continue;
    }
    // The right padding for oneDNN's size arithmetic: the left one when that fits (as in
    // torch), otherwise the one that makes it exact (output_padding >= stride).
    const int64_t ext = dil[i] * (p.k[i] - 1) + 1;
    const bool fits = (p.in[i] + 2 * pad[i] - ext) / s[i] + 1 == p.out[i];
    p.pad_r.push_back(fits ? pad[i] : (p.out[i] - 1) * s[i] + ext - p.in[i] - pad[i]);
  }
  *out_shape = shape;
  return p;
}

// ---- oneDNN -------------------------------------------------------------------------------

enum class Pass { kForward, kBackwardData, kBackwardWeights };

struct OneDnnConv {
  dnnl::primitive prim;
  dnnl::memory::desc src, wei, dst;  // the layouts the primitive takes
};

dnnl::memory::dims Dnnl(const std::vector<int64_t>& v) { return dnnl::memory::dims(v); }

struct OneDnnShapes {
  dnnl::memory::dims src, wei, dst, strides, dil, pad_l, pad_r;
};

OneDnnShapes ShapesOf(const ConvParams& p) {
  OneDnnShapes s;
  s.src = {p.n, p.cin};
  s.dst = {p.n, p.cout};
  if (p.groups > 1)
    s.wei = {p.groups, p.cout / p.groups, p.cin / p.groups};
  else
    s.wei = {p.cout, p.cin};
  for (int64_t i = 0; i < p.nsp; ++i) {
    s.src.push_back(p.in[i]);
    s.dst.push_back(p.out[i]);
    s.wei.push_back(p.k[i]);
    s.dil.push_back(p.dil[i] - 1);
  }
  s.strides = Dnnl(p.stride);
  s.pad_l = Dnnl(p.pad_l);
  s.pad_r = Dnnl(p.pad_r);
  return s;
}

OneDnnConv MakeOneDnnConv(Pass pass, const ConvParams& p, dnnl::memory::data_type dt, bool bias) {
  using md = dnnl::memory::desc;
  const auto any = dnnl::memory::format_tag::any;
  OneDnnShapes s = ShapesOf(p);
  md src(s.src, dt, any), wei(s.wei, dt, any), dst(s.dst, dt, any);
  auto& eng = onednn::Engine();
  dnnl::convolution_forward::desc fwd(dnnl::prop_kind::forward_training,
                                      dnnl::algorithm::convolution_direct, src, wei, dst, s.strides,
                                      s.dil, s.pad_l, s.pad_r);
  dnnl::convolution_forward::primitive_desc fwd_pd(fwd, onednn::Attr(), eng);
  if (pass == Pass::kForward && bias) {
    md b({p.cout}, dt, dnnl::memory::format_tag::a);
    dnnl::convolution_forward::desc fb(dnnl::prop_kind::forward_training,
                                       dnnl::algorithm::convolution_direct, src, wei, b, dst,
                                       s.strides, s.dil, s.pad_l, s.pad_r);
    dnnl::convolution_forward::primitive_desc pd(fb, onednn::Attr(), eng);
    return {dnnl::convolution_forward(pd), pd.src_desc(), pd.weights_desc(), pd.dst_desc()};
  }
  if (pass == Pass::kForward) {
    return {dnnl::convolution_forward(fwd_pd), fwd_pd.src_desc(), fwd_pd.weights_desc(),
            fwd_pd.dst_desc()};
  }
  if (pass == Pass::kBackwardData) {
    dnnl::convolution_backward_data::desc d(dnnl::algorithm::convolution_direct, src, wei, dst,
                                            s.strides, s.dil, s.pad_l, s.pad_r);
    dnnl::convolution_backward_data::primitive_desc pd(d, onednn::Attr(), eng, fwd_pd);
    return {dnnl::convolution_backward_data(pd), pd.diff_src_desc(), pd.weights_desc(),
            pd.diff_dst_desc()};
  }
  dnnl::convolution_backward_weights::desc d(dnnl::algorithm::convolution_direct, src, wei, dst,
                                             s.strides, s.dil, s.pad_l, s.pad_r);
  dnnl::convolution_backward_weights::primitive_desc pd(d, onednn::Attr(), eng, fwd_pd);
  return {dnnl::convolution_backward_weights(pd), pd.src_desc(), pd.diff_weights_desc(),
          pd.diff_dst_desc()};
}

// Runs one pass on oneDNN. x, w, y are C-contiguous; the pass writes the one it computes
// (y forward, x backward-data, w backward-weights). `bias` (forward only) may be null.
void OneDnnPass(const char* op, Pass pass, const ConvParams& p, const Tensor& x, const Tensor& w,
                const Tensor& y, const Tensor* bias) {
  auto dt = onednn::DataType(x.dtype(), op);
  for (int64_t i = 0; i < p.nsp; ++i) {
    TB_CHECK(p.pad_r[i] + p.stride[i] > 0, NotImplementedError)
        << op << ": padding not supported by oneDNN";
  }
  std::string key = onednn::Key(
      "conv", static_cast<int>(pass), bias != nullptr, static_cast<int>(dt), p.n, p.cin, p.cout,
      p.groups, Dnnl(p.in), Dnnl(p.k), Dnnl(p.stride), Dnnl(p.pad_l), Dnnl(p.pad_r), Dnnl(p.dil));
  onednn::Guard(op, [&] {
    OneDnnConv c = onednn::CachedValue<OneDnnConv>(key, [&] {
      OneDnnConv made = MakeOneDnnConv(pass, p, dt, bias != nullptr);
      onednn::CountCreated(made.prim);
      return made;
    });
    OneDnnShapes s = ShapesOf(p);
    auto xm = onednn::Wrap(onednn::PlainDesc(s.src, dt), x.data());
    auto wm = onednn::Wrap(onednn::PlainDesc(s.wei, dt), w.data());
    auto ym = onednn::Wrap(onednn::PlainDesc(s.dst, dt), y.data());
    if (pass == Pass::kForward) {
      // The reordered operands live in this thread's temporaries (read or written only inside
      // this call).
      auto xs = onednn::ToLayout(xm, c.src, 0), ws = onednn::ToLayout(wm, c.wei, 1);
      dnnl::memory ys = c.dst == ym.get_desc() ? ym : onednn::ThreadTemporary(c.dst, 2);
      std::unordered_map<int, dnnl::memory> args{
          {DNNL_ARG_SRC, xs}, {DNNL_ARG_WEIGHTS, ws}, {DNNL_ARG_DST, ys}};
      if (bias) {
        args.emplace(DNNL_ARG_BIAS, onednn::Wrap(onednn::PlainDesc({p.cout}, dt), bias->data()));
      }
      onednn::Execute(c.prim, args);
      onednn::FromLayout(ys, ym);
    } else if (pass == Pass::kBackwardData) {
      auto ys = onednn::ToLayout(ym, c.dst, 0), ws = onednn::ToLayout(wm, c.wei, 1);
      dnnl::memory xs = c.src == xm.get_desc() ? xm : onednn::ThreadTemporary(c.src, 2);
      onednn::Execute(c.prim,
                      {{DNNL_ARG_DIFF_DST, ys}, {DNNL_ARG_WEIGHTS, ws}, {DNNL_ARG_DIFF_SRC, xs}});
      onednn::FromLayout(xs, xm);
    } else {
      auto ys = onednn::ToLayout(ym, c.dst, 0), xs = onednn::ToLayout(xm, c.src, 1);
      dnnl::memory ws = c.wei == wm.get_desc() ? wm : onednn::ThreadTemporary(c.wei, 2);
      onednn::Execute(c.prim,
                      {{DNNL_ARG_DIFF_DST, ys}, {DNNL_ARG_SRC, xs}, {DNNL_ARG_DIFF_WEIGHTS, ws}});
      onednn::FromLayout(ws, wm);
    }
  });
}

// ---- im2col + GEMM (float64, int64, and anything oneDNN does not take) --------------------

// The spatial sizes padded to 3 dims (depth, height, width).
struct Geom3 {
  std::array<int64_t, 3> in, out, k, s, p, d;
  int64_t isz, osz, ksz;
};

Geom3 Geom(const ConvParams& p) {
  Geom3 g{};
  for (int i = 0; i < 3; ++i) {
    const int64_t j = i - (3 - p.nsp);
    const bool has = j >= 0;
    g.in[i] = has ? p.in[j] : 1;
    g.out[i] = has ? p.out[j] : 1;
    g.k[i] = has ? p.k[j] : 1;
    g.s[i] = has ? p.stride[j] : 1;
    g.p[i] = has ? p.pad_l[j] : 0;
    g.d[i] = has ? p.dil[j] : 1;
  }
  g.isz = g.in[0] * g.in[1] * g.in[2];
  g.osz = g.out[0] * g.out[1] * g.out[2];
  g.ksz = g.k[0] * g.k[1] * g.k[2];
  return g;
}

// Visits (column row r, output position o, input position or -1) of the im2col matrix of
// `channels` channels.
template <typename F>
void ForEachCol(const Geom3& g, int64_t channels, F&& f) {
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t kd = 0; kd < g.k[0]; ++kd) {
      for (int64_t kh = 0; kh < g.k[1]; ++kh) {
        for (int64_t kw = 0; kw < g.k[2]; ++kw) {
          const int64_t r = ((c * g.k[0] + kd) * g.k[1] + kh) * g.k[2] + kw;
          int64_t o = 0;
          for (int64_t od = 0; od < g.out[0]; ++od) {
            const int64_t id = od * g.s[0] - g.p[0] + kd * g.d[0];
            for (int64_t oh = 0; oh < g.out[1]; ++oh) {
              const int64_t ih = oh * g.s[1] - g.p[1] + kh * g.d[1];
              for (int64_t ow = 0; ow < g.out[2]; ++ow, ++o) {
                const int64_t iw = ow * g.s[2] - g.p[2] + kw * g.d[2];
                const bool inside =
                    id >= 0 && id < g.in[0] && ih >= 0 && ih < g.in[1] && iw >= 0 && iw < g.in[2];
                f(r, o, inside ? c * g.isz + (id * g.in[1] + ih) * g.in[2] + iw : -1);
              }
            }
          }
        }
      }
    }
  }
}

// With R other than T (backward-data only), the columns and every sum of col2im are rounded
// to R: torch's float16 transposed convolution (slow_conv_transpose) keeps them in float16.
template <typename T, typename R = T>
void GemmPass(Pass pass, const ConvParams& p, const Tensor& x, const Tensor& w, const Tensor& y,
              const Tensor* bias) {
  constexpr bool kRound = !std::is_same_v<T, R>;
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Map = Eigen::Map<Mat>;
  const Geom3 g = Geom(p);
  const int64_t G = p.groups, cgi = p.cin / G, cgo = p.cout / G, kc = cgi * g.ksz;
  T* px = static_cast<T*>(x.data());
  T* pw = static_cast<T*>(w.data());
  T* py = static_cast<T*>(y.data());
  if (pass == Pass::kBackwardWeights) {
    Mat col(kc, g.osz);
    Map(pw, p.cout, kc).setZero();
    for (int64_t n = 0; n < p.n; ++n) {
      for (int64_t gi = 0; gi < G; ++gi) {
        const T* xg = px + (n * p.cin + gi * cgi) * g.isz;
        ForEachCol(g, cgi,
                   [&](int64_t r, int64_t o, int64_t i) { col(r, o) = i >= 0 ? xg[i] : T(0); });
        Map wg(pw + gi * cgo * kc, cgo, kc);
        Map yg(py + (n * p.cout + gi * cgo) * g.osz, cgo, g.osz);
        wg.noalias() += yg * col.transpose();
      }
    }
    return;
  }
#pragma omp parallel for schedule(static) if (p.n > 1 && p.n * p.cout * g.osz * kc > 65536)
  for (int64_t n = 0; n < p.n; ++n) {
    Mat col(kc, g.osz);
    for (int64_t gi = 0; gi < G; ++gi) {
      T* xg = px + (n * p.cin + gi * cgi) * g.isz;
      Map wg(pw + gi * cgo * kc, cgo, kc);
      Map yg(py + (n * p.cout + gi * cgo) * g.osz, cgo, g.osz);
      if (pass == Pass::kForward) {
        ForEachCol(g, cgi,
                   [&](int64_t r, int64_t o, int64_t i) { col(r, o) = i >= 0 ? xg[i] : T(0); });
        yg.noalias() = wg * col;
        if (bias) {
          const T* pb = bias->data_as<const T>() + gi * cgo;
          for (int64_t c = 0; c < cgo; ++c) yg.row(c).array() += pb[c];
        }
      } else {
        col.noalias() = wg.transpose() * yg;
        std::fill(xg, xg + cgi * g.isz, T(0));
        ForEachCol(g, cgi, [&](int64_t r, int64_t o, int64_t i) {
          if (i < 0) return;
          if constexpr (kRound) {
            xg[i] = Convert<T>(Convert<R>(xg[i] + Convert<T>(Convert<R>(col(r, o)))));
          } else {
            xg[i] += col(r, o);
          }
        });
      }
    }
  }
}

// Runs one pass (see OneDnnPass) on whatever serves the dtype.
void RunPass(const char* op, Pass pass, const ConvParams& p, const Tensor& x, const Tensor& w,
             const Tensor& y, const Tensor* bias = nullptr) {
  const DType dt = x.dtype();
  if (dt == DType::kFloat32 || dt == DType::kBFloat16) {
    try {
      OneDnnPass(op, pass, p, x, w, y, bias);
      return;
    } catch (const Error&) {
      // No oneDNN implementation (a bfloat16 CPU gap, an unusual padding): below.
    }
  }
  if (dt == DType::kFloat16 || dt == DType::kBFloat16) {
    Tensor x32 = Cast(x, DType::kFloat32), w32 = Cast(w, DType::kFloat32);
    Tensor y32 = Cast(y, DType::kFloat32);
    Tensor b32 = bias ? Cast(*bias, DType::kFloat32) : Tensor();
    RunPass(op, pass, p, x32, w32, y32, bias ? &b32 : nullptr);
    const Tensor& src = pass == Pass::kForward ? y32 : pass == Pass::kBackwardData ? x32 : w32;
    const Tensor& dst = pass == Pass::kForward ? y : pass == Pass::kBackwardData ? x : w;
    CopyCast(dst, src);
    return;
  }
  switch (dt) {
    case DType::kFloat32: GemmPass<float>(pass, p, x, w, y, bias); return;
    case DType::kFloat64: GemmPass<double>(pass, p, x, w, y, bias); return;
    case DType::kInt64: GemmPass<int64_t>(pass, p, x, w, y, bias); return;
    default: TB_DECLINE << op << ": dtype " << DTypeName(dt) << " is not supported";
  }
}

// y[:, c, ...] += bias[c].
void AddBias(const Tensor& y, const Tensor& bias) {
  const int64_t n = y.size(0), c = y.size(1), inner = y.numel() / std::max<int64_t>(1, n * c);
  Tensor b = bias.contiguous();
  TB_DISPATCH(y.dtype(), "aten::convolution", TB_TYPES_NUMERIC, [&] {
    using T = scalar_t;
    using Acc = kernels::opmath_t<T>;
    T* py = static_cast<T*>(y.mutable_data());
    const T* pb = b.data_as<const T>();
    ParallelFor(n * c, y.numel() > kernels::kGrain, [&](int64_t i) {
      const Acc v = Convert<Acc>(pb[i % c]);
      for (int64_t j = 0; j < inner; ++j) {
        py[i * inner + j] = Convert<T>(static_cast<Acc>(Convert<Acc>(py[i * inner + j]) + v));
      }
    });
  });
}

// sum of dy over all dims but 1.
Tensor BiasGrad(const Tensor& dy_in) {
  Tensor dy = dy_in.contiguous();
  const int64_t n = dy.size(0), c = dy.size(1), inner = dy.numel() / std::max<int64_t>(1, n * c);
  Tensor out = Tensor::Empty({c}, dy.dtype());
  TB_DISPATCH(dy.dtype(), "aten::convolution_backward", TB_TYPES_NUMERIC, [&] {
    using T = scalar_t;
    using Acc = std::conditional_t<kernels::kIsFloating<T>, double, T>;
    const T* p = dy.data_as<const T>();
    T* o = static_cast<T*>(out.mutable_data());
    ParallelFor(c, dy.numel() > kernels::kGrain, [&](int64_t ci) {
      Acc acc = 0;
      for (int64_t ni = 0; ni < n; ++ni) {
        const T* row = p + (ni * c + ci) * inner;
        for (int64_t j = 0; j < inner; ++j) acc += Convert<Acc>(row[j]);
      }
      o[ci] = Convert<T>(acc);
    });
  });
  return out;
}

void CheckBias(const char* op, const Tensor& bias, int64_t channels, DType dt) {
  TB_CHECK(bias.ndim() == 1 && bias.size(0) == channels, ValueError)
      << op << ": expected bias of shape [" << channels << "], got " << ShapeString(bias.shape());
  TB_CHECK(bias.dtype() == dt, TypeError) << op << ": bias dtype " << DTypeName(bias.dtype())
                                          << " does not match input dtype " << DTypeName(dt);
}

// The layout torch's CPU convolution gives its result and its input and weight gradients (the
// memory format a fake CPU tensor gets, i.e. what a traced graph holds): a 1-d convolution runs
// as a 2-d one over the input made contiguous and the weight unsqueezed; a 2-d one (oneDNN or
// the native kernel) is channels-last when the input or the weight suggests it; a 3-d one only
// on oneDNN (float32 per torch's size heuristics, bfloat16 always), when they suggest
// channels-last-3d. Tensors are laid out so by ConvLayout.
struct ConvFormat {
  MemoryFormat format = MemoryFormat::kContiguous;
};

ConvFormat ConvFormatOf(const Tensor& input, const Tensor& weight,
                        const std::vector<int64_t>& stride, const std::vector<int64_t>& dilation,
                        bool transposed, const std::vector<int64_t>& output_padding,
                        int64_t groups) {
  ConvFormat f;
  const int64_t nd = input.ndim();
  if (nd == 3) {  // the input is made contiguous: only the weight, seen as 4-d, can decide
    const Tensor w4 = weight.unsqueeze(2);
    if (SuggestMemoryFormat(w4) == MemoryFormat::kChannelsLast) {
      f.format = MemoryFormat::kChannelsLast;
    }
    return f;
  }
  const MemoryFormat fi = SuggestMemoryFormat(input), fw = SuggestMemoryFormat(weight);
  if (nd == 4) {
    if (fi == MemoryFormat::kChannelsLast || fw == MemoryFormat::kChannelsLast) {
      f.format = MemoryFormat::kChannelsLast;
    }
    return f;
  }
  if (fi != MemoryFormat::kChannelsLast3d && fw != MemoryFormat::kChannelsLast3d) return f;
  // oneDNN or not, as torch's ConvParams::use_mkldnn decides on the CPU.
  auto any = [](const std::vector<int64_t>& v, auto pred) {
    return std::any_of(v.begin(), v.end(), pred);
  };
  bool mkldnn = false;
  if (transposed && output_padding.size() == stride.size()) {
    for (size_t i = 0; i < stride.size(); ++i) {
      if (output_padding[i] >= stride[i]) return f;  // output padding too big for oneDNN
    }
  }
  if (input.dtype() == DType::kBFloat16) {
    mkldnn = true;
  } else if (input.dtype() == DType::kFloat32) {
    const int64_t n = input.size(0), kw = weight.size(-1), kh = weight.size(-2);
    int64_t threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    const bool strided = any(stride, [](int64_t s) { return s != 1; });
    const bool dilated = any(dilation, [](int64_t d) { return d != 1; });
    mkldnn = (strided || dilated || n >= 16 || kw != 1 || kh != 1 || threads > 1) &&
             (groups > 1 || (kw > 3 && kh > 3) || n > 1 ||
              n * input.size(1) * input.size(2) * input.size(3) > 20480);
  }
  if (mkldnn) f.format = MemoryFormat::kChannelsLast3d;
  return f;
}

// t (a result or gradient of the convolution, computed in C order) laid out as ConvFormat says.
Tensor ConvLayout(const Tensor& t, const ConvFormat& f) {
  if (f.format == MemoryFormat::kContiguous || !t.defined()) return t;
  if (t.ndim() == 3) {  // channels-last of the 2-d view: [N, C, L] stored as [N, L, C]
    const Dims strides = StridesInOrder(t.shape(), {0, 2, 1});
    bool same = true;
    for (int64_t d = 0; d < 3; ++d) same &= t.size(d) == 1 || t.stride(d) == strides[d];
    if (same) return t;
    Tensor out = EmptyDense(t.shape(), strides, t.dtype());
    out.copy_from(t);
    return out;
  }
  return InFormat(t, f.format);
}

}  // namespace

namespace kernels {

// A 16-bit transposed convolution as torch's CPU fallback kernel (slow_conv_transpose)
// computes it: the columns W^T x in float rounded to R, col2im summing them in R, the bias
// added in R. torch takes it for float16, and for bfloat16 where oneDNN is not used (an
// output_padding not below its stride).
template <typename R>
Tensor TransposedHalf(const ConvParams& p, const Dims& shape, const Tensor& input,
                      const Tensor& weight, const std::optional<Tensor>& bias,
                      const std::vector<int64_t>& stride, const std::vector<int64_t>& dilation,
                      const std::vector<int64_t>& output_padding) {
  Tensor out = Tensor::Zeros(shape, input.dtype());
  if (out.numel() > 0 && input.numel() > 0 && weight.numel() > 0) {
    Tensor out32 = Tensor::Empty(shape, DType::kFloat32);
    GemmPass<float, R>(Pass::kBackwardData, p, out32, Cast(weight.contiguous(), DType::kFloat32),
                       Cast(input.contiguous(), DType::kFloat32), nullptr);
    CopyCast(out, out32);  // exact: every value is already an R
  }
  if (bias && out.numel() > 0) AddBias(out, *bias);
  return ConvLayout(out,
                    ConvFormatOf(input, weight, stride, dilation, true, output_padding, p.groups));
}

Tensor Convolution(const char* op, const Tensor& input, const Tensor& weight,
                   const std::optional<Tensor>& bias, const std::vector<int64_t>& stride,
                   const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation,
                   bool transposed, const std::vector<int64_t>& output_padding, int64_t groups,
                   const std::vector<int64_t>& extra_padding) {
  Dims shape;
  ConvParams p = MakeParams(op, input, weight, stride, padding, dilation, transposed,
                            output_padding, groups, &shape, extra_padding);
  if (bias) CheckBias(op, *bias, shape[1], input.dtype());
  const DType dt = input.dtype();
  if (transposed && dt == DType::kFloat16) {
    return TransposedHalf<Half>(p, shape, input, weight, bias, stride, dilation, output_padding);
  }
  if (transposed && dt == DType::kBFloat16) {
    bool big_output_padding = false;
    for (int64_t i = 0; i < p.nsp && !output_padding.empty(); ++i) {
      big_output_padding |= p.stride[i] <= output_padding[output_padding.size() == 1 ? 0 : i];
    }
    if (big_output_padding) {
      return TransposedHalf<BFloat16>(p, shape, input, weight, bias, stride, dilation,
                                      output_padding);
    }
  }
  if (transposed && bias && dt == DType::kBFloat16) {
    // Bias added before the one rounding to 16 bits, as torch: in float32.
    Tensor b32 = Cast(*bias, DType::kFloat32);
    return Cast(Convolution(op, Cast(input, DType::kFloat32), Cast(weight, DType::kFloat32), b32,
                            stride, padding, dilation, transposed, output_padding, groups),
                dt);
  }
  const bool work = ShapeNumel(shape) > 0 && input.numel() > 0 && weight.numel() > 0;
  // Every pass writes its whole result: zeros only when there is nothing to compute.
  Tensor out = work ? Tensor::Empty(shape, dt) : Tensor::Zeros(shape, dt);
  if (work) {
    Tensor x = input.contiguous(), w = weight.contiguous();
    if (!transposed) {
      Tensor b = bias ? bias->contiguous() : Tensor();
      RunPass(op, Pass::kForward, p, x, w, out, bias ? &b : nullptr);
    } else {
      RunPass(op, Pass::kBackwardData, p, out, w, x);
    }
  }
  if (bias && out.numel() > 0 && (transposed || !work)) AddBias(out, *bias);
  // Computed in C order, handed back in torch's layout.
  return ConvLayout(
      out, ConvFormatOf(input, weight, stride, dilation, transposed, output_padding, groups));
}

}  // namespace kernels

namespace {

Tensor AtenConvolution(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                       const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                       const std::vector<int64_t>& dilation, bool transposed,
                       const std::vector<int64_t>& output_padding, int64_t groups) {
  return kernels::Convolution("aten::convolution", input, weight, bias, stride, padding, dilation,
                              transposed, output_padding, groups);
}

// aten::convolution_backward, and with `extra_padding` ((left, right) per spatial dim) the
// gradients of the convolution of constant_pad_nd(input, ..., 0): grad_input has the unpadded
// input's shape (the padded gradient cropped), without making the padded copy.
std::tuple<Tensor, Tensor, Tensor> ConvolutionBackwardOf(
    const char* kOp, const Tensor& grad_output, const Tensor& input, const Tensor& weight,
    const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
    const std::vector<int64_t>& dilation, bool transposed,
    const std::vector<int64_t>& output_padding, int64_t groups,
    const std::vector<bool>& output_mask, const std::vector<int64_t>& extra_padding) {
  TB_CHECK(output_mask.size() == 3, ValueError) << kOp << ": output_mask must have 3 elements";
  Dims shape;
  ConvParams p = MakeParams(kOp, input, weight, stride, padding, dilation, transposed,
                            output_padding, groups, &shape, extra_padding);
  TB_CHECK(grad_output.shape() == shape.ref(), ValueError)
      << kOp << ": expected grad_output of shape " << ShapeString(shape) << ", got "
      << ShapeString(grad_output.shape());
  TB_CHECK(grad_output.dtype() == input.dtype(), TypeError)
      << kOp << ": grad_output dtype " << DTypeName(grad_output.dtype())
      << " does not match input dtype " << DTypeName(input.dtype());
  Tensor dy = grad_output.contiguous(), x = input.contiguous(), w = weight.contiguous();
  const bool work = dy.numel() > 0 && x.numel() > 0 && w.numel() > 0;
  Tensor gi, gw, gb;
  // Every pass writes its whole result: zeros only when there is nothing to compute.
  auto result = [&](const Tensor& like) {
    return work ? Tensor::Empty(like.shape(), like.dtype())
                : Tensor::Zeros(like.shape(), like.dtype());
  };
  if (output_mask[0]) {
    gi = result(input);
    if (work) {
      if (!transposed)
        RunPass(kOp, Pass::kBackwardData, p, gi, w, dy);
      else
        RunPass(kOp, Pass::kForward, p, dy, w, gi);
    }
  }
  if (output_mask[1]) {
    gw = result(weight);
    if (work) {
      if (!transposed)
        RunPass(kOp, Pass::kBackwardWeights, p, x, gw, dy);
      else
        RunPass(kOp, Pass::kBackwardWeights, p, dy, gw, x);
    }
  }
  if (output_mask[2]) gb = BiasGrad(dy);
  // The passes above compute in C order; the gradients in torch's layout.
  const ConvFormat format =
      ConvFormatOf(input, weight, stride, dilation, transposed, output_padding, groups);
  gi = ConvLayout(gi, format);
  gw = ConvLayout(gw, format);
  return {gi, gw, gb};
}

std::tuple<Tensor, Tensor, Tensor> ConvolutionBackward(
    const Tensor& grad_output, const Tensor& input, const Tensor& weight,
    const std::optional<std::vector<int64_t>>& /*bias_sizes*/, const std::vector<int64_t>& stride,
    const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation, bool transposed,
    const std::vector<int64_t>& output_padding, int64_t groups,
    const std::vector<bool>& output_mask) {
  return ConvolutionBackwardOf("aten::convolution_backward", grad_output, input, weight, stride,
                               padding, dilation, transposed, output_padding, groups, output_mask,
                               {});
}

std::tuple<Tensor, Tensor, Tensor> PaddedConvolutionBackward(
    const Tensor& grad_output, const Tensor& input, const Tensor& weight,
    const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
    const std::vector<int64_t>& dilation, int64_t groups, const std::vector<bool>& output_mask,
    const std::vector<int64_t>& extra_padding) {
  return ConvolutionBackwardOf("tensorbridge::convolution_backward_padded", grad_output, input,
                               weight, stride, padding, dilation, false, {}, groups, output_mask,
                               extra_padding);
}

}  // namespace

TB_REGISTER_KERNELS(conv) {
  table.RegisterKernel("aten::convolution", DeviceType::kCPU, Boxed<&AtenConvolution>(), TB_HERE);
  table.RegisterKernel("aten::convolution_backward", DeviceType::kCPU,
                       Boxed<&ConvolutionBackward>(), TB_HERE);
  OpTable::Global().Define(
      "tensorbridge::convolution_backward_padded(Tensor grad_output, Tensor input, Tensor weight, "
      "SymInt[] stride, SymInt[] padding, SymInt[] dilation, SymInt groups, bool[3] output_mask, "
      "int[] extra_padding) -> (Tensor, Tensor, Tensor)");
  table.RegisterKernel("tensorbridge::convolution_backward_padded", DeviceType::kCPU,
                       Boxed<&PaddedConvolutionBackward>(), TB_HERE);
}

}  // namespace tb
