#include "bridge/tensor.h"

#include <cstring>
#include <limits>
#include <sstream>
#include <utility>

namespace tb {

Dims ContiguousStrides(IntArrayRef shape) {
  Dims strides(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = acc;
    // The outermost size is never needed: multiplying by it could only overflow.
    if (i > 0) acc *= shape[i] > 1 ? shape[i] : 1;
  }
  return strides;
}

int64_t ShapeNumel(IntArrayRef shape) {
  int64_t n = 1;
  for (int64_t s : shape) {
    TB_CHECK(s >= 0, ValueError) << "negative dimension in shape " << ShapeString(shape);
    // Not n > max / s: a 64-bit division costs tens of cycles, and this runs on every import.
    if (__builtin_mul_overflow(n, s, &n)) {
      TB_THROW(ValueError) << "shape " << ShapeString(shape) << " has more than 2^63 elements";
    }
  }
  return n;
}

namespace {

// Bytes of `numel` packed elements of `dtype` (`shape` names the tensor in the error).
int64_t PackedBytes(int64_t numel, DType dtype, IntArrayRef shape) {
  int64_t bits;
  if (__builtin_mul_overflow(numel, static_cast<int64_t>(DTypeBits(dtype)), &bits) ||
      bits > std::numeric_limits<int64_t>::max() - 7) {
    TB_THROW(ValueError) << "a tensor of shape " << ShapeString(shape) << " and dtype "
                         << DTypeName(dtype) << " has more than 2^60 bytes";
  }
  return (bits + 7) / 8;
}

}  // namespace

std::string ShapeString(IntArrayRef shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

int64_t WrapDim(int64_t dim, int64_t ndim, const char* op) {
  int64_t n = ndim == 0 ? 1 : ndim;  // 0-d tensors accept dim 0 and -1, as in torch
  if (dim < -n || dim >= n) {
    TB_THROW(IndexError) << op << ": dimension " << dim << " out of range for a tensor of " << ndim
                         << " dimensions (expected in [" << -n << ", " << n - 1 << "])";
  }
  return dim < 0 ? dim + n : dim;
}

namespace {

bool ContiguousLayout(IntArrayRef shape, IntArrayRef strides) {
  int64_t expected = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 1) continue;
    if (shape[i] == 0) return true;
    if (strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

// dst[i * ds] = src[i * ss] for i in [0, n), elements of N bytes (strides in elements); a
// fixed-size memcpy is one load and one store at any alignment.
template <int N>
void CopyRun(char* dst, int64_t ds, const char* src, int64_t ss, int64_t n) {
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * ds * N, src + i * ss * N, N);
}

// Copies `shape` elements of `elem` bytes from a strided source into a strided destination.
// Strides are in elements. Size-1 dims are dropped and neighbours that are one run in both
// layouts merged; then the dims are walked innermost-first with an odometer, the innermost one
// as one memcpy where both are dense there, else an element loop of the element's width.
void StridedCopyBytes(char* dst, IntArrayRef dst_strides, const char* src, IntArrayRef src_strides,
                      IntArrayRef shape, int64_t elem) {
  int64_t numel = ShapeNumel(shape);
  if (numel == 0) return;
  if (ContiguousLayout(shape, dst_strides) && ContiguousLayout(shape, src_strides)) {
    std::memcpy(dst, src, static_cast<size_t>(numel * elem));
    return;
  }
  // The merged dims, outermost first.
  Dims size, dstr, sstr;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    const size_t last = size.size() - 1;
    if (!size.empty() && dstr[last] == dst_strides[d] * shape[d] &&
        sstr[last] == src_strides[d] * shape[d]) {
      size[last] *= shape[d];
      dstr[last] = dst_strides[d];
      sstr[last] = src_strides[d];
      continue;
    }
    size.push_back(shape[d]);
    dstr.push_back(dst_strides[d]);
    sstr.push_back(src_strides[d]);
  }
  if (size.empty()) {  // one element
    std::memcpy(dst, src, static_cast<size_t>(elem));
    return;
  }
  const int64_t nd = static_cast<int64_t>(size.size());
  const int64_t inner = size[nd - 1], ds = dstr[nd - 1], ss = sstr[nd - 1];
  auto run = [&](char* dp, const char* sp) {
    if (ds == 1 && ss == 1) {
      std::memcpy(dp, sp, static_cast<size_t>(inner * elem));
      return;
    }
    switch (elem) {
      case 1: return CopyRun<1>(dp, ds, sp, ss, inner);
      case 2: return CopyRun<2>(dp, ds, sp, ss, inner);
      case 4: return CopyRun<4>(dp, ds, sp, ss, inner);
      case 8: return CopyRun<8>(dp, ds, sp, ss, inner);
      case 16: return CopyRun<16>(dp, ds, sp, ss, inner);
      default:
        for (int64_t i = 0; i < inner; ++i) {
          std::memcpy(dp + i * ds * elem, sp + i * ss * elem, static_cast<size_t>(elem));
        }
    }
  };
  Dims index(static_cast<size_t>(nd), 0);
  for (int64_t done = 0; done < numel; done += inner) {
    int64_t doff = 0, soff = 0;
    for (int64_t d = 0; d < nd - 1; ++d) {
      doff += index[d] * dstr[d];
      soff += index[d] * sstr[d];
    }
    run(dst + doff * elem, src + soff * elem);
    for (int64_t d = nd - 2; d >= 0; --d) {
      if (++index[d] < size[d]) break;
      index[d] = 0;
    }
  }
}

}  // namespace

Tensor::Tensor(std::shared_ptr<Storage> storage, void* data, Dims shape, Dims strides, DType dtype,
               Device device, bool read_only)
    : storage_(std::move(storage)),
      data_(data),
      shape_(std::move(shape)),
      strides_(std::move(strides)),
      numel_(ShapeNumel(shape_)),
      dtype_(dtype),
      device_(device),
      read_only_(read_only) {
  TB_ICHECK(shape_.size() == strides_.size()) << "shape and strides differ in length";
}

Tensor Tensor::Empty(IntArrayRef shape, DType dtype) {
  int64_t numel = ShapeNumel(shape);
  auto storage = Storage::Allocate(static_cast<size_t>(PackedBytes(numel, dtype, shape)));
  void* data = storage->data();
  return Tensor(std::move(storage), data, Dims(shape), ContiguousStrides(shape), dtype, Device{});
}

Tensor Tensor::Zeros(IntArrayRef shape, DType dtype) {
  int64_t numel = ShapeNumel(shape);
  auto storage =
      Storage::Allocate(static_cast<size_t>(PackedBytes(numel, dtype, shape)), /*zero=*/true);
  void* data = storage->data();
  return Tensor(std::move(storage), data, Dims(shape), ContiguousStrides(shape), dtype, Device{});
}

int64_t Tensor::nbytes() const { return PackedBytes(numel_, dtype_, shape_); }

bool Tensor::is_contiguous() const { return ContiguousLayout(shape_, strides_); }

bool TensorView::is_contiguous() const { return ContiguousLayout(shape_, strides_); }

void* Tensor::mutable_data() const {
  if (read_only_) {
    TB_THROW(BufferError) << "cannot write to a read-only tensor of shape " << ShapeString(shape_)
                          << " (" << DTypeName(dtype_) << "); its source marked it read-only. "
                          << "Wrap it with copy=True to get a writable copy.";
  }
  return data_;
}

Tensor Tensor::with_read_only(bool read_only) const {
  Tensor t = *this;
  t.read_only_ = read_only;
  return t;
}

void Tensor::check_viewable(const char* op) const {
  TB_CHECK(defined(), ValueError) << op << ": undefined tensor";
  if (IsSubByte(dtype_)) {
    TB_THROW(NotImplementedError) << op << ": views of the packed sub-byte dtype "
                                  << DTypeName(dtype_) << " are not supported";
  }
}

Tensor Tensor::make_view(void* data, Dims shape, Dims strides) const {
  return Tensor(storage_, data, std::move(shape), std::move(strides), dtype_, device_, read_only_);
}

namespace {
char* Offset(void* base, int64_t elements, int64_t elem_size) {
  return static_cast<char*>(base) + elements * elem_size;
}
}  // namespace

Tensor Tensor::slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> stop,
                     int64_t step) const {
  check_viewable("slice");
  dim = WrapDim(dim, ndim(), "slice");
  TB_CHECK(ndim() > 0, IndexError) << "slice: cannot slice a 0-d tensor";
  TB_CHECK(step > 0, ValueError) << "slice: step must be positive, got " << step;
  const int64_t n = shape_[dim];
  auto clamp = [n](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v < 0 ? *v + n : *v;
    return x < 0 ? int64_t{0} : (x > n ? n : x);
  };
  int64_t b = clamp(start, 0), e = clamp(stop, n);
  int64_t len = e > b ? (e - b + step - 1) / step : 0;
  Dims shape = shape_, strides = strides_;
  shape[dim] = len;
  strides[dim] = strides_[dim] * step;
  void* data = len > 0 ? Offset(data_, b * strides_[dim], element_size()) : data_;
  return make_view(data, std::move(shape), std::move(strides));
}

Tensor Tensor::select(int64_t dim, int64_t index) const {
  check_viewable("select");
  TB_CHECK(ndim() > 0, IndexError) << "select: cannot select from a 0-d tensor";
  dim = WrapDim(dim, ndim(), "select");
  const int64_t n = shape_[dim];
  if (index < -n || index >= n) {
    TB_THROW(IndexError) << "select: index " << index << " out of range for dimension " << dim
                         << " of size " << n;
  }
  if (index < 0) index += n;
  Dims shape = shape_, strides = strides_;
  shape.erase(dim);
  strides.erase(dim);
  void* data = numel_ > 0 ? Offset(data_, index * strides_[dim], element_size()) : data_;
  return make_view(data, std::move(shape), std::move(strides));
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  check_viewable("transpose");
  dim0 = WrapDim(dim0, ndim(), "transpose");
  dim1 = WrapDim(dim1, ndim(), "transpose");
  Dims shape = shape_, strides = strides_;
  if (ndim() > 0) {
    std::swap(shape[dim0], shape[dim1]);
    std::swap(strides[dim0], strides[dim1]);
  }
  return make_view(data_, std::move(shape), std::move(strides));
}

Tensor Tensor::permute(IntArrayRef dims) const {
  check_viewable("permute");
  TB_CHECK(static_cast<int64_t>(dims.size()) == ndim(), ValueError)
      << "permute: got " << dims.size() << " dimensions for a tensor of " << ndim();
  Dims shape(dims.size()), strides(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = WrapDim(dims[i], ndim(), "permute");
    TB_CHECK(!seen[d], ValueError)
        << "permute: dimension " << d << " repeats in " << ShapeString(dims);
    seen[d] = true;
    shape[i] = shape_[d];
    strides[i] = strides_[d];
  }
  return make_view(data_, std::move(shape), std::move(strides));
}

Tensor Tensor::expand(IntArrayRef shape) const {
  check_viewable("expand");
  const int64_t nd = static_cast<int64_t>(shape.size());
  TB_CHECK(nd >= ndim(), ValueError) << "expand: cannot expand " << ShapeString(shape_) << " to "
                                     << ShapeString(shape) << " (fewer dimensions)";
  Dims out_shape(nd), out_strides(nd);
  for (int64_t i = nd - 1; i >= 0; --i) {
    int64_t j = i - (nd - ndim());
    int64_t want = shape[i];
    if (j < 0) {
      TB_CHECK(want >= 0, ValueError) << "expand: -1 not allowed in a new leading dimension";
      out_shape[i] = want;
      out_strides[i] = 0;
      continue;
    }
    if (want == -1) want = shape_[j];
    if (shape_[j] == want) {
      out_shape[i] = want;
      out_strides[i] = strides_[j];
    } else if (shape_[j] == 1) {
      out_shape[i] = want;
      out_strides[i] = 0;
    } else {
      TB_THROW(ValueError) << "expand: size " << shape_[j] << " of dimension " << j
                           << " cannot expand to " << want << " (" << ShapeString(shape_) << " -> "
                           << ShapeString(shape) << ")";
    }
  }
  return make_view(data_, std::move(out_shape), std::move(out_strides));
}

Tensor Tensor::squeeze() const {
  check_viewable("squeeze");
  Dims shape, strides;
  for (int64_t i = 0; i < ndim(); ++i) {
    if (shape_[i] != 1) {
      shape.push_back(shape_[i]);
      strides.push_back(strides_[i]);
    }
  }
  return make_view(data_, std::move(shape), std::move(strides));
}

Tensor Tensor::squeeze(int64_t dim) const {
  check_viewable("squeeze");
  if (ndim() == 0) return *this;
  dim = WrapDim(dim, ndim(), "squeeze");
  if (shape_[dim] != 1) return *this;
  Dims shape = shape_, strides = strides_;
  shape.erase(dim);
  strides.erase(dim);
  return make_view(data_, std::move(shape), std::move(strides));
}

Tensor Tensor::unsqueeze(int64_t dim) const {
  check_viewable("unsqueeze");
  dim = WrapDim(dim, ndim() + 1, "unsqueeze");
  Dims shape = shape_, strides = strides_;
  int64_t stride = dim < ndim() ? strides_[dim] * shape_[dim] : 1;
  shape.insert(dim, 1);
  strides.insert(dim, stride);
  return make_view(data_, std::move(shape), std::move(strides));
}

Tensor Tensor::as_strided(IntArrayRef shape, IntArrayRef strides, int64_t storage_offset) const {
  check_viewable("as_strided");
  TB_CHECK(shape.size() == strides.size(), ValueError)
      << "as_strided: shape " << ShapeString(shape) << " and strides " << ShapeString(strides)
      << " differ in length";
  int64_t numel = ShapeNumel(shape);
  TB_CHECK(numel == 0 || data_ != nullptr, ValueError)
      << "as_strided: shape " << ShapeString(shape) << " reaches outside a tensor with no memory";
  // The view must stay inside the memory the storage is known to cover, when known.
  if (numel > 0 && storage_->nbytes() > 0 && storage_->data() != nullptr) {
    // Element offsets of the first and one past the last element reached, in bytes from
    // data_; a reach past int64 is outside any storage.
    int64_t lo = storage_offset, hi = storage_offset;
    bool overflow = false;
    for (size_t i = 0; i < shape.size(); ++i) {
      int64_t reach = 0;
      overflow |= __builtin_mul_overflow(shape[i] - 1, strides[i], &reach);
      overflow |= __builtin_add_overflow(reach < 0 ? lo : hi, reach, reach < 0 ? &lo : &hi);
    }
    const auto item = static_cast<int64_t>(element_size());
    int64_t lo_bytes = 0, hi_bytes = 0;
    overflow |= __builtin_mul_overflow(lo, item, &lo_bytes);
    overflow |=
        __builtin_add_overflow(hi, int64_t{1}, &hi) || __builtin_mul_overflow(hi, item, &hi_bytes);
    const auto base = reinterpret_cast<intptr_t>(storage_->data());
    const auto here = reinterpret_cast<intptr_t>(data_);
    const auto size = static_cast<intptr_t>(storage_->nbytes());
    if (overflow || lo_bytes < base - here || hi_bytes > base + size - here) {
      TB_THROW(ValueError) << "as_strided: shape " << ShapeString(shape) << " with strides "
                           << ShapeString(strides) << " and offset " << storage_offset
                           << " reaches outside the storage of " << storage_->nbytes() << " bytes";
    }
  }
  return make_view(numel > 0 ? Offset(data_, storage_offset, element_size()) : data_, Dims(shape),
                   Dims(strides));
}

Tensor Tensor::diagonal(int64_t offset, int64_t dim1, int64_t dim2) const {
  check_viewable("diagonal");
  TB_CHECK(ndim() >= 2, ValueError) << "diagonal: needs at least 2 dimensions, got " << ndim();
  dim1 = WrapDim(dim1, ndim(), "diagonal");
  dim2 = WrapDim(dim2, ndim(), "diagonal");
  TB_CHECK(dim1 != dim2, ValueError) << "diagonal: dim1 and dim2 are both " << dim1;
  int64_t len, start = 0;
  if (offset >= 0) {
    len = std::max<int64_t>(std::min(shape_[dim1], shape_[dim2] - offset), 0);
    start = offset * strides_[dim2];
  } else {
    len = std::max<int64_t>(std::min(shape_[dim1] + offset, shape_[dim2]), 0);
    start = -offset * strides_[dim1];
  }
  Dims shape, strides;
  for (int64_t i = 0; i < ndim(); ++i) {
    if (i == dim1 || i == dim2) continue;
    shape.push_back(shape_[i]);
    strides.push_back(strides_[i]);
  }
  shape.push_back(len);
  strides.push_back(strides_[dim1] + strides_[dim2]);
  return make_view(len > 0 ? Offset(data_, start, element_size()) : data_, std::move(shape),
                   std::move(strides));
}

namespace {

// Resolves one -1 in `shape` against numel.
Dims InferShape(IntArrayRef shape, int64_t numel, const char* op) {
  Dims out(shape);
  int64_t known = 1, infer = -1;
  bool overflow = false, zero = false;  // a product past int64 matches no numel, unless a 0
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      TB_CHECK(infer < 0, ValueError)
          << op << ": only one dimension can be -1 in " << ShapeString(shape);
      infer = static_cast<int64_t>(i);
    } else {
      TB_CHECK(out[i] >= 0, ValueError) << op << ": invalid size in " << ShapeString(shape);
      zero |= out[i] == 0;
      overflow |= __builtin_mul_overflow(known, out[i], &known);
    }
  }
  if (zero) {
    known = 0;
  } else {
    TB_CHECK(!overflow, ValueError)
        << op << ": shape " << ShapeString(shape) << " is invalid for " << numel << " elements";
  }
  if (infer >= 0) {
    TB_CHECK(known != 0 && numel % known == 0, ValueError)
        << op << ": shape " << ShapeString(shape) << " is invalid for " << numel << " elements";
    out[infer] = numel / known;
  } else {
    TB_CHECK(known == numel, ValueError)
        << op << ": shape " << ShapeString(shape) << " is invalid for " << numel << " elements";
  }
  return out;
}

// Strides for viewing (old_shape, old_strides) as new_shape without copying, if possible.
// Walks both shapes from the innermost dimension, matching chunks of memory-contiguous
// dimensions (the algorithm PyTorch's view uses).
std::optional<Dims> ViewStrides(IntArrayRef old_shape, IntArrayRef old_strides,
                                IntArrayRef new_shape) {
  Dims new_strides(new_shape.size());
  if (old_shape.empty()) {
    for (auto& s : new_strides) s = 1;
    return new_strides;
  }
  if (ShapeNumel(old_shape) == 0) return ContiguousStrides(new_shape);
  int64_t view_d = static_cast<int64_t>(new_shape.size()) - 1;
  int64_t chunk_base_stride = old_strides[old_shape.size() - 1];
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t tensor_d = static_cast<int64_t>(old_shape.size()) - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= old_shape[tensor_d];
    if (tensor_d == 0 || (old_shape[tensor_d - 1] != 1 &&
                          old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
        new_strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (tensor_d > 0) {
        chunk_base_stride = old_strides[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

}  // namespace

Tensor Tensor::view(IntArrayRef shape) const {
  check_viewable("view");
  Dims new_shape = InferShape(shape, numel_, "view");
  auto strides = ViewStrides(shape_, strides_, new_shape);
  if (!strides) {
    TB_THROW(ValueError) << "view: a tensor of shape " << ShapeString(shape_) << " and strides "
                         << ShapeString(strides_) << " cannot be viewed as "
                         << ShapeString(new_shape) << " without a copy; use reshape()";
  }
  return make_view(data_, std::move(new_shape), std::move(*strides));
}

Tensor Tensor::reshape(IntArrayRef shape) const {
  check_viewable("reshape");
  Dims new_shape = InferShape(shape, numel_, "reshape");
  if (auto strides = ViewStrides(shape_, strides_, new_shape)) {
    return make_view(data_, std::move(new_shape), std::move(*strides));
  }
  return clone().view(new_shape);
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  TB_CHECK(defined(), ValueError) << "clone: undefined tensor";
  if (!device_.is_host_accessible()) {
    TB_THROW(NotImplementedError) << "clone: copying memory on device " << DeviceString(device_)
                                  << " is not supported; tensorbridge computes on the CPU";
  }
  Tensor out = Empty(shape_, dtype_);
  if (IsSubByte(dtype_)) {
    TB_CHECK(is_contiguous(), NotImplementedError)
        << "clone: strided copies of the packed sub-byte dtype " << DTypeName(dtype_)
        << " are not supported";
    if (nbytes() > 0) std::memcpy(out.data_, data_, static_cast<size_t>(nbytes()));
    return out;
  }
  StridedCopyBytes(static_cast<char*>(out.data_), out.strides_, static_cast<const char*>(data_),
                   strides_, shape_, element_size());
  return out;
}

void Tensor::copy_from(const Tensor& src) const {
  check_viewable("copy_from");
  TB_CHECK(src.dtype() == dtype_, TypeError)
      << "copy_from: dtype " << DTypeName(src.dtype()) << " into " << DTypeName(dtype_)
      << " needs a converting copy (aten::copy_)";
  TB_CHECK(device_.is_host_accessible() && src.device().is_host_accessible(), NotImplementedError)
      << "copy_from: copies between " << DeviceString(src.device()) << " and "
      << DeviceString(device_) << " are not supported";
  Tensor s = src.expand(shape_);
  void* dst = mutable_data();
  StridedCopyBytes(static_cast<char*>(dst), strides_, static_cast<const char*>(s.data()),
                   s.strides(), shape_, element_size());
}

std::string Tensor::ToString() const {
  std::ostringstream os;
  os << "Tensor(shape=" << ShapeString(shape_) << ", strides=" << ShapeString(strides_)
     << ", dtype=" << DTypeName(dtype_) << ", device=" << DeviceString(device_)
     << (read_only_ ? ", read_only" : "") << ")";
  return os.str();
}

}  // namespace tb
