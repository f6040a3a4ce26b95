// Indexing along one dimension and by flat position: aten::index_add, index_copy,
// index_fill (Scalar and 0-d Tensor values), index_reduce (prod, mean, amax, amin) and their
// in-place forms; put / put_, take, masked_select, nonzero_static.
//
// As torch's CPU kernels: index_add / index_copy / index_reduce take indices in [0, size);
// index_fill, put and take wrap negative indices. Every index is checked before any element
// moves (IndexError naming the op, the index and the size). Duplicate indices are applied in
// index order, so results are deterministic (torch's CPU loop order): index_add and put with
// accumulate add in that order, index_copy and put keep the last write.
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "dispatch/op_call.h"
#include "dispatch/op_table.h"
#include "kernels/common_internal.h"
#include "kernels/dtype_internal.h"
#include "kernels/promote_broadcast.h"

namespace tb {
namespace {

// The values of an index tensor (0-d or 1-d unless `any_shape`), each checked to lie in
// [0, n), or in [-n, n) and wrapped when `wrap`.
std::vector<int64_t> Indices(const Tensor& index, int64_t n, bool wrap, const char* op,
                             bool long_only = false, bool any_shape = false) {
  kernels::CheckHost(op, index);
  TB_CHECK(any_shape || index.ndim() <= 1, IndexError)
      << op << ": index is supposed to be a vector, got shape " << ShapeString(index.shape());
  if (long_only) {
    TB_CHECK(index.dtype() == DType::kInt64, TypeError)
        << op << ": expected a long tensor for index, but got " << DTypeName(index.dtype());
  } else {
    TB_CHECK(index.dtype() == DType::kInt64 || index.dtype() == DType::kInt32, TypeError)
        << op << ": expected an int32 or int64 index tensor, got " << DTypeName(index.dtype());
  }
  Tensor c = Cast(index, DType::kInt64).contiguous();
  const int64_t* p = c.data_as<const int64_t>();
  std::vector<int64_t> out(p, p + c.numel());
  for (int64_t& i : out) {
    if (i < (wrap ? -n : 0) || i >= n) {
      TB_THROW(IndexError) << op << ": index " << i << " is out of range for a dimension of size "
                           << n;
    }
    if (i < 0) i += n;
  }
  return out;
}

// self viewed as [outer, size(dim), inner] (a 0-d tensor as [1, 1, 1]).
struct Blocks {
  int64_t outer = 1, len = 1, inner = 1;
};
Blocks BlocksOf(IntArrayRef shape, int64_t dim) {
  Blocks b;
  if (shape.empty()) return b;
  b.len = shape[dim];
  for (int64_t d = 0; d < dim; ++d) b.outer *= shape[d];
  for (int64_t d = dim + 1; d < static_cast<int64_t>(shape.size()); ++d) b.inner *= shape[d];
  return b;
}

// Checks source against self for index_add / index_copy / index_reduce: the same number of
// dimensions, the same sizes except along dim, index.numel() entries along dim.
void CheckSource(const Tensor& self, int64_t dim, int64_t count, const Tensor& source,
                 const char* op) {
  kernels::CheckHost(op, source);
  TB_CHECK(source.dtype() == self.dtype(), TypeError)
      << op << ": self (" << DTypeName(self.dtype()) << ") and source ("
      << DTypeName(source.dtype()) << ") must have the same scalar type";
  const int64_t nd = std::max<int64_t>(self.ndim(), 1);
  const int64_t snd = std::max<int64_t>(source.ndim(), 1);
  bool ok = nd == snd;
  for (int64_t d = 0; ok && d < nd; ++d) {
    const int64_t s = self.ndim() ? self.size(d) : 1, t = source.ndim() ? source.size(d) : 1;
    ok = d == dim ? t == count : s == t;
  }
  TB_CHECK(ok, ValueError) << op << ": source of shape " << ShapeString(source.shape())
                           << " does not match self of shape " << ShapeString(self.shape())
                           << " with " << count << " indices along dimension " << dim;
}

enum class Kind { kAdd, kCopy, kProd, kMean, kAmax, kAmin };

// index_add (self + alpha * source, c10::complex's product) or index_copy of complex rows
// with parts of type R, in index order.
template <typename R>
void ComplexIndexCombine(const Tensor& out, const Blocks& b, const std::vector<int64_t>& idx,
                         const Tensor& src, bool add, const Scalar& alpha) {
  using T = std::complex<R>;
  T* o = out.data_as<T>();
  const T* s = src.data_as<const T>();
  const int64_t n = static_cast<int64_t>(idx.size());
  const std::complex<double> a = add ? alpha.to_complex() : std::complex<double>(1);
  const R ar = static_cast<R>(a.real()), ai = static_cast<R>(a.imag());
  for (int64_t x = 0; x < b.outer; ++x) {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t y = 0; y < b.inner; ++y) {
        T& d = o[(x * b.len + idx[i]) * b.inner + y];
        const T v = s[(x * n + i) * b.inner + y];
        if (!add) {
          d = v;
        } else if (ai == 0) {
          d = T(d.real() + ar * v.real(), d.imag() + ar * v.imag());
        } else {
          d = T(d.real() + (ar * v.real() - ai * v.imag()),
                d.imag() + (ar * v.imag() + ai * v.real()));
        }
      }
    }
  }
}

// out (a contiguous copy of self) <- the indexed rows of source combined by `kind`.
void IndexCombine(const Tensor& out, int64_t dim, const std::vector<int64_t>& idx,
                  const Tensor& source, Kind kind, const Scalar& alpha, bool include_self,
                  const char* op) {
  const Blocks b = BlocksOf(out.shape(), dim);
  Tensor src = source.contiguous();
  const int64_t n = static_cast<int64_t>(idx.size());
  if (IsComplex(out.dtype()) && (kind == Kind::kAdd || kind == Kind::kCopy)) {
    if (out.dtype() == DType::kComplex64) {
      ComplexIndexCombine<float>(out, b, idx, src, kind == Kind::kAdd, alpha);
    } else {
      ComplexIndexCombine<double>(out, b, idx, src, kind == Kind::kAdd, alpha);
    }
    return;
  }
  TB_DISPATCH(out.dtype(), op, TB_TYPES_ALL, [&] {
    using T = scalar_t;
    using Acc = std::conditional_t<std::is_same_v<T, bool>, int64_t, kernels::opmath_t<T>>;
    T* o = out.data_as<T>();
    const T* s = src.data_as<const T>();
    auto at = [&](int64_t outer, int64_t row, int64_t in) -> T& {
      return o[(outer * b.len + row) * b.inner + in];
    };
    auto sv = [&](int64_t outer, int64_t i, int64_t in) {
      return s[(outer * n + i) * b.inner + in];
    };
    if (kind == Kind::kAdd) {
      const Acc a = alpha.is_floating_point() ? static_cast<Acc>(alpha.to_double())
                                              : static_cast<Acc>(alpha.to_int());
      for (int64_t x = 0; x < b.outer; ++x) {
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t y = 0; y < b.inner; ++y) {
            T& d = at(x, idx[i], y);
            d = kernels::Convert<T>(static_cast<Acc>(d) + a * static_cast<Acc>(sv(x, i, y)));
          }
        }
      }
      return;
    }
    if (kind == Kind::kCopy) {
      for (int64_t x = 0; x < b.outer; ++x) {
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t y = 0; y < b.inner; ++y) at(x, idx[i], y) = sv(x, i, y);
        }
      }
      return;
    }
    // index_reduce: rows that are indexed start from the reduction's identity when self is
    // left out.
    if (!include_self) {
      constexpr double kInf = std::numeric_limits<double>::infinity();
      T init = kernels::Convert<T>(kind == Kind::kProd ? 1.0 : 0.0);
      if constexpr (kernels::kIsFloating<T>) {
        if (kind == Kind::kAmax) init = kernels::Convert<T>(-kInf);
        if (kind == Kind::kAmin) init = kernels::Convert<T>(kInf);
      } else {
        if (kind == Kind::kAmax) init = std::numeric_limits<T>::lowest();
        if (kind == Kind::kAmin) init = std::numeric_limits<T>::max();
      }
      for (int64_t x = 0; x < b.outer; ++x) {
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t y = 0; y < b.inner; ++y) at(x, idx[i], y) = init;
        }
      }
    }
    for (int64_t x = 0; x < b.outer; ++x) {
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t y = 0; y < b.inner; ++y) {
          T& d = at(x, idx[i], y);
          const T v = sv(x, i, y);
          const Acc dv = static_cast<Acc>(d), vv = static_cast<Acc>(v);
          switch (kind) {
            case Kind::kProd: d = kernels::Convert<T>(dv * vv); break;
            case Kind::kMean: d = kernels::Convert<T>(dv + vv); break;
            case Kind::kAmax: d = (std::isnan(static_cast<double>(vv)) || vv > dv) ? v : d; break;
            case Kind::kAmin: d = (std::isnan(static_cast<double>(vv)) || vv < dv) ? v : d; break;
            default: break;
          }
        }
      }
    }
    if (kind == Kind::kMean) {
      // Each indexed row divided by how many values it took (self counting once when
      // included); integer results round down, as torch's floor division.
      std::vector<int64_t> count(static_cast<size_t>(b.len), include_self ? 1 : 0);
      for (int64_t i : idx) ++count[i];
      for (int64_t x = 0; x < b.outer; ++x) {
        for (int64_t r = 0; r < b.len; ++r) {
          const int64_t c = std::max<int64_t>(count[r], 1);
          if (c == 1) continue;
          for (int64_t y = 0; y < b.inner; ++y) {
            T& d = at(x, r, y);
            if constexpr (kernels::kIsFloating<T>) {
              d = static_cast<T>(static_cast<Acc>(d) / static_cast<Acc>(c));
            } else if constexpr (!std::is_same_v<T, bool>) {
              const int64_t v = static_cast<int64_t>(d);
              int64_t q = v / c;
              if ((v % c != 0) && ((v < 0) != (c < 0))) --q;
              d = static_cast<T>(q);
            }
          }
        }
      }
    }
  });
}

// The shared body of index_add / index_copy / index_reduce: a contiguous result.
Tensor IndexFunc(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                 Kind kind, const Scalar& alpha, bool include_self, const char* op) {
  kernels::CheckHost(op, self);
  dim = WrapDim(dim, std::max<int64_t>(self.ndim(), 1), op);
  const int64_t len = self.ndim() ? self.size(dim) : 1;
  std::vector<int64_t> idx = Indices(index, len, /*wrap=*/false, op);
  CheckSource(self, dim, static_cast<int64_t>(idx.size()), source, op);
  Tensor out = self.clone();
  IndexCombine(out, dim, idx, source, kind, alpha, include_self, op);
  return out;
}

Tensor IntoSelf(const Tensor& self, const Tensor& result) {
  self.mutable_data();  // BufferError on read-only memory
  CopyCast(self, result);
  return self;
}

Tensor IndexAdd(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                const Scalar& alpha) {
  return IndexFunc(self, dim, index, source, Kind::kAdd, alpha, true, "aten::index_add");
}
Tensor IndexAdd_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                 const Scalar& alpha) {
  return IntoSelf(self,
                  IndexFunc(self, dim, index, source, Kind::kAdd, alpha, true, "aten::index_add_"));
}
Tensor IndexCopy(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source) {
  return IndexFunc(self, dim, index, source, Kind::kCopy, Scalar(int64_t{1}), true,
                   "aten::index_copy");
}
Tensor IndexCopy_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source) {
  return IntoSelf(self, IndexFunc(self, dim, index, source, Kind::kCopy, Scalar(int64_t{1}), true,
                                  "aten::index_copy_"));
}

Kind ReduceKind(const std::string& reduce, const char* op) {
  if (reduce == "prod") return Kind::kProd;
  if (reduce == "mean") return Kind::kMean;
  if (reduce == "amax") return Kind::kAmax;
  if (reduce == "amin") return Kind::kAmin;
  TB_THROW(ValueError) << op << ": reduce argument must be one of prod, mean, amax or amin, got '"
                       << reduce << "'";
}

Tensor IndexReduce(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                   const std::string& reduce, bool include_self) {
  constexpr const char* kOp = "aten::index_reduce";
  return IndexFunc(self, dim, index, source, ReduceKind(reduce, kOp), Scalar(int64_t{1}),
                   include_self, kOp);
}
Tensor IndexReduce_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                    const std::string& reduce, bool include_self) {
  constexpr const char* kOp = "aten::index_reduce_";
  return IntoSelf(self, IndexFunc(self, dim, index, source, ReduceKind(reduce, kOp),
                                  Scalar(int64_t{1}), include_self, kOp));
}

Tensor IndexFillImpl(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& value,
                     const char* op) {
  kernels::CheckHost(op, self);
  dim = WrapDim(dim, std::max<int64_t>(self.ndim(), 1), op);
  const int64_t len = self.ndim() ? self.size(dim) : 1;
  std::vector<int64_t> idx = Indices(index, len, /*wrap=*/true, op, /*long_only=*/true);
  Tensor out = self.clone();
  if (idx.empty() || out.numel() == 0) return out;
  Tensor v = Cast(value, out.dtype());
  Tensor moved = out.ndim() ? out : out.reshape({1});
  for (int64_t i : idx) CopyCast(moved.select(dim, i), v);
  return out;
}

Tensor ValueTensor(const Scalar& value) {
  if (value.is_complex()) return WrapNumber(Value(value));
  Tensor t = Tensor::Empty({}, value.is_floating_point() ? DType::kFloat64 : DType::kInt64);
  if (value.is_floating_point()) {
    *t.data_as<double>() = value.to_double();
  } else {
    *t.data_as<int64_t>() = value.to_int();
  }
  return t;
}

Tensor IndexFillScalar(const Tensor& self, int64_t dim, const Tensor& index, const Scalar& value) {
  return IndexFillImpl(self, dim, index, ValueTensor(value), "aten::index_fill");
}
Tensor IndexFillTensor(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& value) {
  TB_CHECK(value.ndim() == 0, ValueError)
      << "aten::index_fill: only supports a 0-dimensional value tensor, but got tensor with "
      << value.ndim() << " dimension(s)";
  kernels::CheckHost("aten::index_fill", value);
  return IndexFillImpl(self, dim, index, value, "aten::index_fill");
}
Tensor IndexFillScalar_(const Tensor& self, int64_t dim, const Tensor& index, const Scalar& value) {
  return IntoSelf(self, IndexFillImpl(self, dim, index, ValueTensor(value), "aten::index_fill_"));
}
Tensor IndexFillTensor_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& value) {
  return IntoSelf(self, IndexFillTensor(self, dim, index, value));
}

Tensor PutImpl(const Tensor& self, const Tensor& index, const Tensor& source, bool accumulate,
               const char* op) {
  kernels::CheckHost(op, self);
  kernels::CheckHost(op, source);
  TB_CHECK(source.dtype() == self.dtype(), TypeError)
      << op << ": self (" << DTypeName(self.dtype()) << ") and source ("
      << DTypeName(source.dtype()) << ") must have the same scalar type";
  TB_CHECK(index.numel() == source.numel(), ValueError)
      << op << ": expected source and index to have the same number of elements, but got "
      << source.numel() << " and " << index.numel();
  std::vector<int64_t> idx;
  if (index.numel() > 0) {
    TB_CHECK(self.numel() > 0, IndexError) << op << ": cannot put into an empty tensor";
    idx = Indices(index, self.numel(), /*wrap=*/true, op, /*long_only=*/true, /*any_shape=*/true);
  }
  Tensor out = self.clone();
  const Tensor flat = out.reshape({out.numel()});
  IndexCombine(flat, 0, idx, source.reshape({source.numel()}),
               accumulate ? Kind::kAdd : Kind::kCopy, Scalar(int64_t{1}), true, op);
  return out;
}

Tensor Put(const Tensor& self, const Tensor& index, const Tensor& source, bool accumulate) {
  return PutImpl(self, index, source, accumulate, "aten::put");
}
Tensor Put_(const Tensor& self, const Tensor& index, const Tensor& source, bool accumulate) {
  return IntoSelf(self, PutImpl(self, index, source, accumulate, "aten::put_"));
}

Tensor Take(const Tensor& self, const Tensor& index) {
  constexpr const char* kOp = "aten::take";
  kernels::CheckHost(kOp, self);
  std::vector<int64_t> idx;
  if (index.numel() > 0) {
    TB_CHECK(self.numel() > 0, IndexError) << kOp << ": cannot take from an empty tensor";
    idx = Indices(index, self.numel(), /*wrap=*/true, kOp, /*long_only=*/true,
                  /*any_shape=*/true);
  } else {
    Indices(index, 0, true, kOp, true, true);
  }
  Tensor flat = self.reshape({self.numel()});
  return GatherBlocks(flat, 0, idx).view(index.shape());
}

Tensor MaskedSelect(const Tensor& self, const Tensor& mask) {
  constexpr const char* kOp = "aten::masked_select";
  kernels::CheckHost(kOp, self);
  kernels::CheckHost(kOp, mask);
  TB_CHECK(mask.dtype() == DType::kBool, TypeError)
      << kOp << ": expected BoolTensor for mask, got " << DTypeName(mask.dtype());
  const Dims shape = BroadcastShapes({self.shape(), mask.shape()}, kOp);
  Tensor m = mask.expand(shape).contiguous();
  const bool* mp = m.data_as<const bool>();
  std::vector<int64_t> picked;
  for (int64_t i = 0; i < m.numel(); ++i) {
    if (mp[i]) picked.push_back(i);
  }
  Tensor s = self.expand(shape).contiguous();
  return GatherBlocks(s.reshape({s.numel()}), 0, picked);
}

Tensor NonzeroStatic(const Tensor& self, int64_t size, int64_t fill_value) {
  constexpr const char* kOp = "aten::nonzero_static";
  kernels::CheckHost(kOp, self);
  TB_CHECK(size >= 0, ValueError) << kOp << ": 'size' must be non-negative, got " << size;
  static const OpRef nonzero("aten::nonzero");
  Tensor nz = nonzero(self).tensor().contiguous();
  const int64_t nd = self.ndim(), count = nz.size(0);
  Tensor out = Tensor::Empty({size, nd}, DType::kInt64);
  int64_t* o = out.data_as<int64_t>();
  const int64_t* p = nz.data_as<const int64_t>();
  const int64_t keep = std::min(size, count);
  std::copy(p, p + keep * nd, o);
  std::fill(o + keep * nd, o + size * nd, fill_value);
  return out;
}

// torch's grad of masked_scatter for source: the masked elements of grad in order, padded
// with zeros to numel(sizes), viewed as sizes.
Tensor MaskedScatterBackward(const Tensor& grad, const Tensor& mask,
                             const std::vector<int64_t>& sizes) {
  constexpr const char* kOp = "aten::masked_scatter_backward";
  int64_t numel = 1;
  for (int64_t v : sizes) numel *= v;
  Tensor picked = MaskedSelect(grad, mask);
  TB_CHECK(picked.numel() <= numel, ValueError)
      << kOp << ": " << picked.numel() << " masked elements do not fit sizes "
      << ShapeString(sizes);
  Tensor out = Tensor::Zeros({numel}, grad.dtype());
  if (picked.numel() > 0) CopyCast(out.slice(0, 0, picked.numel()), picked);
  return out.view(sizes);
}

// Indices clamped into [lo(size), size - 1] per indexed dimension (None stays None).
std::vector<std::optional<Tensor>> ClampIndices(const Tensor& self,
                                                const std::vector<std::optional<Tensor>>& indices,
                                                bool allow_negative, const char* op) {
  static const OpRef clamp("aten::clamp");
  TB_CHECK(static_cast<int64_t>(indices.size()) <= self.ndim(), IndexError)
      << op << ": too many indices (" << indices.size() << ") for a tensor of dimension "
      << self.ndim();
  std::vector<std::optional<Tensor>> out;
  for (size_t i = 0; i < indices.size(); ++i) {
    if (!indices[i]) {
      out.push_back(std::nullopt);
      continue;
    }
    TB_CHECK(indices[i]->dtype() == DType::kInt64 || indices[i]->dtype() == DType::kInt32,
             TypeError)
        << op << ": expected int32 or int64 indices, got " << DTypeName(indices[i]->dtype());
    const int64_t n = self.size(static_cast<int64_t>(i));
    out.push_back(
        clamp(*indices[i], Scalar(allow_negative ? -n : int64_t{0}), Scalar(n - 1)).tensor());
  }
  return out;
}

// x[clamped indices] where mask, else fill (torch's decomposition of the op).
Tensor UnsafeMaskedIndex(const Tensor& self, const Tensor& mask,
                         const std::vector<std::optional<Tensor>>& indices, const Scalar& fill) {
  constexpr const char* kOp = "aten::_unsafe_masked_index";
  kernels::CheckHost(kOp, self);
  TB_CHECK(mask.dtype() == DType::kBool, TypeError)
      << kOp << ": expected a bool mask, got " << DTypeName(mask.dtype());
  static const OpRef index("aten::_unsafe_index.Tensor"), masked_fill("aten::masked_fill.Scalar"),
      logical_not("aten::logical_not"), full("aten::full");
  if (self.numel() == 0) {
    // The shape index.Tensor would give, filled: index stand-ins whose empty dims have size 1
    // and then 2 with zero indices; result dims that change size come from those empty dims.
    std::vector<std::optional<Tensor>> zeros;
    for (const auto& i : indices) {
      zeros.push_back(i ? std::optional<Tensor>(Tensor::Zeros(i->shape(), DType::kInt64))
                        : std::nullopt);
    }
    Dims s1(self.shape()), s2(self.shape());
    for (size_t d = 0; d < s1.size(); ++d) {
      if (s1[d] == 0) {
        s1[d] = 1;
        s2[d] = 2;
      }
    }
    const Tensor r1 = index(Tensor::Zeros(s1, self.dtype()), zeros).tensor();
    const Tensor r2 = index(Tensor::Zeros(s2, self.dtype()), zeros).tensor();
    std::vector<int64_t> shape(r1.shape().begin(), r1.shape().end());
    for (size_t d = 0; d < shape.size(); ++d) {
      if (r1.shape()[d] != r2.shape()[d]) shape[d] = 0;
    }
    return full.WithKeywords({shape, fill}, {{"dtype", self.dtype()}}).tensor();
  }
  Tensor picked = index(self, ClampIndices(self, indices, false, kOp)).tensor();
  return masked_fill(picked, logical_not(mask).tensor(), fill).tensor();
}

// x with values (zero where not mask) added at the clamped indices.
Tensor UnsafeMaskedIndexPutAccumulate(const Tensor& self, const Tensor& mask,
                                      const std::vector<std::optional<Tensor>>& indices,
                                      const Tensor& values) {
  constexpr const char* kOp = "aten::_unsafe_masked_index_put_accumulate";
  kernels::CheckHost(kOp, self);
  TB_CHECK(mask.dtype() == DType::kBool, TypeError)
      << kOp << ": expected a bool mask, got " << DTypeName(mask.dtype());
  if (self.numel() == 0) return self.clone();
  static const OpRef put("aten::_unsafe_index_put"), masked_fill("aten::masked_fill.Scalar"),
      logical_not("aten::logical_not");
  Tensor masked = masked_fill(values, logical_not(mask).tensor(), Scalar(int64_t{0})).tensor();
  return put(self, ClampIndices(self, indices, true, kOp), masked, true).tensor();
}

}  // namespace

TB_REGISTER_KERNELS(index_reduce) {
  const DeviceType cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::index_add", cpu, Boxed<&IndexAdd>(), TB_HERE);
  table.RegisterKernel("aten::index_add_", cpu, Boxed<&IndexAdd_>(), TB_HERE);
  table.RegisterKernel("aten::index_copy", cpu, Boxed<&IndexCopy>(), TB_HERE);
  table.RegisterKernel("aten::index_copy_", cpu, Boxed<&IndexCopy_>(), TB_HERE);
  table.RegisterKernel("aten::index_reduce", cpu, Boxed<&IndexReduce>(), TB_HERE);
  table.RegisterKernel("aten::index_reduce_", cpu, Boxed<&IndexReduce_>(), TB_HERE);
  table.RegisterKernel("aten::index_fill.int_Scalar", cpu, Boxed<&IndexFillScalar>(), TB_HERE);
  table.RegisterKernel("aten::index_fill.int_Tensor", cpu, Boxed<&IndexFillTensor>(), TB_HERE);
  table.RegisterKernel("aten::index_fill_.int_Scalar", cpu, Boxed<&IndexFillScalar_>(), TB_HERE);
  table.RegisterKernel("aten::index_fill_.int_Tensor", cpu, Boxed<&IndexFillTensor_>(), TB_HERE);
  table.RegisterKernel("aten::put", cpu, Boxed<&Put>(), TB_HERE);
  table.RegisterKernel("aten::put_", cpu, Boxed<&Put_>(), TB_HERE);
  table.RegisterKernel("aten::take", cpu, Boxed<&Take>(), TB_HERE);
  table.RegisterKernel("aten::masked_select", cpu, Boxed<&MaskedSelect>(), TB_HERE);
  table.RegisterKernel("aten::nonzero_static", cpu, Boxed<&NonzeroStatic>(), TB_HERE);
  table.RegisterKernel("aten::masked_scatter_backward", cpu, Boxed<&MaskedScatterBackward>(),
                       TB_HERE);
  table.RegisterKernel("aten::_unsafe_masked_index", cpu, Boxed<&UnsafeMaskedIndex>(), TB_HERE);
  table.RegisterKernel("aten::_unsafe_masked_index_put_accumulate", cpu,
                       Boxed<&UnsafeMaskedIndexPutAccumulate>(), TB_HERE);
}

}  // namespace tb
