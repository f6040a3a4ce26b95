// A kernel library built outside tensorbridge against its installed headers: it declares an
// op of its own and registers a kernel for it, which appears in the same table once loaded.
#include "dispatch/op_table.h"

namespace {

tb::Tensor Triple(const tb::Tensor& x) {
  TB_CHECK(x.dtype() == tb::DType::kFloat32, TypeError) << "plugin::triple: float32 only";
  tb::Tensor c = x.contiguous();
  tb::Tensor out = tb::Tensor::Empty(x.shape(), x.dtype());
  for (int64_t i = 0; i < x.numel(); ++i) out.data_as<float>()[i] = 3 * c.data_as<float>()[i];
  return out;
}

}  // namespace

TB_REGISTER_KERNELS(plugin) {
  tb::OpTable::Global().Define("plugin::triple(Tensor x) -> Tensor");
  table.RegisterKernel("plugin::triple", tb::DeviceType::kCPU, tb::Boxed<&Triple>(), TB_HERE);
}
