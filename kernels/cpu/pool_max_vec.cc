// Vector loops of 2-d max pooling for float32 / float64 (see kernels/pool_internal.h).
//
// Written once on GCC vector extensions, as templates over the vector width in bytes (16:
// SSE2, 32: AVX2), instantiated inside functions compiled for that ISA
// (__attribute__((target))) and picked once from the CPU's features. (No AVX-512 version:
// GCC 12 does these 64-byte selects one lane at a time.) Every lane does what
// the scalar loop does for its column or channel (compare, NaN test, select), so all widths
// give the same results. A window's best position is tracked in integer lanes of T's width,
// so a float32 plane must have fewer than 2^31 elements (callers check).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "kernels/cpu/isa_internal.h"
#include "kernels/pool_internal.h"

namespace tb::kernels::pool {
namespace {

// kB-byte vectors of T, of the same-width signed integers (a comparison's type) and of int64.
template <typename T, int kB>
struct Vec {
  static constexpr int kL = kB / static_cast<int>(sizeof(T));
  typedef T V __attribute__((vector_size(kB)));
  typedef std::conditional_t<sizeof(T) == 4, int32_t, int64_t> Idx;
  typedef Idx I __attribute__((vector_size(kB)));
  typedef int64_t I64 __attribute__((vector_size(kL * 8)));
};

// One tap of a window on every lane: where v > m or v is NaN, v becomes the maximum m and
// pos the position `best`. (Two selects, each on one comparison: GCC does an OR of two
// comparisons one lane at a time.)
template <int kB, typename V, typename I>
TB_INLINE void Step(V v, I pos, V& m, I& best) {
#if defined(__SSE2__)
  if constexpr (kB == 16 && sizeof(v[0]) == 8) {
    // SSE2 has no 64-bit lane compare, so GCC would select on int64 lanes one at a time; the
    // cmppd / andpd / andnpd / orpd builtins stay vectors.
    const __m128d x = reinterpret_cast<__m128d>(v), y = reinterpret_cast<__m128d>(m);
    const __m128d t = _mm_or_pd(_mm_cmpgt_pd(x, y), _mm_cmpunord_pd(x, x));
    m = reinterpret_cast<V>(_mm_or_pd(_mm_and_pd(t, x), _mm_andnot_pd(t, y)));
    const __m128d p = reinterpret_cast<__m128d>(pos), q = reinterpret_cast<__m128d>(best);
    best = reinterpret_cast<I>(_mm_or_pd(_mm_and_pd(t, p), _mm_andnot_pd(t, q)));
    return;
  }
#endif
  const auto gt = v > m;
  m = gt ? v : m;
  best = gt ? pos : best;
  // NaN: |v|'s bits above infinity's (GCC does a vector's v != v one lane at a time).
  using Idx = std::remove_reference_t<decltype(best[0])>;
  constexpr Idx kAbs = std::numeric_limits<Idx>::max();
  constexpr Idx kInf = static_cast<Idx>(sizeof(Idx) == 4 ? 0x7f800000 : 0x7ff0000000000000);
  const auto nan = (reinterpret_cast<I>(v) & kAbs) > kInf;
  m = nan ? v : m;
  best = nan ? pos : best;
}

template <typename V, typename T>
TB_INLINE V Load(const T* x) {
  V v;
  std::memcpy(&v, x, sizeof(v));
  return v;
}

// Lanes x[0], x[s], x[2 s], ... (kS: s known at compile time, 0 for any s); reads nothing
// past the last lane's element.
template <typename T, int kB, int kS>
TB_INLINE typename Vec<T, kB>::V LoadLanes(const T* x, int64_t s) {
  using Vt = Vec<T, kB>;
  typename Vt::V v;
  if constexpr (kS == 1) {
    v = Load<typename Vt::V>(x);
#if !defined(__clang__)  // __builtin_shuffle is GCC's; Clang loads lane by lane below
  } else if constexpr (kS == 2) {
    // a = x[0, kL), b = x[kL - 1, 2 kL - 1): lane l is x[2 l], in a below kL, else b's
    // element 2 l - kL + 1 (shuffle index 2 l + 1).
    const auto a = Load<typename Vt::V>(x), b = Load<typename Vt::V>(x + Vt::kL - 1);
    typename Vt::I sel;
    for (int l = 0; l < Vt::kL; ++l) sel[l] = 2 * l < Vt::kL ? 2 * l : 2 * l + 1;
    v = __builtin_shuffle(a, b, sel);
#endif
  } else {
    for (int l = 0; l < Vt::kL; ++l) v[l] = x[l * s];
  }
  return v;
}

template <typename Vt>
TB_INLINE void StoreIdx(int64_t* dst, typename Vt::I best) {
  const auto wide = __builtin_convertvector(best, typename Vt::I64);
  std::memcpy(dst, &wide, sizeof(wide));
}

// Output columns [ow, ow_end) of a row, kL at a time, while a block's taps stay in the row.
template <typename T, int kB, int kS>
TB_INLINE int64_t RowBlocks(const RowArgs<T>& a, int64_t ow) {
  using Vt = Vec<T, kB>;
  using I = typename Vt::I;
  using Idx = typename Vt::Idx;
  constexpr int kL = Vt::kL;
  const int64_t W = a.W, sw = a.sw;
  I lane;
  for (int l = 0; l < kL; ++l) lane[l] = static_cast<Idx>(l * sw);
  for (; ow + kL <= a.ow_end; ow += kL) {
    const int64_t w = ow * sw - a.pw;
    if (w + (kL - 1) * sw + a.kw > W) break;
    auto m = LoadLanes<T, kB, kS>(a.in + a.h0 * W + w, sw);
    I best = lane + static_cast<Idx>(a.h0 * W + w);
    for (int64_t ih = a.h0; ih < a.h1; ih += a.dh) {
      const T* r = a.in + ih * W + w;
      for (int64_t j = ih == a.h0 ? 1 : 0; j < a.kw; ++j) {
        Step<kB>(LoadLanes<T, kB, kS>(r + j, sw), lane + static_cast<Idx>(ih * W + w + j), m, best);
      }
    }
    std::memcpy(a.out + ow, &m, sizeof(m));
    StoreIdx<Vt>(a.idx + ow, best);
  }
  return ow;
}

template <typename T, int kB>
TB_INLINE int64_t RowStride(const RowArgs<T>& a, int64_t ow) {
  return a.sw == 1   ? RowBlocks<T, kB, 1>(a, ow)
         : a.sw == 2 ? RowBlocks<T, kB, 2>(a, ow)
                     : RowBlocks<T, kB, 0>(a, ow);
}

// kB-byte blocks, then 16-byte ones for what is left.
template <typename T, int kB>
TB_INLINE int64_t Row(const RowArgs<T>& a) {
  int64_t ow = RowStride<T, kB>(a, a.ow);
  if constexpr (kB > 16) ow = RowStride<T, 16>(a, ow);
  return ow;
}

// Channels [c, C) of one output pixel, kU vectors of kL at a time (kU independent chains);
// returns the first channel left undone.
template <typename T, int kB, int kU>
TB_INLINE int64_t PixelBlocks(const PixelArgs<T>& a, int64_t c) {
  using Vt = Vec<T, kB>;
  using V = typename Vt::V;
  using I = typename Vt::I;
  using Idx = typename Vt::Idx;
  constexpr int kL = Vt::kL;
  const int64_t W = a.W, C = a.C;
  for (; c + kU * kL <= C; c += kU * kL) {
    const T* first = a.x + (a.h0 * W + a.w0) * C + c;
    V m[kU];
    I best[kU];
    for (int u = 0; u < kU; ++u) {
      m[u] = Load<V>(first + u * kL);
      best[u] = I{} + static_cast<Idx>(a.h0 * W + a.w0);
    }
    for (int64_t ih = a.h0; ih < a.h1; ih += a.dh) {
      for (int64_t iw = ih == a.h0 ? a.w0 + a.dw : a.w0; iw < a.w1; iw += a.dw) {
        const T* x = a.x + (ih * W + iw) * C + c;
        const I pos = I{} + static_cast<Idx>(ih * W + iw);
        for (int u = 0; u < kU; ++u) Step<kB>(Load<V>(x + u * kL), pos, m[u], best[u]);
      }
    }
    for (int u = 0; u < kU; ++u) {
      std::memcpy(a.out + c + u * kL, &m[u], sizeof(m[u]));
      StoreIdx<Vt>(a.idx + c + u * kL, best[u]);
    }
  }
  return c;
}

template <typename T, int kB>
TB_INLINE int64_t Pixel(const PixelArgs<T>& a) {
  int64_t c = PixelBlocks<T, kB, 4>(a, 0);
  c = PixelBlocks<T, kB, 1>(a, c);
  if constexpr (kB > 16) c = PixelBlocks<T, 16, 1>(a, c);
  return c;
}

template <typename T>
struct Fns {
  int64_t (*row)(const RowArgs<T>&);
  int64_t (*pixel)(const PixelArgs<T>&);
};

#define TB_POOL_ISA(NAME, ISA, BYTES)          \
  template <typename T>                        \
  TB_TARGET(ISA)                               \
  int64_t Row##NAME(const RowArgs<T>& a) {     \
    return Row<T, BYTES>(a);                   \
  }                                            \
  template <typename T>                        \
  TB_TARGET(ISA)                               \
  int64_t Pixel##NAME(const PixelArgs<T>& a) { \
    return Pixel<T, BYTES>(a);                 \
  }
#if TB_X86_DISPATCH
TB_POOL_ISA(Avx2, "avx2,fma", 32)
#endif
#undef TB_POOL_ISA

template <typename T>
int64_t RowBase(const RowArgs<T>& a) {
  return Row<T, 16>(a);
}
template <typename T>
int64_t PixelBase(const PixelArgs<T>& a) {
  return Pixel<T, 16>(a);
}

// The AVX2 version where the CPU has AVX2 and the environment variable TB_MAX_CPU_ISA (as
// for kernels/cpu/simd.cc) is not "sse2".
template <typename T>
Fns<T> Pick() {
#if TB_X86_DISPATCH
  __builtin_cpu_init();
  const char* cap = std::getenv("TB_MAX_CPU_ISA");
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      !(cap && std::string(cap) == "sse2")) {
    return {&RowAvx2<T>, &PixelAvx2<T>};
  }
#endif
  return {&RowBase<T>, &PixelBase<T>};
}

template <typename T>
const Fns<T>& Chosen() {
  static const Fns<T> fns = Pick<T>();
  return fns;
}

}  // namespace

int64_t MaxPoolRowVec(const RowArgs<float>& a) { return Chosen<float>().row(a); }
int64_t MaxPoolRowVec(const RowArgs<double>& a) { return Chosen<double>().row(a); }
int64_t MaxPoolPixelVec(const PixelArgs<float>& a) { return Chosen<float>().pixel(a); }
int64_t MaxPoolPixelVec(const PixelArgs<double>& a) { return Chosen<double>().pixel(a); }

}  // namespace tb::kernels::pool
