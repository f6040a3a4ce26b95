// Activations on oneDNN eltwise primitives: aten::relu, aten::gelu.
#include <string>

#include "dispatch/op_table.h"
#include "kernels/onednn_internal.h"

namespace tb {
namespace {

Tensor Eltwise(const char* op, const Tensor& self, dnnl::algorithm alg, float alpha = 0.f) {
  Tensor src = self.contiguous();
  Tensor out = Tensor::Empty(self.shape(), self.dtype());
  const int64_t n = self.numel();
  if (n == 0) return out;
  auto dt = onednn::DataType(self.dtype(), op);
  return onednn::Guard(op, [&] {
    dnnl::memory::desc md({n}, dt, dnnl::memory::format_tag::a);
    std::string key = std::string("eltwise:") + std::to_string(static_cast<int>(alg)) + ":" +
                      std::to_string(n) + ":" + std::to_string(static_cast<int>(dt)) + ":" +
                      std::to_string(alpha);
    auto prim = onednn::Cached(key, [&] {
      dnnl::eltwise_forward::desc desc(dnnl::prop_kind::forward_inference, alg, md, alpha, 0.f);
      return dnnl::primitive(dnnl::eltwise_forward(
          dnnl::eltwise_forward::primitive_desc(desc, onednn::Engine())));
    });
    auto& eng = onednn::Engine();
    dnnl::memory sm(md, eng, src.data()), dm(md, eng, out.data());
    prim.execute(onednn::Stream(), {{DNNL_ARG_SRC, sm}, {DNNL_ARG_DST, dm}});
    onednn::Stream().wait();
    return out;
  });
}

Tensor Relu(const Tensor& self) {
  return Eltwise("aten::relu", self, dnnl::algorithm::eltwise_relu);
}

Tensor Gelu(const Tensor& self, const std::string& approximate) {
  if (approximate == "none") return Eltwise("aten::gelu", self, dnnl::algorithm::eltwise_gelu_erf);
  if (approximate == "tanh") return Eltwise("aten::gelu", self, dnnl::algorithm::eltwise_gelu_tanh);
  TB_THROW(ValueError) << "aten::gelu: approximate must be 'none' or 'tanh', got '" << approximate
                       << "'";
}

}  // namespace

TB_REGISTER_KERNELS(activation) {
  table.RegisterKernel("aten::relu", DeviceType::kCPU, Boxed<&Relu>(), TB_HERE);
  table.RegisterKernel("aten::gelu", DeviceType::kCPU, Boxed<&Gelu>(), TB_HERE);
}

}  // namespace tb
