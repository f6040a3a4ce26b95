// Pooling: aten::avg_pool2d (+ backward), avg_pool3d, _adaptive_avg_pool2d (+ backward) and
// _adaptive_avg_pool3d (+ backward). Max pooling is in kernels/pool_max.cc.
//
// float32 average pooling without ceil_mode / divisor_override runs on oneDNN's pooling
// primitives (forward and backward). Everything else runs on loops, one implementation for
// 2-d and 3-d pooling (a 2-d input is a 3-d one of depth 1), over (batch * channel) planes in
// parallel, following torch's CPU kernels element for element (window clipping, division
// order) so that results agree bit for bit where possible.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "dispatch/op_table.h"
#include "kernels/dtype_internal.h"
#include "kernels/layout.h"
#include "kernels/onednn/onednn_internal.h"
#include "kernels/pool_internal.h"

namespace tb {
namespace {

using kernels::Convert;
using kernels::opmath_t;
using namespace kernels::pool;  // NOLINT(build/namespaces): PoolGeom and its helpers

// ---- average ------------------------------------------------------------------------------

// f(src plane, dst plane) for every (batch, channel) plane of g, planes of src_size elements
// in the contiguous `src` and of dst_size in `dst`, in parallel when the output is large.
template <typename T, typename F>
void ForEachPlane(const PoolGeom& g, const Tensor& src, int64_t src_size, const Tensor& dst,
                  int64_t dst_size, F&& f) {
  const T* ps = src.data_as<const T>();
  T* pd = static_cast<T*>(dst.mutable_data());
  ParallelFor(g.planes, g.planes * g.osz() > 4096,
              [&](int64_t plane) { f(ps + plane * src_size, pd + plane * dst_size); });
}

// f(i) for the index i, within a plane of g.in, of every element of the window [lo, hi), in
// C order.
template <typename F>
void ForEachInWindow(const PoolGeom& g, const Arr3& lo, const Arr3& hi, F&& f) {
  for (int64_t id = lo[0]; id < hi[0]; ++id) {
    for (int64_t ih = lo[1]; ih < hi[1]; ++ih) {
      const int64_t row = (id * g.in[1] + ih) * g.in[2];
      for (int64_t iw = lo[2]; iw < hi[2]; ++iw) f(row + iw);
    }
  }
}

// Visits each output position of `g` with its clipped window [lo, hi) and the divisor torch
// uses; windows entirely in the padding get divisor 0.
template <typename F>
void ForEachAvgWindow(const PoolGeom& g, bool count_include_pad,
                      std::optional<int64_t> divisor_override, F&& f) {
  int64_t o = 0;
  for (int64_t od = 0; od < g.out[0]; ++od) {
    for (int64_t oh = 0; oh < g.out[1]; ++oh) {
      for (int64_t ow = 0; ow < g.out[2]; ++ow, ++o) {
        Arr3 lo, hi;
        const Arr3 pos{od, oh, ow};
        int64_t pool = 1, count = 1;
        for (int i = 0; i < 3; ++i) {
          lo[i] = pos[i] * g.s[i] - g.p[i];
          hi[i] = std::min(lo[i] + g.k[i], g.in[i] + g.p[i]);
          pool *= hi[i] - lo[i];
          lo[i] = std::max<int64_t>(lo[i], 0);
          hi[i] = std::min(hi[i], g.in[i]);
          count *= std::max<int64_t>(hi[i] - lo[i], 0);
        }
        if (count == 0) {
          f(o, lo, hi, int64_t{0});
          continue;
        }
        const int64_t div = divisor_override ? *divisor_override : count_include_pad ? pool : count;
        f(o, lo, hi, div);
      }
    }
  }
}

// oneDNN average pooling (float32) where its windows are torch's: no ceil_mode, no
// divisor_override (the divisor is then the kernel size, or the count of real elements).
// Forward: src -> dst; backward: dst holds the output gradient, src receives the input one.
bool OneDnnAvgPool(const PoolGeom& g, int64_t nsp, const Tensor& self, bool ceil_mode,
                   bool count_include_pad, std::optional<int64_t> divisor_override, bool backward,
                   const Tensor& src, const Tensor& dst) {
  if (self.dtype() != DType::kFloat32 || ceil_mode || divisor_override || g.planes == 0) {
    return false;
  }
  const bool batched = self.ndim() == nsp + 2;
  dnnl::memory::dims sd{batched ? self.size(0) : 1, self.size(batched ? 1 : 0)};
  dnnl::memory::dims dd = sd, strides, kernel, pad;
  for (int i = 3 - static_cast<int>(nsp); i < 3; ++i) {
    sd.push_back(g.in[i]);
    dd.push_back(g.out[i]);
    strides.push_back(g.s[i]);
    kernel.push_back(g.k[i]);
    pad.push_back(g.p[i]);
  }
  using dt = dnnl::memory::data_type;
  auto smd = onednn::PlainDesc(sd, dt::f32), dmd = onednn::PlainDesc(dd, dt::f32);
  const auto alg = count_include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                     : dnnl::algorithm::pooling_avg_exclude_padding;
  std::string key =
      onednn::Key("avgpool", backward, count_include_pad, sd, dd, strides, kernel, pad);
  try {
    auto prim = onednn::Cached(key, [&] {
      auto& eng = onednn::Engine();
      dnnl::pooling_forward::primitive_desc fwd(
          dnnl::pooling_forward::desc(
              backward ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference,
              alg, smd, dmd, strides, kernel, pad, pad),
          onednn::Attr(), eng);
      if (!backward) return dnnl::primitive(dnnl::pooling_forward(fwd));
      dnnl::pooling_backward::desc d(alg, smd, dmd, strides, kernel, pad, pad);
      return dnnl::primitive(dnnl::pooling_backward(
          dnnl::pooling_backward::primitive_desc(d, onednn::Attr(), eng, fwd)));
    });
    auto sm = onednn::Wrap(smd, src.data()), dm = onednn::Wrap(dmd, dst.data());
    if (backward) {
      onednn::Execute(prim, {{DNNL_ARG_DIFF_DST, dm}, {DNNL_ARG_DIFF_SRC, sm}});
    } else {
      onednn::Execute(prim, {{DNNL_ARG_SRC, sm}, {DNNL_ARG_DST, dm}});
    }
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

// The kernels compute in C order; torch lays the results (and input gradients) of 2-d pooling
// over a batch out in the input's suggested memory format (channels-last stays so), those of
// 3-d pooling in C order.
Tensor LikeTorch(const Tensor& self, int64_t nsp, const Tensor& result) {
  if (nsp != 2 || self.ndim() != 4) return result;
  return InFormat(result, SuggestMemoryFormat(self));
}

// The windows of average pooling (WindowGeom, no dilation), divisor_override checked.
PoolGeom AvgGeom(const char* op, const Tensor& self, int64_t nsp,
                 const std::vector<int64_t>& kernel_size, const std::vector<int64_t>& stride,
                 const std::vector<int64_t>& padding, bool ceil_mode,
                 std::optional<int64_t> divisor_override) {
  TB_CHECK(!divisor_override || *divisor_override != 0, ValueError)
      << op << ": divisor must be not zero";
  return WindowGeom(op, self, nsp, kernel_size, stride, padding, {1}, ceil_mode);
}

Tensor AvgPool(const char* op, const Tensor& self, int64_t nsp,
               const std::vector<int64_t>& kernel_size, const std::vector<int64_t>& stride,
               const std::vector<int64_t>& padding, bool ceil_mode, bool count_include_pad,
               std::optional<int64_t> divisor_override) {
  PoolGeom g = AvgGeom(op, self, nsp, kernel_size, stride, padding, ceil_mode, divisor_override);
  Tensor x = self.contiguous();
  Tensor out = Tensor::Empty(g.out_shape, self.dtype());
  if (OneDnnAvgPool(g, nsp, self, ceil_mode, count_include_pad, divisor_override, false, x, out)) {
    return out;
  }
  TB_DISPATCH(self.dtype(), op, TB_TYPES_NUMERIC, [&] {
    using T = scalar_t;
    using Acc = opmath_t<T>;
    ForEachPlane<T>(g, x, g.isz(), out, g.osz(), [&](const T* in, T* o) {
      ForEachAvgWindow(g, count_include_pad, divisor_override,
                       [&](int64_t oi, const Arr3& lo, const Arr3& hi, int64_t div) {
                         if (div == 0) {
                           o[oi] = T(0);
                           return;
                         }
                         Acc sum = 0;
                         ForEachInWindow(g, lo, hi, [&](int64_t i) { sum += Convert<Acc>(in[i]); });
                         o[oi] = Convert<T>(static_cast<Acc>(sum / static_cast<Acc>(div)));
                       });
    });
  });
  return out;
}

Tensor AvgPool2d(const Tensor& self, const std::vector<int64_t>& kernel_size,
                 const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                 bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override) {
  return LikeTorch(self, 2,
                   AvgPool("aten::avg_pool2d", self, 2, kernel_size, stride, padding, ceil_mode,
                           count_include_pad, divisor_override));
}

Tensor AvgPool3d(const Tensor& self, const std::vector<int64_t>& kernel_size,
                 const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                 bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override) {
  return LikeTorch(self, 3,
                   AvgPool("aten::avg_pool3d", self, 3, kernel_size, stride, padding, ceil_mode,
                           count_include_pad, divisor_override));
}

Tensor AvgPoolBackward(const char* op, const Tensor& grad_output, const Tensor& self, int64_t nsp,
                       const std::vector<int64_t>& kernel_size, const std::vector<int64_t>& stride,
                       const std::vector<int64_t>& padding, bool ceil_mode, bool count_include_pad,
                       std::optional<int64_t> divisor_override) {
  PoolGeom g = AvgGeom(op, self, nsp, kernel_size, stride, padding, ceil_mode, divisor_override);
  TB_CHECK(grad_output.shape() == g.out_shape.ref(), ValueError)
      << op << ": expected grad_output of shape " << ShapeString(g.out_shape) << ", got "
      << ShapeString(grad_output.shape());
  TB_CHECK(grad_output.dtype() == self.dtype(), TypeError)
      << op << ": grad_output and self must have the same dtype";
  Tensor go = grad_output.contiguous();
  Tensor gi = Tensor::Zeros(self.shape(), self.dtype());
  if (OneDnnAvgPool(g, nsp, self, ceil_mode, count_include_pad, divisor_override, true, gi, go)) {
    return gi;
  }
  TB_DISPATCH(self.dtype(), op, TB_TYPES_NUMERIC, [&] {
    using T = scalar_t;
    using Acc = opmath_t<T>;
    ForEachPlane<T>(g, go, g.osz(), gi, g.isz(), [&](const T* gout, T* gin) {
      ForEachAvgWindow(
          g, count_include_pad, divisor_override,
          [&](int64_t oi, const Arr3& lo, const Arr3& hi, int64_t div) {
            if (div == 0) return;
            const T delta =
                Convert<T>(static_cast<Acc>(Convert<Acc>(gout[oi]) / static_cast<Acc>(div)));
            ForEachInWindow(g, lo, hi, [&](int64_t i) {
              gin[i] = Convert<T>(static_cast<Acc>(Convert<Acc>(gin[i]) + Convert<Acc>(delta)));
            });
          });
    });
  });
  return gi;
}

Tensor AvgPool2dBackward(const Tensor& grad_output, const Tensor& self,
                         const std::vector<int64_t>& kernel_size,
                         const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                         bool ceil_mode, bool count_include_pad,
                         std::optional<int64_t> divisor_override) {
  return LikeTorch(
      self, 2,
      AvgPoolBackward("aten::avg_pool2d_backward", grad_output, self, 2, kernel_size, stride,
                      padding, ceil_mode, count_include_pad, divisor_override));
}

// ---- adaptive average -----------------------------------------------------------------------

int64_t StartIndex(int64_t a, int64_t b, int64_t c) { return (a / b) * c + ((a % b) * c) / b; }
int64_t EndIndex(int64_t a, int64_t b, int64_t c) { return 1 + ((a + 1) * c - 1) / b; }

PoolGeom AdaptiveGeom(const char* op, const Tensor& self, int64_t nsp,
                      const std::vector<int64_t>& output_size) {
  PoolGeom g;
  InputGeom(op, self, nsp, &g);
  TB_CHECK(static_cast<int64_t>(output_size.size()) == nsp, ValueError)
      << op << ": output_size must have " << nsp << " elements";
  for (int64_t i = 0; i < nsp; ++i) {
    TB_CHECK(output_size[i] >= 0, ValueError) << op << ": output_size must be non-negative";
    g.out[3 - nsp + i] = output_size[i];
    g.out_shape[self.ndim() - nsp + i] = output_size[i];
  }
  return g;
}

// Visits each output position with its window and the window's sizes.
template <typename F>
void ForEachAdaptiveWindow(const PoolGeom& g, F&& f) {
  int64_t o = 0;
  for (int64_t od = 0; od < g.out[0]; ++od) {
    for (int64_t oh = 0; oh < g.out[1]; ++oh) {
      for (int64_t ow = 0; ow < g.out[2]; ++ow, ++o) {
        const Arr3 pos{od, oh, ow};
        Arr3 lo, hi;
        for (int i = 0; i < 3; ++i) {
          lo[i] = StartIndex(pos[i], g.out[i], g.in[i]);
          hi[i] = EndIndex(pos[i], g.out[i], g.in[i]);
        }
        f(o, lo, hi);
      }
    }
  }
}

Tensor AdaptiveAvgPool(const char* op, const Tensor& self, int64_t nsp,
                       const std::vector<int64_t>& output_size) {
  PoolGeom g = AdaptiveGeom(op, self, nsp, output_size);
  Tensor x = self.contiguous();
  Tensor out = Tensor::Empty(g.out_shape, self.dtype());
  TB_DISPATCH(self.dtype(), op, TB_TYPES_FLOAT, [&] {
    using T = scalar_t;
    using Acc = opmath_t<T>;
    ForEachPlane<T>(g, x, g.isz(), out, g.osz(), [&](const T* in, T* o) {
      ForEachAdaptiveWindow(g, [&](int64_t oi, const Arr3& lo, const Arr3& hi) {
        // torch's 3-d kernel sums float16 / bfloat16 in their own type and divides by each
        // window size in turn, rounding every step; its 2-d kernel sums in float.
        const bool round_steps = kernels::kIsReducedFloat<T> && nsp == 3;
        Acc sum = 0;
        ForEachInWindow(g, lo, hi, [&](int64_t i) {
          sum += Convert<Acc>(in[i]);
          if (round_steps) sum = Convert<Acc>(Convert<T>(sum));
        });
        Acc v = sum;
        for (int i = 0; i < 3; ++i) {
          if (hi[i] - lo[i] != 1) v = v / static_cast<Acc>(hi[i] - lo[i]);
          if (round_steps) v = Convert<Acc>(Convert<T>(v));
        }
        o[oi] = Convert<T>(v);
      });
    });
  });
  return out;
}

Tensor AdaptiveAvgPool2d(const Tensor& self, const std::vector<int64_t>& output_size) {
  return LikeTorch(self, 2, AdaptiveAvgPool("aten::_adaptive_avg_pool2d", self, 2, output_size));
}
Tensor AdaptiveAvgPool3d(const Tensor& self, const std::vector<int64_t>& output_size) {
  return LikeTorch(self, 3, AdaptiveAvgPool("aten::_adaptive_avg_pool3d", self, 3, output_size));
}

Tensor AdaptiveAvgPoolBackward(const char* op, const Tensor& grad_output, const Tensor& self,
                               int64_t nsp) {
  TB_CHECK(grad_output.ndim() == self.ndim(), ValueError)
      << op << ": grad_output of shape " << ShapeString(grad_output.shape())
      << " does not match self of shape " << ShapeString(self.shape());
  std::vector<int64_t> out_size;
  for (int64_t i = 0; i < nsp; ++i) out_size.push_back(grad_output.size(self.ndim() - nsp + i));
  PoolGeom g = AdaptiveGeom(op, self, nsp, out_size);
  TB_CHECK(grad_output.shape() == g.out_shape.ref(), ValueError)
      << op << ": grad_output of shape " << ShapeString(grad_output.shape())
      << " does not match self of shape " << ShapeString(self.shape());
  TB_CHECK(grad_output.dtype() == self.dtype(), TypeError)
      << op << ": grad_output and self must have the same dtype";
  Tensor go = grad_output.contiguous();
  Tensor gi = Tensor::Zeros(self.shape(), self.dtype());
  TB_DISPATCH(self.dtype(), op, TB_TYPES_FLOAT, [&] {
    using T = scalar_t;
    using Acc = opmath_t<T>;
    ForEachPlane<T>(g, go, g.osz(), gi, g.isz(), [&](const T* gout, T* gin) {
      ForEachAdaptiveWindow(g, [&](int64_t oi, const Arr3& lo, const Arr3& hi) {
        Acc delta = Convert<Acc>(gout[oi]);
        for (int i = 0; i < 3; ++i) {
          if (hi[i] - lo[i] != 1) delta = delta / static_cast<Acc>(hi[i] - lo[i]);
        }
        const T dt = Convert<T>(delta);
        ForEachInWindow(g, lo, hi, [&](int64_t i) {
          gin[i] = Convert<T>(static_cast<Acc>(Convert<Acc>(gin[i]) + Convert<Acc>(dt)));
        });
      });
    });
  });
  return gi;
}

Tensor AdaptiveAvgPool2dBackward(const Tensor& grad_output, const Tensor& self) {
  return LikeTorch(
      self, 2,
      AdaptiveAvgPoolBackward("aten::_adaptive_avg_pool2d_backward", grad_output, self, 2));
}
Tensor AdaptiveAvgPool3dBackward(const Tensor& grad_output, const Tensor& self) {
  return LikeTorch(
      self, 3,
      AdaptiveAvgPoolBackward("aten::_adaptive_avg_pool3d_backward", grad_output, self, 3));
}

}  // namespace

TB_REGISTER_KERNELS(pool) {
  const auto cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::avg_pool2d", cpu, Boxed<&AvgPool2d>(), TB_HERE);
  table.RegisterKernel("aten::avg_pool2d_backward", cpu, Boxed<&AvgPool2dBackward>(), TB_HERE);
  table.RegisterKernel("aten::avg_pool3d", cpu, Boxed<&AvgPool3d>(), TB_HERE);
  table.RegisterKernel("aten::_adaptive_avg_pool2d", cpu, Boxed<&AdaptiveAvgPool2d>(), TB_HERE);
  table.RegisterKernel("aten::_adaptive_avg_pool2d_backward", cpu,
                       Boxed<&AdaptiveAvgPool2dBackward>(), TB_HERE);
  table.RegisterKernel("aten::_adaptive_avg_pool3d", cpu, Boxed<&AdaptiveAvgPool3d>(), TB_HERE);
  table.RegisterKernel("aten::_adaptive_avg_pool3d_backward", cpu,
                       Boxed<&AdaptiveAvgPool3dBackward>(), TB_HERE);
}

}  // namespace tb
