// Private to kernels/attention*.cc: the fused attention kernels' shared pieces (CPU flash
// attention, forward and backward, over tiles of queries and keys with an online softmax).
//
// Both kernels compute in `Acc` (float for float32, bfloat16 and float16; double for
// float64) on row-major tiles: inner products by GEMM on tiles (oneDNN's sgemm for float,
// Eigen for double), the softmax rows by the vector loops of cpu/attention_vec.cc.
#pragma once

#include <cstdint>
#include <optional>

#include "bridge/tensor.h"

namespace tb::kernels::attn {

// ---- row loops (cpu/attention_vec.cc: AVX-512, AVX2 or scalar, picked once per process) ------

// max of x[0, n) (-inf for n = 0; NaN is not propagated).
float RowMax(const float* x, int64_t n);
double RowMax(const double* x, int64_t n);
// x[i] = exp(x[i] - m) over [0, n), returning the sum of the new values. m is finite.
float ExpSubSum(float* x, int64_t n, float m);
double ExpSubSum(double* x, int64_t n, double m);
// x[i] *= a over [0, n).
void ScaleRow(float* x, int64_t n, float a);
void ScaleRow(double* x, int64_t n, double a);
// y[i] = x[i] * a over [0, n).
void ScaleCopyRow(float* y, const float* x, int64_t n, float a);
void ScaleCopyRow(double* y, const double* x, int64_t n, double a);
// sum of x[i] * y[i] over [0, n).
float DotRow(const float* x, const float* y, int64_t n);
double DotRow(const double* x, const double* y, int64_t n);
// x[i] += y[i] over [0, n).
void AddRow(float* x, const float* y, int64_t n);
void AddRow(double* x, const double* y, int64_t n);
// dp[i] = p[i] * (dp[i] - d) over [0, n): the softmax gradient of a row from dL/dp.
void SoftmaxGradRow(float* dp, const float* p, int64_t n, float d);
void SoftmaxGradRow(double* dp, const double* p, int64_t n, double d);

// The vector width the float loops use: 64 (AVX-512), 32 (AVX2 + FMA) or 0 (scalar), from
// the CPU's features capped by the environment variable TB_MAX_CPU_ISA ("sse2", "avx2").
int VectorWidth();

// ---- GEMM on tiles (cpu/attention_gemm.cc) -----------------------------------------------------

// c[m, n] = alpha * op(a) @ op(b) + beta * c, row-major; op(a) is [m, k] (a stored [k, m]
// when ta), op(b) is [k, n] (b stored [n, k] when tb); leading dimensions in elements.
// Runs on the calling thread (the kernels parallelise over tiles). For float, tb = false is
// the fast form (small products run on the micro-kernels only then).
void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
          int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

// dst[j, i] = src[i, j] for a row-major [rows, cols] src (row strides lds and ldd).
void Transpose(const float* src, int64_t rows, int64_t cols, int64_t lds, float* dst, int64_t ldd);
void Transpose(const double* src, int64_t rows, int64_t cols, int64_t lds, double* dst,
               int64_t ldd);

// ---- the problem -------------------------------------------------------------------------

// One attention call: query [B, H, L, E], key / value [B, Hk, S, E] (H a multiple of Hk:
// query head h reads key / value head h / (H / Hk)), in the compute type and laid out as the
// GEMMs need them (unit stride along E, rows at least E apart).
struct Problem {
  int64_t batch = 0, heads = 0, kv_heads = 0, q_len = 0, kv_len = 0, dim = 0;
  bool causal = false;  // query i sees keys j <= i (top-left aligned, as torch)
  double scale = 1.0;
  // The additive mask in the compute type, broadcast to [B, H, L, S] (stride 0 where
  // broadcast), or a bool mask (true: attend) seen the same way; undefined when absent.
  Tensor mask;
};

// Tile sizes: query rows per task, keys per score tile.
inline constexpr int64_t kQBlock = 64;
inline constexpr int64_t kKvBlock = 512;
// Query rows per key head from which the float kernels copy the keys transposed (the copy
// costs about what the score GEMM of a few rows does).
inline constexpr int64_t kTransposeRows = 8;

// The type the kernels compute in for inputs of `t`: float64 or float32.
DType ComputeType(DType t);

// Checks the arguments of `op` as torch's CPU flash attention does (dropout_p must be 0;
// masks of the query's dtype or float32, 2-d or 4-d, broadcast to [B, H, L, S]; bool masks
// too when bool_mask_ok) and describes the call; the mask comes back in the compute type.
Problem CheckProblem(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                     double dropout_p, bool is_causal, const std::optional<Tensor>& mask,
                     std::optional<double> scale, bool bool_mask_ok);

// `t` in the compute type `acc`, laid out for the GEMMs (t itself when it already is).
Tensor ForGemm(const Tensor& t, DType acc);

// The causal cut and the mask on a score tile s [rows, cols] of (b, h): rows [i0, i0 + rows)
// against keys [j0, j0 + cols).
template <typename Acc>
void MaskTile(const Problem& p, int64_t b, int64_t h, int64_t i0, int64_t rows, int64_t j0,
              int64_t cols, Acc* s);

// t [B, Hk, N, E] (GemmLayout) as a new contiguous [B, Hk, E, N]: keys and values for the
// float GEMMs' fast form (q @ k^T as q @ kt), transposed once per call.
Tensor TransposeRows(const Tensor& t);

// OpenMP's thread count and this thread's number (1 and 0 without OpenMP).
int MaxThreads();
int ThreadNum();

// A 4-d tensor's element strides for the kernels: unit stride along the last dimension and
// rows far enough apart for a GEMM, or false when it needs a contiguous copy.
bool GemmLayout(const Tensor& t);

// Output allocation with torch's layouts: empty_like(t) (t's strides when t is dense and
// non-overlapping, else a dense layout in the order of t's strides) ...
Tensor EmptyLike(const Tensor& t, DType dtype);
// ... and a tensor of `shape` laid out as [d0, d2, d1, d3] (torch.empty_permuted with
// (0, 2, 1, 3): the layout of the CPU attention gradients and of the logsumexp, 3-d).
Tensor EmptyHeadsInner(IntArrayRef shape, DType dtype);

}  // namespace tb::kernels::attn
