// The memory layouts PyTorch gives the tensors its kernels allocate, for kernels that allocate
// results. Compiled plans are traced with torch's strides (its meta functions); a result laid
// out otherwise is copied into them, so kernels follow torch's rules:
//
// - element-wise ops (TensorIterator): the result is dense and follows the stride order of
//   the inputs, the first input deciding, later ones breaking its ties (ElementwiseOrder);
// - `*_like` factories, clone and conversions with memory_format=preserve: the strides of a
//   non-overlapping and dense source, else dense strides in the source's stride order
//   (LikeStrides).
//
// Layouts are compared on dimensions of size > 1: a dimension of size 1 may have any stride.
#pragma once

#include <initializer_list>
#include <string_view>
#include <vector>

#include "bridge/tensor.h"
#include "dispatch/value.h"

namespace tb {

// torch.memory_format.
enum class MemoryFormat { kPreserve, kContiguous, kChannelsLast, kChannelsLast3d };

// A memory_format argument by the name torch prints ("preserve_format", "contiguous_format",
// "channels_last", "channels_last_3d"; empty: preserve). ValueError naming `op` otherwise.
TB_API MemoryFormat ParseMemoryFormat(std::string_view name, const char* op);
// A memory_format argument as a kernel receives it: None (preserve) or its name.
TB_API MemoryFormat MemoryFormatArg(const Value& v, const char* op);

// torch's is_non_overlapping_and_dense: the elements fill numel() consecutive slots, in some
// order of the dimensions.
TB_API bool IsNonOverlappingAndDense(IntArrayRef shape, IntArrayRef strides);

// IsNonOverlappingAndDense on t's shape and strides.
TB_API bool IsDense(const Tensor& t);

// a and b have one shape and their elements at the same offsets (strides equal on the
// dimensions of size > 1): a loop may walk both as flat memory when they are dense.
TB_API bool SameLayout(const Tensor& a, const Tensor& b);

// Dense strides with the dimensions laid out in `order` (outermost first: order.back() gets
// stride 1). Sizes 0 and 1 count as 1.
TB_API Dims StridesInOrder(IntArrayRef shape, IntArrayRef order);

// Dense strides for `format` (not kPreserve): C-contiguous, or channels-last for 4-d
// (channels-last-3d for 5-d) shapes; ValueError naming `op` for a channels-last format of
// another rank.
TB_API Dims FormatStrides(IntArrayRef shape, MemoryFormat format, const char* op);

// torch's suggest_memory_format: channels-last (channels-last-3d) for a 4-d (5-d) tensor
// whose strides look like it by c10's rule (the channel dimension innermost, then the spatial
// ones from the last, then the batch; ambiguous size-1 cases count as contiguous), else
// contiguous. The strides need not be dense.
TB_API MemoryFormat SuggestMemoryFormat(const Tensor& t);

// t's strides equal FormatStrides(t.shape(), format) on its dimensions of size > 1.
TB_API bool IsContiguousIn(const Tensor& t, MemoryFormat format);

// t itself when IsContiguousIn(t, format), else a copy laid out so (torch's
// t.contiguous(memory_format=format)).
TB_API Tensor InFormat(const Tensor& t, MemoryFormat format);

// The strides of torch's empty_like(src, memory_format=format) (and clone, _to_copy): with
// kPreserve, src's own strides when they are non-overlapping and dense, else dense strides in
// src's stride order.
TB_API Dims LikeStrides(const Tensor& src, MemoryFormat format = MemoryFormat::kPreserve,
                        const char* op = "empty_like");

// A new tensor of our own memory with `strides`, which must be dense for `shape` (as the
// functions above return); C-contiguous for the packed sub-byte dtypes.
TB_API Tensor EmptyDense(IntArrayRef shape, IntArrayRef strides, DType dtype);

// A new tensor with t's shape and exact strides, dense or not (torch's clone_preserve_strides):
// its storage spans t's elements. For overlapping or negative strides: EmptyLike(t, dtype).
TB_API Tensor EmptyPreservingStrides(const Tensor& t, DType dtype);

// t's values in a new tensor laid out as torch's clone(t, memory_format=format).
TB_API Tensor CloneLike(const Tensor& t, MemoryFormat format = MemoryFormat::kPreserve);

// t itself when its strides are LikeStrides(like) (t and like of one shape), else a copy of t
// laid out so: for kernels that compute into a C-contiguous buffer a result torch lays out like
// one of its inputs.
TB_API Tensor LaidOutLike(const Tensor& t, const Tensor& like);

// t itself when laid out as a new result of an element-wise op over `operands` (dense, in
// ElementwiseOrder), else a copy of t laid out so: for kernels that compute into a C-contiguous
// buffer a result torch computes (or decomposes into) element-wise ops over `operands`.
TB_API Tensor LaidOutElementwise(const Tensor& t, std::initializer_list<const Tensor*> operands);

// EmptyDense(src.shape(), LikeStrides(src, format, op), dtype).
TB_API Tensor EmptyLike(const Tensor& src, DType dtype,
                        MemoryFormat format = MemoryFormat::kPreserve,
                        const char* op = "empty_like");

// The order (outermost dimension first) of the dense result torch's TensorIterator allocates
// for an element-wise op over `operands` (in the op's argument order, each broadcastable to
// `shape`; null entries are skipped). Dimensions are sorted by stride, operand by operand: the
// first operand whose strides of two dimensions differ (neither being broadcast) decides
// their order; equal strides put the larger dimension outside. Identity (C order) when every
// operand is C-contiguous (the same order on the dimensions of size > 1).
TB_API Dims ElementwiseOrder(IntArrayRef shape, const Tensor* const* operands, size_t n);
inline Dims ElementwiseOrder(IntArrayRef shape, std::initializer_list<const Tensor*> operands) {
  return ElementwiseOrder(shape, operands.begin(), operands.size());
}
// The same from operand strides already broadcast to `shape` (0 on broadcast dimensions).
TB_API Dims ElementwiseOrder(IntArrayRef shape, const std::vector<Dims>& strides);

// True when `order` is 0, 1, ..., n-1.
TB_API bool IsIdentityOrder(IntArrayRef order);

// shape[order[0]], shape[order[1]], ...
TB_API Dims PermutedShape(IntArrayRef shape, IntArrayRef order);

// t.permute(order) and back: Permuted(t, order) has dimension i = t's dimension order[i];
// Unpermuted undoes it.
TB_API Tensor Permuted(const Tensor& t, IntArrayRef order);
TB_API Tensor Unpermuted(const Tensor& t, IntArrayRef order);

// The loop order of an element-wise op and its new result. Operands (of the op's shape) are
// permuted by In() to the order ElementwiseOrder gives, innermost dimension last; NewResult()
// is C-contiguous in that order, so contiguous fast paths apply to inputs laid out like it, and
// Out() turns it back to the op's dimension order, laid out as torch lays out the result.
class TB_API ElementwiseLayout {
 public:
  ElementwiseLayout(IntArrayRef shape, const Tensor* const* operands, size_t n);
  ElementwiseLayout(IntArrayRef shape, std::initializer_list<const Tensor*> operands)
      : ElementwiseLayout(shape, operands.begin(), operands.size()) {}
  bool permuted() const { return permuted_; }
  Tensor In(const Tensor& t) const { return permuted_ ? Permuted(t, order_) : t; }
  Tensor NewResult(DType dtype) const { return Tensor::Empty(loop_shape_, dtype); }
  Tensor Out(const Tensor& t) const { return permuted_ ? Unpermuted(t, order_) : t; }

 private:
  Dims order_;
  Dims loop_shape_;
  bool permuted_;
};

}  // namespace tb
