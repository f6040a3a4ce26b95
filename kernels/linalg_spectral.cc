// Spectral decompositions and the functions built on them, for float32, float64, complex64 and
// complex128: aten::_linalg_svd (LAPACK gesdd, as torch's CPU default), aten::_linalg_eigh
// (syevd / heevd), aten::linalg_pinv.atol_rtol_tensor (composed
// from them exactly as torch composes it) and aten::linalg_matrix_exp (torch's optimized Taylor
// polynomials with scaling and squaring, in the input's precision, on BLAS).
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
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
  Tensor s = Tensor::Empty(Concat(batch, {k}), ValueDType(a.dtype()));
  Tensor u = compute_uv ? ColMajor(batch, m, ucols, a.dtype()) : Tensor::Empty({0}, a.dtype());
  Tensor vt = compute_uv ? ColMajor(batch, vrows, n, a.dtype()) : Tensor::Empty({0}, a.dtype());
  Tensor info = Int32Zeros(batch);
  ForType(a.dtype(), [&](auto t) {
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
    using R = Real<T>;
    const char jobz = !compute_uv ? 'N' : (full_matrices ? 'A' : 'S');
    // cgesdd's real workspace: 7 min(m, n) without vectors, else
    // min(m, n) * max(5 min(m, n) + 7, 2 max(m, n) + 2 min(m, n) + 1).
    const int64_t mx = std::max(m, n);
    std::vector<R> rwork(
        kIsComplex<T> ? (compute_uv ? k * std::max(5 * k + 7, 2 * mx + 2 * k + 1) : 7 * k) : 1);
    // gesdd wants ldu >= 1 and ldvt >= 1 even when it does not write them.
    const Int ldu = static_cast<Int>(compute_uv ? m : 1);
    const Int ldvt = static_cast<Int>(compute_uv ? vrows : 1);
    T dummy_u[1], dummy_vt[1];
    std::vector<Int> iwork(8 * k);
    T query;
    Int qinfo;
    gesdd(jobz, m, n, work_a.data_as<T>(), m, s.data_as<R>(), compute_uv ? u.data_as<T>() : dummy_u,
          ldu, compute_uv ? vt.data_as<T>() : dummy_vt, ldvt, &query, -1, rwork.data(),
          iwork.data(), &qinfo);
    std::vector<T> work(Lwork(query));
    for (int64_t b = 0; b < nb; ++b) {
      // gesdd may never return on an infinity (OpenBLAS): a matrix with a NaN or an infinity
      // gets LAPACK 3.10's info -4 for it, which CheckErrors raises as torch does.
      if (!AllFinite(work_a.data_as<const T>() + b * m * n, m * n)) {
        info.data_as<Int>()[b] = -4;
        continue;
      }
      gesdd(jobz, m, n, work_a.data_as<T>() + b * m * n, m, s.data_as<R>() + b * k,
            compute_uv ? u.data_as<T>() + b * m * ucols : dummy_u, ldu,
            compute_uv ? vt.data_as<T>() + b * vrows * n : dummy_vt, ldvt, work.data(),
            static_cast<Int>(work.size()), rwork.data(), iwork.data(), info.data_as<Int>() + b);
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
  Tensor w = Tensor::Empty(Concat(batch, {n}), ValueDType(a.dtype()));
  Tensor info = Int32Zeros(batch);
  const char up = (uplo == "U" || uplo == "u") ? 'U' : 'L';
  ForType(a.dtype(), [&](auto t) {
    using T = decltype(t);
    using R = Real<T>;
    if (n == 0) return;
    const char jobz = compute_v ? 'V' : 'N';
    T query;
    R rquery = 1;
    Int iquery, qinfo;
    syevd(jobz, up, n, v.data_as<T>(), n, w.data_as<R>(), &query, -1, &rquery, -1, &iquery, -1,
          &qinfo);
    std::vector<T> work(Lwork(query));
    std::vector<R> rwork(Lwork(rquery));
    std::vector<Int> iwork(std::max<Int>(1, iquery));
    for (int64_t b = 0; b < nb; ++b) {
      syevd(jobz, up, n, v.data_as<T>() + b * n * n, n, w.data_as<R>() + b * n, work.data(),
            static_cast<Int>(work.size()), rwork.data(), static_cast<Int>(rwork.size()),
            iwork.data(), static_cast<Int>(iwork.size()), info.data_as<Int>() + b);
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
    const double eps = ValueDType(a.dtype()) == DType::kFloat32
                           ? std::numeric_limits<float>::epsilon()
                           : std::numeric_limits<double>::epsilon();
    for (int64_t b = 0; b < nb; ++b) {
      rt[b] = (atol && at[b] > 0) ? 0.0 : eps * static_cast<double>(std::max(m, n));
    }
  }
  ForType(a.dtype(), [&](auto t) {
    using T = decltype(t);
    using R = Real<T>;
    T* o = out.data_as<T>();
    if (!hermitian) {
      auto [u, s, vt] = Svd(a, false, true, std::nullopt);
      for (int64_t b = 0; b < nb; ++b) {
        const R* sb = s.data_as<const R>() + b * k;
        const double tol = std::max(at[b], rt[b] * static_cast<double>(sb[0]));
        // pinv = V diag(s+) U^H: Vh^H (n x k) scaled by column, times U^H (k x m).
        Eigen::Map<const ColMat<T>> U(u.data_as<const T>() + b * m * k, m, k);
        Eigen::Map<const ColMat<T>> Vh(vt.data_as<const T>() + b * k * n, k, n);
        ColMat<T> vs = Vh.adjoint();
        for (int64_t j = 0; j < k; ++j) {
          const R inv = static_cast<double>(sb[j]) > tol ? R(1) / sb[j] : R(0);
          vs.col(j) *= inv;
        }
        Eigen::Map<ColMat<T>>(o + b * n * m, n, m).noalias() = vs * U.adjoint();
      }
    } else {
      auto [w, v] = Eigh(a, "L", true);
      for (int64_t b = 0; b < nb; ++b) {
        const R* wb = w.data_as<const R>() + b * n;
        R mx = 0;
        for (int64_t j = 0; j < n; ++j) mx = std::max(mx, std::abs(wb[j]));
        const double tol = std::max(at[b], rt[b] * static_cast<double>(mx));
        Eigen::Map<const ColMat<T>> V(v.data_as<const T>() + b * n * n, n, n);
        ColMat<T> vs = V;
        for (int64_t j = 0; j < n; ++j) {
          const R inv = static_cast<double>(std::abs(wb[j])) > tol ? R(1) / wb[j] : R(0);
          vs.col(j) *= inv;
        }
        Eigen::Map<ColMat<T>>(o + b * n * n, n, n).noalias() = vs * V.adjoint();
      }
    }
  });
  return out;
}

// ---- matrix exponential -----------------------------------------------------------------------

// exp(A) of column-major n x n matrices, in T (float32 in float, float64 in double), as torch
// computes it: the optimized Taylor polynomials of degree 1, 2, 4, 8, 12 or 18 of Bader, Blanes
// and Casas ("Computing the matrix exponential with an optimized Taylor polynomial
// approximation", Mathematics 7(12), 2019), the degree chosen by the 1-norm against the
// thresholds `theta`, scaling and squaring beyond the last one. Each product and each linear
// combination of matrix powers accumulates in T in the order torch's does, so small matrices
// give torch's float32 result to the bit (larger products differ by BLAS summation order).
template <typename T>
class TaylorExp {
  using R = Real<T>;

 public:
  explicit TaylorExp(int64_t n) : n_(n), nn_(n * n), eye_(nn_, T(0)) {
    for (int64_t i = 0; i < n; ++i) eye_[i * (n + 1)] = T(1);
  }

  void Run(const T* a, T* out, const R* theta) {
    R norm = 0;
    for (int64_t j = 0; j < n_; ++j) {
      R c = 0;
      for (int64_t i = 0; i < n_; ++i) c += std::abs(a[j * n_ + i]);
      norm = std::max(norm, c);
    }
    std::vector<T> r;
    if (norm <= theta[0]) {
      r = Comb({{eye_.data(), T(1)}, {a, T(1)}});
    } else if (norm <= theta[1]) {
      std::vector<T> a2 = Mul(a, a);
      for (T& v : a2) v /= T(2);
      r = Comb({{eye_.data(), T(1)}, {a, T(1)}, {a2.data(), T(1)}});
    } else if (norm <= theta[2]) {
      r = T4(a);
    } else if (norm <= theta[3]) {
      r = T8(a);
    } else if (norm < theta[4]) {
      r = T12(a);
    } else if (std::isinf(norm)) {  // torch's scaling by 2^-inf = 0 gives NaN everywhere
      const R nan = std::numeric_limits<R>::quiet_NaN();
      if constexpr (kIsComplex<T>) {
        r.assign(nn_, T(nan, nan));
      } else {
        r.assign(nn_, nan);
      }
    } else {  // scaled by 2^-s into the degree-18 range, then squared s times
      const R ratio = std::ceil(std::log2(norm / theta[5]));
      const int s = ratio > R(0) ? static_cast<int>(ratio) : 0;
      std::vector<T> scaled(a, a + nn_);
      const R scale = std::ldexp(R(1), -s);
      for (T& v : scaled) v *= scale;
      r = T18(scaled.data());
      for (int i = 0; i < s; ++i) r = Mul(r.data(), r.data());
    }
    std::copy(r.begin(), r.end(), out);
  }

 private:
  using Term = std::pair<const T*, T>;

  // X Y. Below 400 multiply-adds per product torch's CPU matmul (bmm and mm alike) sums each
  // element in order of k in T, one rounding per product and per sum; so does this loop (the
  // sample matrices of torch's tests are 5 x 5). Larger products go to BLAS.
  std::vector<T> Mul(const T* x, const T* y) const {
    std::vector<T> c(nn_);
    if (nn_ * n_ < 400) {
      for (int64_t j = 0; j < n_; ++j) {
        for (int64_t i = 0; i < n_; ++i) {
          T acc = 0;
          for (int64_t k = 0; k < n_; ++k) acc += x[k * n_ + i] * y[j * n_ + k];
          c[j * n_ + i] = acc;
        }
      }
    } else {
      Gemm(static_cast<Int>(n_), x, y, c.data());
    }
    return c;
  }
  // sum_i c_i M_i, accumulated in T from 0 in the order given.
  std::vector<T> Comb(std::initializer_list<Term> terms) const {
    std::vector<T> out(nn_, T(0));
    for (const Term& t : terms) {
      for (int64_t k = 0; k < nn_; ++k) out[k] += t.first[k] * t.second;
    }
    return out;
  }
  // Row j of b combines {I, A, A^2, A^3[, A^6]}: B_j = sum_i b[j][i] P_i.
  template <size_t R>
  std::vector<std::vector<T>> Combs(const double (&b)[R][R], const std::vector<const T*>& p) const {
    std::vector<std::vector<T>> out(R, std::vector<T>(nn_, T(0)));
    for (size_t j = 0; j < R; ++j) {
      for (size_t i = 0; i < R; ++i) {
        const T c = static_cast<T>(b[j][i]);
        for (int64_t k = 0; k < nn_; ++k) out[j][k] += p[i][k] * c;
      }
    }
    return out;
  }
  static void AddTo(std::vector<T>& x, const std::vector<T>& y) {
    for (size_t k = 0; k < x.size(); ++k) x[k] += y[k];
  }

  // I + A + A^2 (I / 2 + A / 6 + A^2 / 24)
  std::vector<T> T4(const T* a) const {
    const std::vector<T> a2 = Mul(a, a);
    const std::vector<T> inner =
        Comb({{eye_.data(), T(1 / 2.0)}, {a, T(1 / 6.0)}, {a2.data(), T(1 / 24.0)}});
    const std::vector<T> p = Mul(a2.data(), inner.data());
    return Comb({{eye_.data(), T(1)}, {a, T(1)}, {a2.data(), T(0)}, {p.data(), T(1)}});
  }

  // I + A + y2 A^2 + A8, A4 = A^2 (x1 A + x2 A^2),
  // A8 = (x3 A^2 + A4) (x4 I + x5 A + x6 A^2 + x7 A4); the constants rounded to T as torch's.
  std::vector<T> T8(const T* a) const {
    const double s177 = static_cast<R>(0.1330413469565007072504e+2);
    const double x3d = static_cast<R>(2. / 3.);
    const T x1 = static_cast<T>(x3d * ((1. + s177) / 88.));
    const T x2 = static_cast<T>(x3d * ((1. + s177) / 352.));
    const T x3 = static_cast<T>(x3d);
    const T x4 = static_cast<T>((-271. + 29. * s177) / (315. * x3d));
    const T x5 = static_cast<T>((-11. + 11. * s177) / (1260. * x3d));
    const T x6 = static_cast<T>((-99. + 11. * s177) / (5040. * x3d));
    const T x7 = static_cast<T>((89. - s177) / (5040. * x3d));
    const T y2 = static_cast<T>((857. - 58. * s177) / 630.);
    const std::vector<T> a2 = Mul(a, a);
    const std::vector<T> c4 = Comb({{a, x1}, {a2.data(), x2}});
    const std::vector<T> a4 = Mul(a2.data(), c4.data());
    const std::vector<T> l = Comb({{a2.data(), x3}, {a4.data(), T(1)}});
    const std::vector<T> rr = Comb({{eye_.data(), x4}, {a, x5}, {a2.data(), x6}, {a4.data(), x7}});
    const std::vector<T> a8 = Mul(l.data(), rr.data());
    return Comb(
        {{eye_.data(), T(1)}, {a, T(1)}, {a2.data(), y2}, {a4.data(), T(0)}, {a8.data(), T(1)}});
  }

  // B = b {I, A, A^2, A^3}; B2 += B3 B3; B0 + (B1 + B2) B2.
  std::vector<T> T12(const T* a) const {
    static constexpr double b[4][4] = {
        {9.0198e-16, 0.46932117595418237389, -0.20099424927047284052, -0.04623946134063071740},
        {5.31597895759871264183, 1.19926790417132231573, 0.01179296240992997031,
         0.01108844528519167989},
        {0.18188869982170434744, 0.05502798439925399070, 0.09351590770535414968,
         0.00610700528898058230},
        {-2.0861320e-13, -0.13181061013830184015, -0.02027855540589259079,
         -0.00675951846863086359}};
    const std::vector<T> a2 = Mul(a, a), a3 = Mul(a, a2.data());
    std::vector<std::vector<T>> bs = Combs(b, {eye_.data(), a, a2.data(), a3.data()});
    AddTo(bs[2], Mul(bs[3].data(), bs[3].data()));
    AddTo(bs[1], bs[2]);
    AddTo(bs[0], Mul(bs[1].data(), bs[2].data()));
    return bs[0];
  }

  // B = b {I, A, A^2, A^3, A^6}; B3 += B0 B4; B1 + (B2 + B3) B3.
  std::vector<T> T18(const T* a) const {
    static constexpr double b[5][5] = {
        {0., -1.00365581030144618291e-01, -8.02924648241156932449e-03, -8.92138498045729985177e-04,
         0.},
        {0., 3.97849749499645077844e-01, 1.36783778460411720168e+00, 4.98289622525382669416e-01,
         -6.37898194594723280150e-04},
        {-1.09676396052962061844e+01, 1.68015813878906206114e+00, 5.71779846478865511061e-02,
         -6.98210122488052056106e-03, 3.34975017086070470649e-05},
        {-9.04316832390810593223e-02, -6.76404519071381882256e-02, 6.75961301770459654925e-02,
         2.95552570429315521194e-02, -1.39180257516060693404e-05},
        {0., 0., -9.23364619367118555360e-02, -1.69364939002081722752e-02,
         -1.40086798182036094347e-05}};
    const std::vector<T> a2 = Mul(a, a), a3 = Mul(a, a2.data()), a6 = Mul(a3.data(), a3.data());
    std::vector<std::vector<T>> bs = Combs(b, {eye_.data(), a, a2.data(), a3.data(), a6.data()});
    AddTo(bs[3], Mul(bs[0].data(), bs[4].data()));
    AddTo(bs[2], bs[3]);
    AddTo(bs[1], Mul(bs[2].data(), bs[3].data()));
    return bs[1];
  }

  int64_t n_, nn_;
  std::vector<T> eye_;
};

// torch's degree thresholds for float and double (the last: the degree-18 scaling target).
constexpr float kThetaFloat[6] = {1.192092800768788e-07f, 5.978858893805233e-04f,
                                  5.116619363445086e-02f, 5.800524627688768e-01f,
                                  1.461661507209034e+00f, 3.010066362817634e+00f};
constexpr double kThetaDouble[6] = {2.220446049250313e-16, 2.580956802971767e-08,
                                    3.397168839976962e-04, 4.991228871115323e-02,
                                    2.996158913811580e-01, 1.090863719290036e+00};

Tensor MatrixExp(const Tensor& a) {
  constexpr const char* kOp = "linalg.matrix_exp";
  CheckMatrix(a, kOp, true);
  const Dims batch = BatchShape(a);
  const int64_t nb = BatchCount(batch), n = a.size(-1);
  Tensor x = ColMajorCopy(a);
  Tensor out = ColMajor(batch, n, n, a.dtype());
  if (n == 0) return out;
  ForType(a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const Real<T>* theta = nullptr;
    if constexpr (std::is_same_v<Real<T>, float>) {
      theta = kThetaFloat;
    } else {
      theta = kThetaDouble;
    }
    TaylorExp<T> exp(n);
    for (int64_t b = 0; b < nb; ++b) {
      exp.Run(x.data_as<const T>() + b * n * n, out.data_as<T>() + b * n * n, theta);
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
