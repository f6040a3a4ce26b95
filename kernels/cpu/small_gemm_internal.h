// Private to kernels/: float32 matrix products on register-blocked micro-kernels
// (kernels/cpu/small_gemm.cc), for products where a oneDNN call costs as much as the
// arithmetic: few rows, a short inner dimension, or small tiles (the attention kernels').
//
// Operands are read through two strides each, so a row- or column-major matrix with any leading
// dimension, a transposed weight or a broadcast batch is read in place. Every product runs on
// the calling thread and keeps no state: concurrent calls are safe.
#pragma once

#include <cstdint>

namespace tb::kernels::small_gemm {

// X(i, j) = p[i * rs + j * cs].
struct Mat {
  const float* p;
  int64_t rs, cs;
};

// True when Gemm runs a vector kernel for b's layout on this CPU: AVX-512 for every layout;
// AVX2 + FMA when b is row-major (b.cs == 1) or k <= kPackedInner (b copied into a row-major
// buffer); never on the x86-64 baseline (Gemm then loops in scalar code).
bool Vectorised(int64_t k, Mat b);

// Up to this inner dimension, a b of another layout is copied row-major for the vector kernels.
inline constexpr int64_t kPackedInner = 8;

// c[i * ldc + j] = alpha * sum_p a(i, p) * b(p, j) + beta * c[i * ldc + j] + bias[j] for i < m,
// j < n, accumulating in float32; beta == 0 ignores c's contents and a null bias adds nothing.
// k == 0 gives beta * c + alpha * 0 + bias (NaN for an infinite alpha, as BLAS).
// With b row-major the kernel broadcasts a's elements against vectors of b's rows (up to 8 rows
// x 48 columns, or 2 x 128, in registers); with b the transpose of a row-major [n, k] weight
// (b.rs == 1, k > kPackedInner) it takes dot products along k, reading each weight row once
// per 4 rows of a (a's rows copied to a contiguous buffer first when a.cs != 1).
void Gemm(int64_t m, int64_t n, int64_t k, float alpha, Mat a, Mat b, const float* bias, float beta,
          float* c, int64_t ldc);

}  // namespace tb::kernels::small_gemm
