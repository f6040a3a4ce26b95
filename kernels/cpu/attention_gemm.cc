// GEMMs on the attention kernels' tiles (see kernels/attention_internal.h).
//
// float: small products with a row-major B (up to 64 x 64 x 64, where a oneDNN call costs as
// much as the arithmetic) on the micro-kernels of cpu/small_gemm.cc, which read A through two
// strides (so A may be transposed at no cost); larger ones on oneDNN's sgemm. double: Eigen.
#include <algorithm>
#include <cstdint>

#include <oneapi/dnnl/dnnl.h>
#include <Eigen/Core>

#include "kernels/attention_internal.h"
#include "kernels/cpu/isa_internal.h"
#include "kernels/cpu/small_gemm_internal.h"

#if TB_X86_DISPATCH
#include <immintrin.h>
#endif

namespace tb::kernels::attn {
namespace {

// Products up to this many multiply-adds take the micro-kernels.
constexpr int64_t kSmallGemm = 64 * 64 * 64;

}  // namespace

void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  const small_gemm::Mat A{a, ta ? 1 : lda, ta ? lda : 1};
  const small_gemm::Mat B{b, tb ? 1 : ldb, tb ? ldb : 1};
  if (k == 0 || (!tb && small_gemm::Vectorised(k, B) && m * n * k <= kSmallGemm)) {
    small_gemm::Gemm(m, n, k, alpha, A, B, nullptr, beta, c, ldc);
    return;
  }
  const dnnl_status_t st =
      dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  // oneDNN refuses only arguments the kernels never pass; should it refuse, the micro-kernels
  // (or their scalar loop) give the product (no exception may leave the kernels' parallel
  // regions).
  if (st != dnnl_success) small_gemm::Gemm(m, n, k, alpha, A, B, nullptr, beta, c, ldc);
}

void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
          int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  using Mat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Map = Eigen::Map<const Mat, 0, Eigen::OuterStride<>>;
  if (m == 0 || n == 0) return;
  Eigen::Map<Mat, 0, Eigen::OuterStride<>> C(c, m, n, Eigen::OuterStride<>(ldc));
  if (beta == 0.0) {
    C.setZero();
  } else if (beta != 1.0) {
    C *= beta;
  }
  if (k == 0) {
    C.array() += alpha * 0.0;
    return;
  }
  Map A(a, ta ? k : m, ta ? m : k, Eigen::OuterStride<>(lda));
  Map B(b, tb ? n : k, tb ? k : n, Eigen::OuterStride<>(ldb));
  if (ta && tb) {
    C.noalias() += alpha * (A.transpose() * B.transpose());
  } else if (ta) {
    C.noalias() += alpha * (A.transpose() * B);
  } else if (tb) {
    C.noalias() += alpha * (A * B.transpose());
  } else {
    C.noalias() += alpha * (A * B);
  }
}

namespace {

template <typename Acc>
void TransposeScalar(const Acc* src, int64_t rows, int64_t cols, int64_t lds, Acc* dst,
                     int64_t ldd) {
  constexpr int64_t kBlock = 16;
  for (int64_t i0 = 0; i0 < rows; i0 += kBlock) {
    const int64_t i1 = std::min(rows, i0 + kBlock);
    for (int64_t j0 = 0; j0 < cols; j0 += kBlock) {
      const int64_t j1 = std::min(cols, j0 + kBlock);
      for (int64_t i = i0; i < i1; ++i) {
        for (int64_t j = j0; j < j1; ++j) dst[j * ldd + i] = src[i * lds + j];
      }
    }
  }
}

#if TB_X86_DISPATCH
// 8 x 8 blocks transposed in AVX registers, the edges scalar.
TB_TARGET("avx2,fma")
void TransposeAvx2(const float* src, int64_t rows, int64_t cols, int64_t lds, float* dst,
                   int64_t ldd) {
  const int64_t r8 = rows / 8 * 8, c8 = cols / 8 * 8;
  for (int64_t i = 0; i < r8; i += 8) {
    for (int64_t j = 0; j < c8; j += 8) {
      __m256 r[8], t[8];
      for (int k = 0; k < 8; ++k) r[k] = _mm256_loadu_ps(src + (i + k) * lds + j);
      for (int k = 0; k < 8; k += 2) {
        t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
        t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
      }
      for (int k = 0; k < 8; k += 4) {
        r[k] = _mm256_shuffle_ps(t[k], t[k + 2], 0x44);
        r[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], 0xEE);
        r[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0x44);
        r[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0xEE);
      }
      for (int k = 0; k < 4; ++k) {
        t[k] = _mm256_permute2f128_ps(r[k], r[k + 4], 0x20);
        t[k + 4] = _mm256_permute2f128_ps(r[k], r[k + 4], 0x31);
      }
      for (int k = 0; k < 8; ++k) _mm256_storeu_ps(dst + (j + k) * ldd + i, t[k]);
    }
  }
  if (c8 < cols) TransposeScalar(src + c8, r8, cols - c8, lds, dst + c8 * ldd, ldd);
  if (r8 < rows) TransposeScalar(src + r8 * lds, rows - r8, cols, lds, dst + r8, ldd);
}
#endif

}  // namespace

void Transpose(const float* src, int64_t rows, int64_t cols, int64_t lds, float* dst, int64_t ldd) {
#if TB_X86_DISPATCH
  if (VectorWidth() >= 32) {
    TransposeAvx2(src, rows, cols, lds, dst, ldd);
    return;
  }
#endif
  TransposeScalar(src, rows, cols, lds, dst, ldd);
}

void Transpose(const double* src, int64_t rows, int64_t cols, int64_t lds, double* dst,
               int64_t ldd) {
  TransposeScalar(src, rows, cols, lds, dst, ldd);
}

}  // namespace tb::kernels::attn
