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
#include <cstdint>
#include <vector>

#define LAPACK_COMPLEX_CPP
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
}

namespace tb::kernels::linalg {

using Int = lapack_int;

// ---- LAPACK / BLAS by element type ------------------------------------------------------------
// Each forwards its arguments by value to the Fortran routine of the same name (s or d prefix).
// clang-format off
#define TB_LAPACK_PAIR_(NAME, PARAMS, ARGS)                \
  inline void NAME(PARAMS(float)) { LAPACK_s##NAME ARGS; } \
  inline void NAME(PARAMS(double)) { LAPACK_d##NAME ARGS; }

// Cholesky: potrf / potrs / potri.
#define TB_P_(T) char uplo, Int n, T* a, Int lda, Int* info
TB_LAPACK_PAIR_(potrf, TB_P_, (&uplo, &n, a, &lda, info))
TB_LAPACK_PAIR_(potri, TB_P_, (&uplo, &n, a, &lda, info))
#undef TB_P_
#define TB_P_(T) char uplo, Int n, Int nrhs, const T* a, Int lda, T* b, Int ldb, Int* info
TB_LAPACK_PAIR_(potrs, TB_P_, (&uplo, &n, &nrhs, a, &lda, b, &ldb, info))
#undef TB_P_
// LU: getrf / getrs.
#define TB_P_(T) Int m, Int n, T* a, Int lda, Int* ipiv, Int* info
TB_LAPACK_PAIR_(getrf, TB_P_, (&m, &n, a, &lda, ipiv, info))
#undef TB_P_
#define TB_P_(T) \
  char trans, Int n, Int nrhs, const T* a, Int lda, const Int* ipiv, T* b, Int ldb, Int* info
TB_LAPACK_PAIR_(getrs, TB_P_, (&trans, &n, &nrhs, a, &lda, ipiv, b, &ldb, info))
#undef TB_P_
// QR: geqrf / orgqr / ormqr (workspace queries with lwork = -1).
#define TB_P_(T) Int m, Int n, T* a, Int lda, T* tau, T* work, Int lwork, Int* info
TB_LAPACK_PAIR_(geqrf, TB_P_, (&m, &n, a, &lda, tau, work, &lwork, info))
#undef TB_P_
#define TB_P_(T) Int m, Int n, Int k, T* a, Int lda, const T* tau, T* work, Int lwork, Int* info
TB_LAPACK_PAIR_(orgqr, TB_P_, (&m, &n, &k, a, &lda, tau, work, &lwork, info))
#undef TB_P_
#define TB_P_(T)                                                                                \
  char side, char trans, Int m, Int n, Int k, const T* a, Int lda, const T* tau, T* c, Int ldc, \
      T* work, Int lwork, Int* info
TB_LAPACK_PAIR_(ormqr, TB_P_,
                (&side, &trans, &m, &n, &k, a, &lda, tau, c, &ldc, work, &lwork, info))
#undef TB_P_
// SVD (divide and conquer) and the symmetric eigensolver (divide and conquer).
#define TB_P_(T)                                                                         \
  char jobz, Int m, Int n, T* a, Int lda, T* s, T* u, Int ldu, T* vt, Int ldvt, T* work, \
      Int lwork, Int* iwork, Int* info
TB_LAPACK_PAIR_(gesdd, TB_P_,
                (&jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, iwork, info))
#undef TB_P_
#define TB_P_(T)                                                                                \
  char jobz, char uplo, Int n, T* a, Int lda, T* w, T* work, Int lwork, Int* iwork, Int liwork, \
      Int* info
TB_LAPACK_PAIR_(syevd, TB_P_, (&jobz, &uplo, &n, a, &lda, w, work, &lwork, iwork, &liwork, info))
#undef TB_P_
// Symmetric indefinite (Bunch-Kaufman): sytrf / sytrs.
#define TB_P_(T) char uplo, Int n, T* a, Int lda, Int* ipiv, T* work, Int lwork, Int* info
TB_LAPACK_PAIR_(sytrf, TB_P_, (&uplo, &n, a, &lda, ipiv, work, &lwork, info))
#undef TB_P_
#define TB_P_(T) \
  char uplo, Int n, Int nrhs, const T* a, Int lda, const Int* ipiv, T* b, Int ldb, Int* info
TB_LAPACK_PAIR_(sytrs, TB_P_, (&uplo, &n, &nrhs, a, &lda, ipiv, b, &ldb, info))
#undef TB_P_
// Least squares, complete orthogonal factorization with column pivoting.
#define TB_P_(T)                                                                                \
  Int m, Int n, Int nrhs, T* a, Int lda, T* b, Int ldb, Int* jpvt, T rcond, Int* rank, T* work, \
      Int lwork, Int* info
TB_LAPACK_PAIR_(gelsy, TB_P_,
                (&m, &n, &nrhs, a, &lda, b, &ldb, jpvt, &rcond, rank, work, &lwork, info))
#undef TB_P_
#define TB_P_(T) \
  char trans, Int m, Int n, Int nrhs, T* a, Int lda, T* b, Int ldb, T* work, Int lwork, Int* info
TB_LAPACK_PAIR_(gels, TB_P_, (&trans, &m, &n, &nrhs, a, &lda, b, &ldb, work, &lwork, info))
#undef TB_P_
#define TB_P_(T)                                                                           \
  Int m, Int n, Int nrhs, T* a, Int lda, T* b, Int ldb, T* s, T rcond, Int* rank, T* work, \
      Int lwork, Int* iwork, Int* info
TB_LAPACK_PAIR_(gelsd, TB_P_,
                (&m, &n, &nrhs, a, &lda, b, &ldb, s, &rcond, rank, work, &lwork, iwork, info))
#undef TB_P_
#define TB_P_(T)                                                                           \
  Int m, Int n, Int nrhs, T* a, Int lda, T* b, Int ldb, T* s, T rcond, Int* rank, T* work, \
      Int lwork, Int* info
TB_LAPACK_PAIR_(gelss, TB_P_,
                (&m, &n, &nrhs, a, &lda, b, &ldb, s, &rcond, rank, work, &lwork, info))
#undef TB_P_
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

// C = A B for column-major n x n matrices (BLAS sgemm / dgemm).
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

// The optimal workspace a query (lwork = -1) reported, at least 1.
template <typename T>
inline Int Lwork(T query) {
  return std::max<Int>(1, static_cast<Int>(query));
}

// ---- batches of matrices ----------------------------------------------------------------------

// Raises for what the linear algebra kernels refuse: a device other than the host, fewer than two
// dims, a dtype other than float32 / float64 (complex: NotImplementedError), and with `square`
// matrices that are not square. `op` is torch's name for the function ("linalg.cholesky").
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

// Raises torch's error for the first nonzero LAPACK info in `info` (int32, one per matrix of a
// batch), as aten::_linalg_check_errors does for `api` ("torch.linalg.cholesky_ex").
void CheckErrors(const Tensor& info, const std::string& api, bool is_matrix);

// Runs f(float{}) or f(double{}) for a float32 / float64 dtype (CheckMatrix has refused others).
template <typename F>
void ForFloat(DType dtype, F&& f) {
  if (dtype == DType::kFloat32) {
    f(float{});
  } else {
    f(double{});
  }
}

}  // namespace tb::kernels::linalg
