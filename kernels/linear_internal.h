// float32 linear layers on oneDNN, shared by aten::addmm / aten::mm (matmul.cc) and the fused
// tensorbridge::addmm_act (fused.cc): out = act(a @ b + bias), a [m, k], b [k, n].
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
