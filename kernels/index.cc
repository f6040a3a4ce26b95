// Indexing: aten::index.Tensor (and _unsafe_index.Tensor), index_put, index_put_,
// _unsafe_index_put, index_select, nonzero, embedding, embedding_dense_backward.
//
// Advanced indexing follows torch: bool / uint8 masks become the coordinates of their true
// elements; the index tensors broadcast together to a shape B; when the indexed dimensions
// are adjacent B replaces them in place, otherwise B leads the result. Every index is
// checked before any element moves (IndexError naming the op, the index and the size) and
// negative indices wrap, as in torch. index_select, embedding and the like take indices in
// [0, size) only, as torch does.
#include <algorithm>
#include <complex>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "dispatch/op_table.h"
#include "kernels/common_internal.h"
#include "kernels/complex_internal.h"
#include "kernels/dtype_internal.h"
#include "kernels/layout.h"
#include "kernels/promote_broadcast.h"

namespace tb {
namespace {

using kernels::CheckHost;
using kernels::WithBits;

// A contiguous int64 copy (or the tensor itself) of an integer index tensor.
Tensor LongIndex(const Tensor& t, const char* op) {
  CheckHost(op, t);
  TB_CHECK(IsIntegral(t.dtype(), /*include_bool=*/false), IndexError)
      << op << ": tensors used as indices must be long, int, byte or bool tensors, got "
      << DTypeName(t.dtype());
  return Cast(t, DType::kInt64).contiguous();
}

template <typename T>
bool NonzeroValue(T v) {
  if constexpr (kernels::kIsReducedFloat<T>) {
    return static_cast<float>(v) != 0.0f;
  } else {
    return v != T(0);
  }
}

// Coordinates of the nonzero elements of `self` in row-major order: [count, ndim] int64.
Tensor NonzeroImpl(const Tensor& self, const char* op) {
  CheckHost(op, self);
  Tensor c = IsComplex(self.dtype()) ? kernels::complex::NonzeroMask(self) : self.contiguous();
  const int64_t nd = c.ndim(), numel = c.numel();
  std::vector<uint8_t> nz(static_cast<size_t>(numel));
  TB_DISPATCH(c.dtype(), op, TB_TYPES_ALL, [&] {
    const scalar_t* p = c.data_as<const scalar_t>();
    for (int64_t i = 0; i < numel; ++i) nz[i] = NonzeroValue(p[i]);
  });
  int64_t count = 0;
  for (uint8_t v : nz) count += v;
  // Laid out as torch's: the coordinates of one dimension together (strides [1, count]).
  Tensor out = Tensor::Empty({nd, count}, DType::kInt64).transpose(0, 1);
  int64_t* o = out.data_as<int64_t>();
  Dims coord(static_cast<size_t>(nd), 0);
  int64_t k = 0;
  for (int64_t i = 0; i < numel; ++i) {
    if (nz[i]) {
      for (int64_t d = 0; d < nd; ++d) o[d * count + k] = coord[d];
      ++k;
    }
    for (int64_t d = nd - 1; d >= 0; --d) {
      if (++coord[d] < c.size(d)) break;
      coord[d] = 0;
    }
  }
  return out;
}

Tensor Nonzero(const Tensor& self) { return NonzeroImpl(self, "aten::nonzero"); }

// Calls fn(dst, src) for every element of a block of `sizes` with byte strides.
template <typename F>
void ForBlock(char* dst, const Dims& dst_strides, const char* src, const Dims& src_strides,
              const Dims& sizes, F&& fn) {
  const int64_t nd = static_cast<int64_t>(sizes.size());
  if (nd == 0) {
    fn(dst, src);
    return;
  }
  const int64_t inner = sizes[nd - 1], ds = dst_strides[nd - 1], ss = src_strides[nd - 1];
  int64_t outer = 1;
  for (int64_t d = 0; d < nd - 1; ++d) outer *= sizes[d];
  Dims coord(static_cast<size_t>(nd), 0);
  for (int64_t r = 0; r < outer; ++r) {
    char* dp = dst;
    const char* sp = src;
    for (int64_t d = 0; d < nd - 1; ++d) {
      dp += coord[d] * dst_strides[d];
      sp += coord[d] * src_strides[d];
    }
    for (int64_t i = 0; i < inner; ++i) fn(dp + i * ds, sp + i * ss);
    for (int64_t d = nd - 2; d >= 0; --d) {
      if (++coord[d] < sizes[d]) break;
      coord[d] = 0;
    }
  }
}

// What an advanced index selects in `self`.
struct IndexPlan {
  bool empty_mask = false;          // a 0-d false mask: nothing is selected
  bool any = false;                 // some dimension is indexed by a tensor
  Dims bshape;                      // the index tensors' broadcast shape
  Dims result_shape;                // what index.Tensor returns
  int64_t pre = 0;                  // result dimensions before the B dimensions
  Dims rest_sizes;                  // the dimensions no tensor indexes, in result order ...
  Dims rest_self_strides;           // ... their strides in self (bytes)
  Dims rest_pos;                    // ... and their positions in result_shape
  std::vector<int64_t> offsets;     // per element of B: byte offset of its block in self
  std::vector<Dims> index_strides;  // per index tensor: its strides broadcast to bshape
};

IndexPlan PlanIndex(const Tensor& self, const std::vector<std::optional<Tensor>>& indices,
                    const char* op) {
  IndexPlan plan;
  const int64_t nd = self.ndim();
  std::vector<std::optional<Tensor>> per_dim;  // one entry per consumed dimension
  for (const auto& ix : indices) {
    if (!ix) {
      per_dim.emplace_back(std::nullopt);
      continue;
    }
    CheckHost(op, *ix);
    if (ix->dtype() == DType::kBool || ix->dtype() == DType::kUInt8) {
      const int64_t start = static_cast<int64_t>(per_dim.size());
      TB_CHECK(start + ix->ndim() <= nd, IndexError)
          << op << ": too many indices for tensor of dimension " << nd;
      for (int64_t j = 0; j < ix->ndim(); ++j) {
        TB_CHECK(ix->size(j) == self.size(start + j), IndexError)
            << op << ": the shape of the mask " << ShapeString(ix->shape()) << " at index " << j
            << " does not match the shape of the indexed tensor " << ShapeString(self.shape())
            << " at index " << start + j;
      }
      if (ix->ndim() == 0) {
        if (NonzeroImpl(*ix, op).size(0) == 0) plan.empty_mask = true;
        continue;
      }
      Tensor nz = NonzeroImpl(*ix, op);
      for (int64_t j = 0; j < ix->ndim(); ++j) per_dim.emplace_back(nz.select(1, j));
    } else {
      per_dim.emplace_back(LongIndex(*ix, op));
    }
  }
  TB_CHECK(static_cast<int64_t>(per_dim.size()) <= nd, IndexError)
      << op << ": too many indices for tensor of dimension " << nd << " (got " << per_dim.size()
      << ")";
  std::vector<int64_t> dims;
  std::vector<IntArrayRef> shapes;
  for (size_t d = 0; d < per_dim.size(); ++d) {
    if (per_dim[d]) {
      dims.push_back(static_cast<int64_t>(d));
      shapes.push_back(per_dim[d]->shape());
    }
  }
  if (dims.empty()) return plan;
  plan.any = true;
  try {
    plan.bshape = BroadcastShapes(shapes, op);
  } catch (const Error&) {
    std::string all;
    for (auto s : shapes) all += ShapeString(s) + " ";
    TB_THROW(IndexError) << op << ": shape mismatch: indexing tensors could not be broadcast "
                         << "together with shapes " << all;
  }
  const bool adjacent = dims.back() - dims.front() + 1 == static_cast<int64_t>(dims.size());
  plan.pre = adjacent ? dims.front() : 0;
  for (int64_t d = 0; d < plan.pre; ++d) plan.result_shape.push_back(self.size(d));
  for (int64_t s : plan.bshape) plan.result_shape.push_back(s);
  const int64_t es = self.element_size();
  for (int64_t d = 0; d < nd; ++d) {
    const bool indexed = d < static_cast<int64_t>(per_dim.size()) && per_dim[d].has_value();
    if (indexed) continue;
    if (d < plan.pre) {
      plan.rest_pos.push_back(d);
    } else {
      plan.rest_pos.push_back(static_cast<int64_t>(plan.result_shape.size()));
      plan.result_shape.push_back(self.size(d));
    }
    plan.rest_sizes.push_back(self.size(d));
    plan.rest_self_strides.push_back(self.stride(d) * es);
  }
  // Offsets, with every index checked (and negative ones wrapped) first.
  const int64_t numb = ShapeNumel(plan.bshape);
  plan.offsets.assign(static_cast<size_t>(numb), 0);
  for (int64_t d : dims) {
    const Tensor& ix = *per_dim[d];
    Dims st(plan.bshape.size(), 0);
    const size_t lead = plan.bshape.size() - static_cast<size_t>(ix.ndim());
    for (int64_t j = 0; j < ix.ndim(); ++j) {
      if (ix.size(j) != 1) st[lead + j] = ix.stride(j);
    }
    plan.index_strides.push_back(std::move(st));
    Tensor e = Tensor::Empty(plan.bshape, DType::kInt64);
    CopyCast(e, *per_dim[d]);
    const int64_t* v = e.data_as<const int64_t>();
    const int64_t n = self.size(d), stride = self.stride(d) * es;
    for (int64_t b = 0; b < numb; ++b) {
      int64_t i = v[b];
      if (i < -n || i >= n) {
        TB_THROW(IndexError) << op << ": index " << i << " is out of bounds for dimension " << d
                             << " with size " << n;
      }
      if (i < 0) i += n;
      plan.offsets[b] += i * stride;
    }
  }
  return plan;
}

Tensor Index(const Tensor& self, const std::vector<std::optional<Tensor>>& indices) {
  constexpr const char* kOp = "aten::index";
  CheckHost(kOp, self);
  IndexPlan plan = PlanIndex(self, indices, kOp);
  TB_CHECK(plan.any && !plan.empty_mask, IndexError)
      << kOp << ": at least one index must be a tensor with dimensions";
  // Laid out as torch's TensorIterator lays it out over self (its indexed dimensions
  // broadcast) and the index tensors (broadcast over the others).
  const int64_t rnd = static_cast<int64_t>(plan.result_shape.size());
  const int64_t nb = static_cast<int64_t>(plan.bshape.size());
  std::vector<Dims> operands(1, Dims(static_cast<size_t>(rnd), 0));
  for (size_t i = 0; i < plan.rest_pos.size(); ++i) {
    operands[0][plan.rest_pos[i]] = plan.rest_self_strides[i];
  }
  for (const Dims& st : plan.index_strides) {
    Dims o(static_cast<size_t>(rnd), 0);
    for (int64_t j = 0; j < nb; ++j) o[plan.pre + j] = st[j];
    operands.push_back(std::move(o));
  }
  const Dims order = ElementwiseOrder(plan.result_shape, operands);
  Tensor out =
      EmptyDense(plan.result_shape, StridesInOrder(plan.result_shape, order), self.dtype());
  if (out.numel() == 0) return out;
  const int64_t es = self.element_size();
  Dims dst_strides;
  for (int64_t p : plan.rest_pos) dst_strides.push_back(out.stride(p) * es);
  Dims b_strides;  // out's strides over the B dimensions
  for (int64_t j = 0; j < nb; ++j) b_strides.push_back(out.stride(plan.pre + j));
  const char* src = static_cast<const char*>(self.data());
  char* dst = static_cast<char*>(out.data());
  const int64_t numb = static_cast<int64_t>(plan.offsets.size());
  const int64_t work = out.numel();
  WithBits(kOp, es, [&](auto bits) {
    using U = decltype(bits);
    auto copy = [](char* d, const char* s) { std::memcpy(d, s, sizeof(U)); };
#pragma omp parallel for if (work > (1 << 16)) schedule(static)
    for (int64_t b = 0; b < numb; ++b) {
      int64_t at = 0;  // b's position in out: its coordinates over B, row-major
      for (int64_t j = nb - 1, r = b; j >= 0; --j) {
        at += (r % plan.bshape[j]) * b_strides[j];
        r /= plan.bshape[j];
      }
      ForBlock(dst + at * es, dst_strides, src + plan.offsets[b], plan.rest_self_strides,
               plan.rest_sizes, copy);
    }
  });
  return out;
}

// *d += *s for elements of type T (logical or for bool).
template <typename T>
void AddTo(char* d, const char* s) {
  T& x = *reinterpret_cast<T*>(d);
  const T y = *reinterpret_cast<const T*>(s);
  if constexpr (std::is_same_v<T, bool>) {
    x = x || y;
  } else if constexpr (kernels::kIsReducedFloat<T>) {
    x = T(static_cast<float>(x) + static_cast<float>(y));
  } else {
    x = static_cast<T>(x + y);
  }
}

// Writes (or adds, with accumulate) `values` into what `indices` selects in `self`.
void IndexPutInto(const Tensor& self, const std::vector<std::optional<Tensor>>& indices,
                  const Tensor& values, bool accumulate, const char* op) {
  CheckHost(op, self);
  CheckHost(op, values);
  IndexPlan plan = PlanIndex(self, indices, op);
  if (plan.empty_mask) return;
  Tensor v = Cast(values, self.dtype());
  // values may share memory with self: read them all before writing.
  if (v.storage() == self.storage()) v = v.clone();
  if (!plan.any) {
    // No tensor index (or only 0-d true masks): the whole of self is selected.
    plan.result_shape = Dims(self.shape());
    plan.offsets.assign(1, 0);
    plan.rest_sizes = Dims(self.shape());
    plan.rest_pos.resize(0);
    plan.rest_self_strides.resize(0);
    for (int64_t d = 0; d < self.ndim(); ++d) {
      plan.rest_pos.push_back(d);
      plan.rest_self_strides.push_back(self.stride(d) * self.element_size());
    }
  }
  if (ShapeNumel(plan.result_shape) == 0) {
    self.mutable_data();
    return;
  }
  Tensor ve;
  try {
    ve = v.expand(plan.result_shape);
  } catch (const Error&) {
    TB_THROW(ValueError) << op << ": shape mismatch: value tensor of shape "
                         << ShapeString(values.shape())
                         << " cannot be broadcast to indexing result of shape "
                         << ShapeString(plan.result_shape);
  }
  char* dst = static_cast<char*>(self.mutable_data());
  const char* src = static_cast<const char*>(ve.data());
  const int64_t es = self.element_size();
  Dims val_strides;
  for (int64_t p : plan.rest_pos) val_strides.push_back(ve.stride(p) * es);
  // Values' offset per B position: B is row-major over result dims [pre, pre + |B|).
  const int64_t nb = static_cast<int64_t>(plan.bshape.size());
  Dims bcoord(static_cast<size_t>(nb), 0);
  auto run = [&](auto&& fn) {
    const int64_t numb = static_cast<int64_t>(plan.offsets.size());
    for (int64_t b = 0; b < numb; ++b) {
      int64_t voff = 0;
      for (int64_t k = 0; k < nb; ++k) voff += bcoord[k] * ve.stride(plan.pre + k);
      ForBlock(dst + plan.offsets[b], plan.rest_self_strides, src + voff * es, val_strides,
               plan.rest_sizes, fn);
      for (int64_t k = nb - 1; k >= 0; --k) {
        if (++bcoord[k] < plan.bshape[k]) break;
        bcoord[k] = 0;
      }
    }
  };
  if (!accumulate) {
    // In order, so that with repeated indices the last value wins (torch's CPU behaviour).
    WithBits(op, es, [&](auto bits) {
      using U = decltype(bits);
      run([](char* d, const char* s) { std::memcpy(d, s, sizeof(U)); });
    });
    return;
  }
  if (self.dtype() == DType::kComplex64) return run(AddTo<std::complex<float>>);
  if (self.dtype() == DType::kComplex128) return run(AddTo<std::complex<double>>);
  TB_DISPATCH(self.dtype(), op, TB_TYPES_ALL, [&] {
    using T = scalar_t;
    run([](char* d, const char* s) { AddTo<T>(d, s); });
  });
}

Tensor IndexPut(const Tensor& self, const std::vector<std::optional<Tensor>>& indices,
                const Tensor& values, bool accumulate) {
  CheckHost("aten::index_put", self);
  Tensor out = CloneLike(self);  // self's layout, as torch's
  IndexPutInto(out, indices, values, accumulate, "aten::index_put");
  return out;
}

Tensor IndexPutInPlace(const Tensor& self, const std::vector<std::optional<Tensor>>& indices,
                       const Tensor& values, bool accumulate) {
  self.mutable_data();  // BufferError on read-only memory
  IndexPutInto(self, indices, values, accumulate, "aten::index_put_");
  return self;
}

// The values of an integer index tensor, each checked to lie in [0, n).
std::vector<int64_t> CheckedIndices(const Tensor& index, int64_t n, int64_t dim, const char* op) {
  CheckHost(op, index);
  TB_CHECK(IsIntegral(index.dtype(), /*include_bool=*/false), TypeError)
      << op << ": expected an integer index tensor (int32 or int64), got "
      << DTypeName(index.dtype());
  Tensor c = Cast(index, DType::kInt64).contiguous();
  const int64_t* p = c.data_as<const int64_t>();
  std::vector<int64_t> out(p, p + c.numel());
  for (int64_t i : out) {
    if (i < 0 || i >= n) {
      TB_THROW(IndexError) << op << ": index " << i << " is out of range for dimension " << dim
                           << " with size " << n;
    }
  }
  return out;
}

Tensor IndexSelect(const Tensor& self, int64_t dim, const Tensor& index) {
  constexpr const char* kOp = "aten::index_select";
  CheckHost(kOp, self);
  TB_CHECK(index.ndim() <= 1, IndexError)
      << kOp << ": index is supposed to be a vector, got shape " << ShapeString(index.shape());
  dim = WrapDim(dim, self.ndim(), kOp);
  if (self.ndim() == 0) {
    CheckedIndices(index, 1, 0, kOp);
    TB_CHECK(index.numel() == 1, IndexError)
        << kOp << ": index_select() on a 0-d tensor takes exactly one index, got " << index.numel();
    return self.clone();
  }
  std::vector<int64_t> idx = CheckedIndices(index, self.size(dim), dim, kOp);
  return GatherBlocks(self, dim, idx);
}

Tensor Embedding(const Tensor& weight, const Tensor& indices, int64_t /*padding_idx*/,
                 bool /*scale_grad_by_freq*/, bool /*sparse*/) {
  constexpr const char* kOp = "aten::embedding";
  CheckHost(kOp, weight);
  TB_CHECK(weight.ndim() == 2, ValueError)
      << kOp << ": 'weight' must be 2-D, got shape " << ShapeString(weight.shape());
  std::vector<int64_t> idx = CheckedIndices(indices, weight.size(0), 0, kOp);
  Tensor rows = GatherBlocks(weight, 0, idx);
  Dims shape(indices.shape());
  shape.push_back(weight.size(1));
  return rows.view(shape);
}

Tensor EmbeddingDenseBackward(const Tensor& grad_output, const Tensor& indices, int64_t num_weights,
                              int64_t padding_idx, bool scale_grad_by_freq) {
  constexpr const char* kOp = "aten::embedding_dense_backward";
  CheckHost(kOp, grad_output);
  TB_CHECK(num_weights >= 0, ValueError) << kOp << ": num_weights must be non-negative";
  const int64_t dim = grad_output.ndim() > 0 ? grad_output.size(-1) : 1;
  const int64_t n = indices.numel();
  TB_CHECK(grad_output.numel() == n * dim, ValueError)
      << kOp << ": grad_output of shape " << ShapeString(grad_output.shape())
      << " does not match indices of shape " << ShapeString(indices.shape());
  // Indices equal to padding_idx are skipped before the range check, as in torch.
  CheckHost(kOp, indices);
  TB_CHECK(IsIntegral(indices.dtype(), false), TypeError)
      << kOp << ": expected integer indices, got " << DTypeName(indices.dtype());
  Tensor ic = Cast(indices, DType::kInt64).contiguous();
  const int64_t* idx = ic.data_as<const int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    if (idx[i] == padding_idx) continue;
    if (idx[i] < 0 || idx[i] >= num_weights) {
      TB_THROW(IndexError) << kOp << ": index " << idx[i] << " is out of range for " << num_weights
                           << " weights";
    }
  }
  Tensor grad = grad_output.contiguous();
  Tensor out = Tensor::Zeros({num_weights, dim}, grad.dtype());
  std::vector<int64_t> counts;
  if (scale_grad_by_freq) {
    counts.assign(static_cast<size_t>(num_weights), 0);
    for (int64_t i = 0; i < n; ++i) {
      if (idx[i] != padding_idx) ++counts[idx[i]];
    }
  }
  TB_DISPATCH(grad.dtype(), kOp, TB_TYPES_FLOAT, [&] {
    using T = scalar_t;
    using Acc = kernels::opmath_t<T>;
    const T* g = grad.data_as<const T>();
    T* o = out.data_as<T>();
    for (int64_t i = 0; i < n; ++i) {
      const int64_t k = idx[i];
      if (k == padding_idx) continue;
      const Acc scale = scale_grad_by_freq ? static_cast<Acc>(1.0 / counts[k]) : Acc(1);
      T* row = o + k * dim;
      const T* src = g + i * dim;
      for (int64_t j = 0; j < dim; ++j) {
        row[j] = static_cast<T>(static_cast<Acc>(row[j]) + scale * static_cast<Acc>(src[j]));
      }
    }
  });
  return out;
}

}  // namespace

TB_REGISTER_KERNELS(index) {
  const DeviceType cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::index.Tensor", cpu, Boxed<&Index>(), TB_HERE);
  table.RegisterKernel("aten::_unsafe_index.Tensor", cpu, Boxed<&Index>(), TB_HERE);
  table.RegisterKernel("aten::index_put", cpu, Boxed<&IndexPut>(), TB_HERE);
  table.RegisterKernel("aten::_unsafe_index_put", cpu, Boxed<&IndexPut>(), TB_HERE);
  table.RegisterKernel("aten::index_put_", cpu, Boxed<&IndexPutInPlace>(), TB_HERE);
  table.RegisterKernel("aten::index_select", cpu, Boxed<&IndexSelect>(), TB_HERE);
  table.RegisterKernel("aten::nonzero", cpu, Boxed<&Nonzero>(), TB_HERE);
  table.RegisterKernel("aten::embedding", cpu, Boxed<&Embedding>(), TB_HERE);
  table.RegisterKernel("aten::embedding_dense_backward", cpu, Boxed<&EmbeddingDenseBackward>(),
                       TB_HERE);
}

}  // namespace tb
