// Padding: aten::constant_pad_nd, reflection_pad1d/2d/3d, replication_pad1d/2d/3d.
//
// constant_pad_nd writes a C-contiguous output row by row (the left pad, the input's row, the
// right pad; rows outside the input all pad), each byte once; other layouts fill the output and
// copy the kept part of the input in (negative pads crop). The reflection / replication pads are
// separable: each padded dimension in turn is a gather of whole inner blocks through a source-index
// map.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "dispatch/op_table.h"
#include "kernels/common_internal.h"
#include "kernels/factory_internal.h"
#include "kernels/layout.h"
#include "kernels/loops_internal.h"
#include "kernels/promote_broadcast.h"

namespace tb {
namespace {

using kernels::CheckHost;
using kernels::CopySame;

// An element of `Bytes` bytes, copied as a whole.
template <size_t Bytes>
struct Item {
  unsigned char b[Bytes];
};

// PadRows' loop on elements of type U: planes (every dim but the last two) split across
// threads, each plane's outer indices found once, then its rows in order.
template <typename U>
void PadRowsT(const Tensor& out, const Tensor& self, const Dims& left, const U* fill) {
  const int64_t nd = self.ndim(), width = out.size(nd - 1);
  const int64_t height = nd >= 2 ? out.size(nd - 2) : 1, rows = out.numel() / width;
  const int64_t in_height = nd >= 2 ? self.size(nd - 2) : 1, top = nd >= 2 ? left[nd - 2] : 0;
  const int64_t row_stride = nd >= 2 ? self.stride(nd - 2) : 0, l = left[nd - 1];
  // The output columns the input covers: [lo, hi), from input column lo - l.
  const int64_t lo = std::clamp<int64_t>(l, 0, width),
                hi = std::clamp<int64_t>(self.size(nd - 1) + l, lo, width);
  const U* src = static_cast<const U*>(self.data());
  U* dst = static_cast<U*>(out.mutable_data());
  kernels::ParallelFor(rows / height, out.numel() > kernels::kGrain, [&](int64_t plane) {
    int64_t offset = 0, rest = plane;
    bool inside = hi > lo;
    for (int64_t d = nd - 3; d >= 0 && inside; --d) {
      const int64_t i = rest % out.size(d) - left[d];
      rest /= out.size(d);
      inside = i >= 0 && i < self.size(d);
      offset += i * self.stride(d);
    }
    for (int64_t h = 0; h < height; ++h) {
      U* o = dst + (plane * height + h) * width;
      const int64_t i = h - top;
      if (!inside || i < 0 || i >= in_height) {
        std::copy(fill, fill + width, o);
        continue;
      }
      const U* in = src + offset + i * row_stride + (lo - l);
      for (int64_t j = 0; j < lo; ++j) o[j] = fill[j];
      std::copy(in, in + (hi - lo), o + lo);
      for (int64_t j = hi; j < width; ++j) o[j] = fill[j];
    }
  });
}

// constant_pad_nd into a C-contiguous `out` whose input rows (last dim) are contiguous: per
// output row, the left pad, the input's row and the right pad (a row outside the input along
// an outer dim is all pad), each output byte written once, the pad elements copied from one
// row of the value. False (nothing written) for layouts it does not take.
bool PadRows(const Tensor& out, const Tensor& self, const std::vector<int64_t>& pad,
             const Scalar& value) {
  const int64_t nd = self.ndim();
  if (nd == 0 || !out.is_contiguous() || IsSubByte(self.dtype()) || IsStorageOnly(self.dtype()) ||
      (self.size(nd - 1) > 1 && self.stride(nd - 1) != 1)) {
    return false;
  }
  Dims left(nd, 0);  // per dim: output index - input index
  for (size_t i = 0; i < pad.size() / 2; ++i) left[nd - 1 - static_cast<int64_t>(i)] = pad[2 * i];
  Tensor row = Tensor::Empty({out.size(nd - 1)}, self.dtype());
  kernels::FillScalar(row, value);
  const void* fill = row.data();
  switch (self.element_size()) {
    case 1: PadRowsT(out, self, left, static_cast<const Item<1>*>(fill)); return true;
    case 2: PadRowsT(out, self, left, static_cast<const Item<2>*>(fill)); return true;
    case 4: PadRowsT(out, self, left, static_cast<const Item<4>*>(fill)); return true;
    case 8: PadRowsT(out, self, left, static_cast<const Item<8>*>(fill)); return true;
    case 16: PadRowsT(out, self, left, static_cast<const Item<16>*>(fill)); return true;
    default: return false;
  }
}

Tensor ConstantPadNd(const Tensor& self, const std::vector<int64_t>& pad, const Scalar& value) {
  constexpr const char* kOp = "aten::constant_pad_nd";
  CheckHost(kOp, self);
  TB_CHECK(pad.size() % 2 == 0, ValueError)
      << kOp << ": length of pad must be even but instead it equals " << pad.size();
  const int64_t nd = self.ndim();
  const int64_t npad = static_cast<int64_t>(pad.size()) / 2;
  TB_CHECK(npad <= nd, ValueError)
      << kOp << ": length of pad should be no more than twice the number of dimensions of the "
      << "input. Pad length is " << pad.size() << " while the input has " << nd << " dimensions.";
  Dims shape(self.shape());
  for (int64_t i = 0; i < npad; ++i) {
    const int64_t d = nd - 1 - i;
    shape[d] = self.size(d) + pad[2 * i] + pad[2 * i + 1];
    TB_CHECK(shape[d] >= 0, ValueError)
        << kOp << ": the input size " << self.size(d) << ", plus negative padding " << pad[2 * i]
        << " and " << pad[2 * i + 1] << " resulted in a negative output size, "
        << "which is invalid. Check dimension " << d << " of your input.";
  }
  // Laid out in self's suggested memory format (channels-last stays so), as torch's.
  Tensor out =
      EmptyDense(shape, FormatStrides(shape, SuggestMemoryFormat(self), kOp), self.dtype());
  if (out.numel() == 0 || PadRows(out, self, pad, value)) return out;
  Tensor src = self, dst = out;
  bool full_cover = true;  // the input covers the whole output: no fill needed
  for (int64_t i = 0; i < npad; ++i) {
    const int64_t d = nd - 1 - i, l = pad[2 * i], r = pad[2 * i + 1];
    if (l > 0 || r > 0) full_cover = false;
    src = src.slice(d, std::max<int64_t>(0, -l), self.size(d) - std::max<int64_t>(0, -r), 1);
    dst = dst.slice(d, std::max<int64_t>(0, l), shape[d] - std::max<int64_t>(0, r), 1);
  }
  if (!full_cover || src.numel() == 0) kernels::FillScalar(out, value);
  if (src.numel() > 0) CopySame(dst, src);
  return out;
}

// Reflection (mirror without repeating the edge) or replication (repeat the edge) padding
// of the last `k` dimensions; `self` has k + 1 or k + 2 dimensions.
Tensor IndexPad(const Tensor& self, const std::vector<int64_t>& padding, int64_t k, bool reflect,
                const char* op) {
  CheckHost(op, self);
  TB_CHECK(static_cast<int64_t>(padding.size()) == 2 * k, ValueError)
      << op << ": padding size is expected to be " << 2 * k << ", but got " << padding.size();
  const int64_t nd = self.ndim();
  TB_CHECK(nd == k + 1 || nd == k + 2, ValueError)
      << op << ": expected " << k + 1 << "D or " << k + 2 << "D (batch mode) tensor, but got " << nd
      << "D input of shape " << ShapeString(self.shape());
  // Only a batch dimension may be empty (torch's check).
  for (int64_t d = nd == k + 2 ? 1 : 0; d < nd; ++d) {
    TB_CHECK(self.size(d) != 0, ValueError)
        << op << ": expected a tensor with possibly 0 batch size and other non-zero dimensions, "
        << "got shape " << ShapeString(self.shape());
  }
  Tensor cur = self;
  for (int64_t i = 0; i < k; ++i) {
    const int64_t d = nd - 1 - i, l = padding[2 * i], r = padding[2 * i + 1];
    const int64_t n = self.size(d), m = n + l + r;
    if (reflect) {
      TB_CHECK(l < n && r < n, ValueError)
          << op << ": padding size should be less than the corresponding input dimension, but "
          << "got: padding (" << l << ", " << r << ") at dimension " << d << " of input "
          << ShapeString(self.shape());
    }
    TB_CHECK(m >= 1, ValueError) << op << ": input (size " << n << " in dimension " << d
                                 << ") is too small for the "
                                 << "padding (" << l << ", " << r << "); the output size would be "
                                 << m;
    std::vector<int64_t> index(static_cast<size_t>(m));
    for (int64_t j = 0; j < m; ++j) {
      int64_t x = j - l;
      if (reflect) {
        if (x < 0) x = -x;
        if (x >= n) x = 2 * (n - 1) - x;
      } else {
        x = std::clamp<int64_t>(x, 0, n - 1);
      }
      index[j] = x;
    }
    cur = GatherBlocks(cur, d, index);
  }
  return cur;
}

Tensor ReflectionPad1d(const Tensor& self, const std::vector<int64_t>& p) {
  return IndexPad(self, p, 1, true, "aten::reflection_pad1d");
}
Tensor ReflectionPad2d(const Tensor& self, const std::vector<int64_t>& p) {
  return IndexPad(self, p, 2, true, "aten::reflection_pad2d");
}
Tensor ReflectionPad3d(const Tensor& self, const std::vector<int64_t>& p) {
  return IndexPad(self, p, 3, true, "aten::reflection_pad3d");
}
Tensor ReplicationPad1d(const Tensor& self, const std::vector<int64_t>& p) {
  return IndexPad(self, p, 1, false, "aten::replication_pad1d");
}
Tensor ReplicationPad2d(const Tensor& self, const std::vector<int64_t>& p) {
  return IndexPad(self, p, 2, false, "aten::replication_pad2d");
}
Tensor ReplicationPad3d(const Tensor& self, const std::vector<int64_t>& p) {
  return IndexPad(self, p, 3, false, "aten::replication_pad3d");
}

}  // namespace

TB_REGISTER_KERNELS(pad) {
  const DeviceType cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::constant_pad_nd", cpu, Boxed<&ConstantPadNd>(), TB_HERE);
  table.RegisterKernel("aten::reflection_pad1d", cpu, Boxed<&ReflectionPad1d>(), TB_HERE);
  table.RegisterKernel("aten::reflection_pad2d", cpu, Boxed<&ReflectionPad2d>(), TB_HERE);
  table.RegisterKernel("aten::reflection_pad3d", cpu, Boxed<&ReflectionPad3d>(), TB_HERE);
  table.RegisterKernel("aten::replication_pad1d", cpu, Boxed<&ReplicationPad1d>(), TB_HERE);
  table.RegisterKernel("aten::replication_pad2d", cpu, Boxed<&ReplicationPad2d>(), TB_HERE);
  table.RegisterKernel("aten::replication_pad3d", cpu, Boxed<&ReplicationPad3d>(), TB_HERE);
}

}  // namespace tb
