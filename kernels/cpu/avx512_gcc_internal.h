// Private to the vector files of kernels/cpu/ whose AVX-512 code GCC reports wrongly
// (attention_vec.cc, small_gemm.cc); include it in a .cc file only, before <immintrin.h>.
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_ps() (`__m512 __Y = __Y;`), which
// its own -W(maybe-)uninitialized then reports wherever they are inlined: both warnings are
// off for the rest of the file.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
