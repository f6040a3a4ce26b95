// Private to kernels/: broadcasting and element loops shared by the element-wise kernels.
#pragma once

#include <cstdint>

#include "bridge/tensor.h"
#include "kernels/tensor_ops.h"

namespace tb::kernels {

// The broadcast of two shapes (numpy / torch rules); ValueError naming `op` otherwise.
inline Dims BroadcastShapes(IntArrayRef a, IntArrayRef b, const char* op) {
  return ::tb::BroadcastShapes({a, b}, op);
}

// Below this many elements a loop runs on one thread.
inline constexpr int64_t kParallelGrain = 1 << 15;

// out[i] = f(a[i], b[i]) over out's shape; `a` and `b` already expanded to it.
// C-contiguous operands take a flat loop the compiler vectorises; others an N-d walk.
template <typename T, typename F>
void BinaryLoop(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  const int64_t n = out.numel();
  T* o = static_cast<T*>(out.mutable_data());
  const T* x = a.data_as<const T>();
  const T* y = b.data_as<const T>();
  if (n == 0) return;
  if (out.is_contiguous() && a.is_contiguous() && b.is_contiguous()) {
#pragma omp parallel for if (n > kParallelGrain) schedule(static)
    for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
    return;
  }
  const int64_t nd = out.ndim();
  if (nd == 0) {
    o[0] = f(x[0], y[0]);
    return;
  }
  const int64_t inner = out.size(nd - 1);
  const int64_t so = out.stride(nd - 1), sa = a.stride(nd - 1), sb = b.stride(nd - 1);
  const int64_t rows = n / inner;
#pragma omp parallel for if (n > kParallelGrain) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    int64_t oo = 0, oa = 0, ob = 0, rem = r;
    for (int64_t d = nd - 2; d >= 0; --d) {
      int64_t idx = rem % out.size(d);
      rem /= out.size(d);
      oo += idx * out.stride(d);
      oa += idx * a.stride(d);
      ob += idx * b.stride(d);
    }
    for (int64_t i = 0; i < inner; ++i) o[oo + i * so] = f(x[oa + i * sa], y[ob + i * sb]);
  }
}

}  // namespace tb::kernels

// Runs BODY with `scalar_t` bound to the C++ type of DTYPE, for the types listed; other
// dtypes raise NotImplementedError naming OP.
#define TB_DISPATCH_CASE(ENUM, TYPE, ...) \
  case ::tb::DType::ENUM: {               \
    using scalar_t = TYPE;                \
    __VA_ARGS__();                        \
    break;                                \
  }
#define TB_DISPATCH_NUMERIC(DTYPE, OP, ...)                                     \
  switch (DTYPE) {                                                              \
    TB_DISPATCH_CASE(kFloat32, float, __VA_ARGS__)                              \
    TB_DISPATCH_CASE(kFloat64, double, __VA_ARGS__)                             \
    TB_DISPATCH_CASE(kInt64, int64_t, __VA_ARGS__)                              \
    TB_DISPATCH_CASE(kInt32, int32_t, __VA_ARGS__)                              \
    TB_DISPATCH_CASE(kInt16, int16_t, __VA_ARGS__)                              \
    TB_DISPATCH_CASE(kInt8, int8_t, __VA_ARGS__)                                \
    TB_DISPATCH_CASE(kUInt8, uint8_t, __VA_ARGS__)                              \
    default:                                                                    \
      TB_THROW(NotImplementedError)                                             \
          << OP << ": dtype " << ::tb::DTypeName(DTYPE) << " is not supported"; \
  }
