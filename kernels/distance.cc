// Pairwise distances: aten::_cdist_forward, _pdist_forward and their backward ops (float32 /
// float64, as torch's CPU kernels).
//
// Each distance is one p-norm reduction over the feature dimension, with torch's special
// cases: p == 0 counts the differing features, p == 1 sums |d|, p == 2 takes the square root
// of the sum of squares, p == inf the largest |d|, any other p the 1/p power of the sum of
// |d|^p. cdist's compute_mode chooses, for p == 2, torch's matrix-product formula
// sqrt(max(|x1|^2 + |x2|^2 - 2 x1.x2, 0)) (mode 1 always, mode 0/None when a side has more
// than 25 rows) instead of the direct differences (mode 2).
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "dispatch/op_table.h"
#include "kernels/common_internal.h"
#include "kernels/dtype_internal.h"
#include "kernels/layout.h"
#include "kernels/loops_internal.h"
#include "kernels/promote_broadcast.h"

namespace tb {
namespace {

using kernels::ParallelFor;

// The p-norm of a - b over m features.
template <typename T>
T PNorm(const T* a, const T* b, int64_t m, double p) {
  T agg = 0;
  if (p == 0) {
    for (int64_t k = 0; k < m; ++k) agg += a[k] != b[k] ? T(1) : T(0);
    return agg;
  }
  if (p == 1) {
    for (int64_t k = 0; k < m; ++k) agg += std::abs(a[k] - b[k]);
    return agg;
  }
  if (p == 2) {
    for (int64_t k = 0; k < m; ++k) {
      const T d = a[k] - b[k];
      agg += d * d;
    }
    return std::sqrt(agg);
  }
  if (std::isinf(p)) {
    for (int64_t k = 0; k < m; ++k) {
      const T d = std::abs(a[k] - b[k]);
      agg = std::isnan(d) || d > agg ? d : agg;
    }
    return agg;
  }
  const T tp = static_cast<T>(p);
  for (int64_t k = 0; k < m; ++k) agg += std::pow(std::abs(a[k] - b[k]), tp);
  return std::pow(agg, T(1) / tp);
}

void CheckFloat(const char* op, const char* what, const Tensor& t) {
  TB_CHECK_SUPPORTED(t.dtype() == DType::kFloat32 || t.dtype() == DType::kFloat64)
      << op << ": " << what << " has dtype " << DTypeName(t.dtype())
      << "; only float32 and float64 are supported (as torch on CPU)";
}

template <typename T>
void Cdist(const Tensor& a, const Tensor& b, const Tensor& out, int64_t nb, int64_t r1, int64_t r2,
           int64_t m, double p, bool use_mm) {
  const T* pa = a.data_as<const T>();
  const T* pb = b.data_as<const T>();
  T* po = static_cast<T*>(out.mutable_data());
  std::vector<T> n1, n2;
  if (use_mm) {  // squared row norms, as x.pow(2).sum(-1)
    n1.resize(nb * r1);
    n2.resize(nb * r2);
    for (int64_t i = 0; i < nb * r1; ++i) {
      T s = 0;
      for (int64_t k = 0; k < m; ++k) s += pa[i * m + k] * pa[i * m + k];
      n1[i] = s;
    }
    for (int64_t i = 0; i < nb * r2; ++i) {
      T s = 0;
      for (int64_t k = 0; k < m; ++k) s += pb[i * m + k] * pb[i * m + k];
      n2[i] = s;
    }
  }
  ParallelFor(nb * r1, out.numel() * m > kernels::kGrain, [&](int64_t row) {
    const int64_t bi = row / r1;
    const T* u = pa + row * m;
    T* o = po + row * r2;
    for (int64_t j = 0; j < r2; ++j) {
      const T* v = pb + (bi * r2 + j) * m;
      if (use_mm) {
        T d = 0;
        for (int64_t k = 0; k < m; ++k) d += (T(-2) * u[k]) * v[k];
        d += n1[row];
        d += n2[bi * r2 + j];
        o[j] = std::sqrt(std::max(d, T(0)));
      } else {
        o[j] = PNorm(u, v, m, p);
      }
    }
  });
}

// The shapes of cdist(x1 [..., r1, m], x2 [..., r2, m]): the batch dimensions broadcast, nb
// batches; x1 and x2 expanded to them (e1, e2) and the result's shape [..., r1, r2].
struct CdistShapes {
  int64_t r1, r2, m, nb;
  std::vector<int64_t> e1, e2, shape;
};

CdistShapes BroadcastCdist(const char* op, const Tensor& x1, const Tensor& x2) {
  CdistShapes cs{x1.size(-2), x2.size(-2), x1.size(-1), 1, {}, {}, {}};
  const std::vector<int64_t> b1(x1.shape().begin(), x1.shape().end() - 2);
  const std::vector<int64_t> b2(x2.shape().begin(), x2.shape().end() - 2);
  const Dims bs = BroadcastShapes({IntArrayRef(b1), IntArrayRef(b2)}, op);
  cs.shape.assign(bs.begin(), bs.end());
  for (auto s : cs.shape) cs.nb *= s;
  cs.e1 = cs.e2 = cs.shape;
  cs.e1.insert(cs.e1.end(), {cs.r1, cs.m});
  cs.e2.insert(cs.e2.end(), {cs.r2, cs.m});
  cs.shape.insert(cs.shape.end(), {cs.r1, cs.r2});
  return cs;
}

Tensor CdistForward(const Tensor& x1, const Tensor& x2, double p,
                    std::optional<int64_t> compute_mode) {
  constexpr const char* kOp = "aten::_cdist_forward";
  TB_CHECK(x1.ndim() >= 2, ValueError)
      << kOp << ": cdist only supports at least 2D tensors, X1 got shape "
      << ShapeString(x1.shape());
  TB_CHECK(x2.ndim() >= 2, ValueError)
      << kOp << ": cdist only supports at least 2D tensors, X2 got shape "
      << ShapeString(x2.shape());
  TB_CHECK(x1.size(-1) == x2.size(-1), ValueError)
      << kOp << ": X1 and X2 must have the same number of columns, got shapes "
      << ShapeString(x1.shape()) << " and " << ShapeString(x2.shape());
  CheckFloat(kOp, "X1", x1);
  CheckFloat(kOp, "X2", x2);
  TB_CHECK(x1.dtype() == x2.dtype(), ValueError)
      << kOp << ": X1 and X2 must have the same dtype, got " << DTypeName(x1.dtype()) << " and "
      << DTypeName(x2.dtype());
  TB_CHECK(p >= 0, ValueError) << kOp << ": cdist only supports non-negative p values, got " << p;
  const int64_t mode = compute_mode.value_or(0);
  TB_CHECK(mode >= 0 && mode <= 2, ValueError)
      << kOp << ": compute_mode must be None, 0, 1 or 2, got " << mode;
  const CdistShapes cs = BroadcastCdist(kOp, x1, x2);
  const int64_t r1 = cs.r1, r2 = cs.r2, m = cs.m, nb = cs.nb;
  const std::vector<int64_t>& shape = cs.shape;
  if (nb == 0 || r1 == 0 || r2 == 0) return Tensor::Empty(shape, x1.dtype());
  if (m == 0) return Tensor::Zeros(shape, x1.dtype());
  const Tensor a = x1.expand(cs.e1).contiguous();
  const Tensor b = x2.expand(cs.e2).contiguous();
  Tensor out = Tensor::Empty(shape, x1.dtype());
  const bool use_mm = p == 2 && (mode == 1 || (mode == 0 && (r1 > 25 || r2 > 25)));
  if (x1.dtype() == DType::kFloat32) {
    Cdist<float>(a, b, out, nb, r1, r2, m, p, use_mm);
  } else {
    Cdist<double>(a, b, out, nb, r1, r2, m, p, use_mm);
  }
  return out;
}

template <typename T>
void Pdist(const Tensor& x, const Tensor& out, int64_t n, int64_t m, int64_t pairs, double p) {
  const T* px = x.data_as<const T>();
  T* po = static_cast<T*>(out.mutable_data());
  ParallelFor(n - 1, pairs * m > kernels::kGrain, [&](int64_t i) {
    // Pairs (i, j > i) start at i*n - i*(i+1)/2 in row-major order.
    T* o = po + i * n - i * (i + 1) / 2;
    for (int64_t j = i + 1; j < n; ++j) *o++ = PNorm(px + i * m, px + j * m, m, p);
  });
}

Tensor PdistForward(const Tensor& self, double p) {
  constexpr const char* kOp = "aten::_pdist_forward";
  // Fewer than two rows: no pairs (torch returns the empty result before any other check).
  if (self.ndim() >= 1 && self.size(0) <= 1) return Tensor::Empty({0}, self.dtype());
  TB_CHECK(self.ndim() == 2, ValueError)
      << kOp << ": pdist only supports 2D tensors, got shape " << ShapeString(self.shape());
  CheckFloat(kOp, "input", self);
  TB_CHECK(p >= 0, ValueError) << kOp << ": pdist only supports non-negative p values, got " << p;
  const int64_t n = self.size(0), m = self.size(1);
  const int64_t pairs = n > 1 ? n * (n - 1) / 2 : 0;
  if (pairs == 0) return Tensor::Empty({0}, self.dtype());
  if (m == 0) return Tensor::Zeros({pairs}, self.dtype());
  const Tensor x = self.contiguous();
  Tensor out = Tensor::Empty({pairs}, self.dtype());
  if (self.dtype() == DType::kFloat32) {
    Pdist<float>(x, out, n, m, pairs, p);
  } else {
    Pdist<double>(x, out, n, m, pairs, p);
  }
  return out;
}

// d(dist)/d(a_k) for diff = a_k - b_k of a pair at distance dist (torch's backward cases).
template <typename T>
T PNormGrad(T diff, T dist, double p) {
  const auto sign = [](T v) { return static_cast<T>((v > 0) - (v < 0)); };
  if (p == 0) return T(0);
  if (p == 1) return sign(diff);
  if (p == 2) return dist == 0 ? T(0) : diff / dist;
  if (std::isinf(p)) return std::abs(diff) == dist ? sign(diff) : T(0);
  const T tp = static_cast<T>(p);
  if (p < 2) {
    if (dist == 0 || (diff == 0 && p < 1)) return T(0);
    return sign(diff) * std::pow(std::abs(diff), tp - 1) / std::pow(dist, tp - 1);
  }
  return dist == 0 ? T(0) : diff * std::pow(std::abs(diff), tp - 2) / std::pow(dist, tp - 1);
}

template <typename T>
void CdistGrad(const Tensor& grad, const Tensor& a, const Tensor& b, const Tensor& dist,
               const Tensor& out, int64_t nb, int64_t r1, int64_t r2, int64_t m, double p) {
  const T* pg = grad.data_as<const T>();
  const T* pa = a.data_as<const T>();
  const T* pb = b.data_as<const T>();
  const T* pd = dist.data_as<const T>();
  T* po = static_cast<T*>(out.mutable_data());
  ParallelFor(nb * r1, nb * r1 * r2 * m > kernels::kGrain, [&](int64_t row) {
    const int64_t bi = row / r1;
    T* o = po + row * m;
    for (int64_t k = 0; k < m; ++k) o[k] = 0;
    for (int64_t j = 0; j < r2; ++j) {
      const T g = pg[row * r2 + j], d = pd[row * r2 + j];
      const T* v = pb + (bi * r2 + j) * m;
      for (int64_t k = 0; k < m; ++k) o[k] += g * PNormGrad<T>(pa[row * m + k] - v[k], d, p);
    }
  });
}

// aten::_cdist_backward(grad, x1, x2, p, cdist): the gradient for x1, shaped as x1 broadcast
// to the batch dimensions (autograd sums it back to x1's shape).
Tensor CdistBackward(const Tensor& grad, const Tensor& x1, const Tensor& x2, double p,
                     const Tensor& cdist) {
  constexpr const char* kOp = "aten::_cdist_backward";
  TB_CHECK(x1.ndim() >= 2 && x2.ndim() >= 2 && x1.size(-1) == x2.size(-1), ValueError)
      << kOp << ": expected X1 and X2 of at least 2 dimensions with the same number of "
      << "columns, got shapes " << ShapeString(x1.shape()) << " and " << ShapeString(x2.shape());
  CheckFloat(kOp, "X1", x1);
  for (const Tensor* t : {&x2, &grad, &cdist}) {
    TB_CHECK(t->dtype() == x1.dtype(), ValueError)
        << kOp << ": expected all tensors to have dtype " << DTypeName(x1.dtype()) << ", got "
        << DTypeName(t->dtype());
  }
  const CdistShapes cs = BroadcastCdist(kOp, x1, x2);
  const int64_t r1 = cs.r1, r2 = cs.r2, m = cs.m, nb = cs.nb;
  const std::vector<int64_t>& shape = cs.shape;
  TB_CHECK(grad.shape() == IntArrayRef(shape) && cdist.shape() == IntArrayRef(shape), ValueError)
      << kOp << ": expected grad and cdist of shape " << ShapeString(shape) << ", got "
      << ShapeString(grad.shape()) << " and " << ShapeString(cdist.shape());
  if (nb == 0 || r1 == 0 || r2 == 0 || m == 0) {  // no elements: torch's zeros_like(x1)
    Tensor z = EmptyLike(x1, x1.dtype());
    z.copy_from(Tensor::Zeros({}, x1.dtype()));
    return z;
  }
  if (p == 0) return Tensor::Zeros(cs.e1, x1.dtype());
  const Tensor a = x1.expand(cs.e1).contiguous(), b = x2.expand(cs.e2).contiguous();
  const Tensor g = grad.contiguous(), d = cdist.contiguous();
  Tensor out = Tensor::Empty(cs.e1, x1.dtype());
  if (x1.dtype() == DType::kFloat32) {
    CdistGrad<float>(g, a, b, d, out, nb, r1, r2, m, p);
  } else {
    CdistGrad<double>(g, a, b, d, out, nb, r1, r2, m, p);
  }
  return out;
}

// aten::_pdist_backward(grad, self, p, pdist): each pair (i, j) adds its gradient to row i and
// subtracts it from row j.
Tensor PdistBackward(const Tensor& grad, const Tensor& self, double p, const Tensor& pdist) {
  constexpr const char* kOp = "aten::_pdist_backward";
  TB_CHECK(self.ndim() == 2, ValueError)
      << kOp << ": expected a 2D input, got shape " << ShapeString(self.shape());
  CheckFloat(kOp, "input", self);
  for (const Tensor* t : {&grad, &pdist}) {
    TB_CHECK(t->dtype() == self.dtype(), ValueError)
        << kOp << ": expected all tensors to have dtype " << DTypeName(self.dtype()) << ", got "
        << DTypeName(t->dtype());
  }
  const int64_t n = self.size(0), m = self.size(1);
  const int64_t pairs = n > 1 ? n * (n - 1) / 2 : 0;
  TB_CHECK(grad.numel() == pairs && pdist.numel() == pairs, ValueError)
      << kOp << ": expected grad and pdist with " << pairs << " elements, got shapes "
      << ShapeString(grad.shape()) << " and " << ShapeString(pdist.shape());
  Tensor out = Tensor::Zeros({n, m}, self.dtype());
  if (p == 0 || pairs == 0 || m == 0) return out;
  const Tensor x = self.contiguous(), g = grad.contiguous(), d = pdist.contiguous();
  auto run = [&](auto zero) {
    using T = decltype(zero);
    const T* px = x.data_as<const T>();
    const T* pg = g.data_as<const T>();
    const T* pd = d.data_as<const T>();
    T* po = static_cast<T*>(out.mutable_data());
    // Column k of every row is independent: parallel over columns, pairs in order.
    ParallelFor(m, pairs * m > kernels::kGrain, [&](int64_t k) {
      int64_t pair = 0;
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = i + 1; j < n; ++j, ++pair) {
          const T v = pg[pair] * PNormGrad<T>(px[i * m + k] - px[j * m + k], pd[pair], p);
          po[i * m + k] += v;
          po[j * m + k] -= v;
        }
      }
    });
  };
  if (self.dtype() == DType::kFloat32) {
    run(0.0f);
  } else {
    run(0.0);
  }
  return out;
}

}  // namespace

TB_REGISTER_KERNELS(distance) {
  const auto cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::_cdist_forward", cpu, Boxed<&CdistForward>(), TB_HERE);
  table.RegisterKernel("aten::_pdist_forward", cpu, Boxed<&PdistForward>(), TB_HERE);
  table.RegisterKernel("aten::_cdist_backward", cpu, Boxed<&CdistBackward>(), TB_HERE);
  table.RegisterKernel("aten::_pdist_backward", cpu, Boxed<&PdistBackward>(), TB_HERE);
}

}  // namespace tb
