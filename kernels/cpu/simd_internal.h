// Private to kernels/: hot float row loops compiled for several x86-64 ISAs (kernels/cpu/simd.cc).
//
// The library is built for the x86-64 baseline (SSE2). The functions here are built in
// AVX-512, AVX2 and baseline versions and the loader picks the best the CPU has (GCC/Clang
// target_clones). They are written on 16-wide vector types whose operations are lane-wise,
// so every version gives the same bits: only the instructions differ.
#pragma once

#include <cstdint>

namespace tb::kernels::simd {

inline constexpr int kLanes = 16;  // accumulators of a row sum

// Sum of x[0, n): 16 lanes (lane k: the elements r = k mod 16 of the whole blocks of 16),
// each summed pairwise over leaves of 1024 elements, then the tail (n mod 16 elements) added
// to lanes 0.. and the lanes merged pairwise. Callers need not split long rows.
float SumRow(const float* x, int64_t n);
double SumRow(const double* x, int64_t n);

// Layer norm of a row of float32 x[0, n) into y: mean and biased variance over the row (two
// passes in float with 16-lane, pairwise sums), rstd = 1 / sqrt(var + eps), then
// y = (x - mean) * rstd * w + b; w or b null means 1 or 0. Returns mean and rstd.
void LayerNormRow(const float* x, float* y, const float* w, const float* b, int64_t n, float eps,
                  float* mean, float* rstd);

// Layer norm's gradient for a float32 row x[0, n) with the forward's mean and rstd, dy its
// output's gradient and w the weight (null: 1). When dx is not null: with g = dy * w (written
// to scratch[0, n) when w is given), the sums of g and of g * (x - mean) as SumDot, then
// dx = (g - sum / n - (x - mean) * rstd^2 * dot / n) * rstd. When dw / db are not null, adds
// dy * (x - mean) * rstd to dw and dy to db (the weight's and bias's gradients over rows).
void LayerNormBackwardRow(const float* x, const float* dy, const float* w, int64_t n, float mean,
                          float rstd, float* dx, float* scratch, float* dw, float* db);

// y[i] = x[i] * scale + shift over [0, n) (not fused: the same bits as the scalar float code).
void ScaleShiftRow(const float* x, float* y, int64_t n, float scale, float shift);
void ScaleShiftRow(const double* x, double* y, int64_t n, double scale, double shift);
// The same over `rows` rows of n elements, row r at offset r * stride of x and y.
void ScaleShiftRows(const float* x, float* y, int64_t rows, int64_t stride, int64_t n, float scale,
                    float shift);
void ScaleShiftRows(const double* x, double* y, int64_t rows, int64_t stride, int64_t n,
                    double scale, double shift);

// Batch norm statistics of `rows` rows of n elements (row r at x + r * stride) in double, in
// kLanes lanes over all the rows (float32 lanes add 8 elements of a row in float before each
// step in double; the rows' tails summed per position, then added to lanes 0..): *sum = sum
// of x, *sqdev = sum of (x - m)^2 (in x's type).
void Moments(const float* x, int64_t rows, int64_t stride, int64_t n, float m, double* sum,
             double* sqdev);
void Moments(const double* x, int64_t rows, int64_t stride, int64_t n, double m, double* sum,
             double* sqdev);
// *sum = sum of dy, *dot = sum of dy * (x - m), as Moments (dy's rows at the same offsets).
void SumDot(const float* x, const float* dy, int64_t rows, int64_t stride, int64_t n, float m,
            double* sum, double* dot);
void SumDot(const double* x, const double* dy, int64_t rows, int64_t stride, int64_t n, double m,
            double* sum, double* dot);

// dx[i] = (dy[i] - gm - (x[i] - mean) * proj) * k over `rows` rows of n elements, row r at
// offset r * stride of x, dy and dx (not fused).
void BatchNormBackwardRows(const float* x, const float* dy, float* dx, int64_t rows, int64_t stride,
                           int64_t n, float mean, float gm, float proj, float k);
void BatchNormBackwardRows(const double* x, const double* dy, double* dx, int64_t rows,
                           int64_t stride, int64_t n, double mean, double gm, double proj,
                           double k);

// out[i] = x[i] <= th ? 0 : g[i] over [0, n) (ReLU's gradient; NaN x passes g through).
void ThresholdBackwardRow(const float* g, const float* x, float* out, int64_t n, float th);
void ThresholdBackwardRow(const double* g, const double* x, double* out, int64_t n, double th);

}  // namespace tb::kernels::simd
