// Spectral decompositions and the functions built on them: aten::_linalg_svd (LAPACK gesdd, as
// torch's CPU default), aten::_linalg_eigh (syevd), aten::linalg_pinv.atol_rtol_tensor (composed
// from them exactly as torch composes it) and aten::linalg_matrix_exp (Eigen's scaling and
// squaring Pade approximant, in double precision).
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <Eigen/Core>
#include <unsupported/Eigen/MatrixFunctions>

#include "dispatch/op_table.h"
#include "kernels/linalg_internal.h"
#include "kernels/tensor_ops.h"

namespace tb::kernels::linalg {
namespace {

template <typename T>
using ColMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;

// ---- SVD --------------------------------------------------------------------------------------

std::tuple<Tensor, Tensor, Tensor> Svd(const Tensor& a, bool full_matrices, bool compute_uv,
                                       const std::optional<std::string>& driver) {
  constexpr const char* kOp = "torch.linalg.svd";
  CheckMatrix(a, kOp);
  TB_CHECK(!driver, ValueError) << kOp
                                << ": keyword argument `driver=` is only supported on CUDA "
                                   "inputs with cuSOLVER backend.";
  const Dims batch = BatchShape(a);
  const int64_t nb = BatchCount(batch), m = a.size(-2), n = a.size(-1), k = std::min(m, n);
  const int64_t ucols = full_matrices ? m : k, vrows = full_matrices ? n : k;
  Tensor work_a = ColMajorCopy(a);
  Tensor s = Tensor::Empty(Concat(batch, {k}), a.dtype());
  Tensor u = compute_uv ? ColMajor(batch, m, ucols, a.dtype()) : Tensor::Empty({0}, a.dtype());
  Tensor vt = compute_uv ? ColMajor(batch, vrows, n, a.dtype()) : Tensor::Empty({0}, a.dtype());
  Tensor info = Int32Zeros(batch);
  ForFloat(a.dtype(), [&](auto t) {
    using T = decltype(t);
    if (k == 0) {
      // No singular values; U and Vh (full) are identities, as LAPACK would leave them.
      if (compute_uv) {
        for (Tensor* x : {&u, &vt}) {
          const int64_t r = x->size(-2), c = x->size(-1);
          T* p = x->data_as<T>();
          std::fill(p, p + nb * r * c, T(0));
          for (int64_t b = 0; b < nb; ++b) {
            for (int64_t i = 0; i < std::min(r, c); ++i) p[b * r * c + i * r + i] = T(1);
          }
        }
      }
      return;
    }
    const char jobz = !compute_uv ? 'N' : (full_matrices ? 'A' : 'S');
    // gesdd wants ldu >= 1 and ldvt >= 1 even when it does not write them.
    const Int ldu = compute_uv ? m : 1, ldvt = compute_uv ? vrows : 1;
    T dummy_u[1], dummy_vt[1];
    std::vector<Int> iwork(8 * k);
    T query;
    Int qinfo;
    gesdd(jobz, m, n, work_a.data_as<T>(), m, s.data_as<T>(), compute_uv ? u.data_as<T>() : dummy_u,
          ldu, compute_uv ? vt.data_as<T>() : dummy_vt, ldvt, &query, -1, iwork.data(), &qinfo);
    std::vector<T> work(Lwork(query));
    for (int64_t b = 0; b < nb; ++b) {
      gesdd(jobz, m, n, work_a.data_as<T>() + b * m * n, m, s.data_as<T>() + b * k,
            compute_uv ? u.data_as<T>() + b * m * ucols : dummy_u, ldu,
            compute_uv ? vt.data_as<T>() + b * vrows * n : dummy_vt, ldvt, work.data(),
            static_cast<Int>(work.size()), iwork.data(), info.data_as<Int>() + b);
    }
  });
  CheckErrors(info, "linalg.svd", a.ndim() == 2);
  return {u, s, vt};
}

// ---- symmetric eigendecomposition -------------------------------------------------------------

std::tuple<Tensor, Tensor> Eigh(const Tensor& a, const std::string& uplo, bool compute_v) {
  constexpr const char* kOp = "linalg.eigh";
  CheckMatrix(a, kOp, true);
  TB_CHECK(uplo == "L" || uplo == "U" || uplo == "l" || uplo == "u", ValueError)
      << kOp << ": Expected UPLO argument to be 'L' or 'U', but got " << uplo;
  const Dims batch = BatchShape(a);
  const int64_t nb = BatchCount(batch), n = a.size(-1);
  Tensor v = ColMajorCopy(a);
  Tensor w = Tensor::Empty(Concat(batch, {n}), a.dtype());
  Tensor info = Int32Zeros(batch);
  const char up = (uplo == "U" || uplo == "u") ? 'U' : 'L';
  ForFloat(a.dtype(), [&](auto t) {
    using T = decltype(t);
    if (n == 0) return;
    const char jobz = compute_v ? 'V' : 'N';
    T query;
    Int iquery, qinfo;
    syevd(jobz, up, n, v.data_as<T>(), n, w.data_as<T>(), &query, -1, &iquery, -1, &qinfo);
    std::vector<T> work(Lwork(query));
    std::vector<Int> iwork(std::max<Int>(1, iquery));
    for (int64_t b = 0; b < nb; ++b) {
      syevd(jobz, up, n, v.data_as<T>() + b * n * n, n, w.data_as<T>() + b * n, work.data(),
            static_cast<Int>(work.size()), iwork.data(), static_cast<Int>(iwork.size()),
            info.data_as<Int>() + b);
    }
  });
  CheckErrors(info, "linalg.eigh", a.ndim() == 2);
  return {w, compute_v ? v : Tensor::Empty({0}, a.dtype())};
}

// ---- pseudoinverse ----------------------------------------------------------------------------

// Values of a tolerance (float64, broadcast to `batch`), or `fallback` everywhere.
std::vector<double> Tolerance(const std::optional<Tensor>& t, IntArrayRef batch, const char* name) {
  const int64_t nb = BatchCount(batch);
  if (!t) return std::vector<double>(nb, 0.0);
  TB_CHECK(!IsComplex(t->dtype()), TypeError)
      << "torch.linalg.pinv: " << name << " tensor of complex type is not supported.";
  Tensor c = Cast(*t, DType::kFloat64).expand(batch).contiguous();
  const double* p = c.data_as<const double>();
  return std::vector<double>(p, p + nb);
}

Tensor Pinv(const Tensor& a, const std::optional<Tensor>& atol, const std::optional<Tensor>& rtol,
            bool hermitian) {
  constexpr const char* kOp = "torch.linalg.pinv";
  CheckMatrix(a, kOp, hermitian);
  const Dims batch = BatchShape(a);
  const int64_t nb = BatchCount(batch), m = a.size(-2), n = a.size(-1), k = std::min(m, n);
  Tensor out = ColMajor(batch, n, m, a.dtype());
  if (out.numel() == 0) return out;
  // torch's defaults: atol 0; rtol eps * max(m, n), or 0 where a positive atol is given.
  const std::vector<double> at = Tolerance(atol, batch, "atol");
  std::vector<double> rt = Tolerance(rtol, batch, "rtol");
  if (!rtol) {
    const double eps = a.dtype() == DType::kFloat32 ? std::numeric_limits<float>::epsilon()
                                                    : std::numeric_limits<double>::epsilon();
    for (int64_t b = 0; b < nb; ++b) {
      rt[b] = (atol && at[b] > 0) ? 0.0 : eps * static_cast<double>(std::max(m, n));
    }
  }
  ForFloat(a.dtype(), [&](auto t) {
    using T = decltype(t);
    T* o = out.data_as<T>();
    if (!hermitian) {
      auto [u, s, vt] = Svd(a, false, true, std::nullopt);
      for (int64_t b = 0; b < nb; ++b) {
        const T* sb = s.data_as<const T>() + b * k;
        const double tol = std::max(at[b], rt[b] * static_cast<double>(sb[0]));
        // pinv = V diag(s+) U^T: Vh^T (n x k) scaled by column, times U^T (k x m).
        Eigen::Map<const ColMat<T>> U(u.data_as<const T>() + b * m * k, m, k);
        Eigen::Map<const ColMat<T>> Vh(vt.data_as<const T>() + b * k * n, k, n);
        ColMat<T> vs = Vh.transpose();
        for (int64_t j = 0; j < k; ++j) {
          const T inv = static_cast<double>(sb[j]) > tol ? T(1) / sb[j] : T(0);
          vs.col(j) *= inv;
        }
        Eigen::Map<ColMat<T>>(o + b * n * m, n, m).noalias() = vs * U.transpose();
      }
    } else {
      auto [w, v] = Eigh(a, "L", true);
      for (int64_t b = 0; b < nb; ++b) {
        const T* wb = w.data_as<const T>() + b * n;
        T mx = 0;
        for (int64_t j = 0; j < n; ++j) mx = std::max(mx, std::abs(wb[j]));
        const double tol = std::max(at[b], rt[b] * static_cast<double>(mx));
        Eigen::Map<const ColMat<T>> V(v.data_as<const T>() + b * n * n, n, n);
        ColMat<T> vs = V;
        for (int64_t j = 0; j < n; ++j) {
          const T inv = static_cast<double>(std::abs(wb[j])) > tol ? T(1) / wb[j] : T(0);
          vs.col(j) *= inv;
        }
        Eigen::Map<ColMat<T>>(o + b * n * n, n, n).noalias() = vs * V.transpose();
      }
    }
  });
  return out;
}

// ---- matrix exponential -----------------------------------------------------------------------

Tensor MatrixExp(const Tensor& a) {
  constexpr const char* kOp = "linalg.matrix_exp";
  CheckMatrix(a, kOp, true);
  const Dims batch = BatchShape(a);
  const int64_t nb = BatchCount(batch), n = a.size(-1);
  Tensor x = ColMajorCopy(a);
  Tensor out = ColMajor(batch, n, n, a.dtype());
  ForFloat(a.dtype(), [&](auto t) {
    using T = decltype(t);
    for (int64_t b = 0; b < nb && n > 0; ++b) {
      // In double whatever the dtype: float32's Pade degree loses digits torch keeps.
      Eigen::Map<const ColMat<T>> A(x.data_as<const T>() + b * n * n, n, n);
      const ColMat<double> e = A.template cast<double>().exp();
      Eigen::Map<ColMat<T>>(out.data_as<T>() + b * n * n, n, n) = e.template cast<T>();
    }
  });
  return out;
}

}  // namespace

TB_REGISTER_KERNELS(linalg_spectral) {
  const DeviceType cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::_linalg_svd", cpu, Boxed<&Svd>(), TB_HERE);
  table.RegisterKernel("aten::_linalg_eigh", cpu, Boxed<&Eigh>(), TB_HERE);
  table.RegisterKernel("aten::linalg_pinv.atol_rtol_tensor", cpu, Boxed<&Pinv>(), TB_HERE);
  table.RegisterKernel("aten::linalg_matrix_exp", cpu, Boxed<&MatrixExp>(), TB_HERE);
}

}  // namespace tb::kernels::linalg
