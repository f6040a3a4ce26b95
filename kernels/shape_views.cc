// View ops: aten::view, _unsafe_view, _reshape_alias, reshape, alias, detach, lift_fresh,
// as_strided, expand, permute, select.int, slice.Tensor, narrow, squeeze (default, dim, dims),
// unsqueeze, transpose.int, t, diagonal, unfold, split_with_sizes, split.Tensor (and their
// unsafe_ forms), unbind.int,
// and the metadata queries sym_size.int, sym_stride.int, sym_numel, sym_storage_offset.
//
// The in-place metadata ops squeeze_ (default, dim, dims), unsqueeze_, t_, transpose_,
// swapdims_, swapaxes_, resize_ and resize_as_ change the tensor object, not its data: their
// kernels return the view with self's new geometry, and the caller moves its own tensor onto it
// (tensorbridge.Tensor and tensorbridge.testing.TableMode do; a C++ caller takes the result as the
// new self).
//
// Every op here except _unsafe_view / reshape (which copy only when strides do not allow a
// view) returns tensors sharing storage with `self`: the tensor subclass built on the table
// relies on that aliasing.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dispatch/op_table.h"

namespace tb {
namespace {

// A new Tensor object over the same elements, without the wrapped-number mark.
Tensor Alias(const Tensor& self) {
  Tensor out = self;
  out.set_wrapped_number(false);
  return out;
}

// Elements between the storage's first byte and `t`'s first element. For memory lent by
// another framework the storage starts at the lowest byte the lent tensor reaches, so this
// is the offset within what tensorbridge was given.
int64_t StorageOffset(const Tensor& t) {
  const auto& s = t.storage();
  if (s == nullptr || s->data() == nullptr || t.data() == nullptr) return 0;
  auto diff = static_cast<const char*>(t.data()) - static_cast<const char*>(s->data());
  return diff / t.element_size();
}

Tensor View(const Tensor& self, const std::vector<int64_t>& size) { return self.view(size); }

Tensor Reshape(const Tensor& self, const std::vector<int64_t>& size) { return self.reshape(size); }

Tensor AsStrided(const Tensor& self, const std::vector<int64_t>& size,
                 const std::vector<int64_t>& stride, std::optional<int64_t> storage_offset) {
  constexpr const char* kOp = "aten::as_strided";
  TB_CHECK(size.size() == stride.size(), ValueError)
      << kOp << ": size " << ShapeString(size) << " and stride " << ShapeString(stride)
      << " differ in length";
  for (int64_t s : stride) {
    TB_CHECK(s >= 0, ValueError) << kOp << ": negative strides are not supported, got "
                                 << ShapeString(stride);
  }
  if (storage_offset) {
    TB_CHECK(*storage_offset >= 0, ValueError)
        << kOp << ": storage_offset must be non-negative, got " << *storage_offset;
  }
  const int64_t numel = ShapeNumel(size);
  if (numel > 0) {
    // Tensor::as_strided checks the extent against the storage when it knows the storage's
    // size; a storage of unknown size cannot back a non-empty view.
    TB_CHECK(self.storage() != nullptr && self.storage()->data() != nullptr &&
                 self.storage()->nbytes() > 0,
             ValueError)
        << kOp << ": the view of shape " << ShapeString(size)
        << " reaches outside a storage of 0 bytes";
  }
  const int64_t rel = storage_offset ? *storage_offset - StorageOffset(self) : 0;
  return self.as_strided(size, stride, rel);
}

Tensor ReshapeAlias(const Tensor& self, const std::vector<int64_t>& size,
                    const std::vector<int64_t>& stride) {
  return AsStrided(self, size, stride, std::nullopt);
}

Tensor Expand(const Tensor& self, const std::vector<int64_t>& size, bool /*implicit*/) {
  return self.expand(size);
}

Tensor Permute(const Tensor& self, const std::vector<int64_t>& dims) { return self.permute(dims); }

Tensor Select(const Tensor& self, int64_t dim, int64_t index) { return self.select(dim, index); }

Tensor Slice(const Tensor& self, int64_t dim, std::optional<int64_t> start,
             std::optional<int64_t> end, int64_t step) {
  return self.slice(dim, start, end, step);
}

Tensor Narrow(const Tensor& self, int64_t dim, int64_t start, int64_t length) {
  constexpr const char* kOp = "aten::narrow";
  TB_CHECK(self.ndim() > 0, IndexError) << kOp << ": cannot narrow a 0-d tensor";
  dim = WrapDim(dim, self.ndim(), kOp);
  const int64_t n = self.size(dim);
  TB_CHECK(start >= -n && start <= n, IndexError)
      << kOp << ": start " << start << " out of range for dimension " << dim << " of size " << n;
  if (start < 0) start += n;
  TB_CHECK(length >= 0 && start <= n - length, IndexError)
      << kOp << ": start (" << start << ") + length (" << length << ") exceeds dimension size ("
      << n << ")";
  return self.slice(dim, start, start + length, 1);
}

Tensor SqueezeAll(const Tensor& self) { return self.squeeze(); }

Tensor SqueezeDim(const Tensor& self, int64_t dim) {
  if (self.ndim() == 0) {
    WrapDim(dim, 0, "aten::squeeze");  // validates: 0 and -1 only
    return Alias(self);
  }
  return self.squeeze(dim);
}

Tensor SqueezeDims(const Tensor& self, const std::vector<int64_t>& dims) {
  constexpr const char* kOp = "aten::squeeze";
  std::vector<int64_t> wrapped;
  wrapped.reserve(dims.size());
  for (int64_t d : dims) wrapped.push_back(WrapDim(d, self.ndim(), kOp));
  if (self.ndim() == 0) return Alias(self);
  std::sort(wrapped.begin(), wrapped.end());
  wrapped.erase(std::unique(wrapped.begin(), wrapped.end()), wrapped.end());
  Tensor out = Alias(self);
  // Highest first, so the lower dimension numbers stay valid.
  for (auto it = wrapped.rbegin(); it != wrapped.rend(); ++it) out = out.squeeze(*it);
  return out;
}

Tensor Unsqueeze(const Tensor& self, int64_t dim) { return self.unsqueeze(dim); }

Tensor Transpose(const Tensor& self, int64_t dim0, int64_t dim1) {
  return self.transpose(dim0, dim1);
}

Tensor TransposeT(const Tensor& self) {
  TB_CHECK(self.ndim() <= 2, ValueError)
      << "aten::t: expects a tensor with <= 2 dimensions, but self is " << self.ndim() << "D";
  if (self.ndim() < 2) return Alias(self);
  return self.transpose(0, 1);
}

Tensor Diagonal(const Tensor& self, int64_t offset, int64_t dim1, int64_t dim2) {
  return self.diagonal(offset, dim1, dim2);
}

Tensor Unfold(const Tensor& self, int64_t dimension, int64_t size, int64_t step) {
  constexpr const char* kOp = "aten::unfold";
  const int64_t nd = self.ndim();
  const int64_t d = WrapDim(dimension, nd, kOp);
  const int64_t n = nd == 0 ? 1 : self.size(d);
  const int64_t st = nd == 0 ? 1 : self.stride(d);
  TB_CHECK(size >= 0 && size <= n, ValueError) << kOp << ": maximum size for tensor at dimension "
                                               << d << " is " << n << " but size is " << size;
  TB_CHECK(step > 0, ValueError) << kOp << ": step is " << step << " but must be > 0";
  Dims shape, strides;
  if (nd == 0) {
    shape.push_back(size);
    strides.push_back(1);
  } else {
    shape = Dims(self.shape());
    strides = Dims(self.strides());
    shape[d] = (n - size) / step + 1;
    strides[d] = st * step;
    shape.push_back(size);
    strides.push_back(st);
  }
  return self.as_strided(shape, strides, 0);
}

std::vector<Tensor> SplitWithSizes(const Tensor& self, const std::vector<int64_t>& sizes,
                                   int64_t dim) {
  constexpr const char* kOp = "aten::split_with_sizes";
  TB_CHECK(self.ndim() > 0, ValueError) << kOp << ": cannot split a 0-d tensor";
  dim = WrapDim(dim, self.ndim(), kOp);
  const int64_t n = self.size(dim);
  int64_t total = 0;
  for (int64_t s : sizes) {
    TB_CHECK(s >= 0, ValueError) << kOp << ": split sizes must be non-negative, got "
                                 << ShapeString(sizes);
    total += s;
  }
  TB_CHECK(total == n, ValueError)
      << kOp << ": split sizes " << ShapeString(sizes) << " must sum to the size " << n
      << " of dimension " << dim << " (they sum to " << total << ")";
  std::vector<Tensor> out;
  out.reserve(sizes.size());
  int64_t start = 0;
  for (int64_t s : sizes) {
    out.push_back(self.slice(dim, start, start + s, 1));
    start += s;
  }
  return out;
}

std::vector<Tensor> Split(const Tensor& self, int64_t split_size, int64_t dim) {
  constexpr const char* kOp = "aten::split";
  TB_CHECK(self.ndim() > 0, ValueError) << kOp << ": cannot split a 0-d tensor";
  dim = WrapDim(dim, self.ndim(), kOp);
  const int64_t n = self.size(dim);
  TB_CHECK(split_size >= 0, ValueError)
      << kOp << ": split_size must be non-negative, got " << split_size;
  TB_CHECK(split_size > 0 || n == 0, ValueError)
      << kOp << ": split_size can only be 0 if dimension size is 0, but got dimension size " << n;
  const int64_t chunks =
      split_size > 0 ? std::max<int64_t>((n + split_size - 1) / split_size, 1) : 1;
  std::vector<Tensor> out;
  out.reserve(static_cast<size_t>(chunks));
  for (int64_t i = 0; i < chunks; ++i) {
    const int64_t start = i * split_size;
    out.push_back(self.slice(dim, start, std::min(n, start + split_size), 1));
  }
  return out;
}

std::vector<Tensor> Unbind(const Tensor& self, int64_t dim) {
  constexpr const char* kOp = "aten::unbind";
  TB_CHECK(self.ndim() > 0, ValueError)
      << kOp << ": dimension specified as " << dim << " but tensor has no dimensions";
  dim = WrapDim(dim, self.ndim(), kOp);
  std::vector<Tensor> out;
  out.reserve(static_cast<size_t>(self.size(dim)));
  for (int64_t i = 0; i < self.size(dim); ++i) out.push_back(self.select(dim, i));
  return out;
}

int64_t SymSize(const Tensor& self, int64_t dim) {
  TB_CHECK(self.ndim() > 0, IndexError)
      << "aten::sym_size: dimension specified as " << dim << " but tensor has no dimensions";
  return self.size(dim);
}

int64_t SymStride(const Tensor& self, int64_t dim) {
  TB_CHECK(self.ndim() > 0, IndexError)
      << "aten::sym_stride: dimension specified as " << dim << " but tensor has no dimensions";
  return self.stride(dim);
}

int64_t SymNumel(const Tensor& self) { return self.numel(); }

int64_t SymStorageOffset(const Tensor& self) { return StorageOffset(self); }

// ---- resize_ / resize_as_ --------------------------------------------------------------------

// torch's resize_: the same sizes keep self as it is (unless a memory format restrides it);
// other sizes take the memory format's strides (contiguous by default) at self's first element.
// torch grows the storage when the new sizes need more; the memory here belongs to whoever lent
// it, so a resize that reaches past the storage raises a BufferError instead.
Tensor ResizeImpl(const char* op, const Tensor& self, IntArrayRef size,
                  const std::optional<std::string>& memory_format) {
  for (int64_t n : size) {
    TB_CHECK(n >= 0, ValueError) << op << ": Trying to create tensor with negative dimension " << n
                                 << ": " << ShapeString(size);
  }
  const std::string format = memory_format.value_or("contiguous_format");
  const int64_t nd = static_cast<int64_t>(size.size());
  Dims order(nd);  // dims from the outermost in memory to the innermost
  for (int64_t d = 0; d < nd; ++d) order[d] = d;
  if (format == "channels_last" || format == "channels_last_3d") {
    TB_CHECK(nd == (format == "channels_last" ? 4 : 5), ValueError)
        << op << ": memory format " << format << " needs a " << (format == "channels_last" ? 4 : 5)
        << "-d size, got " << ShapeString(size);
    for (int64_t d = 1; d + 1 < nd; ++d) order[d] = d + 1;  // N, spatial..., C
    order[nd - 1] = 1;
  } else {
    TB_CHECK(format == "contiguous_format", ValueError)
        << op << ": Unsupported memory format " << format;
  }
  if (!memory_format && size == self.shape()) return Alias(self);
  Dims strides(nd);
  int64_t step = 1;
  bool overflow = false;
  for (int64_t i = nd - 1; i >= 0; --i) {
    strides[order[i]] = step;
    overflow |= __builtin_mul_overflow(step, std::max<int64_t>(size[order[i]], 1), &step);
  }
  const int64_t numel = ShapeNumel(size);
  const auto& storage = self.storage();
  const int64_t have = storage == nullptr ? 0 : static_cast<int64_t>(storage->nbytes());
  int64_t need = 0;
  overflow |= __builtin_add_overflow(StorageOffset(self), numel, &need);
  overflow |= __builtin_mul_overflow(need, static_cast<int64_t>(self.element_size()), &need);
  TB_CHECK(!overflow, RuntimeError)
      << op << ": Storage size calculation overflowed with sizes=" << ShapeString(size);
  TB_CHECK(numel == 0 || need <= have, BufferError)
      << op << ": cannot resize a tensor of shape " << ShapeString(self.shape()) << " to "
      << ShapeString(size) << ": that needs " << need << " bytes of storage, and the memory it "
      << "wraps (" << have << " bytes) belongs to the framework that lent it and cannot grow; "
      << "make a new tensor";
  return self.as_strided(size, strides, 0);
}

Tensor Resize(const Tensor& self, const std::vector<int64_t>& size,
              const std::optional<std::string>& memory_format) {
  return ResizeImpl("aten::resize_", self, size, memory_format);
}

Tensor ResizeAs(const Tensor& self, const Tensor& the_template,
                const std::optional<std::string>& memory_format) {
  return ResizeImpl("aten::resize_as_", self, the_template.shape(), memory_format);
}

}  // namespace

TB_REGISTER_KERNELS(shape) {
  const DeviceType cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::view", cpu, Boxed<&View>(), TB_HERE);
  table.RegisterKernel("aten::_unsafe_view", cpu, Boxed<&Reshape>(), TB_HERE);
  table.RegisterKernel("aten::reshape", cpu, Boxed<&Reshape>(), TB_HERE);
  table.RegisterKernel("aten::_reshape_alias", cpu, Boxed<&ReshapeAlias>(), TB_HERE);
  table.RegisterKernel("aten::alias", cpu, Boxed<&Alias>(), TB_HERE);
  table.RegisterKernel("aten::detach", cpu, Boxed<&Alias>(), TB_HERE);
  table.RegisterKernel("aten::lift_fresh", cpu, Boxed<&Alias>(), TB_HERE);
  table.RegisterKernel("aten::as_strided", cpu, Boxed<&AsStrided>(), TB_HERE);
  table.RegisterKernel("aten::expand", cpu, Boxed<&Expand>(), TB_HERE);
  table.RegisterKernel("aten::permute", cpu, Boxed<&Permute>(), TB_HERE);
  table.RegisterKernel("aten::select.int", cpu, Boxed<&Select>(), TB_HERE);
  table.RegisterKernel("aten::slice.Tensor", cpu, Boxed<&Slice>(), TB_HERE);
  table.RegisterKernel("aten::narrow", cpu, Boxed<&Narrow>(), TB_HERE);
  table.RegisterKernel("aten::squeeze", cpu, Boxed<&SqueezeAll>(), TB_HERE);
  table.RegisterKernel("aten::squeeze.dim", cpu, Boxed<&SqueezeDim>(), TB_HERE);
  table.RegisterKernel("aten::squeeze.dims", cpu, Boxed<&SqueezeDims>(), TB_HERE);
  table.RegisterKernel("aten::unsqueeze", cpu, Boxed<&Unsqueeze>(), TB_HERE);
  table.RegisterKernel("aten::transpose.int", cpu, Boxed<&Transpose>(), TB_HERE);
  table.RegisterKernel("aten::t", cpu, Boxed<&TransposeT>(), TB_HERE);
  table.RegisterKernel("aten::diagonal", cpu, Boxed<&Diagonal>(), TB_HERE);
  table.RegisterKernel("aten::unfold", cpu, Boxed<&Unfold>(), TB_HERE);
  table.RegisterKernel("aten::split_with_sizes", cpu, Boxed<&SplitWithSizes>(), TB_HERE);
  table.RegisterKernel("aten::split.Tensor", cpu, Boxed<&Split>(), TB_HERE);
  // The unsafe variants differ only in autograd's view tracking, which is torch's side.
  table.RegisterKernel("aten::unsafe_split_with_sizes", cpu, Boxed<&SplitWithSizes>(), TB_HERE);
  table.RegisterKernel("aten::unsafe_split.Tensor", cpu, Boxed<&Split>(), TB_HERE);
  table.RegisterKernel("aten::unbind.int", cpu, Boxed<&Unbind>(), TB_HERE);
  table.RegisterKernel("aten::sym_size.int", cpu, Boxed<&SymSize>(), TB_HERE);
  table.RegisterKernel("aten::sym_stride.int", cpu, Boxed<&SymStride>(), TB_HERE);
  table.RegisterKernel("aten::sym_numel", cpu, Boxed<&SymNumel>(), TB_HERE);
  table.RegisterKernel("aten::sym_storage_offset", cpu, Boxed<&SymStorageOffset>(), TB_HERE);
  table.RegisterKernel("aten::squeeze_", cpu, Boxed<&SqueezeAll>(), TB_HERE);
  table.RegisterKernel("aten::squeeze_.dim", cpu, Boxed<&SqueezeDim>(), TB_HERE);
  table.RegisterKernel("aten::squeeze_.dims", cpu, Boxed<&SqueezeDims>(), TB_HERE);
  table.RegisterKernel("aten::unsqueeze_", cpu, Boxed<&Unsqueeze>(), TB_HERE);
  table.RegisterKernel("aten::t_", cpu, Boxed<&TransposeT>(), TB_HERE);
  table.RegisterKernel("aten::transpose_", cpu, Boxed<&Transpose>(), TB_HERE);
  table.RegisterKernel("aten::swapdims_", cpu, Boxed<&Transpose>(), TB_HERE);
  table.RegisterKernel("aten::swapaxes_", cpu, Boxed<&Transpose>(), TB_HERE);
  table.RegisterKernel("aten::resize_", cpu, Boxed<&Resize>(), TB_HERE);
  table.RegisterKernel("aten::resize_as_", cpu, Boxed<&ResizeAs>(), TB_HERE);
}

}  // namespace tb
