// Softmax: aten::_softmax, _log_softmax, _softmax_backward_data, _log_softmax_backward_data.
//
// The tensor is seen as [outer, dim, inner]. float32 and bfloat16 run on oneDNN's softmax
// forward and backward (accurate / log algorithms; bfloat16 -> float32 for half_to_float);
// float64, float16 and mixed-dtype gradients run on loops that accumulate in double; 16-bit
// log_softmax over the last dim rounds its intermediates as torch's CPU kernel does.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "dispatch/op_table.h"
#include "kernels/common_internal.h"
#include "kernels/dtype_internal.h"
#include "kernels/layout.h"
#include "kernels/loops_internal.h"
#include "kernels/onednn/onednn_internal.h"
#include "kernels/promote_broadcast.h"

namespace tb {
namespace {

using kernels::Convert;
using kernels::ParallelFor;

struct Split {
  int64_t outer = 1, len = 1, inner = 1, dim = 0;
};

Split SplitAt(const char* op, const Tensor& t, int64_t dim) {
  Split s;
  const int64_t nd = std::max<int64_t>(t.ndim(), 1);
  s.dim = WrapDim(dim, nd, op);
  for (int64_t i = 0; i < t.ndim(); ++i) {
    if (i < s.dim)
      s.outer *= t.size(i);
    else if (i == s.dim)
      s.len = t.size(i);
    else
      s.inner *= t.size(i);
  }
  return s;
}

bool OneDnnSoftmax(const Tensor& x, const Tensor& out, const Split& s, bool log) {
  const DType in = x.dtype(), od = out.dtype();
  if (!((in == DType::kFloat32 && od == DType::kFloat32) ||
        (in == DType::kBFloat16 && (od == DType::kBFloat16 || od == DType::kFloat32)))) {
    return false;
  }
  auto sdt = onednn::DataType(in, "softmax"), ddt = onednn::DataType(od, "softmax");
  dnnl::memory::dims dims{s.outer, s.len, s.inner};
  auto smd = onednn::PlainDesc(dims, sdt), dmd = onednn::PlainDesc(dims, ddt);
  std::string key = onednn::Key("softmax", log, dims, static_cast<int>(sdt), static_cast<int>(ddt));
  try {
    auto prim = onednn::Cached(key, [&] {
      dnnl::softmax_v2_forward::desc d(
          dnnl::prop_kind::forward_inference,
          log ? dnnl::algorithm::softmax_log : dnnl::algorithm::softmax_accurate, smd, dmd, 1);
      return dnnl::primitive(dnnl::softmax_v2_forward(
          dnnl::softmax_v2_forward::primitive_desc(d, onednn::Attr(), onednn::Engine())));
    });
    onednn::Execute(prim, {{DNNL_ARG_SRC, onednn::Wrap(smd, x.data())},
                           {DNNL_ARG_DST, onednn::Wrap(dmd, out.data())}});
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

// diff_src of oneDNN's softmax for dst `y` and diff_dst `g` (all one dtype, contiguous).
bool OneDnnSoftmaxBackward(const Tensor& g, const Tensor& y, const Tensor& out, const Split& s,
                           bool log) {
  const DType dt = g.dtype();
  if ((dt != DType::kFloat32 && dt != DType::kBFloat16) || y.dtype() != dt || out.dtype() != dt) {
    return false;
  }
  auto ddt = onednn::DataType(dt, "softmax_backward");
  dnnl::memory::dims dims{s.outer, s.len, s.inner};
  auto md = onednn::PlainDesc(dims, ddt);
  const auto alg = log ? dnnl::algorithm::softmax_log : dnnl::algorithm::softmax_accurate;
  std::string key = onednn::Key("softmax_bwd", log, dims, static_cast<int>(ddt));
  try {
    auto prim = onednn::Cached(key, [&] {
      auto& eng = onednn::Engine();
      dnnl::softmax_v2_forward::primitive_desc hint(
          dnnl::softmax_v2_forward::desc(dnnl::prop_kind::forward_training, alg, md, md, 1), eng);
      dnnl::softmax_v2_backward::desc d(alg, md, md, md, 1);
      return dnnl::primitive(dnnl::softmax_v2_backward(
          dnnl::softmax_v2_backward::primitive_desc(d, onednn::Attr(), eng, hint)));
    });
    onednn::Execute(prim, {{DNNL_ARG_DST, onednn::Wrap(md, y.data())},
                           {DNNL_ARG_DIFF_DST, onednn::Wrap(md, g.data())},
                           {DNNL_ARG_DIFF_SRC, onednn::Wrap(md, out.data())}});
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

// float16 / bfloat16 log_softmax over the last dim as torch's CPU kernel rounds it: max and
// sum of exp(x - max) in float, the sum rounded to the dtype, its log rounded to the dtype, then
// (x - max) - log in float, rounded once.
void LogSoftmaxLastDim16(const Tensor& x, const Tensor& out, const Split& s) {
  TB_DISPATCH(x.dtype(), "aten::_log_softmax", TB_TYPES_FLOAT, [&] {
    using T = scalar_t;
    if constexpr (kernels::kIsReducedFloat<T>) {
      const T* px = x.data_as<const T>();
      T* po = static_cast<T*>(out.mutable_data());
      ParallelFor(s.outer, out.numel() > kernels::kGrain, [&](int64_t r) {
        const T* in = px + r * s.len;
        T* o = po + r * s.len;
        float m = -std::numeric_limits<float>::infinity();
        for (int64_t i = 0; i < s.len; ++i) m = std::max(m, Convert<float>(in[i]));
        double sum = 0;
        for (int64_t i = 0; i < s.len; ++i) sum += std::exp(Convert<float>(in[i]) - m);
        const float total = Convert<float>(Convert<T>(static_cast<float>(sum)));
        const float lse = Convert<float>(Convert<T>(std::log(total)));
        for (int64_t i = 0; i < s.len; ++i) o[i] = Convert<T>((Convert<float>(in[i]) - m) - lse);
      });
    }
  });
}

Tensor Softmax(const char* op, const Tensor& self, int64_t dim, bool half_to_float, bool log) {
  TB_CHECK_SUPPORTED(IsFloatingPoint(self.dtype()))
      << op << ": dtype " << DTypeName(self.dtype()) << " is not supported";
  TB_CHECK(!half_to_float || self.dtype() == DType::kFloat16 || self.dtype() == DType::kBFloat16,
           ValueError)
      << op << ": half_to_float is only supported for float16 and bfloat16 inputs";
  const Split s = SplitAt(op, self, dim);
  const DType odt = half_to_float ? DType::kFloat32 : self.dtype();
  Tensor x = self.contiguous();
  Tensor out = Tensor::Empty(self.shape(), odt);
  if (out.numel() == 0) return out;
  const bool reduced = self.dtype() == DType::kFloat16 || self.dtype() == DType::kBFloat16;
  if (log && reduced && odt == self.dtype() && s.inner == 1) {
    LogSoftmaxLastDim16(x, out, s);
    return out;
  }
  if (OneDnnSoftmax(x, out, s, log)) return out;
  TB_DISPATCH(self.dtype(), op, TB_TYPES_FLOAT, [&] {
    using T = scalar_t;
    TB_DISPATCH(odt, op, TB_TYPES_FLOAT, [&] {
      using O = scalar_t;
      const T* px = x.data_as<const T>();
      O* po = static_cast<O*>(out.mutable_data());
      ParallelFor(s.outer * s.inner, out.numel() > kernels::kGrain, [&](int64_t r) {
        const int64_t base = (r / s.inner) * s.len * s.inner + r % s.inner;
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t i = 0; i < s.len; ++i)
          m = std::max(m, Convert<double>(px[base + i * s.inner]));
        double sum = 0;
        for (int64_t i = 0; i < s.len; ++i)
          sum += std::exp(Convert<double>(px[base + i * s.inner]) - m);
        const double lse = std::log(sum);
        for (int64_t i = 0; i < s.len; ++i) {
          const double v = Convert<double>(px[base + i * s.inner]) - m;
          po[base + i * s.inner] = Convert<O>(log ? v - lse : std::exp(v) / sum);
        }
      });
    });
  });
  return out;
}

Tensor SoftmaxOp(const Tensor& self, int64_t dim, bool half_to_float) {
  return Softmax("aten::_softmax", self, dim, half_to_float, false);
}
Tensor LogSoftmaxOp(const Tensor& self, int64_t dim, bool half_to_float) {
  return Softmax("aten::_log_softmax", self, dim, half_to_float, true);
}

Tensor SoftmaxBackward(const char* op, const Tensor& grad_output, const Tensor& output, int64_t dim,
                       DType input_dtype, bool log) {
  TB_CHECK(grad_output.shape() == output.shape(), ValueError)
      << op << ": grad_output of shape " << ShapeString(grad_output.shape())
      << " does not match output of shape " << ShapeString(output.shape());
  TB_CHECK_SUPPORTED(IsFloatingPoint(grad_output.dtype()) && IsFloatingPoint(output.dtype()) &&
                     IsFloatingPoint(input_dtype))
      << op << ": only floating point dtypes are supported";
  const Split s = SplitAt(op, output, dim);
  Tensor g = grad_output.contiguous(), y = Cast(output, grad_output.dtype()).contiguous();
  Tensor out = Tensor::Empty(output.shape(), input_dtype);
  if (out.numel() == 0) return out;
  if (OneDnnSoftmaxBackward(g, y, out, s, log)) return out;
  TB_DISPATCH(g.dtype(), op, TB_TYPES_FLOAT, [&] {
    using T = scalar_t;
    TB_DISPATCH(input_dtype, op, TB_TYPES_FLOAT, [&] {
      using O = scalar_t;
      const T* pg = g.data_as<const T>();
      const T* py = y.data_as<const T>();
      O* po = static_cast<O*>(out.mutable_data());
      ParallelFor(s.outer * s.inner, out.numel() > kernels::kGrain, [&](int64_t r) {
        const int64_t base = (r / s.inner) * s.len * s.inner + r % s.inner;
        double sum = 0;
        for (int64_t i = 0; i < s.len; ++i) {
          const int64_t k = base + i * s.inner;
          sum += log ? Convert<double>(pg[k]) : Convert<double>(pg[k]) * Convert<double>(py[k]);
        }
        for (int64_t i = 0; i < s.len; ++i) {
          const int64_t k = base + i * s.inner;
          const double gv = Convert<double>(pg[k]), yv = Convert<double>(py[k]);
          po[k] = Convert<O>(log ? gv - std::exp(yv) * sum : yv * (gv - sum));
        }
      });
    });
  });
  return out;
}

Tensor SoftmaxBackwardData(const Tensor& grad_output, const Tensor& output, int64_t dim,
                           DType input_dtype) {
  return SoftmaxBackward("aten::_softmax_backward_data", grad_output, output, dim, input_dtype,
                         false);
}
// Laid out as torch's decomposition (grad_output - exp(output) * sum) lays it out in a traced
// graph: element-wise over grad_output and output.
Tensor LogSoftmaxBackwardData(const Tensor& grad_output, const Tensor& output, int64_t dim,
                              DType input_dtype) {
  return LaidOutElementwise(SoftmaxBackward("aten::_log_softmax_backward_data", grad_output, output,
                                            dim, input_dtype, true),
                            {&grad_output, &output});
}

}  // namespace

TB_REGISTER_KERNELS(softmax) {
  const auto cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::_softmax", cpu, Boxed<&SoftmaxOp>(), TB_HERE);
  table.RegisterKernel("aten::_log_softmax", cpu, Boxed<&LogSoftmaxOp>(), TB_HERE);
  table.RegisterKernel("aten::_softmax_backward_data", cpu, Boxed<&SoftmaxBackwardData>(), TB_HERE);
  table.RegisterKernel("aten::_log_softmax_backward_data", cpu, Boxed<&LogSoftmaxBackwardData>(),
                       TB_HERE);
}

}  // namespace tb
