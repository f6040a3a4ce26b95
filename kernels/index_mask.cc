// Masked writes: aten::masked_fill.Scalar / .Tensor, masked_fill_.Scalar / .Tensor,
// masked_scatter, masked_scatter_.
//
// The functional forms return a tensor of the broadcast shape of self and mask (as torch's
// expand_outplace does); the in-place forms need the mask to broadcast to self's shape and
// raise BufferError on read-only memory. Elements move as raw bits, so every byte-sized
// dtype is served.
#include <cstdint>
#include <cstring>
#include <vector>

#include "dispatch/op_table.h"
#include "kernels/common_internal.h"
#include "kernels/loops_internal.h"
#include "kernels/promote_broadcast.h"

namespace tb {
namespace {

using kernels::CheckByteSized;
using kernels::CheckHost;
using kernels::WithBits;

// The mask as bool (torch also takes uint8 masks, with a deprecation warning).
Tensor BoolMask(const Tensor& mask, const char* op) {
  CheckHost(op, mask);
  TB_CHECK(mask.dtype() == DType::kBool || mask.dtype() == DType::kUInt8, TypeError)
      << op << ": only supports boolean masks, but got mask with dtype " << DTypeName(mask.dtype());
  return Cast(mask, DType::kBool);
}

// out[i] = mask[i] ? value : out[i]; mask already of out's shape, value a 0-d tensor of
// out's dtype.
void FillWhere(const Tensor& out, const Tensor& mask, const Tensor& value, const char* op) {
  WithBits(op, out.element_size(), [&](auto bits) {
    using U = decltype(bits);
    U v;
    std::memcpy(&v, value.data(), sizeof(U));
    kernels::Map<U, U, bool>(
        out, [v](U x, bool m) { return m ? v : x; }, out, mask);
  });
}

Tensor MaskedFillImpl(const Tensor& self, const Tensor& mask, const Tensor& value, const char* op) {
  CheckHost(op, self);
  CheckByteSized(op, self);
  Tensor m = BoolMask(mask, op);
  Dims shape = BroadcastShapes({self.shape(), m.shape()}, op);
  Tensor out = Tensor::Empty(shape, self.dtype());
  if (out.numel() == 0) return out;
  CopyCast(out, self);
  FillWhere(out, m.expand(shape), Cast(value, self.dtype()), op);
  return out;
}

void MaskedFillInPlaceImpl(const Tensor& self, const Tensor& mask, const Tensor& value,
                           const char* op) {
  CheckHost(op, self);
  CheckByteSized(op, self);
  self.mutable_data();  // BufferError on read-only memory
  Tensor m = BoolMask(mask, op);
  Dims shape = BroadcastShapes({self.shape(), m.shape()}, op);
  TB_CHECK(shape.ref() == self.shape(), ValueError)
      << op << ": mask of shape " << ShapeString(m.shape())
      << " cannot be broadcast to self's shape " << ShapeString(self.shape());
  if (self.numel() == 0) return;
  if (m.storage() == self.storage()) m = m.clone();
  FillWhere(self, m.expand(shape), Cast(value, self.dtype()), op);
}

Tensor ScalarValue(const Scalar& value) { return WrapNumber(Value(value)); }

Tensor TensorValue(const Tensor& value, const char* op) {
  CheckHost(op, value);
  TB_CHECK(value.ndim() == 0, ValueError)
      << op << ": only supports a 0-dimensional value tensor, but got tensor with " << value.ndim()
      << " dimension(s)";
  return value;
}

Tensor MaskedFillScalar(const Tensor& self, const Tensor& mask, const Scalar& value) {
  return MaskedFillImpl(self, mask, ScalarValue(value), "aten::masked_fill");
}

Tensor MaskedFillTensor(const Tensor& self, const Tensor& mask, const Tensor& value) {
  constexpr const char* kOp = "aten::masked_fill";
  return MaskedFillImpl(self, mask, TensorValue(value, kOp), kOp);
}

Tensor MaskedFillScalarInPlace(const Tensor& self, const Tensor& mask, const Scalar& value) {
  MaskedFillInPlaceImpl(self, mask, ScalarValue(value), "aten::masked_fill_");
  return self;
}

Tensor MaskedFillTensorInPlace(const Tensor& self, const Tensor& mask, const Tensor& value) {
  constexpr const char* kOp = "aten::masked_fill_";
  MaskedFillInPlaceImpl(self, mask, TensorValue(value, kOp), kOp);
  return self;
}

// In the contiguous `out`, the i-th true element of `mask` (of out's shape) takes the i-th
// element of `source` (row-major order).
void ScatterWhere(const Tensor& out, const Tensor& mask, const Tensor& source, const char* op) {
  CheckHost(op, source);
  Tensor m = mask.contiguous();
  Tensor src = Cast(source, out.dtype()).contiguous();
  const bool* mp = m.data_as<const bool>();
  const int64_t n = out.numel();
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) count += mp[i] ? 1 : 0;
  TB_CHECK(count <= src.numel(), ValueError)
      << op << ": the mask selects " << count << " elements but source has only " << src.numel();
  const int64_t es = out.element_size();
  char* o = static_cast<char*>(out.mutable_data());
  const char* s = static_cast<const char*>(src.data());
  for (int64_t i = 0, k = 0; i < n; ++i) {
    if (mp[i]) std::memcpy(o + i * es, s + (k++) * es, static_cast<size_t>(es));
  }
}

Tensor MaskedScatter(const Tensor& self, const Tensor& mask, const Tensor& source) {
  constexpr const char* kOp = "aten::masked_scatter";
  CheckHost(kOp, self);
  CheckByteSized(kOp, self);
  Tensor m = BoolMask(mask, kOp);
  Dims shape = BroadcastShapes({self.shape(), m.shape()}, kOp);
  Tensor out = Tensor::Empty(shape, self.dtype());
  if (out.numel() == 0) return out;
  CopyCast(out, self);
  ScatterWhere(out, m.expand(shape), source, kOp);
  return out;
}

Tensor MaskedScatterInPlace(const Tensor& self, const Tensor& mask, const Tensor& source) {
  constexpr const char* kOp = "aten::masked_scatter_";
  CheckHost(kOp, self);
  self.mutable_data();  // BufferError on read-only memory
  Tensor m = BoolMask(mask, kOp);
  TB_CHECK(BroadcastShapes({self.shape(), m.shape()}, kOp).ref() == self.shape(), ValueError)
      << kOp << ": mask of shape " << ShapeString(m.shape())
      << " cannot be broadcast to self's shape " << ShapeString(self.shape());
  Tensor out = MaskedScatter(self, m, source);
  CopyCast(self, out);
  return self;
}

}  // namespace

TB_REGISTER_KERNELS(index_mask) {
  const DeviceType cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::masked_fill.Scalar", cpu, Boxed<&MaskedFillScalar>(), TB_HERE);
  table.RegisterKernel("aten::masked_fill.Tensor", cpu, Boxed<&MaskedFillTensor>(), TB_HERE);
  table.RegisterKernel("aten::masked_fill_.Scalar", cpu, Boxed<&MaskedFillScalarInPlace>(),
                       TB_HERE);
  table.RegisterKernel("aten::masked_fill_.Tensor", cpu, Boxed<&MaskedFillTensorInPlace>(),
                       TB_HERE);
  table.RegisterKernel("aten::masked_scatter", cpu, Boxed<&MaskedScatter>(), TB_HERE);
  table.RegisterKernel("aten::masked_scatter_", cpu, Boxed<&MaskedScatterInPlace>(), TB_HERE);
}

}  // namespace tb
