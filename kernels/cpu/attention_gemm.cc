// GEMMs on the attention kernels' tiles (see kernels/attention_internal.h).
//
// float: small products (up to 64 x 64 x 64, where a oneDNN call costs as much as the
// arithmetic) on register-blocked micro-kernels in AVX-512 (8 rows x 48 columns) or AVX2 + FMA
// (6 rows x 16 columns) that read A through two strides (so A may be transposed at no cost);
// larger ones on oneDNN's sgemm. double: Eigen.
#include <algorithm>
#include <cstdint>

#include <oneapi/dnnl/dnnl.h>
#include <Eigen/Core>

#include "kernels/attention_internal.h"
#include "kernels/cpu/avx512_gcc_internal.h"
#include "kernels/cpu/isa_internal.h"

#if TB_X86_DISPATCH
#include <immintrin.h>
#endif

namespace tb::kernels::attn {
namespace {

// Products up to this many multiply-adds take the micro-kernels.
constexpr int64_t kSmallGemm = 64 * 64 * 64;

// A(i, p) = a[i * as + p * ps]: a row-major [m, k] matrix (as = lda, ps = 1) or the transpose
// of a row-major [k, m] one (as = 1, ps = lda).
struct AView {
  const float* a;
  int64_t as, ps;
};

// B(p, j) = b[p * bs + j * bc].
void GemmScalar(int64_t m, int64_t n, int64_t k, float alpha, AView A, const float* b, int64_t bs,
                int64_t bc, float beta, float* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    float* ci = c + i * ldc;
    for (int64_t j = 0; j < n; ++j) ci[j] = beta == 0.0f ? 0.0f : ci[j] * beta;
    for (int64_t p = 0; p < k; ++p) {
      const float x = alpha * A.a[i * A.as + p * A.ps];
      const float* bp = b + p * bs;
      for (int64_t j = 0; j < n; ++j) ci[j] += x * bp[j * bc];
    }
  }
}

#if TB_X86_DISPATCH

// ---- AVX-512: R rows x V vectors of 16 columns --------------------------------------------

#define TB_AVX512 TB_TARGET("avx512f,avx512dq,avx2,fma")

template <int R, int V>
TB_AVX512 TB_INLINE void Micro512(int64_t k, float alpha, AView A, const float* b, int64_t ldb,
                                  float beta, float* c, int64_t ldc, const __mmask16* mask) {
  __m512 acc[R][V];
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < k; ++p) {
    __m512 bv[V];
    for (int v = 0; v < V; ++v) bv[v] = _mm512_maskz_loadu_ps(mask[v], b + p * ldb + 16 * v);
    for (int r = 0; r < R; ++r) {
      const __m512 x = _mm512_set1_ps(A.a[r * A.as + p * A.ps]);
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(x, bv[v], acc[r][v]);
    }
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < V; ++v) {
      float* out = c + r * ldc + 16 * v;
      __m512 y = _mm512_mul_ps(acc[r][v], va);
      if (beta != 0.0f) y = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask[v], out), vb, y);
      _mm512_mask_storeu_ps(out, mask[v], y);
    }
  }
}

template <int V>
TB_AVX512 void Rows512(int64_t m, int64_t k, float alpha, AView A, const float* b, int64_t ldb,
                       float beta, float* c, int64_t ldc, const __mmask16* mask) {
  constexpr int R = 8;
  int64_t i = 0;
  auto at = [&](int64_t row) { return AView{A.a + row * A.as, A.as, A.ps}; };
  for (; i + R <= m; i += R) Micro512<R, V>(k, alpha, at(i), b, ldb, beta, c + i * ldc, ldc, mask);
  if (m - i >= 4) {
    Micro512<4, V>(k, alpha, at(i), b, ldb, beta, c + i * ldc, ldc, mask);
    i += 4;
  }
  for (; i < m; ++i) Micro512<1, V>(k, alpha, at(i), b, ldb, beta, c + i * ldc, ldc, mask);
}

TB_AVX512 void Gemm512(int64_t m, int64_t n, int64_t k, float alpha, AView A, const float* b,
                       int64_t ldb, float beta, float* c, int64_t ldc) {
  constexpr int64_t kCols = 48;
  for (int64_t j = 0; j < n; j += kCols) {
    const int64_t w = std::min(kCols, n - j);
    __mmask16 mask[3];
    for (int v = 0; v < 3; ++v) {
      const int64_t left = w - 16 * v;
      mask[v] = left >= 16 ? __mmask16(0xFFFF) : left > 0 ? __mmask16((1u << left) - 1u) : 0;
    }
    const int64_t nv = (w + 15) / 16;
    if (nv == 3) {
      Rows512<3>(m, k, alpha, A, b + j, ldb, beta, c + j, ldc, mask);
    } else if (nv == 2) {
      Rows512<2>(m, k, alpha, A, b + j, ldb, beta, c + j, ldc, mask);
    } else {
      Rows512<1>(m, k, alpha, A, b + j, ldb, beta, c + j, ldc, mask);
    }
  }
}

#undef TB_AVX512

// ---- AVX2 + FMA: R rows x 2 vectors of 8 columns ------------------------------------------

#define TB_AVX2 TB_TARGET("avx2,fma")

TB_AVX2 TB_INLINE __m256i Mask256(int64_t left) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::min<int64_t>(left, 8))), idx);
}

template <int R>
TB_AVX2 TB_INLINE void Micro256(int64_t k, float alpha, AView A, const float* b, int64_t ldb,
                                float beta, float* c, int64_t ldc, const __m256i* mask) {
  __m256 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t p = 0; p < k; ++p) {
    const __m256 b0 = _mm256_maskload_ps(b + p * ldb, mask[0]);
    const __m256 b1 = _mm256_maskload_ps(b + p * ldb + 8, mask[1]);
    for (int r = 0; r < R; ++r) {
      const __m256 x = _mm256_set1_ps(A.a[r * A.as + p * A.ps]);
      acc[r][0] = _mm256_fmadd_ps(x, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(x, b1, acc[r][1]);
    }
  }
  const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < 2; ++v) {
      float* out = c + r * ldc + 8 * v;
      __m256 y = _mm256_mul_ps(acc[r][v], va);
      if (beta != 0.0f) y = _mm256_fmadd_ps(_mm256_maskload_ps(out, mask[v]), vb, y);
      _mm256_maskstore_ps(out, mask[v], y);
    }
  }
}

TB_AVX2 void Gemm256(int64_t m, int64_t n, int64_t k, float alpha, AView A, const float* b,
                     int64_t ldb, float beta, float* c, int64_t ldc) {
  constexpr int R = 6;
  for (int64_t j = 0; j < n; j += 16) {
    const __m256i mask[2] = {Mask256(n - j), Mask256(n - j - 8)};
    auto at = [&](int64_t row) { return AView{A.a + row * A.as, A.as, A.ps}; };
    int64_t i = 0;
    for (; i + R <= m; i += R) {
      Micro256<R>(k, alpha, at(i), b + j, ldb, beta, c + i * ldc + j, ldc, mask);
    }
    for (; i < m; ++i) Micro256<1>(k, alpha, at(i), b + j, ldb, beta, c + i * ldc + j, ldc, mask);
  }
}

#undef TB_AVX2

#endif  // TB_X86_DISPATCH

using SmallFn = void (*)(int64_t, int64_t, int64_t, float, AView, const float*, int64_t, float,
                         float*, int64_t);

SmallFn PickSmall() {
#if TB_X86_DISPATCH
  const int w = VectorWidth();
  if (w == 64) return Gemm512;
  if (w == 32) return Gemm256;
#endif
  return nullptr;
}

}  // namespace

void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  const AView A{a, ta ? 1 : lda, ta ? lda : 1};
  const int64_t bs = tb ? 1 : ldb, bc = tb ? ldb : 1;
  if (k == 0) {  // no products: c = beta * c + alpha * 0 (NaN for an infinite alpha, as BLAS)
    GemmScalar(m, n, 0, alpha, A, b, bs, bc, beta, c, ldc);
    const float z = alpha * 0.0f;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] += z;
    }
    return;
  }
  static const SmallFn small = PickSmall();
  if (!tb && small && m * n * k <= kSmallGemm) {
    small(m, n, k, alpha, A, b, ldb, beta, c, ldc);
    return;
  }
  const dnnl_status_t st =
      dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  // oneDNN refuses only arguments the kernels never pass; should it refuse, the plain loop
  // gives the product (no exception may leave the kernels' parallel regions).
  if (st != dnnl_success) GemmScalar(m, n, k, alpha, A, b, bs, bc, beta, c, ldc);
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
