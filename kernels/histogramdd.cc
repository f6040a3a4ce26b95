// Multi-dimensional histograms: aten::_histogramdd_bin_edges, _histogramdd_from_bin_cts and
// _histogramdd_from_bin_tensors (torch.histogramdd calls them), on float32 / float64 input of
// shape [..., D] (N points of D coordinates) with optional weights of shape [...].
//
// As torch's CPU kernel: the edges of dimension d are linspace(lo_d, hi_d, bins_d + 1) in the
// input's dtype, [lo_d, hi_d] given by `range` (lo0, hi0, lo1, hi1, ...) or the data's min and
// max (an empty range widened by 0.5 on each side). A point counts when every coordinate lies
// within its outer edges; its bin along d is floor((x - lo) * bins / (hi - lo)) corrected
// against the edges (from_bin_cts) or found by binary search among the given edges
// (from_bin_tensors); x == hi falls in the last bin. density divides by the total and by each
// bin's volume.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "dispatch/op_call.h"
#include "dispatch/op_table.h"
#include "kernels/dtype_internal.h"
#include "kernels/promote_broadcast.h"

namespace tb {
namespace {

constexpr const char* kOp = "aten::histogramdd";

// self as [N, D] contiguous, checked.
Tensor Points(const Tensor& self, int64_t dims_expected) {
  TB_CHECK_SUPPORTED(self.device().is_host_accessible())
      << kOp << ": tensors on " << DeviceString(self.device())
      << " are not supported; tensorbridge computes on the CPU";
  TB_CHECK(self.dtype() == DType::kFloat32 || self.dtype() == DType::kFloat64, TypeError)
      << kOp << ": expected a float32 or float64 input, got " << DTypeName(self.dtype());
  TB_CHECK(self.ndim() >= 2, ValueError)
      << kOp << ": input tensor should have at least 2 dimensions, but got " << self.ndim();
  const int64_t d = self.size(-1);
  TB_CHECK(dims_expected == d, ValueError)
      << kOp << ": expected " << d << " sequences of bin edges / bin counts for each of the " << d
      << " dimensions of the input, got " << dims_expected;
  return self.contiguous().reshape({self.numel() / std::max<int64_t>(d, 1), d});
}

std::vector<Tensor> BinEdges(const Tensor& self, const std::vector<int64_t>& bins,
                             const std::optional<std::vector<double>>& range,
                             const std::optional<Tensor>& weight, bool /*density*/) {
  Tensor pts = Points(self, static_cast<int64_t>(bins.size()));
  (void)weight;
  const int64_t n = pts.size(0), d = pts.size(1);
  if (range) {
    TB_CHECK(static_cast<int64_t>(range->size()) == 2 * d, ValueError)
        << kOp << ": provided range should have " << 2 * d << " elements, got " << range->size();
  }
  static const OpRef linspace("aten::linspace");
  std::vector<Tensor> edges;
  for (int64_t j = 0; j < d; ++j) {
    TB_CHECK(bins[j] > 0, ValueError)
        << kOp << ": bins must be > 0, but got " << bins[j] << " for dimension " << j;
    double lo = 0, hi = 0;
    if (range) {
      lo = (*range)[2 * j];
      hi = (*range)[2 * j + 1];
    } else if (n > 0) {
      TB_DISPATCH(pts.dtype(), kOp, TB_TYPES_F32_F64, [&] {
        const scalar_t* p = pts.data_as<const scalar_t>();
        lo = hi = p[j];
        for (int64_t i = 1; i < n; ++i) {
          const double v = p[i * d + j];
          if (v < lo || std::isnan(v)) lo = v;
          if (v > hi || std::isnan(v)) hi = v;
        }
      });
    }
    TB_CHECK(std::isfinite(lo) && std::isfinite(hi), ValueError)
        << kOp << ": dimension " << j << "'s range [" << lo << ", " << hi << "] is not finite";
    TB_CHECK(lo <= hi, ValueError) << kOp << ": min should not exceed max, but got min " << lo
                                   << " max " << hi << " for dimension " << j;
    if (lo == hi) {
      lo -= 0.5;
      hi += 0.5;
    }
    edges.push_back(
        linspace
            .WithKeywords({Scalar(lo), Scalar(hi), int64_t{bins[j] + 1}}, {{"dtype", self.dtype()}})
            .tensor());
  }
  return edges;
}

Tensor Count(const Tensor& self, const std::vector<Tensor>& edges_in,
             const std::optional<Tensor>& weight, bool density, bool linear) {
  Tensor pts = Points(self, static_cast<int64_t>(edges_in.size()));
  const int64_t n = pts.size(0), d = pts.size(1);
  std::vector<Tensor> edges;
  std::vector<int64_t> counts;
  for (const Tensor& e : edges_in) {
    TB_CHECK(e.dtype() == self.dtype() && e.ndim() == 1 && e.numel() > 0, ValueError)
        << kOp << ": bin edges should be 1-d, non-empty and of the input's dtype, got "
        << DTypeName(e.dtype()) << " of shape " << ShapeString(e.shape());
    edges.push_back(e.contiguous());
    counts.push_back(e.numel() - 1);
  }
  Tensor w;
  if (weight) {
    TB_CHECK(weight->numel() == n && weight->dtype() == self.dtype(), ValueError)
        << kOp << ": if weight tensor is provided it should have the same shape as the input "
        << "without its last dimension and the input's dtype";
    w = weight->contiguous();
  }
  Tensor hist = Tensor::Zeros(counts, self.dtype());
  TB_DISPATCH(self.dtype(), kOp, TB_TYPES_F32_F64, [&] {
    using T = scalar_t;
    const T* p = pts.data_as<const T>();
    const T* wp = w.defined() ? w.data_as<const T>() : nullptr;
    T* h = hist.data_as<T>();
    std::vector<const T*> e(static_cast<size_t>(d));
    for (int64_t j = 0; j < d; ++j) e[j] = edges[j].data_as<const T>();
    for (int64_t i = 0; i < n; ++i) {
      int64_t flat = 0;
      bool skip = false;
      for (int64_t j = 0; j < d && !skip; ++j) {
        const int64_t b = counts[j];
        const T v = p[i * d + j], lo = e[j][0], hi = e[j][b];
        if (!(v >= lo && v <= hi)) {
          skip = true;
          break;
        }
        int64_t pos;
        if (linear) {
          pos = static_cast<int64_t>((v - lo) * static_cast<T>(b) / (hi - lo));
          const int64_t pmin = std::max<int64_t>(0, pos - 1);
          const int64_t pmax = std::min<int64_t>(pos + 2, b + 1);
          pos = std::upper_bound(e[j] + pmin, e[j] + pmax, v) - e[j] - 1;
        } else {
          pos = std::upper_bound(e[j], e[j] + b + 1, v) - e[j] - 1;
        }
        if (pos == b) pos -= 1;
        flat = flat * b + pos;
      }
      if (!skip && hist.numel() > 0) h[flat] += wp != nullptr ? wp[i] : T(1);
    }
  });
  if (!density) return hist;
  static const OpRef sum("aten::sum"), div("aten::div.Tensor"), sub("aten::sub.Tensor");
  hist = div(hist, sum(hist).tensor()).tensor();
  for (int64_t j = 0; j < d; ++j) {
    const int64_t m = edges[j].numel();
    Tensor widths = sub(edges[j].slice(0, 1, m), edges[j].slice(0, 0, m - 1)).tensor();
    std::vector<int64_t> shape(static_cast<size_t>(d), 1);
    shape[j] = counts[j];
    hist = div(hist, widths.reshape(shape)).tensor();
  }
  return hist;
}

Tensor FromBinCts(const Tensor& self, const std::vector<int64_t>& bins,
                  const std::optional<std::vector<double>>& range,
                  const std::optional<Tensor>& weight, bool density) {
  return Count(self, BinEdges(self, bins, range, weight, density), weight, density, true);
}

Tensor FromBinTensors(const Tensor& self, const std::vector<Tensor>& bins,
                      const std::optional<Tensor>& weight, bool density) {
  return Count(self, bins, weight, density, false);
}

}  // namespace

TB_REGISTER_KERNELS(histogramdd) {
  const DeviceType cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::_histogramdd_bin_edges", cpu, Boxed<&BinEdges>(), TB_HERE);
  table.RegisterKernel("aten::_histogramdd_from_bin_cts", cpu, Boxed<&FromBinCts>(), TB_HERE);
  table.RegisterKernel("aten::_histogramdd_from_bin_tensors", cpu, Boxed<&FromBinTensors>(),
                       TB_HERE);
}

}  // namespace tb
