// Private to kernels/norm*.cc: helpers the normalisation kernels share (double-precision
// parameter access, torch's "parameter dtype", column sums, float32 views for oneDNN).
#pragma once

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <optional>
#include <unordered_map>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "bridge/tensor.h"
#include "kernels/common_internal.h"
#include "kernels/dtype_internal.h"
#include "kernels/loops_internal.h"
#include "kernels/onednn/onednn_internal.h"
#include "kernels/promote_broadcast.h"

namespace tb::kernels::norm {

using kernels::CheckFloat;
using kernels::ParallelFor;

using kernels::Convert;
using Vec = std::vector<double>;

// Column sums over rows in parallel: f(row, acc) adds row's contribution into `ncols` columns
// of `width` accumulators of type A (one set per thread); returns their totals, the threads'
// sets added in thread order.
template <typename A = double, typename F>
inline std::vector<std::vector<A>> ColumnSums(int64_t rows, int64_t width, int64_t ncols,
                                              bool parallel, F&& f) {
  using V = std::vector<A>;
  int nt = 1;
#ifdef _OPENMP
  if (parallel) nt = omp_get_max_threads();
#endif
  std::vector<std::vector<V>> part(nt, std::vector<V>(ncols, V(width, A(0))));
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
#ifdef _OPENMP
    const int t = omp_get_thread_num(), n = omp_get_num_threads();
#else
    const int t = 0, n = 1;
#endif
    for (int64_t r = rows * t / n; r < rows * (t + 1) / n; ++r) f(r, part[t]);
  }
  for (int t = 1; t < nt; ++t) {
    for (int64_t c = 0; c < ncols; ++c) {
      for (int64_t i = 0; i < width; ++i) part[0][c][i] += part[t][c][i];
    }
  }
  return part[0];
}

// Values of an optional 1-d parameter as doubles (`fill` when absent).
inline Vec Doubles(const char* op, const char* name, const std::optional<Tensor>& t, int64_t n,
                   double fill) {
  if (!t) return Vec(n, fill);
  TB_CHECK(t->numel() == n, ValueError) << op << ": expected " << name << " with " << n
                                        << " elements, got shape " << ShapeString(t->shape());
  TB_CHECK(IsFloatingPoint(t->dtype()), TypeError)
      << op << ": " << name << " must be floating point, got " << DTypeName(t->dtype());
  if (t->dtype() == DType::kFloat32 && t->is_contiguous()) {
    const float* p = t->data_as<const float>();
    return Vec(p, p + n);
  }
  Tensor d = Cast(*t, DType::kFloat64).contiguous();
  const double* p = d.data_as<const double>();
  return Vec(p, p + n);
}

// Batch norm in evaluation as y = x * scale[c] + shift[c]: scale = invstd * weight, shift =
// bias - mean * invstd * weight, computed in double and rounded to A (torch's folding).
template <typename A>
void FoldScaleShift(const Vec& mean, const Vec& invstd, const Vec& w, const Vec& b,
                    std::vector<A>* scale, std::vector<A>* shift) {
  const size_t c = mean.size();
  scale->resize(c);
  shift->resize(c);
  for (size_t i = 0; i < c; ++i) {
    (*scale)[i] = static_cast<A>(invstd[i] * w[i]);
    (*shift)[i] = static_cast<A>(b[i] - mean[i] * invstd[i] * w[i]);
  }
}

// v's values (rounded) into `t` of v.size() elements, any layout and dtype.
inline void StoreDoubles(const Vec& v, const Tensor& t) {
  const int64_t n = static_cast<int64_t>(v.size());
  if (t.is_contiguous() && t.dtype() == DType::kFloat64) {
    std::copy(v.begin(), v.end(), static_cast<double*>(t.mutable_data()));
  } else if (t.is_contiguous() && t.dtype() == DType::kFloat32) {
    float* p = static_cast<float*>(t.mutable_data());
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(v[i]);
  } else {
    Tensor d = Tensor::Empty({n}, DType::kFloat64);
    std::copy(v.begin(), v.end(), static_cast<double*>(d.mutable_data()));
    CopyCast(t, d.view(t.shape()));
  }
}

inline Tensor FromDoubles(const Vec& v, IntArrayRef shape, DType dtype) {
  if (dtype == DType::kFloat32 || dtype == DType::kFloat64) {
    Tensor r = Tensor::Empty(shape, dtype);
    StoreDoubles(v, r);
    return r;
  }
  Tensor d = Tensor::Empty(shape, DType::kFloat64);
  std::copy(v.begin(), v.end(), static_cast<double*>(d.mutable_data()));
  return Cast(d, dtype);
}

inline bool IsReduced(DType t) { return t == DType::kBFloat16 || t == DType::kFloat16; }

// torch's param_scalar_type / is_mixed_type.
inline DType ParamDType(DType input, std::initializer_list<const std::optional<Tensor>*> params) {
  if (!IsReduced(input)) return input;
  for (auto* p : params) {
    if (*p && (*p)->dtype() == DType::kFloat32) return DType::kFloat32;
  }
  return input;
}

// ---- oneDNN helpers ------------------------------------------------------------------------

inline bool AllF32(std::initializer_list<const std::optional<Tensor>*> ts) {
  for (auto* t : ts) {
    if (*t && (*t)->dtype() != DType::kFloat32) return false;
  }
  return true;
}

// A contiguous float32 [n] tensor of `t`'s values, or filled with `fill` when absent.
inline Tensor F32Param(const std::optional<Tensor>& t, int64_t n, float fill) {
  if (t) return Cast(*t, DType::kFloat32).contiguous().reshape({n});
  Tensor r = Tensor::Empty({n}, DType::kFloat32);
  std::fill_n(static_cast<float*>(r.mutable_data()), n, fill);
  return r;
}

// 1 / rstd^2: the variance that, with epsilon 0, gives oneDNN back `rstd`.
inline Tensor VarianceFromRstd(const Tensor& rstd) {
  Tensor r = Cast(rstd, DType::kFloat32).contiguous();
  Tensor v = Tensor::Empty(r.shape(), DType::kFloat32);
  const float* pr = r.data_as<const float>();
  float* pv = static_cast<float*>(v.mutable_data());
  for (int64_t i = 0; i < r.numel(); ++i) pv[i] = 1.0f / (pr[i] * pr[i]);
  return v;
}

inline Tensor InvStd(const Tensor& var, double eps) {
  Tensor r = Tensor::Empty(var.shape(), DType::kFloat32);
  const float* pv = var.data_as<const float>();
  float* pr = static_cast<float*>(r.mutable_data());
  for (int64_t i = 0; i < var.numel(); ++i)
    pr[i] = 1.0f / std::sqrt(pv[i] + static_cast<float>(eps));
  return r;
}

using Args = std::unordered_map<int, dnnl::memory>;

using onednn::Execute;

// Runs a layer or batch normalisation backward primitive built with use_scale | use_shift:
// x and dy described by `md`, mean and var by `smd`, the [c] scale and its gradients by `pmd`
// (the weight's values, 1 where absent; the shift is unused by the gradients and passed as 0).
// Sets *dx, *dw and *db to new float32 tensors.
inline void ExecuteNormBackward(const dnnl::primitive& prim, const dnnl::memory::desc& md,
                                const dnnl::memory::desc& smd, const dnnl::memory::desc& pmd,
                                const Tensor& x, const Tensor& dy, const Tensor& mean,
                                const Tensor& var, const std::optional<Tensor>& weight, int64_t c,
                                Tensor* dx, Tensor* dw, Tensor* db) {
  Tensor w = F32Param(weight, c, 1.f), shift = F32Param(std::nullopt, c, 0.f);
  Tensor gx = Tensor::Empty(x.shape(), DType::kFloat32);
  Tensor gw = Tensor::Empty({c}, DType::kFloat32), gb = Tensor::Empty({c}, DType::kFloat32);
  Execute(prim, {{DNNL_ARG_SRC, onednn::Wrap(md, x.data())},
                 {DNNL_ARG_DIFF_DST, onednn::Wrap(md, dy.data())},
                 {DNNL_ARG_MEAN, onednn::Wrap(smd, mean.data())},
                 {DNNL_ARG_VARIANCE, onednn::Wrap(smd, var.data())},
                 {DNNL_ARG_SCALE, onednn::Wrap(pmd, w.data())},
                 {DNNL_ARG_SHIFT, onednn::Wrap(pmd, shift.data())},
                 {DNNL_ARG_DIFF_SRC, onednn::Wrap(md, gx.data())},
                 {DNNL_ARG_DIFF_SCALE, onednn::Wrap(pmd, gw.data())},
                 {DNNL_ARG_DIFF_SHIFT, onednn::Wrap(pmd, gb.data())}});
  *dx = gx;
  *dw = gw;
  *db = gb;
}

}  // namespace tb::kernels::norm
