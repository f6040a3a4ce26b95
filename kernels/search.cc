// Searching sorted sequences and counting into bins: aten::searchsorted (Tensor and Scalar),
// bucketize (Tensor and Scalar), histc, histogram (bins_tensor and bin_ct), bincount.
//
// As torch's CPU kernels:
// * searchsorted: per row of `self`, the first position in the matching row of the sorted
//   sequence (one 1-d sequence serves every row) whose value is >= v (side "left") or > v
//   ("right"), optionally through `sorter`; both operands compared in their promoted dtype;
//   int64 results, int32 with out_int32. bucketize(x, boundaries, right) is searchsorted of x
//   in the 1-d boundaries.
// * histc / histogram: an element x in [lo, hi] falls in bin
//   floor((x - lo) * bins / (hi - lo)) (computed in the input's type; x == hi in the last bin),
//   histogram then corrects it against the bin edges; elements outside the range and NaN are
//   not counted. Without a range, lo / hi are the data's min / max (histc widens an empty range
//   by 1 on each side, histogram by 0.5).
// * bincount: counts (or sums of weights) of each value of a 1-d non-negative integer tensor.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "dispatch/op_call.h"
#include "dispatch/op_table.h"
#include "kernels/common_internal.h"
#include "kernels/dtype_internal.h"
#include "kernels/promote_broadcast.h"

namespace tb {
namespace {

template <typename T>
double AsDouble(T v) {
  return kernels::Convert<double>(v);
}

Tensor SearchImpl(const Tensor& seq_in, const Tensor& self_in, bool out_int32, bool right,
                  const std::optional<std::string>& side, const std::optional<Tensor>& sorter,
                  const char* op) {
  kernels::CheckHost(op, seq_in);
  kernels::CheckHost(op, self_in);
  if (side) {
    TB_CHECK(*side == "left" || *side == "right", ValueError)
        << op << ": side can only be 'left' or 'right' but got '" << *side << "'";
    TB_CHECK(!(right && *side == "left"), ValueError)
        << op << ": side and right can't be set to opposites, got side of left while right "
        << "was True";
    right = *side == "right";
  }
  TB_CHECK(seq_in.ndim() >= 1, ValueError)
      << op << ": boundaries tensor should have positive dimension, but got 0 dimension";
  const bool shared = seq_in.ndim() == 1;
  if (!shared) {
    bool ok = self_in.ndim() == seq_in.ndim();
    for (int64_t d = 0; ok && d + 1 < seq_in.ndim(); ++d) ok = seq_in.size(d) == self_in.size(d);
    TB_CHECK(ok, ValueError)
        << op << ": boundaries tensor should be 1 dimension or the first N-1 dimensions of "
        << "boundaries tensor and input value tensor must match, but we got boundaries tensor "
        << ShapeString(seq_in.shape()) << " and input value tensor "
        << ShapeString(self_in.shape());
  }
  std::vector<int64_t> order;
  if (sorter) {
    kernels::CheckHost(op, *sorter);
    TB_CHECK(sorter->shape() == seq_in.shape(), ValueError)
        << op << ": boundaries and sorter must have the same size, but got boundaries tensor "
        << ShapeString(seq_in.shape()) << " and sorter tensor " << ShapeString(sorter->shape());
    TB_CHECK(sorter->dtype() == DType::kInt64, TypeError)
        << op << ": sorter must be a tensor of long dtype but got " << DTypeName(sorter->dtype());
    Tensor s = sorter->contiguous();
    order.assign(s.data_as<const int64_t>(), s.data_as<const int64_t>() + s.numel());
    const int64_t len = seq_in.size(-1);
    for (int64_t v : order) {
      TB_CHECK(v >= 0 && v < len, IndexError)
          << op << ": sorter index out of range: " << v << " for a sequence of length " << len;
    }
  }
  const DType dt = PromoteTypes(seq_in.dtype(), self_in.dtype());
  Tensor seq = Cast(seq_in, dt).contiguous();
  Tensor vals = Cast(self_in, dt).contiguous();
  const int64_t len = seq.size(-1);
  const int64_t rows_seq = len == 0 ? 0 : seq.numel() / len;
  const int64_t inner = shared ? vals.numel() : (vals.ndim() ? vals.size(-1) : 1);
  Tensor out = Tensor::Empty(self_in.shape(), out_int32 ? DType::kInt32 : DType::kInt64);
  std::vector<int64_t> res(static_cast<size_t>(vals.numel()));
  TB_DISPATCH(dt, op, TB_TYPES_NUMERIC, [&] {
    using T = scalar_t;
    using Acc = kernels::opmath_t<T>;
    const T* sp = seq.data_as<const T>();
    const T* vp = vals.data_as<const T>();
    for (int64_t i = 0; i < vals.numel(); ++i) {
      const int64_t row = shared ? 0 : i / std::max<int64_t>(inner, 1);
      (void)rows_seq;
      const T* base = sp + row * len;
      const int64_t* ord = order.empty() ? nullptr : order.data() + row * len;
      const Acc v = static_cast<Acc>(vp[i]);
      int64_t lo = 0, hi = len;
      while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        const Acc m = static_cast<Acc>(base[ord ? ord[mid] : mid]);
        const bool go_right = right ? !(m > v) : !(m >= v);
        if (go_right) {
          lo = mid + 1;
        } else {
          hi = mid;
        }
      }
      res[i] = lo;
    }
  });
  if (out_int32) {
    int32_t* o = out.data_as<int32_t>();
    for (size_t i = 0; i < res.size(); ++i) o[i] = static_cast<int32_t>(res[i]);
  } else {
    std::copy(res.begin(), res.end(), out.data_as<int64_t>());
  }
  return out;
}

Tensor ScalarTensor(const Scalar& s) {
  Tensor t = Tensor::Empty({}, s.is_floating_point() ? DType::kFloat64 : DType::kInt64);
  if (s.is_floating_point()) {
    *t.data_as<double>() = s.to_double();
  } else {
    *t.data_as<int64_t>() = s.to_int();
  }
  t.set_wrapped_number(true);
  return t;
}

// A Python number searched in a sequence: compared in the sequence's dtype (its category
// decides, as for a wrapped number).
Tensor AsSequenceDType(const Scalar& s, const Tensor& seq) {
  Tensor t = ScalarTensor(s);
  return Cast(t, ResultType({Operand(seq), Operand(t)}));
}

Tensor SearchsortedTensor(const Tensor& seq, const Tensor& self, bool out_int32, bool right,
                          const std::optional<std::string>& side,
                          const std::optional<Tensor>& sorter) {
  return SearchImpl(seq, self, out_int32, right, side, sorter, "aten::searchsorted");
}

Tensor SearchsortedScalar(const Tensor& seq, const Scalar& self, bool out_int32, bool right,
                          const std::optional<std::string>& side,
                          const std::optional<Tensor>& sorter) {
  constexpr const char* kOp = "aten::searchsorted";
  TB_CHECK(seq.ndim() == 1, ValueError)
      << kOp << ": input value can be a scalar only when boundaries tensor dimension is 1, but "
      << "we got boundaries tensor dim(" << seq.ndim() << ")";
  return SearchImpl(seq, AsSequenceDType(self, seq), out_int32, right, side, sorter, kOp);
}

Tensor BucketizeTensor(const Tensor& self, const Tensor& boundaries, bool out_int32, bool right) {
  constexpr const char* kOp = "aten::bucketize";
  TB_CHECK(boundaries.ndim() == 1, ValueError)
      << kOp << ": boundaries tensor must be 1 dimension, but got dim(" << boundaries.ndim() << ")";
  return SearchImpl(boundaries, self, out_int32, right, std::nullopt, std::nullopt, kOp);
}

Tensor BucketizeScalar(const Scalar& self, const Tensor& boundaries, bool out_int32, bool right) {
  constexpr const char* kOp = "aten::bucketize";
  TB_CHECK(boundaries.ndim() == 1, ValueError)
      << kOp << ": boundaries tensor must be 1 dimension, but got dim(" << boundaries.ndim() << ")";
  return SearchImpl(boundaries, AsSequenceDType(self, boundaries), out_int32, right, std::nullopt,
                    std::nullopt, kOp);
}

// The data's range [lo, hi] (0, 0 for no elements; NaN when there is one).
template <typename T>
std::pair<T, T> DataRange(const T* p, int64_t n) {
  if (n == 0) return {kernels::Convert<T>(0.0), kernels::Convert<T>(0.0)};
  T lo = p[0], hi = p[0];
  for (int64_t i = 1; i < n; ++i) {
    const double v = kernels::Convert<double>(p[i]);
    if (v < kernels::Convert<double>(lo) || std::isnan(v)) lo = p[i];
    if (v > kernels::Convert<double>(hi) || std::isnan(v)) hi = p[i];
  }
  return {lo, hi};
}

// Steps are computed in T (each rounded to T for float16 / bfloat16, as torch's kernel).
template <typename T>
void Bin(const T* x, int64_t n, const T* w, T lo, T hi, int64_t bins, const T* edges, T* hist) {
  using Acc = kernels::opmath_t<T>;
  auto r = [](Acc v) { return static_cast<Acc>(static_cast<T>(v)); };
  const Acc lo_a = static_cast<Acc>(lo), hi_a = static_cast<Acc>(hi);
  for (int64_t i = 0; i < n; ++i) {
    const Acc v = static_cast<Acc>(x[i]);
    if (!(v >= lo_a && v <= hi_a)) continue;
    int64_t pos = static_cast<int64_t>(r(r(r(v - lo_a) * static_cast<Acc>(bins)) / r(hi_a - lo_a)));
    if (edges != nullptr) {
      const int64_t pmin = std::max<int64_t>(0, pos - 1);
      const int64_t pmax = std::min<int64_t>(pos + 2, bins + 1);
      pos = std::upper_bound(edges + pmin, edges + pmax, x[i]) - edges - 1;
    }
    if (pos == bins) pos -= 1;
    hist[pos] = static_cast<T>(static_cast<Acc>(hist[pos]) +
                               (w != nullptr ? static_cast<Acc>(w[i]) : Acc(1)));
  }
}

Tensor Histc(const Tensor& self, int64_t bins, const Scalar& min, const Scalar& max) {
  constexpr const char* kOp = "aten::histc";
  kernels::CheckHost(kOp, self);
  TB_CHECK(bins > 0, ValueError) << kOp << ": bins must be > 0, but got " << bins;
  TB_CHECK(IsFloatingPoint(self.dtype()), TypeError)
      << kOp << ": \"histogram_cpu\" not implemented for '" << DTypeName(self.dtype()) << "'";
  Tensor x = self.contiguous();
  Tensor out = Tensor::Zeros({bins}, self.dtype());
  TB_DISPATCH(self.dtype(), kOp, TB_TYPES_FLOAT, [&] {
    using T = scalar_t;
    {
      const T* p = x.data_as<const T>();
      double lo = min.to_double(), hi = max.to_double();
      if (lo == hi && x.numel() > 0) {
        auto [a, b] = DataRange(p, x.numel());
        lo = kernels::Convert<double>(a);
        hi = kernels::Convert<double>(b);
      }
      if (lo == hi) {
        lo -= 1;
        hi += 1;
      }
      TB_CHECK(std::isfinite(lo) && std::isfinite(hi), ValueError)
          << kOp << ": range of [" << lo << ", " << hi << "] is not finite";
      TB_CHECK(lo < hi, ValueError) << kOp << ": max must be larger than min";
      Bin<T>(p, x.numel(), nullptr, kernels::Convert<T>(lo), kernels::Convert<T>(hi), bins, nullptr,
             out.data_as<T>());
    }
  });
  return out;
}

Tensor Density(const Tensor& hist, const Tensor& edges) {
  static const OpRef sum("aten::sum"), div("aten::div.Tensor"), mul("aten::mul.Tensor"),
      sub("aten::sub.Tensor");
  const int64_t n = edges.numel();
  Tensor widths = sub(edges.slice(0, 1, n), edges.slice(0, 0, n - 1)).tensor();
  return div(hist, mul(sum(hist).tensor(), widths).tensor()).tensor();
}

std::tuple<Tensor, Tensor> HistogramImpl(const Tensor& self, const Tensor& edges_in,
                                         const std::optional<Tensor>& weight, bool density,
                                         bool linear, const char* op) {
  kernels::CheckHost(op, self);
  TB_CHECK(IsFloatingPoint(self.dtype()), TypeError)
      << op << ": expected a floating-point input, got " << DTypeName(self.dtype());
  TB_CHECK(edges_in.dtype() == self.dtype(), TypeError)
      << op << ": input tensor and bins tensors should have the same dtype, but got input "
      << DTypeName(self.dtype()) << " and bins " << DTypeName(edges_in.dtype());
  TB_CHECK(edges_in.ndim() == 1 && edges_in.numel() > 0, ValueError)
      << op << ": bins tensor should have one dimension and at least 1 element, got shape "
      << ShapeString(edges_in.shape());
  if (weight) {
    TB_CHECK(weight->shape() == self.shape() && weight->dtype() == self.dtype(), ValueError)
        << op << ": if weight tensor is provided it should have the same shape and dtype as the "
        << "input tensor";
  }
  Tensor x = self.contiguous();
  Tensor edges = edges_in.clone();
  Tensor w = weight ? weight->contiguous() : Tensor();
  const int64_t bins = edges.numel() - 1;
  Tensor hist = Tensor::Zeros({bins}, self.dtype());
  TB_DISPATCH(self.dtype(), op, TB_TYPES_F32_F64, [&] {
    using T = scalar_t;
    {
      const T* e = edges.data_as<const T>();
      if (bins == 0) return;
      const T* wp = w.defined() ? w.data_as<const T>() : nullptr;
      const int64_t n = x.numel();
      const T* p = x.data_as<const T>();
      if (linear) {
        Bin<T>(p, n, wp, e[0], e[bins], bins, e, hist.data_as<T>());
        return;
      }
      T* h = hist.data_as<T>();
      for (int64_t i = 0; i < n; ++i) {
        const T v = p[i];
        if (!(v >= e[0] && v <= e[bins])) continue;
        int64_t pos = std::upper_bound(e, e + bins + 1, v) - e - 1;
        if (pos == bins) pos -= 1;
        h[pos] += wp != nullptr ? wp[i] : T(1);
      }
    }
  });
  if (density && bins > 0) hist = Density(hist, edges);
  return {hist, edges};
}

std::tuple<Tensor, Tensor> HistogramBinsTensor(const Tensor& self, const Tensor& bins,
                                               const std::optional<Tensor>& weight, bool density) {
  return HistogramImpl(self, bins, weight, density, false, "aten::histogram");
}

std::tuple<Tensor, Tensor> HistogramBinCt(const Tensor& self, int64_t bins,
                                          const std::optional<std::vector<double>>& range,
                                          const std::optional<Tensor>& weight, bool density) {
  constexpr const char* kOp = "aten::histogram";
  kernels::CheckHost(kOp, self);
  TB_CHECK(bins > 0, ValueError) << kOp << ": bins must be > 0, but got " << bins;
  TB_CHECK(self.dtype() == DType::kFloat32 || self.dtype() == DType::kFloat64, TypeError)
      << kOp << ": expected a float32 or float64 input, got " << DTypeName(self.dtype());
  double lo = 0, hi = 0;
  Tensor x = self.contiguous();
  if (range) {
    TB_CHECK(range->size() == 2, ValueError)
        << kOp << ": range should have 2 elements, got " << range->size();
    lo = (*range)[0];
    hi = (*range)[1];
  } else if (x.numel() > 0) {
    TB_DISPATCH(self.dtype(), kOp, TB_TYPES_F32_F64, [&] {
      using T = scalar_t;
      {
        auto [a, b] = DataRange(x.data_as<const T>(), x.numel());
        lo = a;
        hi = b;
      }
    });
  }
  TB_CHECK(std::isfinite(lo) && std::isfinite(hi), ValueError)
      << kOp << ": range of [" << lo << ", " << hi << "] is not finite";
  TB_CHECK(lo <= hi, ValueError) << kOp << ": max must be larger than min";
  if (lo == hi) {
    lo -= 0.5;
    hi += 0.5;
  }
  static const OpRef linspace("aten::linspace");
  Tensor edges =
      linspace.WithKeywords({Scalar(lo), Scalar(hi), int64_t{bins + 1}}, {{"dtype", self.dtype()}})
          .tensor();
  return HistogramImpl(self, edges, weight, density, true, kOp);
}

Tensor Bincount(const Tensor& self, const std::optional<Tensor>& weights, int64_t minlength) {
  constexpr const char* kOp = "aten::bincount";
  kernels::CheckHost(kOp, self);
  TB_CHECK(minlength >= 0, ValueError) << kOp << ": minlength should be >= 0";
  TB_CHECK(self.ndim() == 1 && IsIntegral(self.dtype(), /*include_bool=*/false), ValueError)
      << kOp << ": bincount only supports 1-d non-negative integral inputs.";
  Tensor idx = Cast(self, DType::kInt64).contiguous();
  const int64_t* p = idx.data_as<const int64_t>();
  int64_t nbins = minlength;
  for (int64_t i = 0; i < idx.numel(); ++i) {
    TB_CHECK(p[i] >= 0, ValueError)
        << kOp << ": bincount only supports 1-d non-negative integral inputs.";
    nbins = std::max(nbins, p[i] + 1);
  }
  if (!weights) {
    Tensor out = Tensor::Zeros({nbins}, DType::kInt64);
    int64_t* o = out.data_as<int64_t>();
    for (int64_t i = 0; i < idx.numel(); ++i) ++o[p[i]];
    return out;
  }
  kernels::CheckHost(kOp, *weights);
  TB_CHECK(weights->ndim() == 1 && weights->numel() == idx.numel(), ValueError)
      << kOp << ": weights should be 1-d and have the same length as input";
  const DType dt = weights->dtype() == DType::kFloat32 ? DType::kFloat32 : DType::kFloat64;
  Tensor w = Cast(*weights, dt).contiguous();
  Tensor out = Tensor::Zeros({nbins}, dt);
  TB_DISPATCH(dt, kOp, TB_TYPES_FLOAT, [&] {
    using T = scalar_t;
    const T* wp = w.data_as<const T>();
    T* o = out.data_as<T>();
    for (int64_t i = 0; i < idx.numel(); ++i) o[p[i]] = o[p[i]] + wp[i];
  });
  return out;
}

}  // namespace

TB_REGISTER_KERNELS(search) {
  const DeviceType cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::searchsorted.Tensor", cpu, Boxed<&SearchsortedTensor>(), TB_HERE);
  table.RegisterKernel("aten::searchsorted.Scalar", cpu, Boxed<&SearchsortedScalar>(), TB_HERE);
  table.RegisterKernel("aten::bucketize.Tensor", cpu, Boxed<&BucketizeTensor>(), TB_HERE);
  table.RegisterKernel("aten::bucketize.Scalar", cpu, Boxed<&BucketizeScalar>(), TB_HERE);
  table.RegisterKernel("aten::histc", cpu, Boxed<&Histc>(), TB_HERE);
  table.RegisterKernel("aten::histogram.bins_tensor", cpu, Boxed<&HistogramBinsTensor>(), TB_HERE);
  table.RegisterKernel("aten::histogram.bin_ct", cpu, Boxed<&HistogramBinCt>(), TB_HERE);
  table.RegisterKernel("aten::bincount", cpu, Boxed<&Bincount>(), TB_HERE);
}

}  // namespace tb
