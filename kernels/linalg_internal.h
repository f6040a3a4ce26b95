// Private to kernels/linalg_*.cc: LAPACK and BLAS (OpenBLAS through Debian's liblapacke-dev, as
// torch's CPU build links them) overloaded by element type, and the batch helpers the linear
// algebra kernels share.
//
// Matrices go to LAPACK as torch hands them there: a batch of column-major ("Fortran") matrices,
// contiguous one after another. ColMajor() makes such a tensor (its last two dims have strides
// (1, rows)), ColMajorCopy() copies any strided input into one; matrix b of the batch then starts
// at data + b * rows * cols, with leading dimension rows.
#pragma once

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <type_traits>
#include <vector>

// lapack.h's complex types as std::complex (its default is C99 _Complex).
#define lapack_complex_float std::complex<float>
#define lapack_complex_double std::complex<double>
#include <lapack.h>

#include "bridge/error.h"
#include "bridge/tensor.h"

// BLAS products and triangular solves (lapack.h declares LAPACK only).
extern "C" {
void strsm_(const char* side, const char* uplo, const char* transa, const char* diag,
            const lapack_int* m, const lapack_int* n, const float* alpha, const float* a,
            const lapack_int* lda, float* b, const lapack_int* ldb, size_t, size_t, size_t, size_t);
void sgemm_(const char* transa, const char* transb, const lapack_int* m, const lapack_int* n,
            const lapack_int* k, const float* alpha, const float* a, const lapack_int* lda,
            const float* b, const lapack_int* ldb, const float* beta, float* c,
            const lapack_int* ldc, size_t, size_t);
void dgemm_(const char* transa, const char* transb, const lapack_int* m, const lapack_int* n,
            const lapack_int* k, const double* alpha, const double* a, const lapack_int* lda,
            const double* b, const lapack_int* ldb, const double* beta, double* c,
            const lapack_int* ldc, size_t, size_t);
void dtrsm_(const char* side, const char* uplo, const char* transa, const char* diag,
            const lapack_int* m, const lapack_int* n, const double* alpha, const double* a,
            const lapack_int* lda, double* b, const lapack_int* ldb, size_t, size_t, size_t,
            size_t);
void ctrsm_(const char* side, const char* uplo, const char* transa, const char* diag,
            const lapack_int* m, const lapack_int* n, const std::complex<float>* alpha,
            const std::complex<float>* a, const lapack_int* lda, std::complex<float>* b,
            const lapack_int* ldb, size_t, size_t, size_t, size_t);
void ztrsm_(const char* side, const char* uplo, const char* transa, const char* diag,
            const lapack_int* m, const lapack_int* n, const std::complex<double>* alpha,
            const std::complex<double>* a, const lapack_int* lda, std::complex<double>* b,
            const lapack_int* ldb, size_t, size_t, size_t, size_t);
void cgemm_(const char* transa, const char* transb, const lapack_int* m, const lapack_int* n,
            const lapack_int* k, const std::complex<float>* alpha, const std::complex<float>* a,
            const lapack_int* lda, const std::complex<float>* b, const lapack_int* ldb,
            const std::complex<float>* beta, std::complex<float>* c, const lapack_int* ldc, size_t,
            size_t);
void zgemm_(const char* transa, const char* transb, const lapack_int* m, const lapack_int* n,
            const lapack_int* k, const std::complex<double>* alpha, const std::complex<double>* a,
            const lapack_int* lda, const std::complex<double>* b, const lapack_int* ldb,
            const std::complex<double>* beta, std::complex<double>* c, const lapack_int* ldc,
            size_t, size_t);
// The unblocked Q of a QR factorization (lapack.h leaves it out).
#define TB_ORG2R_(NAME, T)                                                       \
  void NAME(const lapack_int* m, const lapack_int* n, const lapack_int* k, T* a, \
            const lapack_int* lda, const T* tau, T* work, lapack_int* info)
TB_ORG2R_(sorg2r_, float);
TB_ORG2R_(dorg2r_, double);
TB_ORG2R_(cung2r_, std::complex<float>);
TB_ORG2R_(zung2r_, std::complex<double>);
#undef TB_ORG2R_
}

namespace tb::kernels::linalg {

using Int = lapack_int;

// ---- element types ----------------------------------------------------------------------------
// The kernels are templates over float, double, std::complex<float> and std::complex<double>;
// Real<T> is the value type (singular values, eigenvalues of Hermitian matrices, tolerances).
template <typename T>
struct RealOf {
  using type = T;
};
template <typename R>
struct RealOf<std::complex<R>> {
  using type = R;
};
template <typename T>
using Real = typename RealOf<T>::type;
template <typename T>
inline constexpr bool kIsComplex = !std::is_same_v<T, Real<T>>;

// conj(x), x itself for a real T.
template <typename T>
inline T Conj(T x) {
  if constexpr (kIsComplex<T>) {
    return std::conj(x);
  } else {
    return x;
  }
}
// The conjugate-transpose flag of BLAS / LAPACK: 'C' for complex, 'T' (the same) for real.
template <typename T>
inline constexpr char kAdjoint = kIsComplex<T> ? 'C' : 'T';

// ---- LAPACK / BLAS by element type ------------------------------------------------------------
// Each forwards its arguments by value to the Fortran routine of the same name (s, d, c or z
// prefix); the complex forms of the orthogonal / symmetric routines are the unitary / Hermitian
// ones (ungqr, unmqr, heevd), and the routines LAPACK gives a real workspace for complex input
// (gesdd, heevd, gelsy, gelsd, gelss) take `rwork`, which the real forms ignore.
// clang-format off
#define TB_LAPACK_PAIR_(NAME, PARAMS, ARGS)                \
  inline void NAME(PARAMS(float)) { LAPACK_s##NAME ARGS; } \
  inline void NAME(PARAMS(double)) { LAPACK_d##NAME ARGS; }
#define TB_LAPACK_QUAD_(NAME, PARAMS, ARGS)                              \
  TB_LAPACK_PAIR_(NAME, PARAMS, ARGS)                                    \
  inline void NAME(PARAMS(std::complex<float>)) { LAPACK_c##NAME ARGS; } \
  inline void NAME(PARAMS(std::complex<double>)) { LAPACK_z##NAME ARGS; }
using C64 = std::complex<float>;
using C128 = std::complex<double>;

// Cholesky: potrf / potrs / potri.
#define TB_P_(T) char uplo, Int n, T* a, Int lda, Int* info
TB_LAPACK_QUAD_(potrf, TB_P_, (&uplo, &n, a, &lda, info))
TB_LAPACK_QUAD_(potri, TB_P_, (&uplo, &n, a, &lda, info))
#undef TB_P_
#define TB_P_(T) char uplo, Int n, Int nrhs, const T* a, Int lda, T* b, Int ldb, Int* info
TB_LAPACK_QUAD_(potrs, TB_P_, (&uplo, &n, &nrhs, a, &lda, b, &ldb, info))
#undef TB_P_
// LU: getrf / getrs.
#define TB_P_(T) Int m, Int n, T* a, Int lda, Int* ipiv, Int* info
TB_LAPACK_QUAD_(getrf, TB_P_, (&m, &n, a, &lda, ipiv, info))
#undef TB_P_
#define TB_P_(T) \
  char trans, Int n, Int nrhs, const T* a, Int lda, const Int* ipiv, T* b, Int ldb, Int* info
TB_LAPACK_QUAD_(getrs, TB_P_, (&trans, &n, &nrhs, a, &lda, ipiv, b, &ldb, info))
#undef TB_P_
// QR: geqrf / orgqr (ungqr) / ormqr (unmqr) (workspace queries with lwork = -1).
#define TB_P_(T) Int m, Int n, T* a, Int lda, T* tau, T* work, Int lwork, Int* info
TB_LAPACK_QUAD_(geqrf, TB_P_, (&m, &n, a, &lda, tau, work, &lwork, info))
#undef TB_P_
#define TB_P_(T) Int m, Int n, Int k, T* a, Int lda, const T* tau, T* work, Int lwork, Int* info
TB_LAPACK_PAIR_(orgqr, TB_P_, (&m, &n, &k, a, &lda, tau, work, &lwork, info))
inline void orgqr(TB_P_(C64)) { LAPACK_cungqr(&m, &n, &k, a, &lda, tau, work, &lwork, info); }
inline void orgqr(TB_P_(C128)) { LAPACK_zungqr(&m, &n, &k, a, &lda, tau, work, &lwork, info); }
#undef TB_P_
// The pieces of blocked QR (kernels/linalg_factor.cc's small-matrix path): the unblocked
// factorization and Q of a panel (geqr2, org2r / ung2r), the triangular factor T of a block of
// reflectors (larft) and its application to a matrix (larfb).
#define TB_P_(T) Int m, Int n, T* a, Int lda, T* tau, T* work, Int* info
TB_LAPACK_QUAD_(geqr2, TB_P_, (&m, &n, a, &lda, tau, work, info))
#undef TB_P_
#define TB_P_(T) Int m, Int n, Int k, T* a, Int lda, const T* tau, T* work, Int* info
inline void org2r(TB_P_(float)) { sorg2r_(&m, &n, &k, a, &lda, tau, work, info); }
inline void org2r(TB_P_(double)) { dorg2r_(&m, &n, &k, a, &lda, tau, work, info); }
inline void org2r(TB_P_(C64)) { cung2r_(&m, &n, &k, a, &lda, tau, work, info); }
inline void org2r(TB_P_(C128)) { zung2r_(&m, &n, &k, a, &lda, tau, work, info); }
#undef TB_P_
#define TB_P_(T) \
  char direct, char storev, Int n, Int k, const T* v, Int ldv, const T* tau, T* t, Int ldt
TB_LAPACK_QUAD_(larft, TB_P_, (&direct, &storev, &n, &k, v, &ldv, tau, t, &ldt))
#undef TB_P_
#define TB_P_(T)                                                                             \
  char side, char trans, char direct, char storev, Int m, Int n, Int k, const T* v, Int ldv, \
      const T* t, Int ldt, T* c, Int ldc, T* work, Int ldwork
TB_LAPACK_QUAD_(larfb, TB_P_,
                (&side, &trans, &direct, &storev, &m, &n, &k, v, &ldv, t, &ldt, c, &ldc, work,
                 &ldwork))
#undef TB_P_
#define TB_P_(T)                                                                                \
  char side, char trans, Int m, Int n, Int k, const T* a, Int lda, const T* tau, T* c, Int ldc, \
      T* work, Int lwork, Int* info
#define TB_A_ &side, &trans, &m, &n, &k, a, &lda, tau, c, &ldc, work, &lwork, info
TB_LAPACK_PAIR_(ormqr, TB_P_, (TB_A_))
inline void ormqr(TB_P_(C64)) { LAPACK_cunmqr(TB_A_); }
inline void ormqr(TB_P_(C128)) { LAPACK_zunmqr(TB_A_); }
#undef TB_A_
#undef TB_P_
// SVD (divide and conquer) and the symmetric / Hermitian eigensolver (divide and conquer).
#define TB_P_(T)                                                                                  \
  char jobz, Int m, Int n, T* a, Int lda, Real<T>* s, T* u, Int ldu, T* vt, Int ldvt, T* work, \
      Int lwork, Real<T>* rwork, Int* iwork, Int* info
#define TB_A_ &jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork
inline void gesdd(TB_P_(float)) { LAPACK_sgesdd(TB_A_, iwork, info); (void)rwork; }
inline void gesdd(TB_P_(double)) { LAPACK_dgesdd(TB_A_, iwork, info); (void)rwork; }
inline void gesdd(TB_P_(C64)) { LAPACK_cgesdd(TB_A_, rwork, iwork, info); }
inline void gesdd(TB_P_(C128)) { LAPACK_zgesdd(TB_A_, rwork, iwork, info); }
#undef TB_A_
#undef TB_P_
#define TB_P_(T)                                                                                \
  char jobz, char uplo, Int n, T* a, Int lda, Real<T>* w, T* work, Int lwork, Real<T>* rwork, \
      Int lrwork, Int* iwork, Int liwork, Int* info
#define TB_A_ &jobz, &uplo, &n, a, &lda, w, work, &lwork
inline void syevd(TB_P_(float)) {
  LAPACK_ssyevd(TB_A_, iwork, &liwork, info);
  (void)rwork, (void)lrwork;
}
inline void syevd(TB_P_(double)) {
  LAPACK_dsyevd(TB_A_, iwork, &liwork, info);
  (void)rwork, (void)lrwork;
}
inline void syevd(TB_P_(C64)) { LAPACK_cheevd(TB_A_, rwork, &lrwork, iwork, &liwork, info); }
inline void syevd(TB_P_(C128)) { LAPACK_zheevd(TB_A_, rwork, &lrwork, iwork, &liwork, info); }
#undef TB_A_
#undef TB_P_
// Symmetric indefinite (Bunch-Kaufman): sytrf / sytrs, and the Hermitian hetrf / hetrs (complex).
#define TB_P_(T) char uplo, Int n, T* a, Int lda, Int* ipiv, T* work, Int lwork, Int* info
TB_LAPACK_QUAD_(sytrf, TB_P_, (&uplo, &n, a, &lda, ipiv, work, &lwork, info))
inline void hetrf(TB_P_(C64)) { LAPACK_chetrf(&uplo, &n, a, &lda, ipiv, work, &lwork, info); }
inline void hetrf(TB_P_(C128)) { LAPACK_zhetrf(&uplo, &n, a, &lda, ipiv, work, &lwork, info); }
#undef TB_P_
#define TB_P_(T) \
  char uplo, Int n, Int nrhs, const T* a, Int lda, const Int* ipiv, T* b, Int ldb, Int* info
TB_LAPACK_QUAD_(sytrs, TB_P_, (&uplo, &n, &nrhs, a, &lda, ipiv, b, &ldb, info))
inline void hetrs(TB_P_(C64)) { LAPACK_chetrs(&uplo, &n, &nrhs, a, &lda, ipiv, b, &ldb, info); }
inline void hetrs(TB_P_(C128)) { LAPACK_zhetrs(&uplo, &n, &nrhs, a, &lda, ipiv, b, &ldb, info); }
#undef TB_P_
// Least squares: QR (gels), complete orthogonal factorization with column pivoting (gelsy), SVD
// (gelsd, gelss).
#define TB_P_(T) \
  char trans, Int m, Int n, Int nrhs, T* a, Int lda, T* b, Int ldb, T* work, Int lwork, Int* info
TB_LAPACK_QUAD_(gels, TB_P_, (&trans, &m, &n, &nrhs, a, &lda, b, &ldb, work, &lwork, info))
#undef TB_P_
#define TB_P_(T)                                                                            \
  Int m, Int n, Int nrhs, T* a, Int lda, T* b, Int ldb, Int* jpvt, Real<T> rcond, Int* rank, \
      T* work, Int lwork, Real<T>* rwork, Int* info
#define TB_A_ &m, &n, &nrhs, a, &lda, b, &ldb, jpvt, &rcond, rank, work, &lwork
inline void gelsy(TB_P_(float)) { LAPACK_sgelsy(TB_A_, info); (void)rwork; }
inline void gelsy(TB_P_(double)) { LAPACK_dgelsy(TB_A_, info); (void)rwork; }
inline void gelsy(TB_P_(C64)) { LAPACK_cgelsy(TB_A_, rwork, info); }
inline void gelsy(TB_P_(C128)) { LAPACK_zgelsy(TB_A_, rwork, info); }
#undef TB_A_
#undef TB_P_
#define TB_P_(T)                                                                             \
  Int m, Int n, Int nrhs, T* a, Int lda, T* b, Int ldb, Real<T>* s, Real<T> rcond, Int* rank, \
      T* work, Int lwork, Real<T>* rwork, Int* iwork, Int* info
#define TB_A_ &m, &n, &nrhs, a, &lda, b, &ldb, s, &rcond, rank, work, &lwork
inline void gelsd(TB_P_(float)) { LAPACK_sgelsd(TB_A_, iwork, info); (void)rwork; }
inline void gelsd(TB_P_(double)) { LAPACK_dgelsd(TB_A_, iwork, info); (void)rwork; }
inline void gelsd(TB_P_(C64)) { LAPACK_cgelsd(TB_A_, rwork, iwork, info); }
inline void gelsd(TB_P_(C128)) { LAPACK_zgelsd(TB_A_, rwork, iwork, info); }
inline void gelss(TB_P_(float)) { LAPACK_sgelss(TB_A_, info); (void)rwork; (void)iwork; }
inline void gelss(TB_P_(double)) { LAPACK_dgelss(TB_A_, info); (void)rwork; (void)iwork; }
inline void gelss(TB_P_(C64)) { LAPACK_cgelss(TB_A_, rwork, info); (void)iwork; }
inline void gelss(TB_P_(C128)) { LAPACK_zgelss(TB_A_, rwork, info); (void)iwork; }
#undef TB_A_
#undef TB_P_
// General eigenproblem, right eigenvectors only: real (wr, wi) pairs from sgeev / dgeev, complex
// w from cgeev / zgeev.
#define TB_P_(T) char jobvr, Int n, T* a, Int lda
#define TB_A_ &no, &jobvr, &n, a, &lda
#define TB_V_ &vl, &one, vr, &ldvr, work, &lwork
#define TB_REAL_GEEV_(T, F)                                                                   \
  inline void geev(TB_P_(T), T* wr, T* wi, T* vr, Int ldvr, T* work, Int lwork, Int* info) { \
    const char no = 'N'; const Int one = 1; T vl;                                             \
    F(TB_A_, wr, wi, TB_V_, info);                                                           \
  }
#define TB_COMPLEX_GEEV_(T, F)                                                           \
  inline void geev(TB_P_(T), T* w, T* vr, Int ldvr, T* work, Int lwork, Real<T>* rwork, \
                   Int* info) {                                                         \
    const char no = 'N'; const Int one = 1; T vl;                                        \
    F(TB_A_, w, TB_V_, rwork, info);                                                    \
  }
TB_REAL_GEEV_(float, LAPACK_sgeev)
TB_REAL_GEEV_(double, LAPACK_dgeev)
TB_COMPLEX_GEEV_(C64, LAPACK_cgeev)
TB_COMPLEX_GEEV_(C128, LAPACK_zgeev)
#undef TB_COMPLEX_GEEV_
#undef TB_REAL_GEEV_
#undef TB_V_
#undef TB_A_
#undef TB_P_
#undef TB_LAPACK_QUAD_
#undef TB_LAPACK_PAIR_
// clang-format on

inline void trsm(char side, char uplo, char trans, char diag, Int m, Int n, const float* a, Int lda,
                 float* b, Int ldb) {
  const float one = 1;
  strsm_(&side, &uplo, &trans, &diag, &m, &n, &one, a, &lda, b, &ldb, 1, 1, 1, 1);
}
inline void trsm(char side, char uplo, char trans, char diag, Int m, Int n, const double* a,
                 Int lda, double* b, Int ldb) {
  const double one = 1;
  dtrsm_(&side, &uplo, &trans, &diag, &m, &n, &one, a, &lda, b, &ldb, 1, 1, 1, 1);
}
inline void trsm(char side, char uplo, char trans, char diag, Int m, Int n, const C64* a, Int lda,
                 C64* b, Int ldb) {
  const C64 one = 1;
  ctrsm_(&side, &uplo, &trans, &diag, &m, &n, &one, a, &lda, b, &ldb, 1, 1, 1, 1);
}
inline void trsm(char side, char uplo, char trans, char diag, Int m, Int n, const C128* a, Int lda,
                 C128* b, Int ldb) {
  const C128 one = 1;
  ztrsm_(&side, &uplo, &trans, &diag, &m, &n, &one, a, &lda, b, &ldb, 1, 1, 1, 1);
}

// C = A B for column-major n x n matrices (BLAS sgemm / dgemm / cgemm / zgemm).
inline void Gemm(Int n, const float* a, const float* b, float* c) {
  const float one = 1, zero = 0;
  const char no = 'N';
  sgemm_(&no, &no, &n, &n, &n, &one, a, &n, b, &n, &zero, c, &n, 1, 1);
}
inline void Gemm(Int n, const double* a, const double* b, double* c) {
  const double one = 1, zero = 0;
  const char no = 'N';
  dgemm_(&no, &no, &n, &n, &n, &one, a, &n, b, &n, &zero, c, &n, 1, 1);
}
inline void Gemm(Int n, const C64* a, const C64* b, C64* c) {
  const C64 one = 1, zero = 0;
  const char no = 'N';
  cgemm_(&no, &no, &n, &n, &n, &one, a, &n, b, &n, &zero, c, &n, 1, 1);
}
inline void Gemm(Int n, const C128* a, const C128* b, C128* c) {
  const C128 one = 1, zero = 0;
  const char no = 'N';
  zgemm_(&no, &no, &n, &n, &n, &one, a, &n, b, &n, &zero, c, &n, 1, 1);
}

// The optimal workspace a query (lwork = -1) reported, at least 1.
template <typename T>
inline Int Lwork(T query) {
  return std::max<Int>(1, static_cast<Int>(std::real(query)));
}

// ---- batches of matrices ----------------------------------------------------------------------

// Raises for what the linear algebra kernels refuse: a device other than the host, fewer than two
// dims, a dtype other than float32 / float64 / complex64 / complex128, and with `square` matrices
// that are not square. `op` is torch's name for the function ("linalg.cholesky").
void CheckMatrix(const Tensor& a, const char* op, bool square = false, const char* arg = "A");
// Raises unless `t` has `a`'s dtype (a second operand: B, tau, ...).
void CheckSameDType(const Tensor& a, const Tensor& t, const char* op, const char* arg);

// The batch dims of a matrix tensor (all but the last two) and their product.
Dims BatchShape(const Tensor& a);
int64_t BatchCount(IntArrayRef batch);
// `batch` followed by `tail`.
Dims Concat(IntArrayRef batch, std::initializer_list<int64_t> tail);

// An uninitialized batch of column-major matrices of shape batch + (rows, cols).
Tensor ColMajor(IntArrayRef batch, int64_t rows, int64_t cols, DType dtype);
// `a` (any strides, broadcast to batch + its matrix shape when `batch` is given) copied into a
// new batch of column-major matrices.
Tensor ColMajorCopy(const Tensor& a);
Tensor ColMajorCopy(const Tensor& a, IntArrayRef batch);
// A batch of matrices a routine only reads and can take transposed (trsm): `a` itself when it
// is C-contiguous (its memory is the column-major A^T: transposed = true) or already a column-
// major batch, and of batch shape `batch`; otherwise a column-major copy.
struct ReadOperand {
  Tensor t;
  bool transposed = false;
};
ReadOperand ReadOnly(const Tensor& a, IntArrayRef batch);
// Zeros of shape `shape`, int32 (LAPACK's info and pivots).
Tensor Int32Zeros(IntArrayRef shape);

// Zeroes the strictly lower (upper = true) or strictly upper triangle of each column-major
// matrix in `a` (rows x cols, leading dimension rows), leaving the diagonal.
template <typename T>
void KeepTriangle(T* a, int64_t batch, int64_t rows, int64_t cols, bool upper) {
  for (int64_t b = 0; b < batch; ++b) {
    T* m = a + b * rows * cols;
    for (int64_t j = 0; j < cols; ++j) {
      if (upper) {
        for (int64_t i = j + 1; i < rows; ++i) m[j * rows + i] = T(0);
      } else {
        for (int64_t i = 0; i < std::min(j, rows); ++i) m[j * rows + i] = T(0);
      }
    }
  }
}

// True when none of the n elements at p is a NaN or an infinity (in either part).
template <typename T>
bool AllFinite(const T* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (kIsComplex<T>) {
      if (!std::isfinite(p[i].real()) || !std::isfinite(p[i].imag())) return false;
    } else {
      if (!std::isfinite(p[i])) return false;
    }
  }
  return true;
}

// Raises torch's error for the first nonzero LAPACK info in `info` (int32, one per matrix of a
// batch), as aten::_linalg_check_errors does for `api` ("torch.linalg.cholesky_ex").
void CheckErrors(const Tensor& info, const std::string& api, bool is_matrix);

// float32 for complex64, float64 for complex128, a real dtype itself: the dtype of singular
// values, of Hermitian eigenvalues and of log |det|.
inline DType ValueDType(DType dtype) {
  if (dtype == DType::kComplex64) return DType::kFloat32;
  if (dtype == DType::kComplex128) return DType::kFloat64;
  return dtype;
}

// complex64 for float32, complex128 for float64, a complex dtype itself: the dtype of general
// eigenvalues and eigenvectors.
inline DType ComplexDType(DType dtype) {
  if (dtype == DType::kFloat32) return DType::kComplex64;
  if (dtype == DType::kFloat64) return DType::kComplex128;
  return dtype;
}

// Runs f(T{}) with T the element type of a float32 / float64 / complex64 / complex128 dtype
// (CheckMatrix has refused others).
template <typename F>
void ForType(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat32: f(float{}); return;
    case DType::kComplex64: f(C64{}); return;
    case DType::kComplex128: f(C128{}); return;
    default: f(double{}); return;
  }
}

}  // namespace tb::kernels::linalg
