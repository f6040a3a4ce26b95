// Batch normalisation: aten::native_batch_norm (+ backward), _native_batch_norm_legit
// (+ .no_stats) and _native_batch_norm_legit_no_training.
//
// Contiguous float32 / float64 training forward and backward (both modes) run on the loops of
// kernels/cpu/norm_batch_fast.cc. Other float32 ones run on oneDNN's batch_normalization
// primitives (the backward gets the training statistics back as mean and 1 / invstd^2 with
// epsilon 0; in evaluation it uses the running ones as global statistics); evaluation
// forward and other dtypes run on loops that accumulate in double, one channel per task. In
// training the running statistics are updated in place (momentum; unbiased variance) and the batch
// mean and invstd returned; in evaluation two empty tensors are.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "dispatch/op_table.h"
#include "kernels/cpu/simd_internal.h"
#include "kernels/layout.h"
#include "kernels/norm_batch_internal.h"
#include "kernels/norm_internal.h"

namespace tb {
namespace {

using namespace kernels::norm;  // NOLINT(build/namespaces)

// ---- batch norm ---------------------------------------------------------------------------

using BnShape = BnDims;

BnShape BatchNormShape(const char* op, const Tensor& input) {
  TB_CHECK(input.ndim() >= 2, ValueError)
      << op << ": expected input with at least 2 dims, got shape " << ShapeString(input.shape());
  BnShape b{input.size(0), input.size(1), 1};
  for (int64_t i = 2; i < input.ndim(); ++i) b.s *= input.size(i);
  return b;
}

dnnl::normalization_flags BnFlags(bool scale, bool shift, bool global_stats) {
  auto f = dnnl::normalization_flags::none;
  if (scale) f |= dnnl::normalization_flags::use_scale;
  if (shift) f |= dnnl::normalization_flags::use_shift;
  if (global_stats) f |= dnnl::normalization_flags::use_global_stats;
  return f;
}

// oneDNN float32 training forward: normalises `x` into `out` with the batch statistics and
// fills *mean and *var (biased) with them. False when oneDNN cannot take it. (Evaluation is
// one multiply-add per element: the loops are as fast as oneDNN's plain-layout kernel or
// faster, so it stays there.)
bool OneDnnBatchNormTraining(const Tensor& x, const std::optional<Tensor>& weight,
                             const std::optional<Tensor>& bias,
                             const std::optional<Tensor>& running_mean,
                             const std::optional<Tensor>& running_var, double eps,
                             const BnShape& sh, const Tensor& out, Tensor* mean, Tensor* var) {
  if (x.dtype() != DType::kFloat32 || !AllF32({&weight, &bias, &running_mean, &running_var}) ||
      x.numel() == 0 || sh.n * sh.s < 2) {
    return false;
  }
  using dt = dnnl::memory::data_type;
  auto md = onednn::PlainDesc({sh.n, sh.c, 1, sh.s}, dt::f32),
       pmd = onednn::PlainDesc({sh.c}, dt::f32);
  const auto flags = BnFlags(weight.has_value(), bias.has_value(), false);
  try {
    auto prim =
        onednn::Cached(onednn::Key("bnorm", sh.n, sh.c, sh.s, eps, static_cast<int>(flags)), [&] {
          dnnl::batch_normalization_forward::desc d(dnnl::prop_kind::forward_training, md,
                                                    static_cast<float>(eps), flags);
          return dnnl::primitive(
              dnnl::batch_normalization_forward(dnnl::batch_normalization_forward::primitive_desc(
                  d, onednn::Attr(), onednn::Engine())));
        });
    Tensor mu = Tensor::Empty({sh.c}, DType::kFloat32), v = Tensor::Empty({sh.c}, DType::kFloat32);
    Tensor w = F32Param(weight, sh.c, 1.f), b = F32Param(bias, sh.c, 0.f);
    Execute(prim, {{DNNL_ARG_SRC, onednn::Wrap(md, x.data())},
                   {DNNL_ARG_DST, onednn::Wrap(md, out.data())},
                   {DNNL_ARG_MEAN, onednn::Wrap(pmd, mu.data())},
                   {DNNL_ARG_VARIANCE, onednn::Wrap(pmd, v.data())},
                   {DNNL_ARG_SCALE, onednn::Wrap(pmd, w.data())},
                   {DNNL_ARG_SHIFT, onednn::Wrap(pmd, b.data())}});
    *mean = mu;
    *var = v;
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

// running = (1 - momentum) * running + momentum * batch (the variance made unbiased), in place.
void UpdateRunningStats(const std::optional<Tensor>& running_mean,
                        const std::optional<Tensor>& running_var, const Vec& rm, const Vec& rv,
                        const Vec& mean, const Vec& var, int64_t cnt, double momentum) {
  const int64_t c = static_cast<int64_t>(mean.size());
  if (running_mean) {
    Vec nm(c);
    for (int64_t i = 0; i < c; ++i) nm[i] = (1 - momentum) * rm[i] + momentum * mean[i];
    StoreDoubles(nm, *running_mean);
  }
  if (running_var) {
    Vec nv(c);
    const double unbias = static_cast<double>(cnt) / static_cast<double>(cnt - 1);
    for (int64_t i = 0; i < c; ++i) nv[i] = (1 - momentum) * rv[i] + momentum * var[i] * unbias;
    StoreDoubles(nv, *running_var);
  }
}

// y = x * scale + shift over one plane, in the opmath type A (float and bfloat16 run on
// kernels/cpu/simd.cc's rows, bfloat16 widened a chunk at a time and rounded once).
template <typename T, typename A>
void ScaleShift(const T* x, T* y, int64_t n, A scale, A shift) {
  for (int64_t j = 0; j < n; ++j) {
    y[j] = Convert<T>(static_cast<A>(Convert<A>(x[j]) * scale + shift));
  }
}
void ScaleShift(const float* x, float* y, int64_t n, float scale, float shift) {
  kernels::simd::ScaleShiftRow(x, y, n, scale, shift);
}
void ScaleShift(const kernels::BFloat16* x, kernels::BFloat16* y, int64_t n, float scale,
                float shift) {
  kernels::simd::Bf16Chunks(
      reinterpret_cast<const uint16_t*>(x), reinterpret_cast<uint16_t*>(y), n,
      [&](float* row, int64_t len) { kernels::simd::ScaleShiftRow(row, row, len, scale, shift); });
}

Vec ToVec(const Tensor& t) {
  Tensor d = Cast(t, DType::kFloat64).contiguous();
  const double* p = d.data_as<const double>();
  return Vec(p, p + d.numel());
}

std::tuple<Tensor, Tensor, Tensor> BatchNormC(const char* op, const Tensor& input,
                                              const std::optional<Tensor>& weight,
                                              const std::optional<Tensor>& bias,
                                              const std::optional<Tensor>& running_mean,
                                              const std::optional<Tensor>& running_var,
                                              bool training, double momentum, double eps) {
  CheckFloat(op, input);
  const BnShape sh = BatchNormShape(op, input);
  const int64_t cnt = sh.n * sh.s;
  const DType pdt = ParamDType(input.dtype(), {&weight, &bias, &running_mean, &running_var});
  Vec w = Doubles(op, "weight", weight, sh.c, 1.0), b = Doubles(op, "bias", bias, sh.c, 0.0);
  TB_CHECK(training || (running_mean && running_var), ValueError)
      << op << ": running_mean and running_var must be defined in evaluation mode";
  Vec rm = Doubles(op, "running_mean", running_mean, sh.c, 0.0);
  Vec rv = Doubles(op, "running_var", running_var, sh.c, 1.0);
  Tensor out = Tensor::Empty(input.shape(), input.dtype());
  Vec mean, var;
  if (training && BatchNormTrainFast(input, sh, w, b, eps, out, &mean, &var)) {
    UpdateRunningStats(running_mean, running_var, rm, rv, mean, var, cnt, momentum);
    Vec invstd(sh.c);
    for (int64_t c = 0; c < sh.c; ++c) invstd[c] = 1.0 / std::sqrt(var[c] + eps);
    return {out, FromDoubles(mean, {sh.c}, pdt), FromDoubles(invstd, {sh.c}, pdt)};
  }
  Tensor x = input.contiguous();
  Tensor tmean, tvar;
  if (training && OneDnnBatchNormTraining(x, weight, bias, running_mean, running_var, eps, sh, out,
                                          &tmean, &tvar)) {
    UpdateRunningStats(running_mean, running_var, rm, rv, ToVec(tmean), ToVec(tvar), cnt, momentum);
    return {out, Cast(tmean, pdt), Cast(InvStd(tvar, eps), pdt)};
  }
  mean.assign(sh.c, 0.0);
  var.assign(sh.c, 0.0);
  Vec invstd(sh.c);
  TB_DISPATCH(input.dtype(), op, TB_TYPES_FLOAT, [&] {
    using T = scalar_t;
    using A = kernels::opmath_t<T>;
    const T* px = x.data_as<const T>();
    T* po = static_cast<T*>(out.mutable_data());
    // Per channel: the statistics (training) or the running ones.
    ParallelFor(sh.c, training && sh.c > 1 && input.numel() > kernels::kGrain, [&](int64_t c) {
      double mu, is;
      if (training) {
        double s = 0;
        for (int64_t ni = 0; ni < sh.n; ++ni) {
          const T* p = px + (ni * sh.c + c) * sh.s;
          for (int64_t j = 0; j < sh.s; ++j) s += Convert<double>(p[j]);
        }
        mu = cnt > 0 ? s / cnt : 0.0;
        double v = 0;
        for (int64_t ni = 0; ni < sh.n; ++ni) {
          const T* p = px + (ni * sh.c + c) * sh.s;
          for (int64_t j = 0; j < sh.s; ++j) {
            const double d = Convert<double>(p[j]) - mu;
            v += d * d;
          }
        }
        var[c] = cnt > 0 ? v / cnt : 0.0;
        is = 1.0 / std::sqrt(var[c] + eps);
        if constexpr (kernels::kIsReducedFloat<T>) {
          // torch keeps float16 / bfloat16 batch statistics in their own type: the mean
          // rounded to it; for bfloat16 with bfloat16 parameters also the sum of squared
          // deviations, the variance then being that sum / n in bfloat16 (n as a bfloat16;
          // float16's variance stays in float). invstd = 1 / sqrt(var + eps) in double, rounded
          // to float and then to T.
          mu = Convert<double>(Convert<T>(mu));
          double vr = static_cast<float>(var[c]);
          if (std::is_same_v<T, kernels::BFloat16> && pdt == input.dtype() && cnt > 0) {
            const float vs = Convert<float>(Convert<T>(v));
            var[c] = static_cast<double>(vs) / static_cast<double>(cnt);
            vr = Convert<float>(
                Convert<T>(vs / Convert<float>(Convert<T>(static_cast<float>(cnt)))));
          }
          is = Convert<double>(Convert<T>(static_cast<float>(1.0 / std::sqrt(vr + eps))));
        }
      } else {
        mu = rm[c];
        is = 1.0 / std::sqrt(rv[c] + eps);
      }
      mean[c] = mu;
      invstd[c] = is;
    });
    if constexpr (kernels::kIsReducedFloat<T>) {
      if (training) {  // as torch: ((x - mean) * invstd) * weight + bias, in float
        ParallelFor(
            sh.n * sh.c, sh.n * sh.c > 1 && input.numel() > kernels::kGrain, [&](int64_t p) {
              const int64_t c = p % sh.c;
              const float m = static_cast<float>(mean[c]), i = static_cast<float>(invstd[c]);
              const float wc = static_cast<float>(w[c]), bc = static_cast<float>(b[c]);
              const T* xp = px + p * sh.s;
              T* yp = po + p * sh.s;
              for (int64_t j = 0; j < sh.s; ++j) {
                yp[j] = Convert<T>((Convert<float>(xp[j]) - m) * i * wc + bc);
              }
            });
        return;
      }
    }
    // y = x * scale + shift in the opmath type, plane by plane in memory order.
    std::vector<A> scale, shift;
    FoldScaleShift(mean, invstd, w, b, &scale, &shift);
    ParallelFor(sh.n * sh.c, sh.n * sh.c > 1 && input.numel() > kernels::kGrain, [&](int64_t p) {
      const int64_t c = p % sh.c;
      ScaleShift(px + p * sh.s, po + p * sh.s, sh.s, scale[c], shift[c]);
    });
  });
  if (!training) {
    return {out, Tensor::Empty({0}, pdt), Tensor::Empty({0}, pdt)};
  }
  UpdateRunningStats(running_mean, running_var, rm, rv, mean, var, cnt, momentum);
  return {out, FromDoubles(mean, {sh.c}, pdt), FromDoubles(invstd, {sh.c}, pdt)};
}

// BatchNormC's output (computed in C order) laid out as the input, as torch's decomposition
// (element-wise ops over the input and its statistics) lays it out in a traced graph.
std::tuple<Tensor, Tensor, Tensor> BatchNorm(const char* op, const Tensor& input,
                                             const std::optional<Tensor>& weight,
                                             const std::optional<Tensor>& bias,
                                             const std::optional<Tensor>& running_mean,
                                             const std::optional<Tensor>& running_var,
                                             bool training, double momentum, double eps) {
  auto [out, mean, invstd] =
      BatchNormC(op, input, weight, bias, running_mean, running_var, training, momentum, eps);
  return {LaidOutElementwise(out, {&input}), mean, invstd};
}

std::tuple<Tensor, Tensor, Tensor> NativeBatchNorm(const Tensor& input,
                                                   const std::optional<Tensor>& weight,
                                                   const std::optional<Tensor>& bias,
                                                   const std::optional<Tensor>& running_mean,
                                                   const std::optional<Tensor>& running_var,
                                                   bool training, double momentum, double eps) {
  return BatchNorm("aten::native_batch_norm", input, weight, bias, running_mean, running_var,
                   training, momentum, eps);
}

std::tuple<Tensor, Tensor, Tensor> BatchNormLegit(const Tensor& input,
                                                  const std::optional<Tensor>& weight,
                                                  const std::optional<Tensor>& bias,
                                                  const Tensor& running_mean,
                                                  const Tensor& running_var, bool training,
                                                  double momentum, double eps) {
  return BatchNorm("aten::_native_batch_norm_legit", input, weight, bias, running_mean, running_var,
                   training, momentum, eps);
}

std::tuple<Tensor, Tensor, Tensor> BatchNormLegitNoStats(const Tensor& input,
                                                         const std::optional<Tensor>& weight,
                                                         const std::optional<Tensor>& bias,
                                                         bool training, double momentum,
                                                         double eps) {
  return BatchNorm("aten::_native_batch_norm_legit.no_stats", input, weight, bias, std::nullopt,
                   std::nullopt, training, momentum, eps);
}

std::tuple<Tensor, Tensor, Tensor> BatchNormLegitNoTraining(
    const Tensor& input, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
    const Tensor& running_mean, const Tensor& running_var, double momentum, double eps) {
  return BatchNorm("aten::_native_batch_norm_legit_no_training", input, weight, bias, running_mean,
                   running_var, false, momentum, eps);
}

// The functional form AOT autograd captures in training graphs: the running statistics are
// not written in place; their updated values are returned as results 3 and 4.
std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> BatchNormLegitFunctional(
    const Tensor& input, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
    const Tensor& running_mean, const Tensor& running_var, bool training, double momentum,
    double eps) {
  Tensor new_mean = running_mean.clone(), new_var = running_var.clone();
  auto [out, save_mean, save_invstd] =
      BatchNorm("aten::_native_batch_norm_legit_functional", input, weight, bias, new_mean, new_var,
                training, momentum, eps);
  return {out, save_mean, save_invstd, new_mean, new_var};
}

// oneDNN float32 backward with the statistics given as mean and variance (+ eps).
bool OneDnnBatchNormBackward(const Tensor& x, const Tensor& dy, const std::optional<Tensor>& weight,
                             const Tensor& mean, const Tensor& var, double eps, bool train,
                             const BnShape& sh, Tensor* dx, Tensor* dw, Tensor* db) {
  if (x.dtype() != DType::kFloat32 || dy.dtype() != DType::kFloat32 || !AllF32({&weight}) ||
      x.numel() == 0) {
    return false;
  }
  using dt = dnnl::memory::data_type;
  auto md = onednn::PlainDesc({sh.n, sh.c, 1, sh.s}, dt::f32),
       pmd = onednn::PlainDesc({sh.c}, dt::f32);
  const auto flags = BnFlags(true, true, !train);
  try {
    auto prim = onednn::Cached(
        onednn::Key("bnorm_bwd", sh.n, sh.c, sh.s, eps, static_cast<int>(flags)), [&] {
          auto& eng = onednn::Engine();
          dnnl::batch_normalization_forward::primitive_desc hint(
              dnnl::batch_normalization_forward::desc(dnnl::prop_kind::forward_training, md,
                                                      static_cast<float>(eps), flags),
              eng);
          dnnl::batch_normalization_backward::desc d(dnnl::prop_kind::backward, md, md,
                                                     static_cast<float>(eps), flags);
          return dnnl::primitive(dnnl::batch_normalization_backward(
              dnnl::batch_normalization_backward::primitive_desc(d, onednn::Attr(), eng, hint)));
        });
    ExecuteNormBackward(prim, md, pmd, pmd, x, dy, mean.contiguous(), var.contiguous(), weight,
                        sh.c, dx, dw, db);
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

std::tuple<Tensor, Tensor, Tensor> NativeBatchNormBackwardC(
    const Tensor& grad_out, const Tensor& input, const std::optional<Tensor>& weight,
    const std::optional<Tensor>& running_mean, const std::optional<Tensor>& running_var,
    const std::optional<Tensor>& save_mean, const std::optional<Tensor>& save_invstd, bool train,
    double eps, const std::vector<bool>& output_mask) {
  constexpr const char* kOp = "aten::native_batch_norm_backward";
  CheckFloat(kOp, input);
  TB_CHECK(output_mask.size() == 3, ValueError) << kOp << ": output_mask must have 3 elements";
  TB_CHECK(grad_out.shape() == input.shape(), ValueError)
      << kOp << ": grad_out of shape " << ShapeString(grad_out.shape())
      << " does not match input of shape " << ShapeString(input.shape());
  const BnShape sh = BatchNormShape(kOp, input);
  const int64_t cnt = sh.n * sh.s;
  const DType wdt = weight ? weight->dtype() : input.dtype();
  Vec w = Doubles(kOp, "weight", weight, sh.c, 1.0);
  Vec mean, invstd;
  if (train) {
    TB_CHECK(save_mean && save_invstd, ValueError)
        << kOp << ": save_mean and save_invstd are required in training mode";
    mean = Doubles(kOp, "save_mean", save_mean, sh.c, 0.0);
    invstd = Doubles(kOp, "save_invstd", save_invstd, sh.c, 1.0);
  } else {
    TB_CHECK(running_mean && running_var, ValueError)
        << kOp << ": running_mean and running_var are required in evaluation mode";
    mean = Doubles(kOp, "running_mean", running_mean, sh.c, 0.0);
    Vec rv = Doubles(kOp, "running_var", running_var, sh.c, 1.0);
    invstd.resize(sh.c);
    for (int64_t c = 0; c < sh.c; ++c) invstd[c] = 1.0 / std::sqrt(rv[c] + eps);
  }
  Tensor dx;
  if (output_mask[0]) dx = Tensor::Empty(input.shape(), input.dtype());
  Vec sum_dy, dotp;
  if (!BatchNormBackwardFast(input, grad_out, sh, w, mean, invstd, train,
                             output_mask[0] ? &dx : nullptr, &sum_dy, &dotp)) {
    Tensor x = input.contiguous(), dy = Cast(grad_out, input.dtype()).contiguous();
    {
      // oneDNN: training statistics as (save_mean, 1 / save_invstd^2) with epsilon 0.
      const auto& m = train ? save_mean : running_mean;
      const auto& v = train ? save_invstd : running_var;
      Tensor gx, gw, gb;
      if (m && v && m->dtype() == DType::kFloat32 && v->dtype() == DType::kFloat32 &&
          m->numel() == sh.c && v->numel() == sh.c &&
          OneDnnBatchNormBackward(x, dy, weight, *m, train ? VarianceFromRstd(*v) : *v,
                                  train ? 0.0 : eps, train, sh, &gx, &gw, &gb)) {
        return {output_mask[0] ? gx : Tensor(), output_mask[1] ? Cast(gw, wdt) : Tensor(),
                output_mask[2] ? Cast(gb, wdt) : Tensor()};
      }
    }
    sum_dy.assign(sh.c, 0.0);
    dotp.assign(sh.c, 0.0);
    TB_DISPATCH(input.dtype(), kOp, TB_TYPES_FLOAT, [&] {
      using T = scalar_t;
      const T* px = x.data_as<const T>();
      const T* pg = dy.data_as<const T>();
      T* pd = output_mask[0] ? static_cast<T*>(dx.mutable_data()) : nullptr;
      ParallelFor(sh.c, sh.c > 1 && input.numel() > kernels::kGrain, [&](int64_t c) {
        double s = 0, d = 0;
        for (int64_t ni = 0; ni < sh.n; ++ni) {
          const int64_t base = (ni * sh.c + c) * sh.s;
          for (int64_t j = 0; j < sh.s; ++j) {
            const double g = Convert<double>(pg[base + j]);
            s += g;
            d += g * (Convert<double>(px[base + j]) - mean[c]);
          }
        }
        sum_dy[c] = s;
        dotp[c] = d;
        if (!pd) return;
        const double is = invstd[c];
        if (train) {
          const double proj = cnt > 0 ? d / cnt * is * is : 0.0;
          const double gm = cnt > 0 ? s / cnt : 0.0;
          for (int64_t ni = 0; ni < sh.n; ++ni) {
            const int64_t base = (ni * sh.c + c) * sh.s;
            for (int64_t j = 0; j < sh.s; ++j) {
              const double xm = Convert<double>(px[base + j]) - mean[c];
              pd[base + j] =
                  Convert<T>((Convert<double>(pg[base + j]) - gm - xm * proj) * is * w[c]);
            }
          }
        } else {
          for (int64_t ni = 0; ni < sh.n; ++ni) {
            const int64_t base = (ni * sh.c + c) * sh.s;
            for (int64_t j = 0; j < sh.s; ++j) {
              pd[base + j] = Convert<T>(Convert<double>(pg[base + j]) * is * w[c]);
            }
          }
        }
      });
    });
  }
  Tensor dw, db;
  if (output_mask[1]) {
    Vec v(sh.c);
    for (int64_t c = 0; c < sh.c; ++c) v[c] = dotp[c] * invstd[c];
    dw = FromDoubles(v, {sh.c}, wdt);
  }
  if (output_mask[2]) db = FromDoubles(sum_dy, {sh.c}, wdt);
  return {dx, dw, db};
}
// The input gradient laid out as torch's decomposition (element-wise ops over grad_out and the
// input) lays it out.
std::tuple<Tensor, Tensor, Tensor> NativeBatchNormBackward(
    const Tensor& grad_out, const Tensor& input, const std::optional<Tensor>& weight,
    const std::optional<Tensor>& running_mean, const std::optional<Tensor>& running_var,
    const std::optional<Tensor>& save_mean, const std::optional<Tensor>& save_invstd, bool train,
    double eps, const std::vector<bool>& output_mask) {
  auto [dx, dw, db] = NativeBatchNormBackwardC(grad_out, input, weight, running_mean, running_var,
                                               save_mean, save_invstd, train, eps, output_mask);
  if (dx.defined()) dx = LaidOutElementwise(dx, {&grad_out, &input});
  return {dx, dw, db};
}

}  // namespace

TB_REGISTER_KERNELS(norm_batch) {
  const auto cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::native_batch_norm", cpu, Boxed<&NativeBatchNorm>(), TB_HERE);
  table.RegisterKernel("aten::native_batch_norm_backward", cpu, Boxed<&NativeBatchNormBackward>(),
                       TB_HERE);
  table.RegisterKernel("aten::_native_batch_norm_legit", cpu, Boxed<&BatchNormLegit>(), TB_HERE);
  table.RegisterKernel("aten::_native_batch_norm_legit.no_stats", cpu,
                       Boxed<&BatchNormLegitNoStats>(), TB_HERE);
  table.RegisterKernel("aten::_native_batch_norm_legit_functional", cpu,
                       Boxed<&BatchNormLegitFunctional>(), TB_HERE);
  table.RegisterKernel("aten::_native_batch_norm_legit_no_training", cpu,
                       Boxed<&BatchNormLegitNoTraining>(), TB_HERE);
}

}  // namespace tb
