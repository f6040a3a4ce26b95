// Hot float row loops in several ISA versions (see kernels/cpu/simd_internal.h).
//
// Each loop is written once, as a template over the vector register width in bytes (16: SSE2,
// 32: AVX2, 64: AVX-512), and instantiated inside functions compiled for that ISA
// (__attribute__((target))). A row sum keeps 16 lanes in 16 / W registers of W lanes, lane k
// in register k / W, so every width adds the same numbers in the same order. The version is
// picked once, on first use, from the CPU's features.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>

#include "kernels/cpu/isa_internal.h"
#include "kernels/cpu/simd_internal.h"

namespace tb::kernels::simd {
namespace {

// A vector of kBytes / sizeof(T) lanes of T (GCC/Clang vector extensions).
template <typename T, int kBytes>
struct VecOf;
#define TB_VEC(T, B)                                            \
  template <>                                                   \
  struct VecOf<T, B> {                                          \
    typedef T type __attribute__((vector_size(B), aligned(B))); \
  }
TB_VEC(float, 8);
TB_VEC(float, 16);
TB_VEC(float, 32);
TB_VEC(float, 64);
TB_VEC(double, 16);
TB_VEC(double, 32);
TB_VEC(double, 64);
#undef TB_VEC

template <typename V, typename T>
TB_INLINE V Load(const T* p) {
  V v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline constexpr int64_t kLeaf = 1024;  // elements summed in a row before pairing

// Register v with lanes [w, 2w) moved down to lanes [0, w) (the other lanes: don't care).
template <int W, int w, typename V, size_t... I>
TB_INLINE V LanesFrom(V v, std::index_sequence<I...>) {
  return __builtin_shufflevector(v, v, static_cast<int>((I + w) % W)...);
}

// Lane 0 of v after lane k += lane k + w for w = W / 2, ..., 1 (k < w), as shuffles and adds.
template <int W, int w, typename V>
TB_INLINE auto ReduceRegister(V v) {
  if constexpr (w == 0) {
    return v[0];
  } else {
    return ReduceRegister<W, w / 2>(v + LanesFrom<W, w>(v, std::make_index_sequence<W>{}));
  }
}

// The kLanes lanes held in kLanes / W registers of W lanes (lane k in register k / W) merged
// as lane k += lane k + w for w = kLanes / 2, ..., 1: whole registers while w >= W, then the
// lanes of register 0. The same additions in the same order as on the lanes one by one.
template <int W, typename V>
TB_INLINE auto MergeLanes(V* v) {
  for (int w = kLanes / W / 2; w > 0; w /= 2) {
    for (int a = 0; a < w; ++a) v[a] += v[a + w];
  }
  return ReduceRegister<W, W / 2>(v[0]);
}

// Sum of f(x[r]) over x[0, n) (f: lane-wise, on vectors and scalars), in kLanes lanes: lane k
// sums the elements r = k (mod kLanes) of the whole blocks of kLanes. Within a leaf of kLeaf
// elements each lane adds in order; leaves are paired like a binary counter (pairwise
// summation), lane by lane. The tail (n mod kLanes elements) then goes to lanes 0.., and the
// lanes are merged as lane k += lane k + w for w = 8, 4, 2, 1.
template <int kBytes, typename T, typename F>
TB_INLINE T LaneSum(const T* x, int64_t n, const F& f) {
  using V = typename VecOf<T, kBytes>::type;
  constexpr int W = kBytes / static_cast<int>(sizeof(T)), NA = kLanes / W;
  struct Acc {
    V v[NA];
  };
  Acc stack[64];
  int top = 0;
  const int64_t whole = n / kLanes * kLanes;
  int64_t count = 0;
  for (int64_t i = 0; i < whole; i += kLeaf, ++count) {
    const int64_t end = std::min(i + kLeaf, whole);
    Acc s;
    for (int a = 0; a < NA; ++a) s.v[a] = V{};
    for (int64_t r = i; r < end; r += kLanes) {
#pragma GCC unroll 16
      for (int a = 0; a < NA; ++a) s.v[a] += f(Load<V>(x + r + a * W));
    }
    for (int64_t c = count; c & 1; c >>= 1) {
      --top;
      for (int a = 0; a < NA; ++a) s.v[a] = stack[top].v[a] + s.v[a];
    }
    stack[top++] = s;
  }
  T l[kLanes] = {};
  if (top > 0) {
    Acc s = stack[--top];
    while (top > 0) {
      --top;
      for (int a = 0; a < NA; ++a) s.v[a] = stack[top].v[a] + s.v[a];
    }
    if (whole == n) return MergeLanes<W>(s.v);
    for (int k = 0; k < kLanes; ++k) l[k] = s.v[k / W][k % W];
  }
  for (int64_t k = 0; whole + k < n; ++k) l[k] += f(x[whole + k]);
  for (int w = kLanes / 2; w > 0; w /= 2) {
    for (int k = 0; k < w; ++k) l[k] += l[k + w];
  }
  return l[0];
}

template <int kBytes, typename T>
TB_INLINE T SumRowT(const T* x, int64_t n) {
  return LaneSum<kBytes>(x, n, [](auto v) { return v; });
}

template <int kBytes>
TB_INLINE void LayerNormRowT(const float* x, float* y, const float* w, const float* b, int64_t n,
                             float eps, float* mean, float* rstd) {
  const float mu = SumRowT<kBytes>(x, n) / static_cast<float>(n);
  const float var =
      LaneSum<kBytes>(x, n, [mu](auto v) { return (v - mu) * (v - mu); }) / static_cast<float>(n);
  const float rs = 1.0f / std::sqrt(var + eps);
  *mean = mu;
  *rstd = rs;
  // Element-wise: every lane width gives the same bits.
  if (w && b) {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mu) * rs * w[i] + b[i];
  } else if (w) {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mu) * rs * w[i];
  } else if (b) {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mu) * rs + b[i];
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mu) * rs;
  }
}

// y = x * scale + shift over `rows` rows of n elements, row r at offset r * stride.
template <int kBytes, typename T>
TB_INLINE void ScaleShiftT(const T* x, T* y, int64_t rows, int64_t stride, int64_t n, T scale,
                           T shift) {
  for (int64_t r = 0; r < rows; ++r, x += stride, y += stride) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale + shift;
  }
}

// ---- batch norm and ReLU-gradient rows -----------------------------------------------------

// Sums in double of f(x[i]) and g(x[i], y[i]) (y may be x; f and g in T) over `rows` rows of
// [0, n), row r at x + r * stride (and y + r * stride), in kLanes lanes each (lane k: the
// elements i = k mod kLanes of the rows' whole blocks of kLanes). float32 lanes add kJoin
// elements of a row in float, then that partial into the lane's double; double lanes add in
// order. The rows' tails (n mod kLanes elements each) are summed in double per position and
// go to lanes 0.., and the lanes are merged pairwise. Every width adds the same numbers in the
// same order.
template <int kBytes, typename T, typename F, typename G>
TB_INLINE void DoubleSums2(const T* x0, const T* y0, int64_t rows, int64_t stride, int64_t n,
                           const F& f, const G& g, double* sf, double* sg) {
  using VT = typename VecOf<T, kBytes>::type;
  using VD = typename VecOf<double, kBytes>::type;
  constexpr int WT = kBytes / static_cast<int>(sizeof(T)), NT = kLanes / WT;
  constexpr int WD = kBytes / 8, ND = kLanes / WD;
  constexpr int64_t kJoin = sizeof(T) == 4 ? 8 : 1;
  VD a[ND], b[ND];
  for (int k = 0; k < ND; ++k) a[k] = b[k] = VD{};
  const int64_t whole = n / kLanes * kLanes;
  double ta[kLanes] = {}, tb[kLanes] = {};  // the tails' sums
  for (int64_t row = 0; row < rows; ++row) {
    const T* x = x0 + row * stride;
    const T* y = y0 + row * stride;
    for (int64_t r = 0; r < whole;) {
      const int64_t end = std::min(whole, r + kJoin * kLanes);
      VT pa[NT], pb[NT];
      for (int k = 0; k < NT; ++k) pa[k] = pb[k] = VT{};
      for (; r < end; r += kLanes) {
#pragma GCC unroll 16
        for (int k = 0; k < NT; ++k) {
          const VT xv = Load<VT>(x + r + k * WT), yv = Load<VT>(y + r + k * WT);
          pa[k] += f(xv);
          pb[k] += g(xv, yv);
        }
      }
      if constexpr (sizeof(T) == 8) {
        for (int k = 0; k < ND; ++k) {
          a[k] += pa[k];
          b[k] += pb[k];
        }
      } else {
        // Register k of float lanes k * WT.. holds double registers 2k and 2k + 1.
        using VH = typename VecOf<float, kBytes / 2>::type;
#pragma GCC unroll 16
        for (int k = 0; k < NT; ++k) {
          const char* ca = reinterpret_cast<const char*>(&pa[k]);
          const char* cb = reinterpret_cast<const char*>(&pb[k]);
          a[2 * k] += __builtin_convertvector(Load<VH>(ca), VD);
          a[2 * k + 1] += __builtin_convertvector(Load<VH>(ca + kBytes / 2), VD);
          b[2 * k] += __builtin_convertvector(Load<VH>(cb), VD);
          b[2 * k + 1] += __builtin_convertvector(Load<VH>(cb + kBytes / 2), VD);
        }
      }
    }
    for (int64_t k = 0; whole + k < n; ++k) {
      ta[k] += static_cast<double>(f(x[whole + k]));
      tb[k] += static_cast<double>(g(x[whole + k], y[whole + k]));
    }
  }
  if (whole == n) {
    *sf = MergeLanes<WD>(a);
    *sg = MergeLanes<WD>(b);
    return;
  }
  double la[kLanes], lb[kLanes];
  for (int k = 0; k < kLanes; ++k) {
    la[k] = a[k / WD][k % WD] + ta[k];
    lb[k] = b[k / WD][k % WD] + tb[k];
  }
  for (int w = kLanes / 2; w > 0; w /= 2) {
    for (int k = 0; k < w; ++k) {
      la[k] += la[k + w];
      lb[k] += lb[k + w];
    }
  }
  *sf = la[0];
  *sg = lb[0];
}

template <int kBytes, typename T>
TB_INLINE void MomentsT(const T* x, int64_t rows, int64_t stride, int64_t n, T m, double* sum,
                        double* sqdev) {
  DoubleSums2<kBytes>(
      x, x, rows, stride, n, [](auto v) { return v; },
      [m](auto v, auto) { return (v - m) * (v - m); }, sum, sqdev);
}

template <int kBytes, typename T>
TB_INLINE void SumDotT(const T* x, const T* dy, int64_t rows, int64_t stride, int64_t n, T m,
                       double* sum, double* dot) {
  DoubleSums2<kBytes>(
      dy, x, rows, stride, n, [](auto g) { return g; }, [m](auto g, auto v) { return g * (v - m); },
      sum, dot);
}

template <int kBytes, typename T>
TB_INLINE void BnBackwardT(const T* x, const T* dy, T* dx, int64_t n, T mean, T gm, T proj, T k) {
  for (int64_t i = 0; i < n; ++i) dx[i] = (dy[i] - gm - (x[i] - mean) * proj) * k;
}

// BnBackwardT over `rows` rows of n elements, row r at offset r * stride.
template <int kBytes, typename T>
TB_INLINE void BnBackwardRowsT(const T* x, const T* dy, T* dx, int64_t rows, int64_t stride,
                               int64_t n, T mean, T gm, T proj, T k) {
  for (int64_t r = 0; r < rows; ++r) {
    BnBackwardT<kBytes>(x + r * stride, dy + r * stride, dx + r * stride, n, mean, gm, proj, k);
  }
}

// Layer norm's gradient of one float32 row (see LayerNormBackwardRow in simd_internal.h).
template <int kBytes>
TB_INLINE void LnBackwardT(const float* x, const float* dy, const float* w, int64_t n, float mean,
                           float rstd, float* dx, float* scratch, float* dw, float* db) {
  if (dx) {
    const float* g = dy;
    if (w) {
      for (int64_t i = 0; i < n; ++i) scratch[i] = dy[i] * w[i];
      g = scratch;
    }
    double sum = 0, dot = 0;
    SumDotT<kBytes>(x, g, 1, 0, n, mean, &sum, &dot);
    const auto nd = static_cast<double>(n);
    const float gm = static_cast<float>(sum / nd);
    const float proj = static_cast<float>(static_cast<double>(rstd) * rstd * dot / nd);
    BnBackwardT<kBytes>(x, g, dx, n, mean, gm, proj, rstd);
  }
  if (dw) {
    for (int64_t i = 0; i < n; ++i) dw[i] += dy[i] * ((x[i] - mean) * rstd);
  }
  if (db) {
    for (int64_t i = 0; i < n; ++i) db[i] += dy[i];
  }
}

template <int kBytes, typename T>
TB_INLINE void ThresholdBackwardT(const T* g, const T* x, T* out, int64_t n, T th) {
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] <= th ? T(0) : g[i];
}

// NAME##_512 / _256 / _128: the body `BODY<bytes>(args...)` compiled per ISA.
#define TB_ISA_VERSIONS(RET, NAME, BODY, PARAMS, ARGS)                          \
  TB_TARGET("avx512f,avx2,fma") RET NAME##_512 PARAMS { return BODY<64> ARGS; } \
  TB_TARGET("avx2,fma") RET NAME##_256 PARAMS { return BODY<32> ARGS; }         \
  RET NAME##_128 PARAMS { return BODY<16> ARGS; }                               \
  using NAME##_fn = RET(*) PARAMS;                                              \
  NAME##_fn NAME##_pick() { return PickIsa<NAME##_fn>(NAME##_512, NAME##_256, NAME##_128); }

// The widest vector the CPU has (64, 32 or 16 bytes), capped by the environment variable
// TB_MAX_CPU_ISA ("sse2", "avx2" or "avx512").
int IsaBytes() {
  int bytes = 16;
#if TB_X86_DISPATCH
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) bytes = 32;
  if (bytes == 32 && __builtin_cpu_supports("avx512f")) bytes = 64;
#endif
  if (const char* cap = std::getenv("TB_MAX_CPU_ISA")) {
    const std::string c = cap;
    if (c == "sse2") bytes = 16;
    if (c == "avx2") bytes = std::min(bytes, 32);
  }
  return bytes;
}

// The version for this CPU.
template <typename F>
F PickIsa(F v512, F v256, F v128) {
  static const int bytes = IsaBytes();
  return bytes == 64 ? v512 : bytes == 32 ? v256 : v128;
}

TB_ISA_VERSIONS(float, SumRowF32, SumRowT, (const float* x, int64_t n), (x, n))
TB_ISA_VERSIONS(double, SumRowF64, SumRowT, (const double* x, int64_t n), (x, n))
TB_ISA_VERSIONS(void, LayerNorm, LayerNormRowT,
                (const float* x, float* y, const float* w, const float* b, int64_t n, float eps,
                 float* mean, float* rstd),
                (x, y, w, b, n, eps, mean, rstd))
TB_ISA_VERSIONS(void, ScaleShiftF32, ScaleShiftT,
                (const float* x, float* y, int64_t rows, int64_t stride, int64_t n, float scale,
                 float shift),
                (x, y, rows, stride, n, scale, shift))
TB_ISA_VERSIONS(void, MomentsF32, MomentsT,
                (const float* x, int64_t rows, int64_t stride, int64_t n, float m, double* s,
                 double* q),
                (x, rows, stride, n, m, s, q))
TB_ISA_VERSIONS(void, MomentsF64, MomentsT,
                (const double* x, int64_t rows, int64_t stride, int64_t n, double m, double* s,
                 double* q),
                (x, rows, stride, n, m, s, q))
TB_ISA_VERSIONS(void, SumDotF32, SumDotT,
                (const float* x, const float* dy, int64_t rows, int64_t stride, int64_t n, float m,
                 double* s, double* d),
                (x, dy, rows, stride, n, m, s, d))
TB_ISA_VERSIONS(void, SumDotF64, SumDotT,
                (const double* x, const double* dy, int64_t rows, int64_t stride, int64_t n,
                 double m, double* s, double* d),
                (x, dy, rows, stride, n, m, s, d))
TB_ISA_VERSIONS(void, ScaleShiftF64, ScaleShiftT,
                (const double* x, double* y, int64_t rows, int64_t stride, int64_t n, double scale,
                 double shift),
                (x, y, rows, stride, n, scale, shift))
TB_ISA_VERSIONS(void, BnBackwardF32, BnBackwardRowsT,
                (const float* x, const float* dy, float* dx, int64_t rows, int64_t stride,
                 int64_t n, float mean, float gm, float proj, float k),
                (x, dy, dx, rows, stride, n, mean, gm, proj, k))
TB_ISA_VERSIONS(void, BnBackwardF64, BnBackwardRowsT,
                (const double* x, const double* dy, double* dx, int64_t rows, int64_t stride,
                 int64_t n, double mean, double gm, double proj, double k),
                (x, dy, dx, rows, stride, n, mean, gm, proj, k))
TB_ISA_VERSIONS(void, LnBackward, LnBackwardT,
                (const float* x, const float* dy, const float* w, int64_t n, float mean, float rstd,
                 float* dx, float* scratch, float* dw, float* db),
                (x, dy, w, n, mean, rstd, dx, scratch, dw, db))
TB_ISA_VERSIONS(void, ThresholdBackwardF32, ThresholdBackwardT,
                (const float* g, const float* x, float* out, int64_t n, float th),
                (g, x, out, n, th))
TB_ISA_VERSIONS(void, ThresholdBackwardF64, ThresholdBackwardT,
                (const double* g, const double* x, double* out, int64_t n, double th),
                (g, x, out, n, th))
#undef TB_ISA_VERSIONS

}  // namespace

float SumRow(const float* x, int64_t n) {
  static const SumRowF32_fn f = SumRowF32_pick();
  return f(x, n);
}

double SumRow(const double* x, int64_t n) {
  static const SumRowF64_fn f = SumRowF64_pick();
  return f(x, n);
}

void LayerNormRow(const float* x, float* y, const float* w, const float* b, int64_t n, float eps,
                  float* mean, float* rstd) {
  static const LayerNorm_fn f = LayerNorm_pick();
  f(x, y, w, b, n, eps, mean, rstd);
}

// The picked version of a TB_ISA_VERSIONS function, called with `args`.
#define TB_CALL_PICKED(NAME, ...)              \
  do {                                         \
    static const NAME##_fn f_ = NAME##_pick(); \
    f_(__VA_ARGS__);                           \
  } while (0)

void LayerNormBackwardRow(const float* x, const float* dy, const float* w, int64_t n, float mean,
                          float rstd, float* dx, float* scratch, float* dw, float* db) {
  TB_CALL_PICKED(LnBackward, x, dy, w, n, mean, rstd, dx, scratch, dw, db);
}

void Moments(const float* x, int64_t rows, int64_t stride, int64_t n, float m, double* sum,
             double* sqdev) {
  TB_CALL_PICKED(MomentsF32, x, rows, stride, n, m, sum, sqdev);
}
void Moments(const double* x, int64_t rows, int64_t stride, int64_t n, double m, double* sum,
             double* sqdev) {
  TB_CALL_PICKED(MomentsF64, x, rows, stride, n, m, sum, sqdev);
}
void SumDot(const float* x, const float* dy, int64_t rows, int64_t stride, int64_t n, float m,
            double* sum, double* dot) {
  TB_CALL_PICKED(SumDotF32, x, dy, rows, stride, n, m, sum, dot);
}
void SumDot(const double* x, const double* dy, int64_t rows, int64_t stride, int64_t n, double m,
            double* sum, double* dot) {
  TB_CALL_PICKED(SumDotF64, x, dy, rows, stride, n, m, sum, dot);
}
void ScaleShiftRow(const float* x, float* y, int64_t n, float scale, float shift) {
  TB_CALL_PICKED(ScaleShiftF32, x, y, 1, 0, n, scale, shift);
}
void ScaleShiftRow(const double* x, double* y, int64_t n, double scale, double shift) {
  TB_CALL_PICKED(ScaleShiftF64, x, y, 1, 0, n, scale, shift);
}
void ScaleShiftRows(const float* x, float* y, int64_t rows, int64_t stride, int64_t n, float scale,
                    float shift) {
  TB_CALL_PICKED(ScaleShiftF32, x, y, rows, stride, n, scale, shift);
}
void ScaleShiftRows(const double* x, double* y, int64_t rows, int64_t stride, int64_t n,
                    double scale, double shift) {
  TB_CALL_PICKED(ScaleShiftF64, x, y, rows, stride, n, scale, shift);
}
void BatchNormBackwardRows(const float* x, const float* dy, float* dx, int64_t rows, int64_t stride,
                           int64_t n, float mean, float gm, float proj, float k) {
  TB_CALL_PICKED(BnBackwardF32, x, dy, dx, rows, stride, n, mean, gm, proj, k);
}
void BatchNormBackwardRows(const double* x, const double* dy, double* dx, int64_t rows,
                           int64_t stride, int64_t n, double mean, double gm, double proj,
                           double k) {
  TB_CALL_PICKED(BnBackwardF64, x, dy, dx, rows, stride, n, mean, gm, proj, k);
}
void ThresholdBackwardRow(const float* g, const float* x, float* out, int64_t n, float th) {
  TB_CALL_PICKED(ThresholdBackwardF32, g, x, out, n, th);
}
void ThresholdBackwardRow(const double* g, const double* x, double* out, int64_t n, double th) {
  TB_CALL_PICKED(ThresholdBackwardF64, g, x, out, n, th);
}
#undef TB_CALL_PICKED

}  // namespace tb::kernels::simd
