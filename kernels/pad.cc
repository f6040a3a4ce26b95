// Padding: aten::constant_pad_nd, reflection_pad1d/2d/3d, replication_pad1d/2d/3d.
//
// constant_pad_nd fills the output and copies the kept part of the input in (negative pads
// crop). The reflection / replication pads are separable: each padded dimension in turn is
// a gather of whole inner blocks through a source-index map.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "dispatch/op_table.h"
#include "kernels/common_internal.h"
#include "kernels/layout.h"
#include "kernels/loops_internal.h"
#include "kernels/promote_broadcast.h"

namespace tb {
namespace {

using kernels::CheckHost;
using kernels::CopySame;

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
  if (out.numel() == 0) return out;
  Tensor src = self, dst = out;
  bool full_cover = true;  // the input covers the whole output: no fill needed
  for (int64_t i = 0; i < npad; ++i) {
    const int64_t d = nd - 1 - i, l = pad[2 * i], r = pad[2 * i + 1];
    if (l > 0 || r > 0) full_cover = false;
    src = src.slice(d, std::max<int64_t>(0, -l), self.size(d) - std::max<int64_t>(0, -r), 1);
    dst = dst.slice(d, std::max<int64_t>(0, l), shape[d] - std::max<int64_t>(0, r), 1);
  }
  if (!full_cover || src.numel() == 0) CopyCast(out, WrapNumber(Value(value)));
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
