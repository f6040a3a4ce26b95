// Spectral decompositions and the functions built on them: aten::_linalg_svd (LAPACK gesdd, as
// torch's CPU default), aten::_linalg_eigh (syevd), aten::linalg_pinv.atol_rtol_tensor (composed
// from them exactly as torch composes it) and aten::linalg_matrix_exp (scaling and squaring,
// a Pade approximant in double precision on BLAS).
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <Eigen/Core>

#include "dispatch/op_table.h"
#include "kernels/linalg_internal.h"
#include "kernels/promote_broadcast.h"

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
    const Int ldu = static_cast<Int>(compute_uv ? m : 1);
    const Int ldvt = static_cast<Int>(compute_uv ? vrows : 1);
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

// exp(A) of one column-major n x n matrix, in double: Higham's scaling and squaring with the
// diagonal Pade approximant of degree 3, 5, 7, 9 or 13 chosen by the 1-norm ("The scaling and
// squaring method for the matrix exponential revisited", 2005), products on BLAS dgemm.
void ExpPade(const double* a_in, double* out, int64_t n) {
  static constexpr double kTheta[] = {1.495585217958292e-2, 2.539398330063230e-1,
                                      9.504178996162932e-1, 2.097847961257068e0,
                                      5.371920351148152e0};
  static constexpr double kB3[] = {120, 60, 12, 1};
  static constexpr double kB5[] = {30240, 15120, 3360, 420, 30, 1};
  static constexpr double kB7[] = {17297280, 8648640, 1995840, 277200, 25200, 1512, 56, 1};
  static constexpr double kB9[] = {17643225600., 8821612800., 2075673600., 302702400., 30270240.,
                                   2162160.,     110880.,     3960.,       90.,        1.};
  static constexpr double kB13[] = {64764752532480000.,
                                    32382376266240000.,
                                    7771770303897600.,
                                    1187353796428800.,
                                    129060195264000.,
                                    10559470521600.,
                                    670442572800.,
                                    33522128640.,
                                    1323241920.,
                                    40840800.,
                                    960960.,
                                    16380.,
                                    182.,
                                    1.};
  const int64_t nn = n * n;
  double norm = 0;
  for (int64_t j = 0; j < n; ++j) {
    double c = 0;
    for (int64_t i = 0; i < n; ++i) c += std::abs(a_in[j * n + i]);
    norm = std::max(norm, c);
  }
  std::vector<double> a(a_in, a_in + nn), a2(nn), a4(nn), a6(nn), u(nn), v(nn), t(nn);
  const Int ni = static_cast<Int>(n);
  int s = 0, m = 13;
  const double* b = kB13;
  const double* low[] = {kB3, kB5, kB7, kB9};
  for (int i = 0; i < 4; ++i) {
    if (norm <= kTheta[i]) {
      m = 3 + 2 * i;
      b = low[i];
      break;
    }
  }
  if (m == 13 && norm > kTheta[4]) {
    s = static_cast<int>(std::ceil(std::log2(norm / kTheta[4])));
    const double scale = std::ldexp(1.0, -s);
    for (double& x : a) x *= scale;
  }
  Gemm(ni, a.data(), a.data(), a2.data());
  if (m >= 5) Gemm(ni, a2.data(), a2.data(), a4.data());
  if (m >= 7) Gemm(ni, a4.data(), a2.data(), a6.data());
  auto eye = [&](int64_t k) { return (k % (n + 1)) == 0 ? 1.0 : 0.0; };
  if (m == 13) {
    // U = A (A6 (b13 A6 + b11 A4 + b9 A2) + b7 A6 + b5 A4 + b3 A2 + b1 I)
    // V = A6 (b12 A6 + b10 A4 + b8 A2) + b6 A6 + b4 A4 + b2 A2 + b0 I
    for (int64_t k = 0; k < nn; ++k) t[k] = b[13] * a6[k] + b[11] * a4[k] + b[9] * a2[k];
    Gemm(ni, a6.data(), t.data(), u.data());
    for (int64_t k = 0; k < nn; ++k) {
      t[k] = u[k] + b[7] * a6[k] + b[5] * a4[k] + b[3] * a2[k] + b[1] * eye(k);
    }
    Gemm(ni, a.data(), t.data(), u.data());
    for (int64_t k = 0; k < nn; ++k) t[k] = b[12] * a6[k] + b[10] * a4[k] + b[8] * a2[k];
    Gemm(ni, a6.data(), t.data(), v.data());
    for (int64_t k = 0; k < nn; ++k) {
      v[k] += b[6] * a6[k] + b[4] * a4[k] + b[2] * a2[k] + b[0] * eye(k);
    }
  } else {
    // U = A sum_j b_(2j+1) A^(2j), V = sum_j b_(2j) A^(2j), j < (m + 1) / 2.
    std::vector<double> a8;
    if (m == 9) {
      a8.resize(nn);
      Gemm(ni, a4.data(), a4.data(), a8.data());
    }
    const double* pw[] = {nullptr, a2.data(), a4.data(), a6.data(), a8.data()};
    for (int64_t k = 0; k < nn; ++k) {
      double odd = b[1] * eye(k), even = b[0] * eye(k);
      for (int64_t j = 1; 2 * j < m; ++j) {
        odd += b[2 * j + 1] * pw[j][k];
        even += b[2 * j] * pw[j][k];
      }
      t[k] = odd;
      v[k] = even;
    }
    Gemm(ni, a.data(), t.data(), u.data());
  }
  // exp(A / 2^s) = (V - U)^-1 (V + U), then squared s times.
  for (int64_t k = 0; k < nn; ++k) {
    const double p = v[k] + u[k];
    v[k] -= u[k];
    u[k] = p;
  }
  std::vector<Int> piv(n);
  Int info = 0;
  getrf(ni, ni, v.data(), ni, piv.data(), &info);
  getrs('N', ni, ni, v.data(), ni, piv.data(), u.data(), ni, &info);
  for (int i = 0; i < s; ++i) {
    Gemm(ni, u.data(), u.data(), t.data());
    u.swap(t);
  }
  std::copy(u.begin(), u.end(), out);
}

Tensor MatrixExp(const Tensor& a) {
  constexpr const char* kOp = "linalg.matrix_exp";
  CheckMatrix(a, kOp, true);
  const Dims batch = BatchShape(a);
  const int64_t nb = BatchCount(batch), n = a.size(-1);
  // In double whatever the dtype (float32's approximant would lose digits torch keeps).
  Tensor x = ColMajorCopy(a.dtype() == DType::kFloat64 ? a : Cast(a, DType::kFloat64));
  Tensor out = ColMajor(batch, n, n, DType::kFloat64);
  for (int64_t b = 0; b < nb && n > 0; ++b) {
    ExpPade(x.data_as<const double>() + b * n * n, out.data_as<double>() + b * n * n, n);
  }
  return a.dtype() == DType::kFloat64 ? out : Cast(out, a.dtype());
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
