// Small value types for shapes and strides: IntArrayRef (borrowed) and Dims (owned, with
// inline room for the common case so that wrapping a tensor does not allocate).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <vector>

namespace tb {

// A borrowed, read-only run of int64_t. Does not own its data: never keep one beyond the
// life of what it points into.
class IntArrayRef {
 public:
  constexpr IntArrayRef() = default;
  constexpr IntArrayRef(const int64_t* data, size_t size) : data_(data), size_(size) {}
  IntArrayRef(const std::vector<int64_t>& v) : data_(v.data()), size_(v.size()) {}  // NOLINT
  // For arguments only (`t.view({2, 3})`): the list lives until the end of the call.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime"
#endif
  constexpr IntArrayRef(std::initializer_list<int64_t> il)  // NOLINT
      : data_(il.begin()), size_(il.size()) {}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

  constexpr const int64_t* data() const { return data_; }
  constexpr size_t size() const { return size_; }
  constexpr bool empty() const { return size_ == 0; }
  constexpr const int64_t* begin() const { return data_; }
  constexpr const int64_t* end() const { return data_ + size_; }
  constexpr int64_t operator[](size_t i) const { return data_[i]; }
  std::vector<int64_t> vec() const { return std::vector<int64_t>(begin(), end()); }

  friend bool operator==(IntArrayRef a, IntArrayRef b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }
  friend bool operator!=(IntArrayRef a, IntArrayRef b) { return !(a == b); }

 private:
  const int64_t* data_ = nullptr;
  size_t size_ = 0;
};

// An owned run of int64_t with kInline elements stored in place; larger sizes (ndim up to
// any value) go to the heap.
class Dims {
 public:
  static constexpr size_t kInline = 6;

  Dims() = default;
  explicit Dims(size_t n, int64_t value = 0) { resize(n, value); }
  Dims(IntArrayRef ref) { assign(ref.data(), ref.size()); }  // NOLINT
  Dims(std::initializer_list<int64_t> il) { assign(il.begin(), il.size()); }
  Dims(const Dims& o) { assign(o.data(), o.size()); }
  Dims(Dims&& o) noexcept { steal(o); }
  Dims& operator=(const Dims& o) {
    if (this != &o) assign(o.data(), o.size());
    return *this;
  }
  Dims& operator=(Dims&& o) noexcept {
    if (this != &o) {
      release();
      steal(o);
    }
    return *this;
  }
  ~Dims() { release(); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t* data() { return heap_ ? heap_ : inline_; }
  const int64_t* data() const { return heap_ ? heap_ : inline_; }
  int64_t& operator[](size_t i) { return data()[i]; }
  int64_t operator[](size_t i) const { return data()[i]; }
  int64_t* begin() { return data(); }
  int64_t* end() { return data() + size_; }
  const int64_t* begin() const { return data(); }
  const int64_t* end() const { return data() + size_; }
  operator IntArrayRef() const { return IntArrayRef(data(), size_); }  // NOLINT
  IntArrayRef ref() const { return IntArrayRef(data(), size_); }

  void resize(size_t n, int64_t value = 0) {
    reserve(n);
    for (size_t i = size_; i < n; ++i) data()[i] = value;
    size_ = n;
  }
  void push_back(int64_t v) {
    reserve(size_ + 1);
    data()[size_++] = v;
  }
  void insert(size_t pos, int64_t v) {
    reserve(size_ + 1);
    int64_t* d = data();
    std::memmove(d + pos + 1, d + pos, (size_ - pos) * sizeof(int64_t));
    d[pos] = v;
    ++size_;
  }
  void erase(size_t pos) {
    int64_t* d = data();
    std::memmove(d + pos, d + pos + 1, (size_ - pos - 1) * sizeof(int64_t));
    --size_;
  }

 private:
  void reserve(size_t n) {
    if (n <= capacity()) return;
    size_t cap = std::max(n, 2 * capacity());
    auto* fresh = new int64_t[cap];
    std::memcpy(fresh, data(), size_ * sizeof(int64_t));
    delete[] heap_;
    heap_ = fresh;
    heap_capacity_ = cap;
  }
  size_t capacity() const { return heap_ ? heap_capacity_ : kInline; }
  void assign(const int64_t* src, size_t n) {
    size_ = 0;
    reserve(n);
    if (n) std::memcpy(data(), src, n * sizeof(int64_t));
    size_ = n;
  }
  void release() {
    delete[] heap_;
    heap_ = nullptr;
    size_ = 0;
  }
  void steal(Dims& o) {
    size_ = o.size_;
    if (o.heap_) {
      heap_ = o.heap_;
      heap_capacity_ = o.heap_capacity_;
      o.heap_ = nullptr;
    } else {
      heap_ = nullptr;
      std::memcpy(inline_, o.inline_, size_ * sizeof(int64_t));
    }
    o.size_ = 0;
  }

  size_t size_ = 0;
  int64_t* heap_ = nullptr;  // owned; null while the elements fit in inline_
  size_t heap_capacity_ = 0;
  int64_t inline_[kInline] = {};
};

}  // namespace tb
