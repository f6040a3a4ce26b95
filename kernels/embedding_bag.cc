// aten::_embedding_bag (and _embedding_bag_forward_only): sums, means or maxima of bags of
// weight rows.
//
// padding_idx < 0 means no padding (torch.nn.functional wraps negative ones before the call).
// Bag b holds indices[offsets[b] : offsets[b+1]] (the last bag runs to the end, unless
// include_last_offset makes the last offset its end). Indices equal to padding_idx are left out.
// The auxiliary outputs are torch's CPU kernel's, which its backward reads:
// * offset2bag: the bag of each index; empty in sum mode on torch's fast path (float32, float16
//   or bfloat16 weight and padding_idx < 0);
// * bag_size: the non-padding indices in each bag in mean and max mode, zeros in sum mode (one
//   per bag; _embedding_bag_forward_only: one per offset);
// * max_indices: in max mode the row each maximum came from ([bags, dim], 0 for an empty bag),
//   otherwise a copy of bag_size.
// The backward (_embedding_bag_backward, dense only; _embedding_bag_per_sample_weights_backward)
// reads the bag of each index from offset2bag, or from the offsets when offset2bag is empty;
// scale_grad_by_freq=True is refused (NotImplementedError).
// Sums accumulate in the weight's dtype's opmath type (float for 16-bit floats), in index order.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <tuple>
#include <vector>

#include "dispatch/op_table.h"
#include "kernels/common_internal.h"
#include "kernels/dtype_internal.h"
#include "kernels/promote_broadcast.h"

namespace tb {
namespace {

using kernels::CheckHost;

constexpr const char* kOp = "aten::_embedding_bag";

std::vector<int64_t> Longs(const Tensor& t, const char* what) {
  CheckHost(kOp, t);
  TB_CHECK(t.dtype() == DType::kInt64 || t.dtype() == DType::kInt32, TypeError)
      << kOp << ": " << what << " must be int32 or int64, got " << DTypeName(t.dtype());
  TB_CHECK(t.ndim() == 1, ValueError)
      << kOp << ": " << what << " must be 1-D, got shape " << ShapeString(t.shape());
  Tensor c = Cast(t, DType::kInt64).contiguous();
  const int64_t* p = c.data_as<const int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}

std::tuple<Tensor, Tensor, Tensor, Tensor> EmbeddingBagImpl(
    bool forward_only, const Tensor& weight, const Tensor& indices, const Tensor& offsets,
    bool /*scale_grad*/, int64_t mode, bool /*sparse*/,
    const std::optional<Tensor>& per_sample_weights, bool include_last_offset,
    int64_t padding_idx) {
  CheckHost(kOp, weight);
  TB_CHECK(weight.ndim() == 2, ValueError)
      << kOp << ": weight must be 2-D, got shape " << ShapeString(weight.shape());
  TB_CHECK(mode >= 0 && mode <= 2, ValueError)
      << kOp << ": mode must be 0 (sum), 1 (mean) or 2 (max), got " << mode;
  const std::vector<int64_t> idx = Longs(indices, "indices");
  const std::vector<int64_t> off = Longs(offsets, "offsets");
  const int64_t n = static_cast<int64_t>(idx.size()), rows = weight.size(0), dim = weight.size(1);
  for (int64_t i : idx) {
    TB_CHECK(i >= 0 && i < rows, IndexError)
        << kOp << ": index " << i << " is out of range for " << rows << " weight rows";
  }
  const int64_t bags = static_cast<int64_t>(off.size()) - (include_last_offset ? 1 : 0);
  TB_CHECK(bags >= 0, ValueError) << kOp << ": include_last_offset needs at least one offset";
  for (size_t b = 0; b < off.size(); ++b) {
    TB_CHECK(off[b] >= 0 && off[b] <= n && (b == 0 || off[b] >= off[b - 1]), ValueError)
        << kOp << ": offsets must be non-decreasing and within [0, " << n << "], got " << off[b]
        << " at position " << b;
  }
  TB_CHECK(off.empty() || off[0] == 0, ValueError)
      << kOp << ": offsets[0] must be 0, got " << off[0];
  std::vector<int64_t> psw_idx;
  Tensor psw;
  if (per_sample_weights) {
    TB_CHECK(mode == 0, NotImplementedError)
        << kOp << ": per_sample_weights is only supported for mode 'sum'";
    CheckHost(kOp, *per_sample_weights);
    TB_CHECK(per_sample_weights->dtype() == weight.dtype(), TypeError)
        << kOp << ": per_sample_weights must have the weight's dtype " << DTypeName(weight.dtype())
        << ", got " << DTypeName(per_sample_weights->dtype());
    TB_CHECK(per_sample_weights->ndim() == 1 && per_sample_weights->numel() == n, ValueError)
        << kOp << ": per_sample_weights must be 1-D with one entry per index, got shape "
        << ShapeString(per_sample_weights->shape());
    psw = per_sample_weights->contiguous();
  }
  const DType aux = indices.dtype() == DType::kInt32 && offsets.dtype() == DType::kInt32
                        ? DType::kInt32
                        : DType::kInt64;
  // The bag of each index, and each bag's range.
  auto end_of = [&](int64_t b) {
    return b + 1 < static_cast<int64_t>(off.size()) ? off[b + 1] : n;
  };
  std::vector<int64_t> o2b(static_cast<size_t>(n), 0);
  for (int64_t b = 0; b < bags; ++b) {
    for (int64_t i = off[b]; i < end_of(b); ++i) o2b[i] = b;
  }
  // Indices past the last bag's end (include_last_offset with a last offset below n) belong to
  // the last bag, as in torch.
  if (bags > 0) {
    for (int64_t i = end_of(bags - 1); i < n; ++i) o2b[i] = bags - 1;
  }
  const DType wt = weight.dtype();
  const bool fast_sum = mode == 0 && padding_idx < 0 &&
                        (wt == DType::kFloat32 || wt == DType::kFloat16 || wt == DType::kBFloat16);
  Tensor w = weight.contiguous();
  Tensor output = Tensor::Zeros({bags, dim}, wt);
  std::vector<int64_t> bag_size(static_cast<size_t>(bags), 0);
  std::vector<int64_t> max_idx(static_cast<size_t>(mode == 2 ? bags * dim : 0), 0);
  TB_DISPATCH(wt, kOp, TB_TYPES_FLOAT, [&] {
    using T = scalar_t;
    using Acc = kernels::opmath_t<T>;
    const T* wp = w.data_as<const T>();
    const T* sp = psw.defined() ? psw.data_as<const T>() : nullptr;
    T* out = output.data_as<T>();
    std::vector<Acc> acc(static_cast<size_t>(dim));
    for (int64_t b = 0; b < bags; ++b) {
      const int64_t lo = off[b], hi = b + 1 == bags ? n : end_of(b);
      std::fill(acc.begin(), acc.end(), Acc(0));
      int64_t count = 0;
      for (int64_t i = lo; i < hi; ++i) {
        const int64_t k = idx[i];
        if (k == padding_idx) continue;
        const T* row = wp + k * dim;
        if (mode == 2) {
          for (int64_t j = 0; j < dim; ++j) {
            const Acc v = static_cast<Acc>(row[j]);
            if (count == 0 || v > acc[j]) {
              acc[j] = v;
              max_idx[b * dim + j] = k;
            }
          }
        } else {
          const Acc s = sp ? static_cast<Acc>(sp[i]) : Acc(1);
          for (int64_t j = 0; j < dim; ++j) {
            acc[j] += sp ? s * static_cast<Acc>(row[j]) : static_cast<Acc>(row[j]);
          }
        }
        ++count;
      }
      if (mode == 1 && count > 0) {
        for (int64_t j = 0; j < dim; ++j) acc[j] /= static_cast<Acc>(count);
      }
      if (count > 0) {
        for (int64_t j = 0; j < dim; ++j) out[b * dim + j] = static_cast<T>(acc[j]);
      }
      bag_size[b] = mode == 0 ? 0 : count;
    }
  });
  auto to_tensor = [&](const std::vector<int64_t>& v, Dims shape) {
    Tensor t = Tensor::Empty(shape, DType::kInt64);
    std::copy(v.begin(), v.end(), t.data_as<int64_t>());
    return aux == DType::kInt64 ? t : Cast(t, aux);
  };
  Tensor offset2bag = fast_sum ? Tensor::Empty({0}, aux) : to_tensor(o2b, {n});
  // _embedding_bag_forward_only's sum mode gives one (zero) bag size per offset.
  if (forward_only && mode == 0) bag_size.assign(off.size(), 0);
  const int64_t nsize = static_cast<int64_t>(bag_size.size());
  Tensor bag_size_t = to_tensor(bag_size, {nsize});
  Tensor max_indices = mode == 2 ? to_tensor(max_idx, {bags, dim}) : to_tensor(bag_size, {nsize});
  return {output, offset2bag, bag_size_t, max_indices};
}

template <bool kForwardOnly>
std::tuple<Tensor, Tensor, Tensor, Tensor> EmbeddingBag(
    const Tensor& weight, const Tensor& indices, const Tensor& offsets, bool scale_grad,
    int64_t mode, bool sparse, const std::optional<Tensor>& per_sample_weights,
    bool include_last_offset, int64_t padding_idx) {
  return EmbeddingBagImpl(kForwardOnly, weight, indices, offsets, scale_grad, mode, sparse,
                          per_sample_weights, include_last_offset, padding_idx);
}

// The bag of each index: offset2bag when it has one entry per index, otherwise the last bag
// starting at or before the index (offsets may carry include_last_offset's final entry).
std::vector<int64_t> BagOf(const Tensor& offset2bag, const std::vector<int64_t>& off, int64_t n,
                           int64_t bags) {
  if (offset2bag.numel() == n && n > 0) return Longs(offset2bag, "offset2bag");
  std::vector<int64_t> out(static_cast<size_t>(n), 0);
  size_t b = 0;
  for (int64_t i = 0; i < n; ++i) {
    while (b + 1 < off.size() && off[b + 1] <= i) ++b;
    out[i] = std::min<int64_t>(static_cast<int64_t>(b), bags - 1);
  }
  return out;
}

Tensor EmbeddingBagBackward(const Tensor& grad, const Tensor& indices, const Tensor& offsets,
                            const Tensor& offset2bag, const Tensor& bag_size,
                            const Tensor& maximum_indices, int64_t num_weights,
                            bool scale_grad_by_freq, int64_t mode, bool sparse,
                            const std::optional<Tensor>& per_sample_weights, int64_t padding_idx) {
  constexpr const char* kBwd = "aten::_embedding_bag_backward";
  CheckHost(kBwd, grad);
  TB_CHECK(!sparse, NotImplementedError) << kBwd << ": sparse gradients are not supported";
  TB_CHECK(!scale_grad_by_freq, NotImplementedError)
      << kBwd << ": scale_grad_by_freq=True is not supported";
  TB_CHECK(grad.ndim() == 2, ValueError)
      << kBwd << ": grad must be 2-D, got shape " << ShapeString(grad.shape());
  TB_CHECK(mode >= 0 && mode <= 2, ValueError) << kBwd << ": mode must be 0, 1 or 2, got " << mode;
  const std::vector<int64_t> idx = Longs(indices, "indices");
  const std::vector<int64_t> off = Longs(offsets, "offsets");
  const int64_t n = static_cast<int64_t>(idx.size()), bags = grad.size(0), dim = grad.size(1);
  for (int64_t i : idx) {
    TB_CHECK(i >= 0 && i < num_weights, IndexError)
        << kBwd << ": index " << i << " is out of range for " << num_weights << " weight rows";
  }
  const std::vector<int64_t> bag = BagOf(offset2bag, off, n, bags);
  std::vector<int64_t> sizes;
  if (mode != 0) sizes = Longs(bag_size, "bag_size");
  Tensor g = grad.contiguous();
  Tensor out = Tensor::Zeros({num_weights, dim}, grad.dtype());
  Tensor psw = per_sample_weights ? per_sample_weights->contiguous() : Tensor();
  Tensor mx = mode == 2 ? Cast(maximum_indices, DType::kInt64).contiguous() : Tensor();
  TB_DISPATCH(grad.dtype(), kBwd, TB_TYPES_FLOAT, [&] {
    using T = scalar_t;
    using Acc = kernels::opmath_t<T>;
    const T* gp = g.data_as<const T>();
    T* o = out.data_as<T>();
    auto add = [&](int64_t row, int64_t j, Acc v) {
      o[row * dim + j] = static_cast<T>(static_cast<Acc>(o[row * dim + j]) + v);
    };
    if (mode == 2) {
      const int64_t* m = mx.data_as<const int64_t>();
      for (int64_t b = 0; b < bags; ++b) {
        if (sizes[b] == 0) continue;
        for (int64_t j = 0; j < dim; ++j) add(m[b * dim + j], j, static_cast<Acc>(gp[b * dim + j]));
      }
      return;
    }
    const T* sp = psw.defined() ? psw.data_as<const T>() : nullptr;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t k = idx[i], b = bag[i];
      if (k == padding_idx) continue;
      Acc scale = sp ? static_cast<Acc>(sp[i]) : Acc(1);
      if (mode == 1) scale = sizes[b] > 0 ? scale / static_cast<Acc>(sizes[b]) : Acc(0);
      for (int64_t j = 0; j < dim; ++j) add(k, j, scale * static_cast<Acc>(gp[b * dim + j]));
    }
  });
  return out;
}

Tensor EmbeddingBagPerSampleWeightsBackward(const Tensor& grad, const Tensor& weight,
                                            const Tensor& indices, const Tensor& offsets,
                                            const Tensor& offset2bag, int64_t mode,
                                            int64_t padding_idx) {
  constexpr const char* kBwd = "aten::_embedding_bag_per_sample_weights_backward";
  CheckHost(kBwd, grad);
  CheckHost(kBwd, weight);
  TB_CHECK(mode == 0, NotImplementedError)
      << kBwd << ": per_sample_weights is only supported for mode 'sum'";
  TB_CHECK(grad.ndim() == 2 && weight.ndim() == 2 && grad.size(1) == weight.size(1), ValueError)
      << kBwd << ": grad " << ShapeString(grad.shape()) << " and weight "
      << ShapeString(weight.shape()) << " must be 2-D with the same embedding size";
  const std::vector<int64_t> idx = Longs(indices, "indices");
  const std::vector<int64_t> off = Longs(offsets, "offsets");
  const int64_t n = static_cast<int64_t>(idx.size()), dim = grad.size(1), rows = weight.size(0);
  for (int64_t i : idx) {
    TB_CHECK(i >= 0 && i < rows, IndexError)
        << kBwd << ": index " << i << " is out of range for " << rows << " weight rows";
  }
  const std::vector<int64_t> bag = BagOf(offset2bag, off, n, grad.size(0));
  Tensor g = grad.contiguous();
  Tensor w = Cast(weight, grad.dtype()).contiguous();
  Tensor out = Tensor::Zeros({n}, grad.dtype());
  TB_DISPATCH(grad.dtype(), kBwd, TB_TYPES_FLOAT, [&] {
    using T = scalar_t;
    using Acc = kernels::opmath_t<T>;
    const T* gp = g.data_as<const T>();
    const T* wp = w.data_as<const T>();
    T* o = out.data_as<T>();
    for (int64_t i = 0; i < n; ++i) {
      if (idx[i] == padding_idx) continue;
      Acc dot = 0;
      for (int64_t j = 0; j < dim; ++j) {
        dot += static_cast<Acc>(gp[bag[i] * dim + j]) * static_cast<Acc>(wp[idx[i] * dim + j]);
      }
      o[i] = static_cast<T>(dot);
    }
  });
  return out;
}

}  // namespace

TB_REGISTER_KERNELS(embedding_bag) {
  const DeviceType cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::_embedding_bag", cpu, Boxed<&EmbeddingBag<false>>(), TB_HERE);
  table.RegisterKernel("aten::_embedding_bag_forward_only", cpu, Boxed<&EmbeddingBag<true>>(),
                       TB_HERE);
  table.RegisterKernel("aten::_embedding_bag_backward", cpu, Boxed<&EmbeddingBagBackward>(),
                       TB_HERE);
  table.RegisterKernel("aten::_embedding_bag_per_sample_weights_backward", cpu,
                       Boxed<&EmbeddingBagPerSampleWeightsBackward>(), TB_HERE);
}

}  // namespace tb
