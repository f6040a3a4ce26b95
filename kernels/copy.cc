// Copies and conversions: aten::clone, lift_fresh_copy, _to_copy, copy, copy_, fill.Scalar,
// fill_.Scalar, fill.Tensor, fill_.Tensor, zero_, _local_scalar_dense.
//
// Same-dtype copies move raw element bits through the strided loop (any byte-sized dtype,
// storage-only ones included); converting copies go through CopyCast. In-place ops write
// through mutable_data(), so read-only memory (JAX arrays, non-writeable numpy arrays)
// raises BufferError.
#include <complex>
#include <cstdint>
#include <cstring>
#include <optional>

#include "dispatch/op_table.h"
#include "kernels/common_internal.h"
#include "kernels/dtype_internal.h"
#include "kernels/factory_internal.h"
#include "kernels/layout.h"
#include "kernels/loops_internal.h"
#include "kernels/promote_broadcast.h"

namespace tb {
namespace {

using kernels::CheckHost;
using kernels::CheckOptions;
using kernels::CopyBits;
using kernels::MayOverlap;

// dst <- src broadcast to dst's shape, converting the dtype. dst must not overlap src.
void CopyInto(const Tensor& dst, const Tensor& src, const char* op) {
  CheckHost(op, dst);
  CheckHost(op, src);
  Tensor s = src.expand(dst.shape());
  if (IsSubByte(dst.dtype()) || IsSubByte(s.dtype())) {
    TB_CHECK_SUPPORTED(s.dtype() == dst.dtype() && s.is_contiguous() && dst.is_contiguous())
        << op << ": only whole contiguous copies of the packed sub-byte dtype "
        << DTypeName(dst.dtype()) << " are supported";
    void* d = dst.mutable_data();
    if (dst.nbytes() > 0) std::memcpy(d, s.data(), static_cast<size_t>(dst.nbytes()));
    return;
  }
  if (s.dtype() == dst.dtype()) {
    CopyBits(dst, s);
  } else {
    CopyCast(dst, s);
  }
}

// A new tensor of `dtype` holding self's values, laid out as torch's clone / _to_copy lay it
// out for `format` (kernels/layout.h).
Tensor CopyLike(const Tensor& self, DType dtype, const Value& memory_format, const char* op) {
  CheckHost(op, self);
  const MemoryFormat format = MemoryFormatArg(memory_format, op);
  if (dtype == self.dtype() && IsSubByte(dtype)) return self.clone();
  Tensor out = EmptyLike(self, dtype, format, op);
  CopyInto(out, self, op);
  return out;
}

Tensor Clone(const Tensor& self, const Value& memory_format) {
  return CopyLike(self, self.dtype(), memory_format, "aten::clone");
}

Tensor LiftFreshCopy(const Tensor& self) { return Clone(self, Value()); }

Tensor ToCopy(const Tensor& self, std::optional<DType> dtype, const Value& layout,
              const Value& device, const Value& /*pin_memory*/, bool /*non_blocking*/,
              const Value& memory_format) {
  constexpr const char* kOp = "aten::_to_copy";
  CheckOptions(kOp, layout, device);
  return CopyLike(self, dtype.value_or(self.dtype()), memory_format, kOp);
}

// self's layout with src's values (torch's copy: a clone of self, preserving its strides,
// that src is copied into).
Tensor Copy(const Tensor& self, const Tensor& src, bool /*non_blocking*/) {
  constexpr const char* kOp = "aten::copy";
  CheckHost(kOp, self);
  Tensor out = EmptyLike(self, self.dtype(), MemoryFormat::kPreserve, kOp);
  CopyInto(out, src, kOp);
  return out;
}

Tensor CopyInPlace(const Tensor& self, const Tensor& src, bool /*non_blocking*/) {
  constexpr const char* kOp = "aten::copy_";
  CheckHost(kOp, self);
  CheckHost(kOp, src);
  self.mutable_data();  // BufferError on read-only memory, even with no elements
  if (self.data() == src.data() && self.shape() == src.shape() && self.strides() == src.strides() &&
      self.dtype() == src.dtype()) {
    return self;  // copying a tensor onto itself
  }
  // Read everything before writing when the two share memory (x.copy_(x.flip(0))).
  Tensor s = MayOverlap(self, src) ? src.clone() : src;
  CopyInto(self, s, kOp);
  return self;
}

// Fills `t` with `value` converted to t's dtype.
void FillWith(const Tensor& t, const Scalar& value, const char* op) {
  CheckHost(op, t);
  t.mutable_data();
  if (t.numel() == 0) return;
  if (IsSubByte(t.dtype()) || IsStorageOnly(t.dtype()) || IsComplex(t.dtype())) {
    // A complex value fills a real tensor only without an imaginary part (torch's RuntimeError
    // "value cannot be converted to type double without overflow" otherwise).
    const Scalar v =
        value.is_complex() && !IsComplex(t.dtype()) ? Scalar(value.to_double()) : value;
    // Element by element; raises NotImplementedError for dtypes it cannot convert to.
    CopyCast(t, WrapNumber(Value(v)));
    return;
  }
  kernels::FillScalar(t, value);  // converts a complex value the same way
}

Tensor Fill(const Tensor& self, const Scalar& value) {
  Tensor out = EmptyLike(self, self.dtype(), MemoryFormat::kPreserve, "aten::fill");
  FillWith(out, value, "aten::fill");
  return out;
}

Tensor FillInPlace(const Tensor& self, const Scalar& value) {
  FillWith(self, value, "aten::fill_");
  return self;
}

Scalar LocalScalar(const Tensor& self) {
  constexpr const char* kOp = "aten::_local_scalar_dense";
  CheckHost(kOp, self);
  TB_CHECK(self.numel() == 1, ValueError)
      << kOp << ": a Tensor with " << self.numel() << " elements cannot be converted to Scalar";
  if (self.dtype() == DType::kComplex64) {
    const auto v = *self.data_as<const std::complex<float>>();
    return Scalar(std::complex<double>(v.real(), v.imag()));
  }
  if (self.dtype() == DType::kComplex128)
    return Scalar(*self.data_as<const std::complex<double>>());
  Scalar out;
  TB_DISPATCH(self.dtype(), kOp, TB_TYPES_ALL, [&] {
    using T = scalar_t;
    const T v = *self.data_as<const T>();
    if constexpr (std::is_same_v<T, bool>) {
      out = Scalar(v);
    } else if constexpr (kernels::kIsFloating<T>) {
      out = Scalar(static_cast<double>(static_cast<kernels::opmath_t<T>>(v)));
    } else {
      out = Scalar(static_cast<int64_t>(v));
    }
  });
  return out;
}

Scalar ValueScalar(const Tensor& value, const char* op) {
  TB_CHECK(value.ndim() == 0, ValueError)
      << op << ": only supports a 0-dimensional value tensor, but got tensor with " << value.ndim()
      << " dimension(s)";
  return LocalScalar(value);
}

Tensor FillTensor(const Tensor& self, const Tensor& value) {
  return Fill(self, ValueScalar(value, "aten::fill"));
}

Tensor FillTensorInPlace(const Tensor& self, const Tensor& value) {
  return FillInPlace(self, ValueScalar(value, "aten::fill_"));
}

Tensor ZeroInPlace(const Tensor& self) {
  constexpr const char* kOp = "aten::zero_";
  CheckHost(kOp, self);
  void* data = self.mutable_data();
  if (self.numel() == 0) return self;
  if (self.is_contiguous()) {
    std::memset(data, 0, static_cast<size_t>(self.nbytes()));
    return self;
  }
  FillWith(self, Scalar(int64_t{0}), kOp);
  return self;
}

}  // namespace

TB_REGISTER_KERNELS(copy) {
  const DeviceType cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::clone", cpu, Boxed<&Clone>(), TB_HERE);
  table.RegisterKernel("aten::lift_fresh_copy", cpu, Boxed<&LiftFreshCopy>(), TB_HERE);
  table.RegisterKernel("aten::_to_copy", cpu, Boxed<&ToCopy>(), TB_HERE);
  table.RegisterKernel("aten::copy", cpu, Boxed<&Copy>(), TB_HERE);
  table.RegisterKernel("aten::copy_", cpu, Boxed<&CopyInPlace>(), TB_HERE);
  table.RegisterKernel("aten::fill.Scalar", cpu, Boxed<&Fill>(), TB_HERE);
  table.RegisterKernel("aten::fill_.Scalar", cpu, Boxed<&FillInPlace>(), TB_HERE);
  table.RegisterKernel("aten::fill.Tensor", cpu, Boxed<&FillTensor>(), TB_HERE);
  table.RegisterKernel("aten::fill_.Tensor", cpu, Boxed<&FillTensorInPlace>(), TB_HERE);
  table.RegisterKernel("aten::zero_", cpu, Boxed<&ZeroInPlace>(), TB_HERE);
  table.RegisterKernel("aten::_local_scalar_dense", cpu, Boxed<&LocalScalar>(), TB_HERE);
}

}  // namespace tb
