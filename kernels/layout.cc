#include "kernels/layout.h"

#include <algorithm>
#include <numeric>
#include <utility>

namespace tb {
namespace {

// The dimensions of `shape` sorted innermost first by the strides of `operands` (each already
// broadcast to `shape`: 0 on a broadcast dimension), with torch's insertion sort. compare(a, b)
// is 1 when dimension a goes inside b, -1 when outside, 0 when no operand decides: the first
// operand with two unequal strides, neither 0, decides; equal strides put the larger size
// outside. An undecided pair is stepped over, not stopped at, so a dimension may move past it.
Dims InnermostFirst(IntArrayRef shape, const std::vector<Dims>& operands) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  Dims perm(nd);
  for (int64_t i = 0; i < nd; ++i) perm[i] = nd - 1 - i;
  auto compare = [&](int64_t a, int64_t b) {
    for (const Dims& s : operands) {
      const int64_t sa = s[a], sb = s[b];
      if (sa == 0 || sb == 0) continue;
      if (sa != sb) return sa < sb ? -1 : 1;
      if (shape[a] > shape[b]) return 1;
    }
    return 0;
  };
  for (int64_t i = 1; i < nd; ++i) {
    int64_t moving = i;
    for (int64_t j = i - 1; j >= 0; --j) {
      const int c = compare(perm[j], perm[moving]);
      if (c > 0) {
        std::swap(perm[j], perm[moving]);
        moving = j;
      } else if (c < 0) {
        break;
      }
    }
  }
  return perm;
}

Dims Reversed(Dims d) {
  std::reverse(d.begin(), d.end());
  return d;
}

// c10's is_channels_last_strides_2d/3d: strides increase along `walk` (the channel
// dimension, the spatial ones from the last, the batch), each at least the extent of the one
// before; the ambiguous N111-like cases count as contiguous.
bool LooksChannelsLast(IntArrayRef shape, IntArrayRef strides, std::initializer_list<int> walk) {
  if (strides[1] == 0) return false;
  int64_t min = 0;
  for (int d : walk) {
    if (shape[d] == 0 || strides[d] < min) return false;
    if (d == 0 && min == strides[1]) return false;
    min = strides[d];
    if (shape[d] > 1) min *= shape[d];
  }
  return true;
}

}  // namespace

MemoryFormat SuggestMemoryFormat(const Tensor& t) {
  if (t.ndim() == 4 && LooksChannelsLast(t.shape(), t.strides(), {1, 3, 2, 0})) {
    return MemoryFormat::kChannelsLast;
  }
  if (t.ndim() == 5 && LooksChannelsLast(t.shape(), t.strides(), {1, 4, 3, 2, 0})) {
    return MemoryFormat::kChannelsLast3d;
  }
  return MemoryFormat::kContiguous;
}

bool IsContiguousIn(const Tensor& t, MemoryFormat format) {
  if (format == MemoryFormat::kPreserve) return true;
  if (format == MemoryFormat::kContiguous) return t.is_contiguous();
  if (t.ndim() != (format == MemoryFormat::kChannelsLast ? 4 : 5)) return false;
  const Dims want = FormatStrides(t.shape(), format, "contiguous");
  for (int64_t d = 0; d < t.ndim(); ++d) {
    if (t.shape()[d] > 1 && t.strides()[d] != want[d]) return false;
  }
  return true;
}

Tensor InFormat(const Tensor& t, MemoryFormat format) {
  if (IsContiguousIn(t, format)) return t;
  Tensor out = EmptyDense(t.shape(), FormatStrides(t.shape(), format, "contiguous"), t.dtype());
  out.copy_from(t);
  return out;
}

MemoryFormat ParseMemoryFormat(std::string_view name, const char* op) {
  if (name.empty() || name == "preserve_format") return MemoryFormat::kPreserve;
  if (name == "contiguous_format") return MemoryFormat::kContiguous;
  if (name == "channels_last") return MemoryFormat::kChannelsLast;
  if (name == "channels_last_3d") return MemoryFormat::kChannelsLast3d;
  TB_THROW(ValueError) << op << ": unknown memory_format '" << name
                       << "' (preserve_format, contiguous_format, channels_last or "
                          "channels_last_3d)";
}

MemoryFormat MemoryFormatArg(const Value& v, const char* op) {
  if (v.is_none()) return MemoryFormat::kPreserve;
  TB_CHECK(v.tag() == Value::Tag::kString, TypeError)
      << op << ": memory_format must be a torch.memory_format";
  return ParseMemoryFormat(v.to_string(), op);
}

bool IsNonOverlappingAndDense(IntArrayRef shape, IntArrayRef strides) {
  const size_t nd = shape.size();
  int64_t expected = 1;  // C-contiguous (the common case) first, without sorting
  bool contiguous = true;
  for (size_t i = nd; i-- > 0 && contiguous;) {
    if (shape[i] == 1) continue;
    contiguous = strides[i] == expected;
    expected *= shape[i];
  }
  if (contiguous) return true;
  if (nd == 1) return shape[0] < 2 || strides[0] == 1;
  std::vector<size_t> perm(nd);
  std::iota(perm.begin(), perm.end(), 0);
  // Dimensions of size < 2 last; the others by increasing stride.
  std::sort(perm.begin(), perm.end(), [&](size_t a, size_t b) {
    if (shape[a] < 2) return false;
    if (shape[b] < 2) return true;
    return strides[a] < strides[b];
  });
  expected = 1;
  for (size_t d : perm) {
    if (shape[d] < 2) return true;
    if (strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

bool IsDense(const Tensor& t) { return IsNonOverlappingAndDense(t.shape(), t.strides()); }

bool SameLayout(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  for (int64_t d = 0; d < a.ndim(); ++d) {
    if (a.shape()[d] > 1 && a.strides()[d] != b.strides()[d]) return false;
  }
  return true;
}

Dims StridesInOrder(IntArrayRef shape, IntArrayRef order) {
  Dims strides(shape.size());
  int64_t acc = 1;
  for (size_t i = order.size(); i-- > 0;) {
    const int64_t d = order[i];
    strides[d] = acc;
    acc *= shape[d] > 1 ? shape[d] : 1;
  }
  return strides;
}

Dims FormatStrides(IntArrayRef shape, MemoryFormat format, const char* op) {
  switch (format) {
    case MemoryFormat::kChannelsLast:
      TB_CHECK(shape.size() == 4, ValueError)
          << op << ": memory_format channels_last needs a 4-d tensor, got shape "
          << ShapeString(shape);
      return StridesInOrder(shape, {0, 2, 3, 1});
    case MemoryFormat::kChannelsLast3d:
      TB_CHECK(shape.size() == 5, ValueError)
          << op << ": memory_format channels_last_3d needs a 5-d tensor, got shape "
          << ShapeString(shape);
      return StridesInOrder(shape, {0, 2, 3, 4, 1});
    default: return ContiguousStrides(shape);
  }
}

Dims LikeStrides(const Tensor& src, MemoryFormat format, const char* op) {
  if (format != MemoryFormat::kPreserve) return FormatStrides(src.shape(), format, op);
  if (IsNonOverlappingAndDense(src.shape(), src.strides())) return Dims(src.strides());
  if (src.ndim() <= 1) return ContiguousStrides(src.shape());
  // Not dense: dense strides in src's order (torch's infer_dense_strides: its size-1
  // dimensions keep their strides and take part in the order).
  Dims perm = InnermostFirst(src.shape(), {Dims(src.strides())});
  return StridesInOrder(src.shape(), Reversed(std::move(perm)));
}

Tensor EmptyDense(IntArrayRef shape, IntArrayRef strides, DType dtype) {
  if (IsSubByte(dtype) || ContiguousStrides(shape).ref() == strides) {
    return Tensor::Empty(shape, dtype);
  }
  const int64_t numel = ShapeNumel(shape);
  auto storage = Storage::Allocate(static_cast<size_t>(numel * DTypeSize(dtype)));
  void* data = storage->data();
  return Tensor(std::move(storage), data, Dims(shape), Dims(strides), dtype, Device{});
}

Tensor EmptyPreservingStrides(const Tensor& t, DType dtype) {
  int64_t extent = t.numel() > 0 ? 1 : 0;
  bool simple = !IsSubByte(dtype);
  for (int64_t d = 0; d < t.ndim(); ++d) {
    const int64_t size = t.shape()[d], stride = t.strides()[d];
    if (size > 1 && stride <= 0) simple = false;  // negative, or broadcast (overlapping)
    if (size > 0) extent += (size - 1) * stride;
  }
  if (!simple || t.numel() == 0 || IsNonOverlappingAndDense(t.shape(), t.strides())) {
    return EmptyLike(t, dtype);
  }
  // Positive strides may still overlap (a sliding window): only non-overlapping ones are kept.
  Dims perm(t.ndim());
  std::iota(perm.begin(), perm.end(), 0);
  std::sort(perm.begin(), perm.end(),
            [&](int64_t a, int64_t b) { return t.strides()[a] < t.strides()[b]; });
  int64_t reach = 0;  // offset of the last element of the dimensions so far
  for (int64_t d : perm) {
    const int64_t size = t.shape()[d], stride = t.strides()[d];
    if (size <= 1) continue;
    if (stride <= reach) return EmptyLike(t, dtype);
    reach += (size - 1) * stride;
  }
  auto storage = Storage::Allocate(static_cast<size_t>(extent * DTypeSize(dtype)));
  void* data = storage->data();
  return Tensor(std::move(storage), data, Dims(t.shape()), Dims(t.strides()), dtype, Device{});
}

Tensor CloneLike(const Tensor& t, MemoryFormat format) {
  Tensor out = EmptyLike(t, t.dtype(), format, "clone");
  out.copy_from(t);
  return out;
}

namespace {

// `t` itself when it already has the strides `want` (dimensions of size 1 aside), else a copy
// of it with them.
Tensor InStrides(const Tensor& t, const Dims& want) {
  for (int64_t d = 0; d < t.ndim(); ++d) {
    if (t.shape()[d] > 1 && t.strides()[d] != want[d]) {
      Tensor out = EmptyDense(t.shape(), want, t.dtype());
      out.copy_from(t);
      return out;
    }
  }
  return t;
}

}  // namespace

Tensor LaidOutLike(const Tensor& t, const Tensor& like) { return InStrides(t, LikeStrides(like)); }

Tensor LaidOutElementwise(const Tensor& t, std::initializer_list<const Tensor*> operands) {
  return InStrides(t, StridesInOrder(t.shape(), ElementwiseOrder(t.shape(), operands)));
}

Tensor EmptyLike(const Tensor& src, DType dtype, MemoryFormat format, const char* op) {
  return EmptyDense(src.shape(), LikeStrides(src, format, op), dtype);
}

// C-contiguous operands (broadcast or not) only ever order dimensions outside-in, up to the
// places of size-1 dimensions, which no layout comparison looks at.
bool AllContiguous(const Tensor* const* operands, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (operands[i] != nullptr && !operands[i]->is_contiguous()) return false;
  }
  return true;
}

Dims ElementwiseOrder(IntArrayRef shape, const Tensor* const* operands, size_t n) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  Dims identity(nd);
  std::iota(identity.begin(), identity.end(), 0);
  if (nd <= 1 || AllContiguous(operands, n)) return identity;
  std::vector<Dims> strides;
  strides.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const Tensor* t = operands[i];
    if (t == nullptr) continue;
    Dims s(nd, 0);  // leading dimensions t lacks are broadcast
    const int64_t offset = nd - t->ndim();
    for (int64_t d = 0; d < t->ndim(); ++d) {
      const bool broadcast = t->shape()[d] == 1 && shape[offset + d] != 1;
      s[offset + d] = broadcast ? 0 : t->strides()[d];
    }
    strides.push_back(std::move(s));
  }
  return Reversed(InnermostFirst(shape, strides));
}

Dims ElementwiseOrder(IntArrayRef shape, const std::vector<Dims>& strides) {
  if (shape.size() <= 1) {
    Dims identity(shape.size());
    std::iota(identity.begin(), identity.end(), 0);
    return identity;
  }
  return Reversed(InnermostFirst(shape, strides));
}

bool IsIdentityOrder(IntArrayRef order) {
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

Dims PermutedShape(IntArrayRef shape, IntArrayRef order) {
  Dims out(order.size());
  for (size_t i = 0; i < order.size(); ++i) out[i] = shape[order[i]];
  return out;
}

Tensor Permuted(const Tensor& t, IntArrayRef order) { return t.permute(order); }

Tensor Unpermuted(const Tensor& t, IntArrayRef order) {
  Dims inverse(order.size());
  for (size_t i = 0; i < order.size(); ++i) inverse[order[i]] = static_cast<int64_t>(i);
  return t.permute(inverse);
}

ElementwiseLayout::ElementwiseLayout(IntArrayRef shape, const Tensor* const* operands, size_t n)
    : permuted_(false) {
  if (shape.size() <= 1 || AllContiguous(operands, n)) {  // the common case, kept cheap
    loop_shape_ = shape;
    return;
  }
  order_ = ElementwiseOrder(shape, operands, n);
  loop_shape_ = PermutedShape(shape, order_);
  permuted_ = !IsIdentityOrder(order_);
}

}  // namespace tb
