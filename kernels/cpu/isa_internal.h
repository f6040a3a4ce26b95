// Private to kernels/: what the ISA-dispatched vector files of kernels/cpu/ (simd.cc,
// pool_max_vec.cc, attention_vec.cc,
// attention_gemm.cc, small_gemm.cc) share.
// Include it in a .cc file only: it turns off GCC's note about vector arguments' ABI, true for
// those files, whose vectors pass by value between their own inline functions and never cross
// the library's ABI.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

// TB_TARGET("avx2,fma") builds one function for an ISA above the x86-64 baseline; the caller
// checks the CPU (__builtin_cpu_supports) before calling it.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TB_X86_DISPATCH 1
#define TB_TARGET(isa) __attribute__((target(isa)))
#else
#define TB_X86_DISPATCH 0
#define TB_TARGET(isa)
#endif
#define TB_INLINE inline __attribute__((always_inline))
