// The kernels' shared helpers (declared in kernels/common_internal.h).
#include "kernels/common_internal.h"

#include "bridge/device.h"
#include "kernels/loops_internal.h"
#include "kernels/promote_broadcast.h"

namespace tb::kernels {
namespace {

// The byte range [lo, hi) a tensor with elements occupies.
void ByteRange(const Tensor& t, uintptr_t* lo, uintptr_t* hi) {
  int64_t min_off = 0, max_off = 0;
  for (int64_t d = 0; d < t.ndim(); ++d) {
    const int64_t span = (t.size(d) - 1) * t.stride(d);
    (span < 0 ? min_off : max_off) += span;
  }
  const auto base = reinterpret_cast<uintptr_t>(t.data());
  *lo = base + min_off * t.element_size();
  *hi = base + (max_off + 1) * t.element_size();
}

}  // namespace

void CheckHostTensor(const char* op, const Tensor& t) {
  if (!t.defined()) return;
  TB_CHECK_SUPPORTED(t.device().is_host_accessible())
      << op << ": tensors on " << DeviceString(t.device())
      << " are not supported; tensorbridge computes on the CPU";
}

void CheckByteSized(const char* op, const Tensor& t) {
  TB_CHECK_SUPPORTED(!IsSubByte(t.dtype()))
      << op << ": the packed sub-byte dtype " << DTypeName(t.dtype()) << " is not supported";
}

void CheckFloat(const char* op, const Tensor& t) {
  TB_CHECK_SUPPORTED(IsFloatingPoint(t.dtype()))
      << op << ": dtype " << DTypeName(t.dtype()) << " is not supported";
}

void CheckOptions(const char* op, const Value& layout, const Value& device) {
  if (device.tag() == Value::Tag::kDevice && !device.to_device().is_cpu()) {
    TB_DECLINE << op << ": device " << DeviceString(device.to_device())
               << " is not supported; tensorbridge computes on the CPU";
  }
  if (device.tag() == Value::Tag::kString && device.to_string() != "cpu") {
    TB_DECLINE << op << ": device " << device.to_string()
               << " is not supported; tensorbridge computes on the CPU";
  }
  if (layout.tag() == Value::Tag::kString && layout.to_string() != "strided") {
    TB_THROW(NotImplementedError) << op << ": layout " << layout.to_string()
                                  << " is not supported (strided only)";
  }
}

void CopyBits(const Tensor& dst, const Tensor& src) {
  if (CopyContiguousRows(dst, src)) return;
  auto same = [](auto v) { return v; };
  switch (dst.element_size()) {
    case 1: Map<uint8_t, uint8_t>(dst, same, src); return;
    case 2: Map<uint16_t, uint16_t>(dst, same, src); return;
    case 4: Map<uint32_t, uint32_t>(dst, same, src); return;
    case 8: Map<uint64_t, uint64_t>(dst, same, src); return;
    case 16: Map<Bits128, Bits128>(dst, same, src); return;
    default: dst.copy_from(src);
  }
}

void CopySame(const Tensor& dst, const Tensor& src) {
  if (src.dtype() != dst.dtype() || IsSubByte(dst.dtype())) {
    CopyCast(dst, src);
    return;
  }
  CopyBits(dst, src.expand(dst.shape()));
}

bool MayOverlap(const Tensor& a, const Tensor& b) {
  if (a.numel() == 0 || b.numel() == 0 || a.data() == nullptr || b.data() == nullptr) {
    return false;
  }
  uintptr_t alo, ahi, blo, bhi;
  ByteRange(a, &alo, &ahi);
  ByteRange(b, &blo, &bhi);
  return alo < bhi && blo < ahi;
}

}  // namespace tb::kernels
