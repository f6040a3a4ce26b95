// Shape ops that copy: aten::cat, stack, flip, roll, repeat, tril, triu (and tril_, triu_).
// Results are new C-contiguous tensors.
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

// A 1-d tensor with no elements: torch's cat skips these whatever the other shapes.
bool CatSkips(const Tensor& t) { return t.ndim() == 1 && t.numel() == 0; }

Tensor Cat(const std::vector<Tensor>& tensors, int64_t dim) {
  constexpr const char* kOp = "aten::cat";
  TB_CHECK(!tensors.empty(), ValueError) << kOp << ": expected a non-empty list of Tensors";
  DType dtype = tensors[0].dtype();
  size_t valid = tensors.size();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    CheckHost(kOp, t);
    TB_CHECK(t.ndim() > 0, ValueError)
        << kOp << ": zero-dimensional tensor (at position " << i << ") cannot be concatenated";
    dtype = PromoteTypes(dtype, t.dtype());
    if (valid == tensors.size() && !CatSkips(t)) valid = i;
  }
  if (valid == tensors.size()) return Tensor::Empty(tensors[0].shape(), dtype);
  const Tensor& ref = tensors[valid];
  dim = WrapDim(dim, ref.ndim(), kOp);
  Dims shape(ref.shape());
  int64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (CatSkips(t)) continue;
    TB_CHECK(t.ndim() == ref.ndim(), ValueError)
        << kOp << ": tensors must have the same number of dimensions: got " << ref.ndim() << " and "
        << t.ndim() << " (tensor " << i << ")";
    for (int64_t d = 0; d < ref.ndim(); ++d) {
      TB_CHECK(d == dim || t.size(d) == ref.size(d), ValueError)
          << kOp << ": sizes of tensors must match except in dimension " << dim
          << ". Expected size " << ref.size(d) << " but got size " << t.size(d)
          << " for tensor number " << i << " in the list";
    }
    total += t.size(dim);
  }
  shape[dim] = total;
  // torch's cat: the inputs' suggested memory format when they all agree, else C order.
  MemoryFormat format = SuggestMemoryFormat(tensors[0]);
  for (const Tensor& t : tensors) {
    if (SuggestMemoryFormat(t) != format) format = MemoryFormat::kContiguous;
  }
  Tensor out = EmptyDense(shape, FormatStrides(shape, format, kOp), dtype);
  if (out.numel() == 0) return out;
  int64_t offset = 0;
  for (const Tensor& t : tensors) {
    if (CatSkips(t)) continue;
    const int64_t len = t.size(dim);
    if (len > 0) CopySame(out.slice(dim, offset, offset + len), t);
    offset += len;
  }
  return out;
}

Tensor StackOp(const std::vector<Tensor>& tensors, int64_t dim) {
  constexpr const char* kOp = "aten::stack";
  TB_CHECK(!tensors.empty(), ValueError) << kOp << ": expected a non-empty list of Tensors";
  const Tensor& ref = tensors[0];
  dim = WrapDim(dim, ref.ndim() + 1, kOp);
  std::vector<Tensor> parts;
  parts.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    TB_CHECK(tensors[i].shape() == ref.shape(), ValueError)
        << kOp << ": expects each tensor to be equal size, but got " << ShapeString(ref.shape())
        << " at entry 0 and " << ShapeString(tensors[i].shape()) << " at entry " << i;
    parts.push_back(tensors[i].unsqueeze(dim));
  }
  if (dim < ref.ndim()) {
    // As torch: the inputs concatenated along `dim` (keeping their memory format), the new
    // dimension split off by a view.
    Tensor flat = Cat(tensors, dim);
    Dims sizes(parts[0].shape());
    sizes[dim] = static_cast<int64_t>(tensors.size());
    return flat.view(sizes);
  }
  return Cat(parts, dim);
}

Tensor Flip(const Tensor& self, const std::vector<int64_t>& dims) {
  constexpr const char* kOp = "aten::flip";
  CheckHost(kOp, self);
  std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(self.ndim(), 1)), false);
  Dims strides(self.strides());
  int64_t offset = 0;
  for (int64_t d : dims) {
    d = WrapDim(d, self.ndim(), kOp);
    TB_CHECK(!seen[d], ValueError) << kOp << ": dim " << d << " appears multiple times in the "
                                   << "list of dims " << ShapeString(dims);
    seen[d] = true;
    if (self.ndim() == 0 || self.size(d) == 0) continue;
    offset += (self.size(d) - 1) * strides[d];
    strides[d] = -strides[d];
  }
  if (self.numel() == 0 || self.ndim() == 0) return self.clone();
  Tensor out = EmptyLike(self, self.dtype(), MemoryFormat::kPreserve, kOp);
  CopySame(out, self.as_strided(self.shape(), strides, offset));
  return out;
}

// Rolls `src` by `shift` along `dim` into a new tensor.
Tensor RollDim(const Tensor& src, int64_t shift, int64_t dim) {
  Tensor out = Tensor::Empty(src.shape(), src.dtype());
  const int64_t n = src.size(dim);
  const int64_t s = ((shift % n) + n) % n;
  if (s == 0) {
    CopySame(out, src);
    return out;
  }
  CopySame(out.slice(dim, s, n, 1), src.slice(dim, 0, n - s, 1));
  CopySame(out.slice(dim, 0, s, 1), src.slice(dim, n - s, n, 1));
  return out;
}

Tensor Roll(const Tensor& self, const std::vector<int64_t>& shifts,
            const std::vector<int64_t>& dims) {
  constexpr const char* kOp = "aten::roll";
  CheckHost(kOp, self);
  TB_CHECK(!shifts.empty(), ValueError) << kOp << ": `shifts` required";
  if (dims.empty()) {
    TB_CHECK(shifts.size() == 1, ValueError)
        << kOp << ": shifts and dimensions must align. shifts: " << shifts.size() << ", dims: 0";
    if (self.numel() == 0) return self.clone();
    Tensor flat = self.reshape({-1});
    return RollDim(flat, shifts[0], 0).view(self.shape());
  }
  TB_CHECK(shifts.size() == dims.size(), ValueError)
      << kOp << ": shifts and dimensions must align. shifts: " << shifts.size()
      << ", dims: " << dims.size();
  for (int64_t d : dims) WrapDim(d, self.ndim(), kOp);
  if (self.numel() == 0 || self.ndim() == 0) return self.clone();
  Tensor cur = self;
  for (size_t i = 0; i < dims.size(); ++i) {
    cur = RollDim(cur, shifts[i], WrapDim(dims[i], self.ndim(), kOp));
  }
  return cur;
}

Tensor Repeat(const Tensor& self, const std::vector<int64_t>& repeats) {
  constexpr const char* kOp = "aten::repeat";
  CheckHost(kOp, self);
  const int64_t nd = static_cast<int64_t>(repeats.size());
  TB_CHECK(nd >= self.ndim(), ValueError)
      << kOp << ": number of dimensions of repeat dims (" << nd
      << ") can not be smaller than number of dimensions of tensor (" << self.ndim() << ")";
  const int64_t pad = nd - self.ndim();
  // self viewed as [r0, s0, r1, s1, ...] with stride 0 along each r: copying that view
  // contiguously lays the result out as [r0 * s0, r1 * s1, ...].
  Dims out_shape(static_cast<size_t>(nd)), big_shape, big_strides;
  for (int64_t i = 0; i < nd; ++i) {
    TB_CHECK(repeats[i] >= 0, ValueError)
        << kOp << ": repeats can not be negative, got " << ShapeString(repeats);
    const int64_t s = i < pad ? 1 : self.size(i - pad);
    const int64_t st = i < pad ? 0 : self.stride(i - pad);
    out_shape[i] = s * repeats[i];
    big_shape.push_back(repeats[i]);
    big_strides.push_back(0);
    big_shape.push_back(s);
    big_strides.push_back(st);
  }
  Tensor out = Tensor::Empty(out_shape, self.dtype());
  if (out.numel() == 0) return out;
  Tensor src = self.as_strided(big_shape, big_strides, 0);
  CopySame(out.view(big_shape), src);
  return out;
}

// Zeroes, in the contiguous `out`, the elements of each matrix outside the kept triangle.
void ZeroTriangle(const Tensor& out, int64_t k, bool lower) {
  const int64_t rows = out.size(-2), cols = out.size(-1);
  if (out.numel() == 0) return;
  const int64_t mats = out.numel() / (rows * cols);
  const int64_t es = out.element_size();
  char* base = static_cast<char*>(out.mutable_data());
  const int64_t total = mats * rows;
  // Past either end every row is kept or zeroed whole: clamped, i + k cannot overflow.
  k = std::clamp<int64_t>(k, -rows - 1, cols + 1);
#pragma omp parallel for if (total * cols > (1 << 16)) schedule(static)
  for (int64_t r = 0; r < total; ++r) {
    const int64_t i = r % rows;
    char* row = base + r * cols * es;
    int64_t b, e;  // zeroed columns [b, e)
    if (lower) {   // keep j - i <= k
      b = std::clamp<int64_t>(i + k + 1, 0, cols);
      e = cols;
    } else {  // keep j - i >= k
      b = 0;
      e = std::clamp<int64_t>(i + k, 0, cols);
    }
    if (e > b) std::memset(row + b * es, 0, static_cast<size_t>((e - b) * es));
  }
}

Tensor Triangle(const Tensor& self, int64_t k, bool lower, const char* op) {
  CheckHost(op, self);
  TB_CHECK(self.ndim() >= 2, ValueError)
      << op << ": input tensor must have at least 2 dimensions, got " << self.ndim();
  Tensor out = self.clone();
  ZeroTriangle(out, k, lower);
  return out;
}

Tensor Tril(const Tensor& self, int64_t k) { return Triangle(self, k, true, "aten::tril"); }
Tensor Triu(const Tensor& self, int64_t k) { return Triangle(self, k, false, "aten::triu"); }

Tensor TriangleInPlace(const Tensor& self, int64_t k, bool lower, const char* op) {
  self.mutable_data();  // BufferError on read-only memory
  Tensor out = Triangle(self, k, lower, op);
  CopySame(self, out);
  return self;
}

Tensor TrilInPlace(const Tensor& self, int64_t k) {
  return TriangleInPlace(self, k, true, "aten::tril_");
}
Tensor TriuInPlace(const Tensor& self, int64_t k) {
  return TriangleInPlace(self, k, false, "aten::triu_");
}

}  // namespace

TB_REGISTER_KERNELS(shape_ops) {
  const DeviceType cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::cat", cpu, Boxed<&Cat>(), TB_HERE);
  table.RegisterKernel("aten::stack", cpu, Boxed<&StackOp>(), TB_HERE);
  table.RegisterKernel("aten::flip", cpu, Boxed<&Flip>(), TB_HERE);
  table.RegisterKernel("aten::roll", cpu, Boxed<&Roll>(), TB_HERE);
  table.RegisterKernel("aten::repeat", cpu, Boxed<&Repeat>(), TB_HERE);
  table.RegisterKernel("aten::tril", cpu, Boxed<&Tril>(), TB_HERE);
  table.RegisterKernel("aten::triu", cpu, Boxed<&Triu>(), TB_HERE);
  table.RegisterKernel("aten::tril_", cpu, Boxed<&TrilInPlace>(), TB_HERE);
  table.RegisterKernel("aten::triu_", cpu, Boxed<&TriuInPlace>(), TB_HERE);
}

}  // namespace tb
