// float32 linear layers on oneDNN, shared by aten::addmm / aten::mm (matmul.cc) and the fused
// tensorbridge::addmm_act (fused.cc): out = act(a @ b + bias), a [m, k], b [k, n]; and the
// products with few rows or a short inner dimension, which run on tensorbridge's own kernels.
#pragma once

#include <cstdint>

#include "bridge/tensor.h"

namespace tb::kernels {

// The eltwise post-op. kRelu is oneDNN's relu, which turns NaN into 0 (torch's keeps NaN):
// callers matching torch run relu after the primitive instead.
enum class LinearAct : uint8_t { kNone, kRelu, kGelu, kGeluTanh };

// Up to this many rows, the inner product on the weight as stored (a matrix-vector product at
// batch 1) is several times faster than oneDNN 2.6's matmul on the transposed weight.
constexpr int64_t kInnerProductRows = 8;

// Products with at most kSmallRows rows (up to kSmallMacs multiply-adds in all), or with more
// rows and a short inner dimension (k <= kSmallInner, up to kShortInnerMacs), run on the
// small-product kernels (cpu/small_gemm.cc): oneDNN would run most of them on its JIT sgemm,
// whose generated code and library pages cost more memory than the product, and whose call
// costs more time. (Larger short-k products stay on oneDNN's brgemm, faster there.)
constexpr int64_t kSmallRows = 8;
constexpr int64_t kSmallInner = 8;
constexpr int64_t kSmallMacs = int64_t{1} << 22;
constexpr int64_t kShortInnerMacs = int64_t{1} << 16;
// One row times a row-major b of more than this many elements stays on oneDNN.
constexpr int64_t kOneRowElems = int64_t{1} << 19;

// *out = alpha * a @ b + beta * *out + bias on the small-product kernels: float32 a [m, k] and
// b [k, n] (any strides) into [m, n], or a batch of them (a [B, m, k], b [B, k, n] into
// [B, m, n]). A defined *out is the C-contiguous output (beta == 0 ignores its contents); an
// undefined one is allocated (beta must then be 0). bias (null: none): n float32 elements added
// to every row. False, with nothing written, when the product is not one of those (another
// dtype, k == 0, too large, or a layout this CPU's kernels lack).
bool SmallGemm(const Tensor& a, const Tensor& b, const Tensor* bias, double alpha, double beta,
               Tensor* out);

// One oneDNN matmul with `bias` ([n] or [1, n]) as its bias argument and `act` as an eltwise
// post-op; a and b row- or column-major (else copied). False for empty products.
bool OneDnnLinear(const char* op, const Tensor& bias, Tensor a, Tensor b, LinearAct act,
                  Tensor* out);

// oneDNN's inner product on b read in place, when b is the transpose of a row-major [n, k]
// weight or is itself row-major; `bias` may be null. False for other layouts, or when the
// product is empty.
bool OneDnnInnerProduct(const char* op, const Tensor* bias, const Tensor& a, const Tensor& b,
                        LinearAct act, Tensor* out);

}  // namespace tb::kernels
