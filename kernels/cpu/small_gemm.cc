// float32 products on register-blocked micro-kernels (see kernels/cpu/small_gemm_internal.h):
// AVX-512 (8 rows x 48 columns, and dot products along k for a transposed weight), AVX2 + FMA
// (6 rows x 16 columns) and scalar code, picked once per process from the CPU's features
// (capped by TB_MAX_CPU_ISA, as kernels/cpu/attention_vec.cc's loops). The register loops are
// unrolled by pragma: GCC then keeps the accumulator arrays in registers, where without it it
// stores every accumulator to the stack on each step of k.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/attention_internal.h"
#include "kernels/cpu/avx512_gcc_internal.h"
#include "kernels/cpu/isa_internal.h"
#include "kernels/cpu/small_gemm_internal.h"

#if TB_X86_DISPATCH
#include <immintrin.h>
#endif

namespace tb::kernels::small_gemm {
namespace {

// The value stored for one element: alpha * acc + beta * c + bias.
TB_INLINE float Out(float acc, float alpha, float beta, const float* c, const float* bias) {
  float y = alpha * acc;
  if (beta != 0.0f) y += beta * *c;
  if (bias != nullptr) y += *bias;
  return y;
}

void GemmScalar(int64_t m, int64_t n, int64_t k, float alpha, Mat A, Mat B, const float* bias,
                float beta, float* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int64_t p = 0; p < k; ++p) acc += A.p[i * A.rs + p * A.cs] * B.p[p * B.rs + j * B.cs];
      float* out = c + i * ldc + j;
      *out = Out(acc, alpha, beta, out, bias != nullptr ? bias + j : nullptr);
    }
  }
}

// Mat at row i of A.
TB_INLINE Mat RowsFrom(Mat A, int64_t i) { return Mat{A.p + i * A.rs, A.rs, A.cs}; }

#if TB_X86_DISPATCH

// ---- AVX-512, b row-major: R rows x V vectors of 16 columns (8 x 3, or 2 x 8 for few rows) -

#define TB_AVX512 TB_TARGET("avx512f,avx512dq,avx2,fma")

template <int R, int V>
TB_AVX512 TB_INLINE void Micro512(int64_t k, float alpha, Mat A, const float* b, int64_t ldb,
                                  const float* bias, float beta, float* c, int64_t ldc,
                                  const __mmask16* mask) {
  __m512 acc[R][V];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < k; ++p) {
    __m512 bv[V];
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) bv[v] = _mm512_maskz_loadu_ps(mask[v], b + p * ldb + 16 * v);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 x = _mm512_set1_ps(A.p[r * A.rs + p * A.cs]);
#pragma GCC unroll 8
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(x, bv[v], acc[r][v]);
    }
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) {
      float* out = c + r * ldc + 16 * v;
      __m512 y = _mm512_mul_ps(acc[r][v], va);
      if (beta != 0.0f) y = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask[v], out), vb, y);
      if (bias != nullptr) y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(mask[v], bias + 16 * v));
      if (mask[v] == 0xFFFF) {  // whole vectors: plain stores (masked ones are slower on AMD)
        _mm512_storeu_ps(out, y);
      } else {
        _mm512_mask_storeu_ps(out, mask[v], y);
      }
    }
  }
}

template <int V>
TB_AVX512 void Rows512(int64_t m, int64_t k, float alpha, Mat A, const float* b, int64_t ldb,
                       const float* bias, float beta, float* c, int64_t ldc,
                       const __mmask16* mask) {
  int64_t i = 0;
  for (; i + 8 <= m; i += 8) {
    Micro512<8, V>(k, alpha, RowsFrom(A, i), b, ldb, bias, beta, c + i * ldc, ldc, mask);
  }
  const Mat a = RowsFrom(A, i);
  float* ci = c + i * ldc;
  switch (m - i) {
    case 7: Micro512<7, V>(k, alpha, a, b, ldb, bias, beta, ci, ldc, mask); break;
    case 6: Micro512<6, V>(k, alpha, a, b, ldb, bias, beta, ci, ldc, mask); break;
    case 5: Micro512<5, V>(k, alpha, a, b, ldb, bias, beta, ci, ldc, mask); break;
    case 4: Micro512<4, V>(k, alpha, a, b, ldb, bias, beta, ci, ldc, mask); break;
    case 3: Micro512<3, V>(k, alpha, a, b, ldb, bias, beta, ci, ldc, mask); break;
    case 2: Micro512<2, V>(k, alpha, a, b, ldb, bias, beta, ci, ldc, mask); break;
    case 1: Micro512<1, V>(k, alpha, a, b, ldb, bias, beta, ci, ldc, mask); break;
    default: break;
  }
}

// One or two rows: panels of 128 columns (8 vectors), fewer passes over b's rows.
TB_AVX512 int64_t FewRows512(int64_t m, int64_t n, int64_t k, float alpha, Mat A, const float* b,
                             int64_t ldb, const float* bias, float beta, float* c, int64_t ldc) {
  constexpr int64_t kCols = 128;
  static const __mmask16 full[8] = {0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF};
  int64_t j = 0;
  for (; j + kCols <= n; j += kCols) {
    const float* bj = bias != nullptr ? bias + j : nullptr;
    if (m == 2) {
      Micro512<2, 8>(k, alpha, A, b + j, ldb, bj, beta, c + j, ldc, full);
    } else {
      Micro512<1, 8>(k, alpha, A, b + j, ldb, bj, beta, c + j, ldc, full);
    }
  }
  return j;
}

TB_AVX512 void Gemm512(int64_t m, int64_t n, int64_t k, float alpha, Mat A, const float* b,
                       int64_t ldb, const float* bias, float beta, float* c, int64_t ldc) {
  constexpr int64_t kCols = 48;
  for (int64_t j = m <= 2 ? FewRows512(m, n, k, alpha, A, b, ldb, bias, beta, c, ldc) : 0; j < n;
       j += kCols) {
    const int64_t w = std::min(kCols, n - j);
    __mmask16 mask[3];
    for (int v = 0; v < 3; ++v) {
      const int64_t left = w - 16 * v;
      mask[v] = left >= 16 ? __mmask16(0xFFFF) : left > 0 ? __mmask16((1u << left) - 1u) : 0;
    }
    const float* bj = bias != nullptr ? bias + j : nullptr;
    const int64_t nv = (w + 15) / 16;
    if (nv == 3) {
      Rows512<3>(m, k, alpha, A, b + j, ldb, bj, beta, c + j, ldc, mask);
    } else if (nv == 2) {
      Rows512<2>(m, k, alpha, A, b + j, ldb, bj, beta, c + j, ldc, mask);
    } else {
      Rows512<1>(m, k, alpha, A, b + j, ldb, bj, beta, c + j, ldc, mask);
    }
  }
}

// ---- AVX-512, b the transpose of a row-major weight: dot products along k ----------------
// R rows of a (contiguous, row stride lda) against C = min(8, 16 / R) weight rows (row stride
// ldw), 16 lanes of k at a time in R * C <= 16 accumulators, reduced together at the end.

// Lane i of the result: the sum of v[i]'s lanes permuted: v[i]'s sum is at lane SumLane(i).
// Four rounds of shuffles and adds (16 vectors to 8, 4, 2, 1).
TB_AVX512 TB_INLINE __m512 Sum16(const __m512* v) {
  __m512 z[8], w[4], t[2];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {  // lanes 0-7: v[2i]'s partial sums, 8-15: v[2i + 1]'s
    z[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0x44),
                         _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0xEE));
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {  // 128-bit lane L: 4 partial sums of v[4i + L]
    w[i] = _mm512_add_ps(_mm512_shuffle_f32x4(z[2 * i], z[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(z[2 * i], z[2 * i + 1], 0xDD));
  }
#pragma GCC unroll 2
  for (int i = 0; i < 2; ++i) {  // lane L: 2 partial sums each of v[8i + L] and v[8i + 4 + L]
    t[i] = _mm512_add_ps(_mm512_shuffle_ps(w[2 * i], w[2 * i + 1], 0x88),
                         _mm512_shuffle_ps(w[2 * i], w[2 * i + 1], 0xDD));
  }
  // lane L: the sums of v[L], v[4 + L], v[8 + L], v[12 + L]
  return _mm512_add_ps(_mm512_shuffle_ps(t[0], t[1], 0x88), _mm512_shuffle_ps(t[0], t[1], 0xDD));
}

// Where Sum16 leaves the sum of v[i].
constexpr int SumLane(int i) { return 4 * (i % 4) + i / 4; }

template <int R>
TB_AVX512 TB_INLINE void Dot512(int64_t k, float alpha, const float* a, int64_t lda, const float* w,
                                int64_t ldw, int64_t cols, const float* bias, float beta, float* c,
                                int64_t ldc) {
  constexpr int C = std::min(8, 16 / R);
  __m512 acc[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
  const float* wq[C];  // past the last column: the last one again, not stored
#pragma GCC unroll 16
  for (int q = 0; q < C; ++q) wq[q] = w + std::min<int64_t>(q, cols - 1) * ldw;
  for (int64_t p = 0; p < k; p += 16) {
    const __mmask16 mask =
        k - p >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << static_cast<unsigned>(k - p)) - 1u);
    __m512 x[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) x[r] = _mm512_maskz_loadu_ps(mask, a + r * lda + p);
#pragma GCC unroll 16
    for (int q = 0; q < C; ++q) {
      const __m512 wv = _mm512_maskz_loadu_ps(mask, wq[q] + p);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[r * C + q] = _mm512_fmadd_ps(x[r], wv, acc[r * C + q]);
    }
  }
  const __m512 sums = Sum16(acc);
  const __mmask16 out = __mmask16((1u << static_cast<unsigned>(cols)) - 1u);
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    alignas(64) int idx[16] = {};
    for (int q = 0; q < C; ++q) idx[q] = SumLane(r * C + q);
    __m512 y = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_load_si512(idx), sums), va);
    float* row = c + r * ldc;
    if (beta != 0.0f) y = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(out, row), vb, y);
    if (bias != nullptr) y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(out, bias));
    _mm512_mask_storeu_ps(row, out, y);
  }
}

template <int R>
TB_AVX512 void DotRows512(int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                          const float* w, int64_t ldw, const float* bias, float beta, float* c,
                          int64_t ldc) {
  constexpr int64_t C = std::min(8, 16 / R);
  for (int64_t j = 0; j < n; j += C) {
    Dot512<R>(k, alpha, a, lda, w + j * ldw, ldw, std::min(C, n - j),
              bias != nullptr ? bias + j : nullptr, beta, c + j, ldc);
  }
}

TB_AVX512 void GemmDot512(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                          const float* w, int64_t ldw, const float* bias, float beta, float* c,
                          int64_t ldc) {
  // Blocks of 4 rows against 4 weight rows: 8 loads per 16 multiply-adds.
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) {
    DotRows512<4>(n, k, alpha, a + i * lda, lda, w, ldw, bias, beta, c + i * ldc, ldc);
  }
  const float* ai = a + i * lda;
  float* ci = c + i * ldc;
  switch (m - i) {
    case 3: DotRows512<3>(n, k, alpha, ai, lda, w, ldw, bias, beta, ci, ldc); break;
    case 2: DotRows512<2>(n, k, alpha, ai, lda, w, ldw, bias, beta, ci, ldc); break;
    case 1: DotRows512<1>(n, k, alpha, ai, lda, w, ldw, bias, beta, ci, ldc); break;
    default: break;
  }
}

#undef TB_AVX512

// ---- AVX2 + FMA, b row-major: R rows x 2 vectors of 8 columns ----------------------------

#define TB_AVX2 TB_TARGET("avx2,fma")

TB_AVX2 TB_INLINE __m256i Mask256(int64_t left) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::min<int64_t>(left, 8))), idx);
}

template <int R>
TB_AVX2 TB_INLINE void Micro256(int64_t k, float alpha, Mat A, const float* b, int64_t ldb,
                                const float* bias, float beta, float* c, int64_t ldc,
                                const __m256i* mask) {
  __m256 acc[R][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t p = 0; p < k; ++p) {
    const __m256 b0 = _mm256_maskload_ps(b + p * ldb, mask[0]);
    const __m256 b1 = _mm256_maskload_ps(b + p * ldb + 8, mask[1]);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 x = _mm256_set1_ps(A.p[r * A.rs + p * A.cs]);
      acc[r][0] = _mm256_fmadd_ps(x, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(x, b1, acc[r][1]);
    }
  }
  const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
    for (int v = 0; v < 2; ++v) {
      float* out = c + r * ldc + 8 * v;
      __m256 y = _mm256_mul_ps(acc[r][v], va);
      if (beta != 0.0f) y = _mm256_fmadd_ps(_mm256_maskload_ps(out, mask[v]), vb, y);
      if (bias != nullptr) y = _mm256_add_ps(y, _mm256_maskload_ps(bias + 8 * v, mask[v]));
      _mm256_maskstore_ps(out, mask[v], y);
    }
  }
}

TB_AVX2 void Gemm256(int64_t m, int64_t n, int64_t k, float alpha, Mat A, const float* b,
                     int64_t ldb, const float* bias, float beta, float* c, int64_t ldc) {
  constexpr int R = 6;
  for (int64_t j = 0; j < n; j += 16) {
    const __m256i mask[2] = {Mask256(n - j), Mask256(n - j - 8)};
    const float* bj = bias != nullptr ? bias + j : nullptr;
    int64_t i = 0;
    for (; i + R <= m; i += R) {
      Micro256<R>(k, alpha, RowsFrom(A, i), b + j, ldb, bj, beta, c + i * ldc + j, ldc, mask);
    }
    for (; i < m; ++i) {
      Micro256<1>(k, alpha, RowsFrom(A, i), b + j, ldb, bj, beta, c + i * ldc + j, ldc, mask);
    }
  }
}

#undef TB_AVX2

#endif  // TB_X86_DISPATCH

// The row-major kernel of this CPU (null: none).
using RowFn = void (*)(int64_t, int64_t, int64_t, float, Mat, const float*, int64_t, const float*,
                       float, float*, int64_t);

RowFn PickRows() {
#if TB_X86_DISPATCH
  const int w = attn::VectorWidth();
  if (w == 64) return Gemm512;
  if (w == 32) return Gemm256;
#endif
  return nullptr;
}

RowFn Rows() {
  static const RowFn f = PickRows();
  return f;
}

bool HasDot() {
#if TB_X86_DISPATCH
  static const bool has = attn::VectorWidth() == 64;
  return has;
#else
  return false;
#endif
}

// Copies X (rows x cols) into the row-major buf.
void Pack(Mat X, int64_t rows, int64_t cols, std::vector<float>* buf) {
  buf->resize(static_cast<size_t>(rows * cols));
  float* d = buf->data();
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) d[i * cols + j] = X.p[i * X.rs + j * X.cs];
  }
}

}  // namespace

bool Vectorised(int64_t k, Mat b) {
  if (HasDot()) return true;
  return Rows() != nullptr && (b.cs == 1 || k <= kPackedInner);
}

void Gemm(int64_t m, int64_t n, int64_t k, float alpha, Mat a, Mat b, const float* bias, float beta,
          float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // no products: alpha * 0 (NaN for an infinite alpha, as BLAS)
    GemmScalar(m, n, 0, alpha, a, b, bias, beta, c, ldc);
    return;
  }
#if TB_X86_DISPATCH
  // A transposed weight, or one contiguous column against contiguous rows of a: dot products.
  if (HasDot() && b.rs == 1 && k > kPackedInner && (b.cs != 1 || (n == 1 && a.cs == 1))) {
    if (a.cs == 1) {
      GemmDot512(m, n, k, alpha, a.p, a.rs, b.p, b.cs, bias, beta, c, ldc);
    } else {
      std::vector<float> packed;
      Pack(a, m, k, &packed);
      GemmDot512(m, n, k, alpha, packed.data(), k, b.p, b.cs, bias, beta, c, ldc);
    }
    return;
  }
#endif
  if (n == 1) b.cs = 1;  // one column: any column stride reads it
  const RowFn rows = Rows();
  if (rows != nullptr && b.cs == 1) {
    rows(m, n, k, alpha, a, b.p, b.rs, bias, beta, c, ldc);
  } else if (rows != nullptr && (HasDot() || k <= kPackedInner)) {
    std::vector<float> packed;
    Pack(b, k, n, &packed);
    rows(m, n, k, alpha, a, packed.data(), n, bias, beta, c, ldc);
  } else {
    GemmScalar(m, n, k, alpha, a, b, bias, beta, c, ldc);
  }
}

}  // namespace tb::kernels::small_gemm
