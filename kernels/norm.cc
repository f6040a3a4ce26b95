// Normalisation: aten::native_layer_norm (+ backward) and aten::native_group_norm
// (+ backward). Batch norm lives in norm_batch.cc.
//
// float32 layer norm runs on row kernels (kernels/cpu/simd.cc), forward and backward (the
// backward of more than 2M elements on oneDNN's layer_normalization primitive); other dtypes
// and group norm run on loops that accumulate in double and parallelise over rows / groups.
// Statistics (mean, rstd) come back in the "parameter dtype": float32 when a 16-bit input comes
// with float32 parameters (torch's mixed-type CPU path), the input's dtype otherwise.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "dispatch/op_table.h"
#include "kernels/cpu/simd_internal.h"
#include "kernels/layout.h"
#include "kernels/norm_internal.h"

namespace tb {
namespace {

using namespace kernels::norm;  // NOLINT(build/namespaces)

// ---- layer norm ---------------------------------------------------------------------------

int64_t LayerNormAxis(const char* op, const Tensor& input,
                      const std::vector<int64_t>& normalized_shape) {
  const int64_t nn = static_cast<int64_t>(normalized_shape.size());
  const int64_t axis = input.ndim() - nn;
  bool ok = nn >= 1 && axis >= 0;
  for (int64_t i = 0; ok && i < nn; ++i) ok = input.size(axis + i) == normalized_shape[i];
  TB_CHECK(ok, ValueError) << op << ": input of shape " << ShapeString(input.shape())
                           << " does not end with normalized_shape "
                           << ShapeString(normalized_shape);
  return axis;
}

Dims StatShape(const Tensor& input, int64_t axis) {
  Dims s;
  for (int64_t i = 0; i < input.ndim(); ++i) s.push_back(i < axis ? input.size(i) : 1);
  return s;
}

// oneDNN float32 forward; false when oneDNN cannot take it.
bool OneDnnLayerNorm(const Tensor& x, const std::optional<Tensor>& w,
                     const std::optional<Tensor>& b, double eps, int64_t m, int64_t n,
                     const Tensor& out, Tensor* mean, Tensor* var) {
  if (x.dtype() != DType::kFloat32 || (w && w->dtype() != DType::kFloat32) ||
      (b && b->dtype() != DType::kFloat32)) {
    return false;
  }
  using dt = dnnl::memory::data_type;
  auto md = onednn::PlainDesc({m, n}, dt::f32), smd = onednn::PlainDesc({m}, dt::f32);
  auto pmd = onednn::PlainDesc({n}, dt::f32);
  std::string key = onednn::Key("lnorm", m, n, eps, w.has_value(), b.has_value());
  try {
    auto prim = onednn::Cached(key, [&] {
      auto flags = dnnl::normalization_flags::none;
      if (w) flags |= dnnl::normalization_flags::use_scale;
      if (b) flags |= dnnl::normalization_flags::use_shift;
      dnnl::layer_normalization_forward::desc d(dnnl::prop_kind::forward_training, md, smd,
                                                static_cast<float>(eps), flags);
      return dnnl::primitive(dnnl::layer_normalization_forward(
          dnnl::layer_normalization_forward::primitive_desc(d, onednn::Attr(), onednn::Engine())));
    });
    *mean = Tensor::Empty({m}, DType::kFloat32);
    *var = Tensor::Empty({m}, DType::kFloat32);
    Tensor wc = w ? w->contiguous() : Tensor(), bc = b ? b->contiguous() : Tensor();
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, onednn::Wrap(md, x.data())},
                                               {DNNL_ARG_DST, onednn::Wrap(md, out.data())},
                                               {DNNL_ARG_MEAN, onednn::Wrap(smd, mean->data())},
                                               {DNNL_ARG_VARIANCE, onednn::Wrap(smd, var->data())}};
    if (w) args.emplace(DNNL_ARG_SCALE, onednn::Wrap(pmd, wc.data()));
    if (b) args.emplace(DNNL_ARG_SHIFT, onednn::Wrap(pmd, bc.data()));
    onednn::Execute(prim, args);
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

std::tuple<Tensor, Tensor, Tensor> NativeLayerNorm(const Tensor& input,
                                                   const std::vector<int64_t>& normalized_shape,
                                                   const std::optional<Tensor>& weight,
                                                   const std::optional<Tensor>& bias, double eps) {
  constexpr const char* kOp = "aten::native_layer_norm";
  CheckFloat(kOp, input);
  const int64_t axis = LayerNormAxis(kOp, input, normalized_shape);
  int64_t m = 1, n = 1;
  for (int64_t i = 0; i < input.ndim(); ++i) (i < axis ? m : n) *= input.size(i);
  const DType pdt = ParamDType(input.dtype(), {&weight, &bias});
  const Dims sshape = StatShape(input, axis);
  Tensor x = input.contiguous();
  Tensor out = Tensor::Empty(input.shape(), input.dtype());
  if (m > 0 && n > 0 && input.dtype() == DType::kFloat32 && AllF32({&weight, &bias})) {
    // float32: one fused pass per row (kernels/cpu/simd.cc), rows in parallel.
    Tensor wc = weight ? weight->contiguous() : Tensor(), bc = bias ? bias->contiguous() : Tensor();
    const float* pw = weight ? wc.data_as<const float>() : nullptr;
    const float* pb = bias ? bc.data_as<const float>() : nullptr;
    TB_CHECK(!weight || wc.numel() == n, ValueError)
        << kOp << ": expected weight with " << n << " elements, got shape "
        << ShapeString(weight->shape());
    TB_CHECK(!bias || bc.numel() == n, ValueError)
        << kOp << ": expected bias with " << n << " elements, got shape "
        << ShapeString(bias->shape());
    Tensor mean = Tensor::Empty(sshape, DType::kFloat32);
    Tensor rstd = Tensor::Empty(sshape, DType::kFloat32);
    const float* px = x.data_as<const float>();
    float* po = static_cast<float*>(out.mutable_data());
    float* pm = static_cast<float*>(mean.mutable_data());
    float* pr = static_cast<float*>(rstd.mutable_data());
    const float feps = static_cast<float>(eps);
    ParallelFor(m, m * n > kernels::kGrain, [&](int64_t r) {
      kernels::simd::LayerNormRow(px + r * n, po + r * n, pw, pb, n, feps, pm + r, pr + r);
    });
    return {out, mean, rstd};
  }
  if (m > 0 && n > 0) {
    Tensor mean, var;
    if (OneDnnLayerNorm(x, weight, bias, eps, m, n, out, &mean, &var)) {
      return {out, Cast(mean, pdt).view(sshape), Cast(InvStd(var, eps), pdt).view(sshape)};
    }
  }
  Vec w = Doubles(kOp, "weight", weight, n, 1.0), b = Doubles(kOp, "bias", bias, n, 0.0);
  Vec mean(m), rstd(m);
  TB_DISPATCH(input.dtype(), kOp, TB_TYPES_FLOAT, [&] {
    using T = scalar_t;
    const T* px = x.data_as<const T>();
    T* po = static_cast<T*>(out.mutable_data());
    ParallelFor(m, m * n > kernels::kGrain, [&](int64_t r) {
      const T* row = px + r * n;
      double s = 0;
      for (int64_t i = 0; i < n; ++i) s += Convert<double>(row[i]);
      const double mu = s / n;
      double v = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double d = Convert<double>(row[i]) - mu;
        v += d * d;
      }
      const double rs = 1.0 / std::sqrt(v / n + eps);
      mean[r] = mu;
      rstd[r] = rs;
      for (int64_t i = 0; i < n; ++i) {
        po[r * n + i] = Convert<T>((Convert<double>(row[i]) - mu) * rs * w[i] + b[i]);
      }
    });
  });
  return {out, FromDoubles(mean, sshape, pdt), FromDoubles(rstd, sshape, pdt)};
}

// float32 backward on kernels/cpu/simd.cc's LayerNormBackwardRow, up to kRowLayerNormMax
// elements; false otherwise (oneDNN's primitive then runs). dx per row (its sums in double), dw
// and db summed over rows in float (as torch's kernel accumulates them), one partial per
// thread, added in thread order. One thread, against oneDNN's primitive: [64, 128] 9.2-9.8 vs
// 11.9-12.4 us, [64, 768] 23 vs 31-32 us, [1024, 768] 304-319 vs 358-508 us; at [4096, 1024],
// beyond the caches, oneDNN's is faster (5.5 vs 7.0-8.0 ms).
constexpr int64_t kRowLayerNormMax = int64_t{1} << 21;

bool RowLayerNormBackward(const Tensor& x, const Tensor& dy, const Tensor& mean, const Tensor& rstd,
                          const std::optional<Tensor>& weight, int64_t m, int64_t n,
                          const std::vector<bool>& mask, Tensor* dx, Tensor* dw, Tensor* db) {
  if (x.dtype() != DType::kFloat32 || dy.dtype() != DType::kFloat32 ||
      mean.dtype() != DType::kFloat32 || rstd.dtype() != DType::kFloat32 || !AllF32({&weight}) ||
      m == 0 || n == 0 || m * n > kRowLayerNormMax) {
    return false;
  }
  const Tensor mu = mean.contiguous(), rs = rstd.contiguous();
  const Tensor wc = weight ? weight->contiguous() : Tensor();
  const float* px = x.data_as<const float>();
  const float* pg = dy.data_as<const float>();
  const float* pw = weight ? wc.data_as<const float>() : nullptr;
  const float* pm = mu.data_as<const float>();
  const float* pr = rs.data_as<const float>();
  float* pdx = nullptr;
  if (mask[0]) {
    *dx = Tensor::Empty(x.shape(), DType::kFloat32);
    pdx = static_cast<float*>(dx->mutable_data());
  }
  // dw's sums, then db's; each thread's scratch row holds dy * w.
  const int64_t ncols = (mask[1] || mask[2]) ? 2 : 0;
  const auto sums = ColumnSums<float>(
      m, n, ncols, m * n > kernels::kGrain, [&](int64_t r, std::vector<std::vector<float>>& acc) {
        thread_local std::vector<float> scratch;
        if (pw && pdx && static_cast<int64_t>(scratch.size()) < n) scratch.resize(n);
        kernels::simd::LayerNormBackwardRow(
            px + r * n, pg + r * n, pw, n, pm[r], pr[r], pdx ? pdx + r * n : nullptr,
            scratch.data(), mask[1] ? acc[0].data() : nullptr, mask[2] ? acc[1].data() : nullptr);
      });
  if (ncols > 0) {
    *dw = Tensor::Empty({n}, DType::kFloat32);
    *db = Tensor::Empty({n}, DType::kFloat32);
    std::copy(sums[0].begin(), sums[0].end(), static_cast<float*>(dw->mutable_data()));
    std::copy(sums[1].begin(), sums[1].end(), static_cast<float*>(db->mutable_data()));
  }
  return true;
}

// oneDNN float32 backward (dx, dgamma, dbeta); false when oneDNN cannot take it.
bool OneDnnLayerNormBackward(const Tensor& x, const Tensor& dy, const Tensor& mean,
                             const Tensor& rstd, const std::optional<Tensor>& weight, int64_t m,
                             int64_t n, Tensor* dx, Tensor* dw, Tensor* db) {
  if (x.dtype() != DType::kFloat32 || dy.dtype() != DType::kFloat32 ||
      mean.dtype() != DType::kFloat32 || rstd.dtype() != DType::kFloat32 || !AllF32({&weight}) ||
      m == 0 || n == 0) {
    return false;
  }
  using dt = dnnl::memory::data_type;
  auto md = onednn::PlainDesc({m, n}, dt::f32), smd = onednn::PlainDesc({m}, dt::f32);
  auto pmd = onednn::PlainDesc({n}, dt::f32);
  const auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
  try {
    auto prim = onednn::Cached(onednn::Key("lnorm_bwd", m, n), [&] {
      auto& eng = onednn::Engine();
      dnnl::layer_normalization_forward::primitive_desc hint(
          dnnl::layer_normalization_forward::desc(dnnl::prop_kind::forward_training, md, smd, 0.f,
                                                  flags),
          eng);
      dnnl::layer_normalization_backward::desc d(dnnl::prop_kind::backward, md, md, smd, 0.f,
                                                 flags);
      return dnnl::primitive(dnnl::layer_normalization_backward(
          dnnl::layer_normalization_backward::primitive_desc(d, onednn::Attr(), eng, hint)));
    });
    ExecuteNormBackward(prim, md, smd, pmd, x, dy, mean.contiguous(), VarianceFromRstd(rstd),
                        weight, n, dx, dw, db);
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

std::tuple<Tensor, Tensor, Tensor> NativeLayerNormBackwardC(
    const Tensor& grad_out, const Tensor& input, const std::vector<int64_t>& normalized_shape,
    const Tensor& mean, const Tensor& rstd, const std::optional<Tensor>& weight,
    const std::optional<Tensor>& bias, const std::vector<bool>& output_mask) {
  constexpr const char* kOp = "aten::native_layer_norm_backward";
  CheckFloat(kOp, input);
  TB_CHECK(output_mask.size() == 3, ValueError) << kOp << ": output_mask must have 3 elements";
  const int64_t axis = LayerNormAxis(kOp, input, normalized_shape);
  TB_CHECK(grad_out.shape() == input.shape(), ValueError)
      << kOp << ": grad_out of shape " << ShapeString(grad_out.shape())
      << " does not match input of shape " << ShapeString(input.shape());
  int64_t m = 1, n = 1;
  for (int64_t i = 0; i < input.ndim(); ++i) (i < axis ? m : n) *= input.size(i);
  TB_CHECK(mean.numel() == m && rstd.numel() == m, ValueError)
      << kOp << ": expected mean and rstd with " << m << " elements, got shapes "
      << ShapeString(mean.shape()) << " and " << ShapeString(rstd.shape());
  Tensor x = input.contiguous(), dy = Cast(grad_out, input.dtype()).contiguous();
  Tensor dx, dw, db;
  const Dims wshape = IntArrayRef(normalized_shape);
  if (RowLayerNormBackward(x, dy, mean, rstd, weight, m, n, output_mask, &dx, &dw, &db) ||
      OneDnnLayerNormBackward(x, dy, mean, rstd, weight, m, n, &dx, &dw, &db)) {
    const DType wdt = weight ? weight->dtype() : input.dtype();
    return {output_mask[0] ? dx : Tensor(), output_mask[1] ? Cast(dw, wdt).view(wshape) : Tensor(),
            output_mask[2] ? Cast(db, bias ? bias->dtype() : wdt).view(wshape) : Tensor()};
  }
  Vec mu = Doubles(kOp, "mean", mean, m, 0.0), rs = Doubles(kOp, "rstd", rstd, m, 0.0);
  Vec w = Doubles(kOp, "weight", weight, n, 1.0);
  if (output_mask[0]) dx = Tensor::Empty(input.shape(), input.dtype());
  std::vector<Vec> sums;
  TB_DISPATCH(input.dtype(), kOp, TB_TYPES_FLOAT, [&] {
    using T = scalar_t;
    const T* px = x.data_as<const T>();
    const T* pg = dy.data_as<const T>();
    if (output_mask[0] && n > 0) {
      T* pd = static_cast<T*>(dx.mutable_data());
      ParallelFor(m, m * n > kernels::kGrain, [&](int64_t r) {
        const T* xr = px + r * n;
        const T* gr = pg + r * n;
        double ds = 0, dbs = 0;
        for (int64_t i = 0; i < n; ++i) {
          const double g = Convert<double>(gr[i]) * w[i];
          ds += g * Convert<double>(xr[i]);
          dbs += g;
        }
        const double a = rs[r];
        const double bb = (dbs * mu[r] - ds) * a * a * a / n;
        const double c = -bb * mu[r] - dbs * a / n;
        for (int64_t i = 0; i < n; ++i) {
          pd[r * n + i] =
              Convert<T>(a * Convert<double>(gr[i]) * w[i] + bb * Convert<double>(xr[i]) + c);
        }
      });
    }
    if (output_mask[1] || output_mask[2]) {
      sums = ColumnSums(m, n, 2, m * n > kernels::kGrain, [&](int64_t r, std::vector<Vec>& acc) {
        const T* xr = px + r * n;
        const T* gr = pg + r * n;
        for (int64_t i = 0; i < n; ++i) {
          const double g = Convert<double>(gr[i]);
          acc[0][i] += g * (Convert<double>(xr[i]) - mu[r]) * rs[r];
          acc[1][i] += g;
        }
      });
    }
  });
  const DType wdt = weight ? weight->dtype() : input.dtype();
  if (output_mask[1]) dw = FromDoubles(sums[0], wshape, wdt);
  if (output_mask[2]) db = FromDoubles(sums[1], wshape, bias ? bias->dtype() : wdt);
  return {dx, dw, db};
}
// ---- group norm ---------------------------------------------------------------------------

void CheckGroupNorm(const char* op, const Tensor& input, int64_t n, int64_t c, int64_t hxw,
                    int64_t group) {
  TB_CHECK(group > 0 && c % group == 0, ValueError)
      << op << ": expected the number of channels (" << c << ") to be divisible by group (" << group
      << ")";
  TB_CHECK(
      input.ndim() >= 2 && input.size(0) == n && input.size(1) == c && input.numel() == n * c * hxw,
      ValueError)
      << op << ": input of shape " << ShapeString(input.shape()) << " does not match N=" << n
      << ", C=" << c << ", HxW=" << hxw;
}

std::tuple<Tensor, Tensor, Tensor> NativeGroupNorm(const Tensor& input,
                                                   const std::optional<Tensor>& weight,
                                                   const std::optional<Tensor>& bias, int64_t n,
                                                   int64_t c, int64_t hxw, int64_t group,
                                                   double eps) {
  constexpr const char* kOp = "aten::native_group_norm";
  CheckFloat(kOp, input);
  CheckGroupNorm(kOp, input, n, c, hxw, group);
  const DType pdt = ParamDType(input.dtype(), {&weight, &bias});
  Vec w = Doubles(kOp, "weight", weight, c, 1.0), b = Doubles(kOp, "bias", bias, c, 0.0);
  const int64_t cg = c / group, d = cg * hxw;
  Tensor x = input.contiguous();
  Tensor out = Tensor::Empty(input.shape(), input.dtype());
  Vec mean(n * group), rstd(n * group);
  TB_DISPATCH(input.dtype(), kOp, TB_TYPES_FLOAT, [&] {
    using T = scalar_t;
    using A = kernels::opmath_t<T>;
    const T* px = x.data_as<const T>();
    T* po = static_cast<T*>(out.mutable_data());
    ParallelFor(n * group, input.numel() > kernels::kGrain, [&](int64_t ng) {
      const T* p = px + ng * d;
      double s = 0;
      for (int64_t i = 0; i < d; ++i) s += Convert<double>(p[i]);
      const double mu = d > 0 ? s / d : 0.0;
      double v = 0;
      for (int64_t i = 0; i < d; ++i) {
        const double e = Convert<double>(p[i]) - mu;
        v += e * e;
      }
      const double rs = 1.0 / std::sqrt((d > 0 ? v / d : 0.0) + eps);
      mean[ng] = mu;
      rstd[ng] = rs;
      const int64_t g = ng % group;
      for (int64_t ci = 0; ci < cg; ++ci) {
        const int64_t ch = g * cg + ci;
        // in the opmath type: float loops vectorise
        const A scale = static_cast<A>(rs * w[ch]), shift = static_cast<A>(b[ch] - mu * rs * w[ch]);
        for (int64_t j = 0; j < hxw; ++j) {
          const int64_t i = ci * hxw + j;
          po[ng * d + i] = Convert<T>(static_cast<A>(Convert<A>(p[i]) * scale + shift));
        }
      }
    });
  });
  return {out, FromDoubles(mean, {n, group}, pdt), FromDoubles(rstd, {n, group}, pdt)};
}

std::tuple<Tensor, Tensor, Tensor> NativeGroupNormBackward(
    const Tensor& grad_out, const Tensor& input, const Tensor& mean, const Tensor& rstd,
    const std::optional<Tensor>& weight, int64_t n, int64_t c, int64_t hxw, int64_t group,
    const std::vector<bool>& output_mask) {
  constexpr const char* kOp = "aten::native_group_norm_backward";
  CheckFloat(kOp, input);
  TB_CHECK(output_mask.size() == 3, ValueError) << kOp << ": output_mask must have 3 elements";
  CheckGroupNorm(kOp, input, n, c, hxw, group);
  TB_CHECK(grad_out.shape() == input.shape(), ValueError)
      << kOp << ": grad_out of shape " << ShapeString(grad_out.shape())
      << " does not match input of shape " << ShapeString(input.shape());
  const int64_t cg = c / group, d = cg * hxw;
  Vec mu = Doubles(kOp, "mean", mean, n * group, 0.0);
  Vec rs = Doubles(kOp, "rstd", rstd, n * group, 0.0);
  Vec w = Doubles(kOp, "weight", weight, c, 1.0);
  Tensor x = input.contiguous(), dy = Cast(grad_out, input.dtype()).contiguous();
  Vec ds(n * c), dbs(n * c);  // per (batch, channel): sum dy * x, sum dy
  Tensor dx;
  if (output_mask[0]) dx = Tensor::Empty(input.shape(), input.dtype());
  TB_DISPATCH(input.dtype(), kOp, TB_TYPES_FLOAT, [&] {
    using T = scalar_t;
    const T* px = x.data_as<const T>();
    const T* pg = dy.data_as<const T>();
    T* pd = output_mask[0] ? static_cast<T*>(dx.mutable_data()) : nullptr;
    ParallelFor(n * group, input.numel() > kernels::kGrain, [&](int64_t ng) {
      const int64_t g = ng % group, ni = ng / group;
      double dsg = 0, dbg = 0;
      for (int64_t ci = 0; ci < cg; ++ci) {
        const int64_t ch = g * cg + ci, base = (ni * c + ch) * hxw;
        double a = 0, bsum = 0;
        for (int64_t j = 0; j < hxw; ++j) {
          const double gv = Convert<double>(pg[base + j]);
          a += gv * Convert<double>(px[base + j]);
          bsum += gv;
        }
        ds[ni * c + ch] = a;
        dbs[ni * c + ch] = bsum;
        dsg += a * w[ch];
        dbg += bsum * w[ch];
      }
      if (!pd || d == 0) return;
      const double r = rs[ng], m = mu[ng], s = 1.0 / d;
      const double bb = (dbg * m - dsg) * r * r * r * s;
      const double cc = -bb * m - dbg * r * s;
      for (int64_t ci = 0; ci < cg; ++ci) {
        const int64_t ch = g * cg + ci, base = (ni * c + ch) * hxw;
        const double a = r * w[ch];
        for (int64_t j = 0; j < hxw; ++j) {
          pd[base + j] = Convert<T>(a * Convert<double>(pg[base + j]) +
                                    bb * Convert<double>(px[base + j]) + cc);
        }
      }
    });
  });
  Tensor dw, db;
  const DType wdt = weight ? weight->dtype() : input.dtype();
  if (output_mask[1]) {
    Vec v(c, 0.0);
    for (int64_t ni = 0; ni < n; ++ni) {
      for (int64_t ch = 0; ch < c; ++ch) {
        const int64_t ng = ni * group + ch / cg;
        v[ch] += (ds[ni * c + ch] - dbs[ni * c + ch] * mu[ng]) * rs[ng];
      }
    }
    dw = FromDoubles(v, {c}, wdt);
  }
  if (output_mask[2]) {
    Vec v(c, 0.0);
    for (int64_t ni = 0; ni < n; ++ni) {
      for (int64_t ch = 0; ch < c; ++ch) v[ch] += dbs[ni * c + ch];
    }
    db = FromDoubles(v, {c}, wdt);
  }
  return {dx, dw, db};
}
// The input gradient laid out as torch's decomposition (element-wise over grad_out and the
// input) lays it out in a traced graph.
std::tuple<Tensor, Tensor, Tensor> NativeLayerNormBackward(
    const Tensor& grad_out, const Tensor& input, const std::vector<int64_t>& normalized_shape,
    const Tensor& mean, const Tensor& rstd, const std::optional<Tensor>& weight,
    const std::optional<Tensor>& bias, const std::vector<bool>& output_mask) {
  auto [dx, dw, db] = NativeLayerNormBackwardC(grad_out, input, normalized_shape, mean, rstd,
                                               weight, bias, output_mask);
  if (dx.defined()) dx = LaidOutElementwise(dx, {&grad_out, &input});
  return {dx, dw, db};
}

}  // namespace

TB_REGISTER_KERNELS(norm) {
  const auto cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::native_layer_norm", cpu, Boxed<&NativeLayerNorm>(), TB_HERE);
  table.RegisterKernel("aten::native_layer_norm_backward", cpu, Boxed<&NativeLayerNormBackward>(),
                       TB_HERE);
  table.RegisterKernel("aten::native_group_norm", cpu, Boxed<&NativeGroupNorm>(), TB_HERE);
  table.RegisterKernel("aten::native_group_norm_backward", cpu, Boxed<&NativeGroupNormBackward>(),
                       TB_HERE);
}

}  // namespace tb
