// Gather / scatter along a dimension: aten::gather, scatter.src, scatter.value, scatter.reduce,
// scatter.value_reduce, scatter_add, scatter_reduce.two (and the in-place forms scatter_.*,
// scatter_add_, scatter_reduce_.two); and the view-scatters select_scatter, slice_scatter,
// diagonal_scatter, as_strided_scatter.
//
// Index values must lie in [0, size) (as in torch, negative ones are not wrapped); all are
// checked before any element moves. Scatters run in index order on one thread, so repeated
// indices give torch's CPU result (the last write wins; reductions see every value).
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "dispatch/op_table.h"
#include "kernels/common_internal.h"
#include "kernels/dtype_internal.h"
#include "kernels/layout.h"
#include "kernels/loops_internal.h"
#include "kernels/promote_broadcast.h"

namespace tb {
namespace {

using kernels::WithBits;

// CheckHost and CheckByteSized: scatters move raw element bits.
void CheckMovable(const char* op, const Tensor& t) {
  kernels::CheckHost(op, t);
  kernels::CheckByteSized(op, t);
}

// ForEachRow's walk, always on the calling thread (scatters must run in order).
template <size_t N, typename Row>
void SerialRows(IntArrayRef shape, const std::array<char*, N>& data,
                const std::array<Dims, N>& byte_strides, Row&& row) {
  if (ShapeNumel(shape) == 0) return;
  kernels::LoopShape<N> ls = kernels::Coalesce<N>(shape, byte_strides);
  const int64_t nd = static_cast<int64_t>(ls.shape.size());
  const int64_t inner = ls.shape[nd - 1];
  const int64_t rows = ShapeNumel(ls.shape) / inner;
  std::array<int64_t, N> inner_strides;
  for (size_t k = 0; k < N; ++k) inner_strides[k] = ls.strides[k][nd - 1];
  Dims coord(static_cast<size_t>(nd), 0);
  for (int64_t r = 0; r < rows; ++r) {
    std::array<char*, N> p = data;
    for (int64_t d = 0; d < nd - 1; ++d) {
      for (size_t k = 0; k < N; ++k) p[k] += coord[d] * ls.strides[k][d];
    }
    row(p, inner_strides, inner);
    for (int64_t d = nd - 2; d >= 0; --d) {
      if (++coord[d] < ls.shape[d]) break;
      coord[d] = 0;
    }
  }
}

// `t` as at least 1-d (torch treats a 0-d self or index as one element along dim 0).
Tensor AtLeast1d(const Tensor& t) { return t.ndim() == 0 ? t.unsqueeze(0) : t; }

// The index as contiguous int64, at least 1-d, shape-checked against self (and src) and with
// every value checked to lie in [0, self.size(dim)).
Tensor CheckedIndex(const Tensor& self1, int64_t dim, const Tensor& index, const Tensor* src1,
                    const char* op) {
  CheckMovable(op, index);
  TB_CHECK(IsIntegral(index.dtype(), /*include_bool=*/false), TypeError)
      << op << ": expected dtype int64 for index, got " << DTypeName(index.dtype());
  Tensor idx = AtLeast1d(Cast(index, DType::kInt64).contiguous());
  TB_CHECK(idx.ndim() == self1.ndim(), ValueError)
      << op << ": index tensor must have the same number of dimensions as the input tensor ("
      << idx.ndim() << " vs " << self1.ndim() << ")";
  for (int64_t d = 0; d < idx.ndim(); ++d) {
    TB_CHECK(d == dim || idx.size(d) <= self1.size(d), ValueError)
        << op << ": size of index " << ShapeString(idx.shape())
        << " must not exceed the size of self " << ShapeString(self1.shape())
        << " apart from dimension " << dim;
    if (src1 != nullptr) {
      TB_CHECK(idx.size(d) <= src1->size(d), ValueError)
          << op << ": size of index " << ShapeString(idx.shape())
          << " must not exceed the size of src " << ShapeString(src1->shape());
    }
  }
  const int64_t n = self1.size(dim);
  const int64_t* p = idx.data_as<const int64_t>();
  for (int64_t i = 0; i < idx.numel(); ++i) {
    if (p[i] < 0 || p[i] >= n) {
      TB_THROW(IndexError) << op << ": index " << p[i] << " is out of bounds for dimension " << dim
                           << " with size " << n;
    }
  }
  return idx;
}

// `t` walked over `shape` with t's strides, except a stride of 0 along `dim`.
Tensor Restride(const Tensor& t, IntArrayRef shape, int64_t dim) {
  Dims strides(t.strides());
  strides[dim] = 0;
  return t.as_strided(shape, strides, 0);
}

Tensor Gather(const Tensor& self, int64_t dim, const Tensor& index, bool /*sparse_grad*/) {
  constexpr const char* kOp = "aten::gather";
  CheckMovable(kOp, self);
  CheckMovable(kOp, index);
  Tensor s = AtLeast1d(self);
  dim = WrapDim(dim, s.ndim(), kOp);
  // torch checks nothing else for an empty index (of any integer dtype and rank).
  if (index.numel() == 0) return Tensor::Empty(index.shape(), self.dtype());
  Tensor idx = CheckedIndex(s, dim, index, nullptr, kOp);
  Tensor out = Tensor::Empty(idx.shape(), self.dtype());
  if (out.numel() > 0) {
    Tensor sr = Restride(s, idx.shape(), dim);
    const int64_t step = s.stride(dim) * s.element_size();
    std::array<char*, 3> data = {static_cast<char*>(out.data()), static_cast<char*>(idx.data()),
                                 static_cast<char*>(sr.data())};
    auto strides = kernels::ByteStrides<3>({&out, &idx, &sr});
    WithBits(kOp, out.element_size(), [&](auto bits) {
      using U = decltype(bits);
      kernels::ForEachRow<3>(
          idx.shape(), data, strides,
          [&](std::array<char*, 3>& p, const std::array<int64_t, 3>& st, int64_t n) {
            for (int64_t i = 0; i < n; ++i) {
              const int64_t k = *reinterpret_cast<int64_t*>(p[1] + i * st[1]);
              std::memcpy(p[0] + i * st[0], p[2] + i * st[2] + k * step, sizeof(U));
            }
          });
    });
  }
  return index.ndim() == 0 ? out.view(IntArrayRef{}) : out;
}

enum class Reduce { kNone, kSum, kProd, kMean, kMax, kMin };

Reduce ParseReduce(const std::string& name, bool two, const char* op) {
  if (two) {
    if (name == "sum") return Reduce::kSum;
    if (name == "prod") return Reduce::kProd;
    if (name == "mean") return Reduce::kMean;
    if (name == "amax") return Reduce::kMax;
    if (name == "amin") return Reduce::kMin;
    TB_THROW(ValueError) << op << ": reduce argument must be one of sum, prod, mean, amax, amin, "
                         << "got " << name;
  }
  if (name == "add") return Reduce::kSum;
  if (name == "multiply") return Reduce::kProd;
  TB_THROW(ValueError) << op << ": reduce argument must be either add or multiply, got " << name;
}

template <typename T>
T Identity(Reduce r) {
  using Acc = kernels::opmath_t<T>;
  switch (r) {
    case Reduce::kProd: return T(Acc(1));
    case Reduce::kMax:
      if constexpr (std::is_same_v<T, bool>)
        return false;
      else if constexpr (kernels::kIsFloating<T>)
        return T(-std::numeric_limits<Acc>::infinity());
      else
        return std::numeric_limits<T>::lowest();
    case Reduce::kMin:
      if constexpr (std::is_same_v<T, bool>)
        return true;
      else if constexpr (kernels::kIsFloating<T>)
        return T(std::numeric_limits<Acc>::infinity());
      else
        return std::numeric_limits<T>::max();
    default: return T(Acc(0));
  }
}

template <typename T>
T Combine(Reduce r, T a, T b) {
  using Acc = kernels::opmath_t<T>;
  if constexpr (std::is_same_v<T, bool>) {
    switch (r) {
      case Reduce::kProd:
      case Reduce::kMin: return a && b;
      default: return a || b;
    }
  } else {
    const Acc x = static_cast<Acc>(a), y = static_cast<Acc>(b);
    switch (r) {
      case Reduce::kProd: return static_cast<T>(x * y);
      case Reduce::kMax:
        if constexpr (kernels::kIsFloating<T>) {
          if (std::isnan(y)) return b;
        }
        return x < y ? b : a;
      case Reduce::kMin:
        if constexpr (kernels::kIsFloating<T>) {
          if (std::isnan(y)) return b;
        }
        return y < x ? b : a;
      default: return static_cast<T>(x + y);
    }
  }
}

// A mean's sum divided by its count (a count of 0 leaves the value); integers round down.
template <typename T>
T DivideByCount(T v, int64_t count) {
  const int64_t c = count == 0 ? 1 : count;
  if constexpr (kernels::kIsFloating<T>) {
    using Acc = kernels::opmath_t<T>;
    return static_cast<T>(static_cast<Acc>(v) / static_cast<Acc>(static_cast<T>(c)));
  } else if constexpr (std::is_same_v<T, bool>) {
    return v && c == 1;
  } else {
    const int64_t x = static_cast<int64_t>(v);
    int64_t q = x / c;
    if (x % c != 0 && x < 0) --q;  // floor division
    return static_cast<T>(q);
  }
}

// Scatters `src` (already of out's dtype and walked over the index's shape) into the
// contiguous `out` along `dim`, combining with `reduce`.
void ScatterInto(const Tensor& out1, int64_t dim, const Tensor& idx, const Tensor& src,
                 Reduce reduce, bool include_self, const char* op) {
  if (idx.numel() == 0) return;
  Tensor tr = Restride(out1, idx.shape(), dim);
  const int64_t es = out1.element_size();
  const int64_t step = out1.stride(dim) * es;
  std::array<char*, 3> data = {static_cast<char*>(tr.mutable_data()),
                               static_cast<char*>(idx.data()), static_cast<char*>(src.data())};
  auto strides = kernels::ByteStrides<3>({&tr, &idx, &src});
  if (reduce == Reduce::kNone) {
    WithBits(op, es, [&](auto bits) {
      using U = decltype(bits);
      SerialRows<3>(idx.shape(), data, strides,
                    [&](std::array<char*, 3>& p, const std::array<int64_t, 3>& st, int64_t n) {
                      for (int64_t i = 0; i < n; ++i) {
                        const int64_t k = *reinterpret_cast<int64_t*>(p[1] + i * st[1]);
                        std::memcpy(p[0] + i * st[0] + k * step, p[2] + i * st[2], sizeof(U));
                      }
                    });
    });
    return;
  }
  if (IsComplex(out1.dtype()) && reduce == Reduce::kSum) {
    // A complex sum adds the real and the imaginary parts apart, in index order.
    auto sum = [&](auto part) {
      using R = decltype(part);
      SerialRows<3>(idx.shape(), data, strides,
                    [&](std::array<char*, 3>& p, const std::array<int64_t, 3>& st, int64_t n) {
                      for (int64_t i = 0; i < n; ++i) {
                        const int64_t k = *reinterpret_cast<int64_t*>(p[1] + i * st[1]);
                        auto* t = reinterpret_cast<R*>(p[0] + i * st[0] + k * step);
                        const auto* v = reinterpret_cast<const R*>(p[2] + i * st[2]);
                        t[0] += v[0];
                        t[1] += v[1];
                      }
                    });
    };
    if (out1.dtype() == DType::kComplex64) {
      sum(float{});
    } else {
      sum(double{});
    }
    return;
  }
  char* base = static_cast<char*>(out1.data());
  TB_DISPATCH(out1.dtype(), op, TB_TYPES_ALL, [&] {
    using T = scalar_t;
    auto target = [&](std::array<char*, 3>& p, const std::array<int64_t, 3>& st, int64_t i) {
      const int64_t k = *reinterpret_cast<int64_t*>(p[1] + i * st[1]);
      return reinterpret_cast<T*>(p[0] + i * st[0] + k * step);
    };
    if (!include_self) {
      const T init = Identity<T>(reduce);
      SerialRows<3>(idx.shape(), data, strides,
                    [&](std::array<char*, 3>& p, const std::array<int64_t, 3>& st, int64_t n) {
                      for (int64_t i = 0; i < n; ++i) *target(p, st, i) = init;
                    });
    }
    std::vector<int64_t> counts;
    if (reduce == Reduce::kMean) counts.assign(static_cast<size_t>(out1.numel()), include_self);
    SerialRows<3>(idx.shape(), data, strides,
                  [&](std::array<char*, 3>& p, const std::array<int64_t, 3>& st, int64_t n) {
                    for (int64_t i = 0; i < n; ++i) {
                      T* t = target(p, st, i);
                      const T v = *reinterpret_cast<const T*>(p[2] + i * st[2]);
                      *t = Combine<T>(reduce, *t, v);
                      if (!counts.empty()) ++counts[(reinterpret_cast<char*>(t) - base) / es];
                    }
                  });
    if (reduce != Reduce::kMean) return;
    T* o = reinterpret_cast<T*>(base);
    for (int64_t i = 0; i < out1.numel(); ++i) o[i] = DivideByCount<T>(o[i], counts[i]);
  });
}

// The functional scatter: a contiguous copy of self with src scattered in.
Tensor ScatterImpl(const Tensor& self, int64_t dim, const Tensor& index, const Tensor* src,
                   const Scalar* value, Reduce reduce, bool include_self, const char* op) {
  CheckMovable(op, self);
  Tensor out = self.clone();
  Tensor out1 = AtLeast1d(out);
  dim = WrapDim(dim, out1.ndim(), op);
  CheckMovable(op, index);
  if (index.numel() == 0) return out;
  Tensor src1;
  if (src != nullptr) {
    CheckMovable(op, *src);
    src1 = AtLeast1d(*src);
    TB_CHECK(src1.ndim() == out1.ndim(), ValueError)
        << op << ": src must have the same number of dimensions as self";
  }
  Tensor idx = CheckedIndex(out1, dim, index, src != nullptr ? &src1 : nullptr, op);
  if (idx.numel() == 0) return out;
  Tensor vals;
  if (src != nullptr) {
    vals = Cast(src1, self.dtype());
    Dims st(vals.strides());
    vals = vals.as_strided(idx.shape(), st, 0);
  } else {
    vals = Cast(WrapNumber(Value(*value)), self.dtype()).expand(idx.shape());
  }
  ScatterInto(out1, dim, idx, vals, reduce, include_self, op);
  return out;
}

Tensor InPlace(const Tensor& self, const Tensor& result) {
  self.mutable_data();  // BufferError on read-only memory
  CopyCast(self, result);
  return self;
}

Tensor ScatterSrc(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  return ScatterImpl(self, dim, index, &src, nullptr, Reduce::kNone, true, "aten::scatter");
}
Tensor ScatterValue(const Tensor& self, int64_t dim, const Tensor& index, const Scalar& value) {
  return ScatterImpl(self, dim, index, nullptr, &value, Reduce::kNone, true, "aten::scatter");
}
Tensor ScatterReduceSrc(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                        const std::string& reduce) {
  constexpr const char* kOp = "aten::scatter";
  return ScatterImpl(self, dim, index, &src, nullptr, ParseReduce(reduce, false, kOp), true, kOp);
}
Tensor ScatterReduceValue(const Tensor& self, int64_t dim, const Tensor& index, const Scalar& value,
                          const std::string& reduce) {
  constexpr const char* kOp = "aten::scatter";
  return ScatterImpl(self, dim, index, nullptr, &value, ParseReduce(reduce, false, kOp), true, kOp);
}
Tensor ScatterAdd(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  return ScatterImpl(self, dim, index, &src, nullptr, Reduce::kSum, true, "aten::scatter_add");
}
Tensor ScatterReduceTwo(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                        const std::string& reduce, bool include_self) {
  constexpr const char* kOp = "aten::scatter_reduce";
  return ScatterImpl(self, dim, index, &src, nullptr, ParseReduce(reduce, true, kOp), include_self,
                     kOp);
}

Tensor ScatterSrc_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  self.mutable_data();
  return InPlace(self, ScatterSrc(self, dim, index, src));
}
Tensor ScatterValue_(const Tensor& self, int64_t dim, const Tensor& index, const Scalar& value) {
  self.mutable_data();
  return InPlace(self, ScatterValue(self, dim, index, value));
}
Tensor ScatterReduceSrc_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                         const std::string& reduce) {
  self.mutable_data();
  return InPlace(self, ScatterReduceSrc(self, dim, index, src, reduce));
}
Tensor ScatterReduceValue_(const Tensor& self, int64_t dim, const Tensor& index,
                           const Scalar& value, const std::string& reduce) {
  self.mutable_data();
  return InPlace(self, ScatterReduceValue(self, dim, index, value, reduce));
}
Tensor ScatterAdd_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  self.mutable_data();
  return InPlace(self, ScatterAdd(self, dim, index, src));
}
Tensor ScatterReduceTwo_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                         const std::string& reduce, bool include_self) {
  self.mutable_data();
  return InPlace(self, ScatterReduceTwo(self, dim, index, src, reduce, include_self));
}

// ---- view scatters: a copy of self with src written through one view of it ---------------

void WriteView(const Tensor& view, const Tensor& src, const char* op) {
  CheckMovable(op, src);
  try {
    CopyCast(view, src.expand(view.shape()));
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kValueError) throw;
    TB_THROW(ValueError) << op << ": expected src to have a size equal to the slice of self ("
                         << ShapeString(view.shape()) << "), got " << ShapeString(src.shape());
  }
}

// A copy of self with self's strides, dense or not (torch's clone_preserve_strides: the view
// scatters of a functionalized graph keep the layout of the tensor they stand for).
Tensor ClonePreservingStrides(const Tensor& self) {
  Tensor out = EmptyPreservingStrides(self, self.dtype());
  CopyCast(out, self);
  return out;
}

Tensor SelectScatter(const Tensor& self, const Tensor& src, int64_t dim, int64_t index) {
  constexpr const char* kOp = "aten::select_scatter";
  CheckMovable(kOp, self);
  Tensor out = ClonePreservingStrides(self);
  WriteView(out.select(dim, index), src, kOp);
  return out;
}

// The gradients of select and slice: zeros of the input's shape with the gradient written into
// the selected part.
Tensor SelectBackward(const Tensor& grad, const std::vector<int64_t>& input_sizes, int64_t dim,
                      int64_t index) {
  constexpr const char* kOp = "aten::select_backward";
  CheckMovable(kOp, grad);
  Tensor out = Tensor::Zeros(input_sizes, grad.dtype());
  WriteView(out.select(dim, index), grad, kOp);
  return out;
}

Tensor SliceBackward(const Tensor& grad, const std::vector<int64_t>& input_sizes, int64_t dim,
                     int64_t start, int64_t end, int64_t step) {
  constexpr const char* kOp = "aten::slice_backward";
  CheckMovable(kOp, grad);
  Tensor out = Tensor::Zeros(input_sizes, grad.dtype());
  WriteView(out.slice(dim, start, end, step), grad, kOp);
  return out;
}

Tensor SliceScatter(const Tensor& self, const Tensor& src, int64_t dim,
                    std::optional<int64_t> start, std::optional<int64_t> end, int64_t step) {
  constexpr const char* kOp = "aten::slice_scatter";
  CheckMovable(kOp, self);
  Tensor out = ClonePreservingStrides(self);
  WriteView(out.slice(dim, start, end, step), src, kOp);
  return out;
}

Tensor DiagonalScatter(const Tensor& self, const Tensor& src, int64_t offset, int64_t dim1,
                       int64_t dim2) {
  constexpr const char* kOp = "aten::diagonal_scatter";
  CheckMovable(kOp, self);
  Tensor out = ClonePreservingStrides(self);
  WriteView(out.diagonal(offset, dim1, dim2), src, kOp);
  return out;
}

// torch clones self keeping its strides when they are a permutation of contiguous ones; the
// view's storage offset then counts from the clone's first byte.
Tensor AsStridedScatter(const Tensor& self, const Tensor& src, const std::vector<int64_t>& size,
                        const std::vector<int64_t>& stride, std::optional<int64_t> offset) {
  constexpr const char* kOp = "aten::as_strided_scatter";
  CheckMovable(kOp, self);
  TB_CHECK(size.size() == stride.size(), ValueError) << kOp << ": size and stride differ in length";
  for (int64_t s : stride) TB_CHECK(s >= 0, ValueError) << kOp << ": negative stride";
  Tensor out;
  std::vector<int64_t> order(static_cast<size_t>(self.ndim()));
  for (int64_t d = 0; d < self.ndim(); ++d) order[d] = d;
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return self.stride(a) > self.stride(b); });
  Dims perm_shape, inverse(static_cast<size_t>(self.ndim()));
  for (size_t i = 0; i < order.size(); ++i) {
    perm_shape.push_back(self.size(order[i]));
    inverse[order[i]] = static_cast<int64_t>(i);
  }
  Tensor dense = Tensor::Empty(perm_shape, self.dtype()).permute(inverse);
  bool same = true;
  for (int64_t d = 0; d < self.ndim(); ++d) {
    if (self.size(d) > 1 && dense.stride(d) != self.stride(d)) same = false;
  }
  out = same ? dense : Tensor::Empty(self.shape(), self.dtype());
  CopyCast(out, self);
  const int64_t numel = ShapeNumel(size);
  if (numel > 0) {
    int64_t hi = offset.value_or(0);
    for (size_t i = 0; i < size.size(); ++i) hi += (size[i] - 1) * stride[i];
    TB_CHECK(offset.value_or(0) >= 0 && hi < out.numel(), ValueError)
        << kOp << ": the view of size " << ShapeString(size) << " and stride "
        << ShapeString(stride) << " reaches outside self's " << out.numel() << " elements";
  }
  Tensor base = Tensor(out.storage(), out.storage()->data(), Dims{out.numel()}, Dims{1},
                       out.dtype(), Device{});
  WriteView(base.as_strided(size, stride, offset.value_or(0)), src, kOp);
  return out;
}

}  // namespace

TB_REGISTER_KERNELS(scatter) {
  const DeviceType cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::gather", cpu, Boxed<&Gather>(), TB_HERE);
  table.RegisterKernel("aten::scatter.src", cpu, Boxed<&ScatterSrc>(), TB_HERE);
  table.RegisterKernel("aten::scatter.value", cpu, Boxed<&ScatterValue>(), TB_HERE);
  table.RegisterKernel("aten::scatter.reduce", cpu, Boxed<&ScatterReduceSrc>(), TB_HERE);
  table.RegisterKernel("aten::scatter.value_reduce", cpu, Boxed<&ScatterReduceValue>(), TB_HERE);
  table.RegisterKernel("aten::scatter_add", cpu, Boxed<&ScatterAdd>(), TB_HERE);
  table.RegisterKernel("aten::scatter_reduce.two", cpu, Boxed<&ScatterReduceTwo>(), TB_HERE);
  table.RegisterKernel("aten::scatter_.src", cpu, Boxed<&ScatterSrc_>(), TB_HERE);
  table.RegisterKernel("aten::scatter_.value", cpu, Boxed<&ScatterValue_>(), TB_HERE);
  table.RegisterKernel("aten::scatter_.reduce", cpu, Boxed<&ScatterReduceSrc_>(), TB_HERE);
  table.RegisterKernel("aten::scatter_.value_reduce", cpu, Boxed<&ScatterReduceValue_>(), TB_HERE);
  table.RegisterKernel("aten::scatter_add_", cpu, Boxed<&ScatterAdd_>(), TB_HERE);
  table.RegisterKernel("aten::scatter_reduce_.two", cpu, Boxed<&ScatterReduceTwo_>(), TB_HERE);
  table.RegisterKernel("aten::select_scatter", cpu, Boxed<&SelectScatter>(), TB_HERE);
  table.RegisterKernel("aten::select_backward", cpu, Boxed<&SelectBackward>(), TB_HERE);
  table.RegisterKernel("aten::slice_backward", cpu, Boxed<&SliceBackward>(), TB_HERE);
  table.RegisterKernel("aten::slice_scatter", cpu, Boxed<&SliceScatter>(), TB_HERE);
  table.RegisterKernel("aten::diagonal_scatter", cpu, Boxed<&DiagonalScatter>(), TB_HERE);
  table.RegisterKernel("aten::as_strided_scatter", cpu, Boxed<&AsStridedScatter>(), TB_HERE);
}

}  // namespace tb
