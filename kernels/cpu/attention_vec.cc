// Row loops of the fused attention kernels (see kernels/attention_internal.h), float32 in
// AVX-512, AVX2 + FMA and scalar versions, picked once from the CPU's features (capped by
// TB_MAX_CPU_ISA as the other vector files are); float64 in plain loops.
//
// exp is Cephes' expf scheme: x = n ln2 + r with |r| <= ln2 / 2 (ln2 in two parts), a
// degree-6 polynomial for exp(r) (relative error below 2e-7), and 2^n from the exponent
// bits; inputs below -87.3 give 0 (so -inf, a masked score, gives exactly 0) and NaN stays
// NaN.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include "kernels/attention_internal.h"
#include "kernels/cpu/avx512_gcc_internal.h"
#include "kernels/cpu/isa_internal.h"

#if TB_X86_DISPATCH
#include <immintrin.h>
#endif

namespace tb::kernels::attn {
namespace {

constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
constexpr float kExpLo = -87.3365447505531f;  // below: exp underflows (result 0)
constexpr float kExpHi = 88.3762626647949f;   // above: exp overflows
constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f, kP2 = 8.3334519073e-3f,
                kP3 = 4.1665795894e-2f, kP4 = 1.6666665459e-1f, kP5 = 5.0000001201e-1f;

// ---- scalar -------------------------------------------------------------------------------

float ExpScalar(float x) { return x < kExpLo ? 0.0f : std::exp(x); }

float RowMaxScalar(const float* x, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) m = std::max(m, x[i]);
  return m;
}

float ExpSubSumScalar(float* x, int64_t n, float m) {
  float s = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = ExpScalar(x[i] - m);
    s += x[i];
  }
  return s;
}

void ScaleScalar(float* x, int64_t n, float a) {
  for (int64_t i = 0; i < n; ++i) x[i] *= a;
}

void ScaleCopyScalar(float* y, const float* x, int64_t n, float a) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * a;
}

float DotScalar(const float* x, const float* y, int64_t n) {
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += x[i] * y[i];
  return s;
}

void AddScalar(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void SoftmaxGradScalar(float* dp, const float* p, int64_t n, float d) {
  for (int64_t i = 0; i < n; ++i) dp[i] = p[i] * (dp[i] - d);
}

#if TB_X86_DISPATCH

// ---- AVX2 + FMA ---------------------------------------------------------------------------

TB_TARGET("avx2,fma") TB_INLINE __m256 Exp256(__m256 x) {
  const __m256 under = _mm256_cmp_ps(x, _mm256_set1_ps(kExpLo), _CMP_LT_OQ);
  // min / max with the constant first: a NaN x comes out of both.
  x = _mm256_min_ps(_mm256_set1_ps(kExpHi), x);
  x = _mm256_max_ps(_mm256_set1_ps(kExpLo), x);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), r);
  __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(kP0), r, _mm256_set1_ps(kP1));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP2));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP3));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP4));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP5));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // 2^n for n in [-126, 127]: the exponent field.
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  p = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
  return _mm256_andnot_ps(under, p);
}

TB_TARGET("avx2,fma") float HSum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

TB_TARGET("avx2,fma") TB_INLINE __m256 Tail256(const float* x, int64_t n, float fill) {
  alignas(32) float t[8];
  for (int i = 0; i < 8; ++i) t[i] = i < n ? x[i] : fill;
  return _mm256_load_ps(t);
}

TB_TARGET("avx2,fma") float RowMax256(const float* x, int64_t n) {
  const float ninf = -std::numeric_limits<float>::infinity();
  __m256 m0 = _mm256_set1_ps(ninf), m1 = m0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    m0 = _mm256_max_ps(m0, _mm256_loadu_ps(x + i));
    m1 = _mm256_max_ps(m1, _mm256_loadu_ps(x + i + 8));
  }
  for (; i + 8 <= n; i += 8) m0 = _mm256_max_ps(m0, _mm256_loadu_ps(x + i));
  if (i < n) m1 = _mm256_max_ps(m1, Tail256(x + i, n - i, ninf));
  alignas(32) float t[8];
  _mm256_store_ps(t, _mm256_max_ps(m0, m1));
  return *std::max_element(t, t + 8);
}

TB_TARGET("avx2,fma") float ExpSubSum256(float* x, int64_t n, float m) {
  const __m256 vm = _mm256_set1_ps(m);
  __m256 s0 = _mm256_setzero_ps(), s1 = s0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a = Exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
    const __m256 b = Exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vm));
    _mm256_storeu_ps(x + i, a);
    _mm256_storeu_ps(x + i + 8, b);
    s0 = _mm256_add_ps(s0, a);
    s1 = _mm256_add_ps(s1, b);
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 a = Exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
    _mm256_storeu_ps(x + i, a);
    s0 = _mm256_add_ps(s0, a);
  }
  float s = HSum256(_mm256_add_ps(s0, s1));
  for (; i < n; ++i) {
    x[i] = ExpScalar(x[i] - m);
    s += x[i];
  }
  return s;
}

TB_TARGET("avx2,fma") void Scale256(float* x, int64_t n, float a) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), va));
  for (; i < n; ++i) x[i] *= a;
}

TB_TARGET("avx2,fma") void ScaleCopy256(float* y, const float* x, int64_t n, float a) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), va));
  for (; i < n; ++i) y[i] = x[i] * a;
}

TB_TARGET("avx2,fma") float Dot256(const float* x, const float* y, int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), s1);
  }
  for (; i + 8 <= n; i += 8) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), s0);
  }
  float s = HSum256(_mm256_add_ps(s0, s1));
  for (; i < n; ++i) s += x[i] * y[i];
  return s;
}

TB_TARGET("avx2,fma") void Add256(float* x, const float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(x + i, _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  }
  for (; i < n; ++i) x[i] += y[i];
}

TB_TARGET("avx2,fma") void SoftmaxGrad256(float* dp, const float* p, int64_t n, float d) {
  const __m256 vd = _mm256_set1_ps(d);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_sub_ps(_mm256_loadu_ps(dp + i), vd);
    _mm256_storeu_ps(dp + i, _mm256_mul_ps(_mm256_loadu_ps(p + i), g));
  }
  for (; i < n; ++i) dp[i] = p[i] * (dp[i] - d);
}

// ---- AVX-512 ------------------------------------------------------------------------------

#define TB_AVX512 TB_TARGET("avx512f,avx512dq,avx2,fma")

TB_AVX512 TB_INLINE __m512 Exp512(__m512 x) {
  const __mmask16 under = _mm512_cmp_ps_mask(x, _mm512_set1_ps(kExpLo), _CMP_LT_OQ);
  x = _mm512_min_ps(_mm512_set1_ps(kExpHi), x);
  x = _mm512_max_ps(_mm512_set1_ps(kExpLo), x);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), r);
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(kP0), r, _mm512_set1_ps(kP1));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP2));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP3));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP4));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP5));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  p = _mm512_scalef_ps(p, n);
  return _mm512_maskz_mov_ps(static_cast<__mmask16>(~under), p);
}

TB_AVX512 TB_INLINE __mmask16 TailMask(int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }

TB_AVX512 float RowMax512(const float* x, int64_t n) {
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 m0 = ninf, m1 = ninf;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    m0 = _mm512_max_ps(m0, _mm512_loadu_ps(x + i));
    m1 = _mm512_max_ps(m1, _mm512_loadu_ps(x + i + 16));
  }
  for (; i + 16 <= n; i += 16) m0 = _mm512_max_ps(m0, _mm512_loadu_ps(x + i));
  if (i < n) m1 = _mm512_max_ps(m1, _mm512_mask_loadu_ps(ninf, TailMask(n - i), x + i));
  return _mm512_reduce_max_ps(_mm512_max_ps(m0, m1));
}

TB_AVX512 float ExpSubSum512(float* x, int64_t n, float m) {
  const __m512 vm = _mm512_set1_ps(m);
  __m512 s0 = _mm512_setzero_ps(), s1 = s0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 a = Exp512(_mm512_sub_ps(_mm512_loadu_ps(x + i), vm));
    const __m512 b = Exp512(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16), vm));
    _mm512_storeu_ps(x + i, a);
    _mm512_storeu_ps(x + i + 16, b);
    s0 = _mm512_add_ps(s0, a);
    s1 = _mm512_add_ps(s1, b);
  }
  for (; i + 16 <= n; i += 16) {
    const __m512 a = Exp512(_mm512_sub_ps(_mm512_loadu_ps(x + i), vm));
    _mm512_storeu_ps(x + i, a);
    s0 = _mm512_add_ps(s0, a);
  }
  if (i < n) {
    const __mmask16 k = TailMask(n - i);
    const __m512 a = Exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), vm));
    _mm512_mask_storeu_ps(x + i, k, a);
    s1 = _mm512_add_ps(s1, _mm512_maskz_mov_ps(k, a));
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

TB_AVX512 void Scale512(float* x, int64_t n, float a) {
  const __m512 va = _mm512_set1_ps(a);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), va));
  if (i < n) {
    const __mmask16 k = TailMask(n - i);
    _mm512_mask_storeu_ps(x + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), va));
  }
}

TB_AVX512 void ScaleCopy512(float* y, const float* x, int64_t n, float a) {
  const __m512 va = _mm512_set1_ps(a);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), va));
  if (i < n) {
    const __mmask16 k = TailMask(n - i);
    _mm512_mask_storeu_ps(y + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), va));
  }
}

TB_AVX512 float Dot512(const float* x, const float* y, int64_t n) {
  __m512 s0 = _mm512_setzero_ps(), s1 = s0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), s0);
    s1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(y + i + 16), s1);
  }
  for (; i + 16 <= n; i += 16) {
    s0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), s0);
  }
  if (i < n) {
    const __mmask16 k = TailMask(n - i);
    s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, x + i), _mm512_maskz_loadu_ps(k, y + i), s1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

TB_AVX512 void Add512(float* x, const float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(x + i, _mm512_add_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
  }
  if (i < n) {
    const __mmask16 k = TailMask(n - i);
    _mm512_mask_storeu_ps(
        x + i, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, x + i), _mm512_maskz_loadu_ps(k, y + i)));
  }
}

TB_AVX512 void SoftmaxGrad512(float* dp, const float* p, int64_t n, float d) {
  const __m512 vd = _mm512_set1_ps(d);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 g = _mm512_sub_ps(_mm512_loadu_ps(dp + i), vd);
    _mm512_storeu_ps(dp + i, _mm512_mul_ps(_mm512_loadu_ps(p + i), g));
  }
  if (i < n) {
    const __mmask16 k = TailMask(n - i);
    const __m512 g = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, dp + i), vd);
    _mm512_mask_storeu_ps(dp + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, p + i), g));
  }
}

#undef TB_AVX512

#endif  // TB_X86_DISPATCH

int Width() {
  int w = 0;
#if TB_X86_DISPATCH
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) w = 32;
  if (w == 32 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq")) w = 64;
#endif
  if (const char* cap = std::getenv("TB_MAX_CPU_ISA")) {
    const std::string c = cap;
    if (c == "sse2") w = 0;
    if (c == "avx2") w = std::min(w, 32);
  }
  return w;
}

struct Fns {
  float (*max)(const float*, int64_t) = RowMaxScalar;
  float (*exp_sum)(float*, int64_t, float) = ExpSubSumScalar;
  void (*scale)(float*, int64_t, float) = ScaleScalar;
  void (*scale_copy)(float*, const float*, int64_t, float) = ScaleCopyScalar;
  float (*dot)(const float*, const float*, int64_t) = DotScalar;
  void (*add)(float*, const float*, int64_t) = AddScalar;
  void (*softmax_grad)(float*, const float*, int64_t, float) = SoftmaxGradScalar;
};

Fns Pick() {
  Fns f;
#if TB_X86_DISPATCH
  const int w = VectorWidth();
  if (w == 64) {
    f = {RowMax512, ExpSubSum512, Scale512, ScaleCopy512, Dot512, Add512, SoftmaxGrad512};
  } else if (w == 32) {
    f = {RowMax256, ExpSubSum256, Scale256, ScaleCopy256, Dot256, Add256, SoftmaxGrad256};
  }
#endif
  return f;
}

const Fns& Picked() {
  static const Fns f = Pick();
  return f;
}

}  // namespace

int VectorWidth() {
  static const int w = Width();
  return w;
}

float RowMax(const float* x, int64_t n) { return Picked().max(x, n); }
float ExpSubSum(float* x, int64_t n, float m) { return Picked().exp_sum(x, n, m); }
void ScaleRow(float* x, int64_t n, float a) { Picked().scale(x, n, a); }
void ScaleCopyRow(float* y, const float* x, int64_t n, float a) { Picked().scale_copy(y, x, n, a); }
float DotRow(const float* x, const float* y, int64_t n) { return Picked().dot(x, y, n); }
void AddRow(float* x, const float* y, int64_t n) { Picked().add(x, y, n); }
void SoftmaxGradRow(float* dp, const float* p, int64_t n, float d) {
  Picked().softmax_grad(dp, p, n, d);
}

double RowMax(const double* x, int64_t n) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < n; ++i) m = std::max(m, x[i]);
  return m;
}

double ExpSubSum(double* x, int64_t n, double m) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - m);
    s += x[i];
  }
  return s;
}

void ScaleRow(double* x, int64_t n, double a) {
  for (int64_t i = 0; i < n; ++i) x[i] *= a;
}

void ScaleCopyRow(double* y, const double* x, int64_t n, double a) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * a;
}

double DotRow(const double* x, const double* y, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += x[i] * y[i];
  return s;
}

void AddRow(double* x, const double* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void SoftmaxGradRow(double* dp, const double* p, int64_t n, double d) {
  for (int64_t i = 0; i < n; ++i) dp[i] = p[i] * (dp[i] - d);
}

}  // namespace tb::kernels::attn
