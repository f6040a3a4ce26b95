// Tensor (owning) and TensorView (borrowed).
//
// A Tensor is a storage reference plus the description of one strided view into it:
// data pointer (any byte offset already applied), shape, strides in elements (zero and
// negative allowed), dtype, device and a read-only flag. View operations return new
// Tensors on the same storage; only contiguous() and clone() copy.
//
// A TensorView borrows a Tensor's description (data pointer, shape, strides, dtype, device)
// for the length of a call, without the storage reference: for C++ code that only reads a
// layout. Kernels take `const Tensor&`, since their results may alias an input's storage
// (views) and must keep it alive. A TensorView cannot be made from a temporary Tensor.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "bridge/api.h"
#include "bridge/array_ref.h"
#include "bridge/device.h"
#include "bridge/dtype.h"
#include "bridge/error.h"
#include "bridge/storage.h"

namespace tb {

// Row-major (C-contiguous) strides for `shape`, in elements.
TB_API Dims ContiguousStrides(IntArrayRef shape);
// Product of the sizes; throws ValueError on a negative size or int64 overflow.
TB_API int64_t ShapeNumel(IntArrayRef shape);
// "[2, 3]" for messages.
TB_API std::string ShapeString(IntArrayRef shape);
// Wraps a possibly negative dimension index into [0, ndim); IndexError names `op`.
TB_API int64_t WrapDim(int64_t dim, int64_t ndim, const char* op);

class TB_API Tensor {
 public:
  Tensor() = default;
  // A view into `storage`; `data` points at the element with all indices zero.
  Tensor(std::shared_ptr<Storage> storage, void* data, Dims shape, Dims strides, DType dtype,
         Device device, bool read_only = false);

  // New, C-contiguous tensors of our own memory (CPU).
  static Tensor Empty(IntArrayRef shape, DType dtype);
  static Tensor Zeros(IntArrayRef shape, DType dtype);

  bool defined() const { return storage_ != nullptr; }
  int64_t ndim() const { return static_cast<int64_t>(shape_.size()); }
  IntArrayRef shape() const { return shape_; }
  IntArrayRef strides() const { return strides_; }
  int64_t size(int64_t dim) const {
    TB_CHECK(ndim() > 0, IndexError) << "size: a 0-d tensor has no dimensions";
    return shape_[WrapDim(dim, ndim(), "size")];
  }
  int64_t stride(int64_t dim) const {
    TB_CHECK(ndim() > 0, IndexError) << "stride: a 0-d tensor has no dimensions";
    return strides_[WrapDim(dim, ndim(), "stride")];
  }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool read_only() const { return read_only_; }
  // A 0-d tensor standing for a Python number (PyTorch's "wrapped number"): in type
  // promotion it counts by category only. Views and copies do not inherit the mark.
  bool is_wrapped_number() const { return wrapped_number_; }
  void set_wrapped_number(bool wrapped) { wrapped_number_ = wrapped; }
  int64_t numel() const { return numel_; }
  int64_t element_size() const { return DTypeSize(dtype_); }
  // Bytes the elements take when packed contiguously (sub-byte types packed).
  int64_t nbytes() const;
  bool is_contiguous() const;

  // Address of element [0, ..., 0]; null only for tensors with no elements.
  void* data() const { return data_; }
  // The same address, for writing: throws BufferError on a read-only tensor.
  void* mutable_data() const;
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data_);
  }
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  // A tensor over the same memory marked read-only (or writable again, when the memory
  // was never read-only at its source: the caller's decision).
  Tensor with_read_only(bool read_only) const;

  // ---- views (share storage) ----
  Tensor slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> stop,
               int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor permute(IntArrayRef dims) const;
  Tensor expand(IntArrayRef shape) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  // `storage_offset` in elements, relative to this tensor's first element.
  Tensor as_strided(IntArrayRef shape, IntArrayRef strides, int64_t storage_offset = 0) const;
  Tensor diagonal(int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1) const;
  // A view with a new shape (one size may be -1); ValueError when strides do not allow it.
  Tensor view(IntArrayRef shape) const;
  // view() when possible, otherwise a contiguous copy reshaped.
  Tensor reshape(IntArrayRef shape) const;

  // ---- copies ----
  // This tensor when already C-contiguous, otherwise a contiguous copy.
  Tensor contiguous() const;
  // Always a new C-contiguous tensor of our own memory.
  Tensor clone() const;
  // Element-wise copy of `src` into this tensor (same shape; same dtype; src broadcast).
  void copy_from(const Tensor& src) const;

  std::string ToString() const;

 private:
  void check_viewable(const char* op) const;
  Tensor make_view(void* data, Dims shape, Dims strides) const;

  std::shared_ptr<Storage> storage_;
  void* data_ = nullptr;
  Dims shape_;
  Dims strides_;
  int64_t numel_ = 0;
  DType dtype_ = DType::kFloat32;
  Device device_{};
  bool read_only_ = false;
  bool wrapped_number_ = false;
};

// A borrowed description of a Tensor, without its storage reference. Valid while the Tensor
// it was made from lives; built only from an lvalue Tensor.
class TensorView {
 public:
  TensorView(const Tensor& t)  // NOLINT(google-explicit-constructor)
      : data_(t.data()),
        shape_(t.shape()),
        strides_(t.strides()),
        numel_(t.numel()),
        dtype_(t.dtype()),
        device_(t.device()),
        read_only_(t.read_only()) {}
  TensorView(Tensor&&) = delete;

  void* data() const { return data_; }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data_);
  }
  IntArrayRef shape() const { return shape_; }
  IntArrayRef strides() const { return strides_; }
  int64_t ndim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t numel() const { return numel_; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool read_only() const { return read_only_; }
  TB_API bool is_contiguous() const;

 private:
  void* data_;
  IntArrayRef shape_;
  IntArrayRef strides_;
  int64_t numel_;
  DType dtype_;
  Device device_;
  bool read_only_;
};

}  // namespace tb
