// Matrix products on oneDNN: aten::mm.
#include <string>

#include "dispatch/op_table.h"
#include "kernels/onednn_internal.h"

namespace tb {
namespace {

// oneDNN takes any non-negative strides; others are made contiguous first.
Tensor OneDnnLayout(const Tensor& t) {
  for (int64_t s : t.strides()) {
    if (s <= 0) return t.clone();
  }
  return t;
}

dnnl::memory::desc Desc(const Tensor& t, dnnl::memory::data_type dt) {
  dnnl::memory::dims dims(t.shape().begin(), t.shape().end());
  dnnl::memory::dims strides(t.strides().begin(), t.strides().end());
  return dnnl::memory::desc(dims, dt, strides);
}

Tensor Mm(const Tensor& self, const Tensor& mat2) {
  TB_CHECK(self.ndim() == 2 && mat2.ndim() == 2, ValueError)
      << "aten::mm: expected 2-D tensors, got " << ShapeString(self.shape()) << " and "
      << ShapeString(mat2.shape());
  TB_CHECK(self.size(1) == mat2.size(0), ValueError)
      << "aten::mm: shapes " << ShapeString(self.shape()) << " and " << ShapeString(mat2.shape())
      << " cannot be multiplied (" << self.size(1) << " != " << mat2.size(0) << ")";
  TB_CHECK(self.dtype() == mat2.dtype(), TypeError)
      << "aten::mm: expected both tensors to have the same dtype, got "
      << DTypeName(self.dtype()) << " and " << DTypeName(mat2.dtype());
  const int64_t m = self.size(0), k = self.size(1), n = mat2.size(1);
  Tensor out = Tensor::Empty({m, n}, self.dtype());
  if (m == 0 || n == 0) return out;
  if (k == 0) return Tensor::Zeros({m, n}, self.dtype());
  auto dt = onednn::DataType(self.dtype(), "aten::mm");
  Tensor a = OneDnnLayout(self), b = OneDnnLayout(mat2);
  return onednn::Guard("aten::mm", [&] {
    auto a_md = Desc(a, dt), b_md = Desc(b, dt), c_md = Desc(out, dt);
    std::string key = "mm:" + std::to_string(m) + "," + std::to_string(k) + "," +
                      std::to_string(n) + ":" + std::to_string(static_cast<int>(dt)) + ":" +
                      std::to_string(a.stride(0)) + "," + std::to_string(a.stride(1)) + ":" +
                      std::to_string(b.stride(0)) + "," + std::to_string(b.stride(1));
    auto prim = onednn::Cached(key, [&] {
      dnnl::matmul::desc desc(a_md, b_md, c_md);
      return dnnl::primitive(dnnl::matmul(dnnl::matmul::primitive_desc(desc, onednn::Engine())));
    });
    auto& eng = onednn::Engine();
    dnnl::memory am(a_md, eng, a.data()), bm(b_md, eng, b.data()), cm(c_md, eng, out.data());
    prim.execute(onednn::Stream(), {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
    onednn::Stream().wait();
    return out;
  });
}

}  // namespace

TB_REGISTER_KERNELS(matmul) {
  table.RegisterKernel("aten::mm", DeviceType::kCPU, Boxed<&Mm>(), TB_HERE);
}

}  // namespace tb
