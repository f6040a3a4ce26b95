// The float32 / float64 batch-norm loops of kernels/norm_batch.cc for contiguous tensors: the
// training forward (statistics + normalisation) and the backward.
//
// An input [n, c, s...] is n x c planes of s elements. With planes of at least kPlaneMin
// elements, one task per channel reads its n planes with the row loops of kernels/cpu/simd.cc
// (sums in double lanes), then writes its outputs while they are still in cache. Smaller
// planes (BatchNorm1d's [n, c]) are summed row by row into one double accumulator per
// (channel, position), the rows split across threads, and the element-wise pass runs row
// by row with those per-position parameters.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/simd_internal.h"
#include "kernels/norm_batch_internal.h"

namespace tb::kernels::norm {
namespace {

inline constexpr int64_t kPlaneMin = 16;  // plane size from which a channel runs plane by plane

// Mean and biased variance of one channel's n planes: one pass about the channel's first
// element, and a second one about the mean when that shift lies far from it. (A pass about m
// gives sum (x - m)^2 = sum (x - mean)^2 + cnt * (mean - m)^2, with m in T.)
template <typename T>
void PlaneMoments(const T* px, const BnDims& sh, int64_t c, double* mean, double* var) {
  const double cnt = static_cast<double>(sh.n * sh.s);
  auto pass = [&](T m, double* sum, double* sq) {
    simd::Moments(px + c * sh.s, sh.n, sh.c * sh.s, sh.s, m, sum, sq);
  };
  const T x0 = px[c * sh.s];
  double sum, sq;
  pass(x0, &sum, &sq);
  const double mu = sum / cnt;
  double d = mu - static_cast<double>(x0);
  double v = sq / cnt - d * d;
  if (!(d * d <= 16 * v)) {  // also NaN / inf
    const T m = static_cast<T>(mu);
    pass(m, &sum, &sq);
    d = mu - static_cast<double>(m);
    v = sq / cnt - d * d;
  }
  *mean = mu;
  *var = std::max(v, 0.0);
}

// Per-(channel, position) double sums over the n rows of width c * s, rows split over threads.
template <typename F>
std::vector<Vec> RowSums(const BnDims& sh, int ncols, bool parallel, F&& f) {
  const int64_t width = sh.c * sh.s;
  return ColumnSums(sh.n, width, ncols, parallel,
                    [&](int64_t r, std::vector<Vec>& acc) { f(r * width, acc); });
}

// Channel totals of per-position sums.
Vec ChannelTotals(const Vec& cols, const BnDims& sh) {
  Vec t(sh.c, 0.0);
  for (int64_t c = 0; c < sh.c; ++c) {
    for (int64_t j = 0; j < sh.s; ++j) t[c] += cols[c * sh.s + j];
  }
  return t;
}

template <typename T>
void TrainForward(const T* px, T* po, const BnDims& sh, const Vec& w, const Vec& b, double eps,
                  bool parallel, Vec* mean, Vec* var) {
  const double cnt = static_cast<double>(sh.n * sh.s);
  if (sh.s >= kPlaneMin) {
    ParallelFor(sh.c, parallel && sh.c > 1, [&](int64_t c) {
      PlaneMoments(px, sh, c, &(*mean)[c], &(*var)[c]);
      const double is = 1.0 / std::sqrt((*var)[c] + eps);
      const T scale = static_cast<T>(is * w[c]);
      const T shift = static_cast<T>(b[c] - (*mean)[c] * is * w[c]);
      simd::ScaleShiftRows(px + c * sh.s, po + c * sh.s, sh.n, sh.c * sh.s, sh.s, scale, shift);
    });
    return;
  }
  const int64_t width = sh.c * sh.s;
  Vec sums = RowSums(sh, 1, parallel, [&](int64_t off, std::vector<Vec>& acc) {
    double* a = acc[0].data();
    for (int64_t j = 0; j < width; ++j) a[j] += static_cast<double>(px[off + j]);
  })[0];
  Vec mu_c = ChannelTotals(sums, sh);
  Vec mu_j(width);
  for (int64_t c = 0; c < sh.c; ++c) {
    mu_c[c] /= cnt;
    for (int64_t j = 0; j < sh.s; ++j) mu_j[c * sh.s + j] = mu_c[c];
  }
  Vec sq = RowSums(sh, 1, parallel, [&](int64_t off, std::vector<Vec>& acc) {
    double* a = acc[0].data();
    for (int64_t j = 0; j < width; ++j) {
      const double d = static_cast<double>(px[off + j]) - mu_j[j];
      a[j] += d * d;
    }
  })[0];
  Vec v_c = ChannelTotals(sq, sh);
  std::vector<T> scale(width), shift(width);
  for (int64_t c = 0; c < sh.c; ++c) {
    v_c[c] /= cnt;
    const double is = 1.0 / std::sqrt(v_c[c] + eps);
    for (int64_t j = 0; j < sh.s; ++j) {
      scale[c * sh.s + j] = static_cast<T>(is * w[c]);
      shift[c * sh.s + j] = static_cast<T>(b[c] - mu_c[c] * is * w[c]);
    }
  }
  ParallelFor(sh.n, parallel && sh.n > 1, [&](int64_t r) {
    const T* x = px + r * width;
    T* y = po + r * width;
    for (int64_t j = 0; j < width; ++j) y[j] = x[j] * scale[j] + shift[j];
  });
  *mean = std::move(mu_c);
  *var = std::move(v_c);
}

template <typename T>
void Backward(const T* px, const T* pg, T* pd, const BnDims& sh, const Vec& w, const Vec& mean,
              const Vec& invstd, bool train, bool parallel, Vec* sum_dy, Vec* dotp) {
  const double cnt = static_cast<double>(sh.n * sh.s);
  // dx = (dy - gm - (x - mean) * proj) * k in training, dy * k in evaluation.
  auto coefs = [&](int64_t c, T* gm, T* proj, T* k) {
    const double is = invstd[c];
    *gm = static_cast<T>((*sum_dy)[c] / cnt);
    *proj = static_cast<T>((*dotp)[c] / cnt * is * is);
    *k = static_cast<T>(is * w[c]);
  };
  if (sh.s >= kPlaneMin) {
    ParallelFor(sh.c, parallel && sh.c > 1, [&](int64_t c) {
      // sum dy * (x - mean) = sum dy * (x - m) - (mean - m) * sum dy, m: the mean in T.
      const T mt = static_cast<T>(mean[c]);
      double s = 0, d = 0;
      simd::SumDot(px + c * sh.s, pg + c * sh.s, sh.n, sh.c * sh.s, sh.s, mt, &s, &d);
      (*sum_dy)[c] = s;
      (*dotp)[c] = d - (mean[c] - static_cast<double>(mt)) * s;
      if (!pd) return;
      T gm, proj, k;
      coefs(c, &gm, &proj, &k);
      const int64_t off = c * sh.s, stride = sh.c * sh.s;
      if (train) {
        simd::BatchNormBackwardRows(px + off, pg + off, pd + off, sh.n, stride, sh.s, mt, gm, proj,
                                    k);
      } else {
        simd::ScaleShiftRows(pg + off, pd + off, sh.n, stride, sh.s, k, T(0));
      }
    });
    return;
  }
  const int64_t width = sh.c * sh.s;
  Vec mu_j(width);
  for (int64_t c = 0; c < sh.c; ++c) {
    for (int64_t j = 0; j < sh.s; ++j) mu_j[c * sh.s + j] = mean[c];
  }
  std::vector<Vec> sums = RowSums(sh, 2, parallel, [&](int64_t off, std::vector<Vec>& acc) {
    double* a = acc[0].data();
    double* b = acc[1].data();
    for (int64_t j = 0; j < width; ++j) {
      const double g = static_cast<double>(pg[off + j]);
      a[j] += g;
      b[j] += g * (static_cast<double>(px[off + j]) - mu_j[j]);
    }
  });
  *sum_dy = ChannelTotals(sums[0], sh);
  *dotp = ChannelTotals(sums[1], sh);
  if (!pd) return;
  std::vector<T> m(width), gm(width), proj(width), k(width);
  for (int64_t c = 0; c < sh.c; ++c) {
    T g, p, kk;
    coefs(c, &g, &p, &kk);
    for (int64_t j = c * sh.s; j < (c + 1) * sh.s; ++j) {
      m[j] = static_cast<T>(mean[c]);
      gm[j] = g;
      proj[j] = p;
      k[j] = kk;
    }
  }
  ParallelFor(sh.n, parallel && sh.n > 1, [&](int64_t r) {
    const T* x = px + r * width;
    const T* g = pg + r * width;
    T* dx = pd + r * width;
    if (train) {
      for (int64_t j = 0; j < width; ++j) dx[j] = (g[j] - gm[j] - (x[j] - m[j]) * proj[j]) * k[j];
    } else {
      for (int64_t j = 0; j < width; ++j) dx[j] = g[j] * k[j];
    }
  });
}

}  // namespace

bool BatchNormTrainFast(const Tensor& x, const BnDims& sh, const Vec& w, const Vec& b, double eps,
                        const Tensor& out, Vec* mean, Vec* var) {
  const DType dt = x.dtype();
  if ((dt != DType::kFloat32 && dt != DType::kFloat64) || x.numel() == 0 || !x.is_contiguous() ||
      !out.is_contiguous() || out.dtype() != dt) {
    return false;
  }
  mean->assign(sh.c, 0.0);
  var->assign(sh.c, 0.0);
  const bool parallel = x.numel() > kGrain;
  if (dt == DType::kFloat32) {
    TrainForward(x.data_as<const float>(), static_cast<float*>(out.mutable_data()), sh, w, b, eps,
                 parallel, mean, var);
  } else {
    TrainForward(x.data_as<const double>(), static_cast<double*>(out.mutable_data()), sh, w, b, eps,
                 parallel, mean, var);
  }
  return true;
}

bool BatchNormBackwardFast(const Tensor& x, const Tensor& dy, const BnDims& sh, const Vec& w,
                           const Vec& mean, const Vec& invstd, bool train, const Tensor* dx,
                           Vec* sum_dy, Vec* dotp) {
  const DType dt = x.dtype();
  if ((dt != DType::kFloat32 && dt != DType::kFloat64) || x.numel() == 0 || !x.is_contiguous() ||
      !dy.is_contiguous() || dy.dtype() != dt || dy.shape() != x.shape() ||
      (dx && (!dx->is_contiguous() || dx->dtype() != dt))) {
    return false;
  }
  sum_dy->assign(sh.c, 0.0);
  dotp->assign(sh.c, 0.0);
  const bool parallel = x.numel() > kGrain;
  if (dt == DType::kFloat32) {
    Backward(x.data_as<const float>(), dy.data_as<const float>(),
             dx ? static_cast<float*>(dx->mutable_data()) : nullptr, sh, w, mean, invstd, train,
             parallel, sum_dy, dotp);
  } else {
    Backward(x.data_as<const double>(), dy.data_as<const double>(),
             dx ? static_cast<double*>(dx->mutable_data()) : nullptr, sh, w, mean, invstd, train,
             parallel, sum_dy, dotp);
  }
  return true;
}

}  // namespace tb::kernels::norm
