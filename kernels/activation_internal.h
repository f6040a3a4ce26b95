// Private to kernels/activation*.cc: element-wise maps for activations and their gradients,
// and the oneDNN eltwise fast path.
//
// The maps take a generic lambda over the "opmath" type (float for the 16-bit floats, the
// type itself otherwise) and produce a new tensor laid out as torch's element-wise result
// (kernels/layout.h); inputs may be strided.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "bridge/tensor.h"
#include "kernels/cpu/simd_internal.h"
#include "kernels/dtype_internal.h"
#include "kernels/layout.h"
#include "kernels/loops_internal.h"
#include "kernels/onednn/onednn_internal.h"
#include "kernels/promote_broadcast.h"

namespace tb::kernels {

// torch compares with a threshold converted to the operands' type (threshold and its backward;
// float32: rounded to nearest): th as that value, for the floating types.
inline double ThresholdIn(DType dt, double th) {
  switch (dt) {
    case DType::kFloat32: return static_cast<double>(static_cast<float>(th));
    case DType::kFloat16: return Convert<double>(Convert<Half>(th));
    case DType::kBFloat16: return Convert<double>(Convert<BFloat16>(th));
    default: return th;
  }
}

// glu's split: self's halves along `dim` (wrapped into *d), checked as torch checks them (not
// a scalar, an even size along the dimension).
struct GluHalves {
  int64_t d;     // the dimension, wrapped
  int64_t half;  // the size of each half along it
  Tensor a, b;   // self's first and second half (views)
};
inline GluHalves SplitGlu(const char* op, const Tensor& self, int64_t dim) {
  TB_CHECK(self.ndim() > 0, ValueError) << op << ": glu does not support scalars";
  const int64_t d = WrapDim(dim, self.ndim(), op);
  const int64_t n = self.size(d);
  TB_CHECK(n % 2 == 0, ValueError)
      << op << ": halving dimension must be even, but dimension " << d << " is size " << n;
  return {d, n / 2, self.slice(d, 0, n / 2), self.slice(d, n / 2, n)};
}

// Below this many elements the loops are used even where oneDNN could run: 1 << 14 for the
// functions whose loops the compiler vectorises (relu, leaky_relu, hardswish), 1 << 10 for
// those computing exp, erf, tanh or log per element (elu, gelu, silu, mish), whose scalar
// loops cost more than a oneDNN call from there on.
inline int64_t EltwiseOneDnnMin(dnnl::algorithm alg) {
  switch (alg) {
    case dnnl::algorithm::eltwise_relu:
    case dnnl::algorithm::eltwise_hardswish: return int64_t{1} << 14;
    default: return int64_t{1} << 10;
  }
}

// out = f(self) for the floating dtypes.
template <typename F>
Tensor MapFloat(const char* op, const Tensor& self, F f) {
  const ElementwiseLayout layout(self.shape(), {&self});
  Tensor out = layout.NewResult(self.dtype());
  TB_DISPATCH(self.dtype(), op, TB_TYPES_FLOAT, [&] {
    using T = scalar_t;
    using A = opmath_t<T>;
    Map<T, T>(
        out, [&f](T v) { return Convert<T>(static_cast<A>(f(Convert<A>(v)))); }, layout.In(self));
  });
  return layout.Out(out);
}

// out = f(self) for the floating and integer dtypes.
template <typename F>
Tensor MapNumeric(const char* op, const Tensor& self, F f) {
  const ElementwiseLayout layout(self.shape(), {&self});
  Tensor out = layout.NewResult(self.dtype());
  TB_DISPATCH(self.dtype(), op, TB_TYPES_NUMERIC, [&] {
    using T = scalar_t;
    using A = opmath_t<T>;
    Map<T, T>(
        out, [&f](T v) { return Convert<T>(static_cast<A>(f(Convert<A>(v)))); }, layout.In(self));
  });
  return layout.Out(out);
}

// out = f(a, b) (broadcast, in the promoted dtype) for the floating dtypes (and the integer
// ones with kInts).
template <bool kInts = false, typename F>
Tensor MapBinary(const char* op, const Tensor& a_in, const Tensor& b_in, F f) {
  const DType dt = PromoteTypes(a_in.dtype(), b_in.dtype());
  Dims shape = BroadcastShapes({a_in.shape(), b_in.shape()}, op);
  const ElementwiseLayout layout(shape, {&a_in, &b_in});
  Tensor a = layout.In(Cast(a_in, dt).expand(shape)), b = layout.In(Cast(b_in, dt).expand(shape));
  Tensor out = layout.NewResult(dt);
  auto body = [&](auto zero) {
    using T = decltype(zero);
    using A = opmath_t<T>;
    Map<T, T, T>(
        out, [&f](T x, T y) { return Convert<T>(static_cast<A>(f(Convert<A>(x), Convert<A>(y)))); },
        a, b);
  };
  if constexpr (kInts) {
    TB_DISPATCH(dt, op, TB_TYPES_NUMERIC, [&] { body(scalar_t{}); });
  } else {
    TB_DISPATCH(dt, op, TB_TYPES_FLOAT, [&] { body(scalar_t{}); });
  }
  return layout.Out(out);
}

// Runs oneDNN's eltwise `alg` on `self` into `out` (same shape and dtype) when that is the
// fast path: float32 / bfloat16, dense and laid out alike (walked as flat memory), large
// enough. Returns false otherwise.
inline bool OneDnnEltwise(const Tensor& self, const Tensor& out, dnnl::algorithm alg,
                          float alpha = 0.f, float beta = 0.f) {
  const DType dt = self.dtype();
  if ((dt != DType::kFloat32 && dt != DType::kBFloat16) || self.numel() < EltwiseOneDnnMin(alg) ||
      !IsDense(self) || !SameLayout(self, out) || out.dtype() != dt) {
    return false;
  }
  const int64_t n = self.numel();
  auto ddt = onednn::DataType(dt, "eltwise");
  dnnl::memory::desc md({n}, ddt, dnnl::memory::format_tag::a);
  std::string key =
      onednn::Key("eltwise", static_cast<int>(alg), n, static_cast<int>(ddt), alpha, beta);
  try {
    auto prim = onednn::Cached(key, [&] {
      dnnl::eltwise_forward::desc desc(dnnl::prop_kind::forward_inference, alg, md, alpha, beta);
      return dnnl::primitive(dnnl::eltwise_forward(
          dnnl::eltwise_forward::primitive_desc(desc, onednn::Attr(), onednn::Engine())));
    });
    onednn::Execute(prim, {{DNNL_ARG_SRC, onednn::Wrap(md, self.data())},
                           {DNNL_ARG_DST, onednn::Wrap(md, out.mutable_data())}});
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

// A new tensor (laid out like a dense self) with oneDNN's `alg` applied when it is the fast
// path, else `fallback()`.
template <typename Fallback>
Tensor EltwiseOr(const Tensor& self, dnnl::algorithm alg, float alpha, float beta,
                 Fallback&& fallback) {
  if (self.numel() >= EltwiseOneDnnMin(alg) && IsDense(self) &&
      (self.dtype() == DType::kFloat32 || self.dtype() == DType::kBFloat16)) {
    Tensor out = EmptyDense(self.shape(), self.strides(), self.dtype());
    if (OneDnnEltwise(self, out, alg, alpha, beta)) return out;
  }
  return fallback();
}

// Gradient of oneDNN's eltwise `alg` at `src` (the forward input) for `grad`, when that is
// the fast path (as OneDnnEltwise, with grad and src of one dtype and layout; the result laid
// out alike). Returns an undefined tensor otherwise.
inline Tensor OneDnnEltwiseBackward(const Tensor& grad, const Tensor& src, dnnl::algorithm alg,
                                    float alpha = 0.f, float beta = 0.f) {
  const DType dt = src.dtype();
  if ((dt != DType::kFloat32 && dt != DType::kBFloat16) || grad.dtype() != dt ||
      src.numel() < EltwiseOneDnnMin(alg) || !IsDense(src) || !SameLayout(grad, src)) {
    return Tensor();
  }
  const int64_t n = src.numel();
  auto ddt = onednn::DataType(dt, "eltwise_backward");
  dnnl::memory::desc md({n}, ddt, dnnl::memory::format_tag::a);
  std::string key =
      onednn::Key("eltwise_bwd", static_cast<int>(alg), n, static_cast<int>(ddt), alpha, beta);
  try {
    auto prim = onednn::Cached(key, [&] {
      auto& eng = onednn::Engine();
      dnnl::eltwise_forward::primitive_desc hint(
          dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_training, alg, md, alpha, beta),
          eng);
      dnnl::eltwise_backward::desc desc(alg, md, md, alpha, beta);
      return dnnl::primitive(dnnl::eltwise_backward(
          dnnl::eltwise_backward::primitive_desc(desc, onednn::Attr(), eng, hint)));
    });
    Tensor out = EmptyDense(src.shape(), src.strides(), dt);
    onednn::Execute(prim, {{DNNL_ARG_SRC, onednn::Wrap(md, src.data())},
                           {DNNL_ARG_DIFF_DST, onednn::Wrap(md, grad.data())},
                           {DNNL_ARG_DIFF_SRC, onednn::Wrap(md, out.mutable_data())}});
    return out;
  } catch (const dnnl::error&) {
    return Tensor();
  }
}

// out = self <= th ? 0 : grad over dense float32 / float64 operands laid out alike (th already
// in their type; NaN self passes grad through; out laid out alike) on kernels/cpu/simd.cc's row
// loop, in chunks across threads: threshold_backward, and relu with grad = self. False when the
// operands are not such.
inline bool ThresholdRows(const Tensor& grad, const Tensor& self, double th, Tensor* out) {
  const DType dt = self.dtype();
  if ((dt != DType::kFloat32 && dt != DType::kFloat64) || grad.dtype() != dt || !IsDense(self) ||
      !SameLayout(grad, self) || std::isnan(th)) {
    return false;
  }
  *out = EmptyDense(self.shape(), self.strides(), dt);
  const int64_t n = self.numel();
  constexpr int64_t kChunk = 16384;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  auto run = [&](auto* g, auto* x, auto* o, auto t) {
#pragma omp parallel for schedule(static) if (n >= 2 * kGrain)
    for (int64_t i = 0; i < chunks; ++i) {
      const int64_t b = i * kChunk;
      simd::ThresholdBackwardRow(g + b, x + b, o + b, std::min(kChunk, n - b), t);
    }
  };
  if (dt == DType::kFloat32) {
    run(grad.data_as<const float>(), self.data_as<const float>(),
        static_cast<float*>(out->mutable_data()), static_cast<float>(th));
  } else {
    run(grad.data_as<const double>(), self.data_as<const double>(),
        static_cast<double*>(out->mutable_data()), th);
  }
  return true;
}

}  // namespace tb::kernels
