// Scans along one dim: aten::cumsum, aten::cumprod, aten::cummax, aten::cummin,
// aten::logcumsumexp.
//
// The input is read as a contiguous [O, L, I] block with the scanned dim L in the middle. When
// I == 1 each of the O rows is scanned on its own; otherwise blocks of I are scanned side by
// side, one row of L at a time (a unit-stride loop the compiler vectorises). As torch on CPU:
// cumsum/cumprod accumulate float32 in double (16-bit floats in float, integers in int64) and
// give int64 for integer and bool input unless dtype= says otherwise; cummax/cummin keep the
// dtype, return int64 indices, take the later index on ties and propagate NaN; logcumsumexp
// accumulates as cumsum does (float32 in double, 16-bit floats in float).
#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <optional>
#include <tuple>

#include "dispatch/op_table.h"
#include "kernels/complex_internal.h"
#include "kernels/reduce_internal.h"

namespace tb {
namespace {

constexpr int64_t kBlock = 64;     // columns scanned side by side
constexpr int64_t kGrain = 32768;  // elements below which one thread works

// The scan's layout: O rows of L elements, each element I apart.
struct ScanShape {
  int64_t O = 1, L = 1, I = 1;
};

ScanShape ShapeOf(const Tensor& x, int64_t dim) {
  ScanShape s;
  for (int64_t d = 0; d < x.ndim(); ++d) {
    (d < dim ? s.O : d == dim ? s.L : s.I) *= x.shape()[d];
  }
  return s;
}

// Calls step(acc, offset, r) for every element in scan order, offset being the element's
// position in the contiguous input and output, r its position along the scanned dim.
template <typename Acc, typename Init, typename Step>
void ScanLoop(const ScanShape& s, Init init, Step step) {
  const bool par = s.O * s.L * s.I >= 2 * kGrain;
  if (s.I == 1) {
#pragma omp parallel for if (par) schedule(static)
    for (int64_t o = 0; o < s.O; ++o) {
      Acc a = init();
      for (int64_t r = 0; r < s.L; ++r) step(a, o * s.L + r, r);
    }
    return;
  }
  const int64_t blocks = (s.I + kBlock - 1) / kBlock;
#pragma omp parallel for if (par) schedule(static)
  for (int64_t t = 0; t < s.O * blocks; ++t) {
    const int64_t o = t / blocks, i0 = (t % blocks) * kBlock;
    const int64_t w = std::min(kBlock, s.I - i0);
    Acc a[kBlock];
    for (int64_t j = 0; j < w; ++j) a[j] = init();
    for (int64_t r = 0; r < s.L; ++r) {
      const int64_t base = (o * s.L + r) * s.I + i0;
      for (int64_t j = 0; j < w; ++j) step(a[j], base + j, r);
    }
  }
}

// The type cumsum/cumprod accumulate in: double for float32/64, float for 16-bit floats,
// int64 for integers and bool.
template <typename T>
using cum_acc_t =
    std::conditional_t<kernels::kIsReducedFloat<T>, float,
                       std::conditional_t<std::is_floating_point_v<T>, double, int64_t>>;

// out = cumsum or cumprod (kProd) of x, read as In, accumulated and written as Out.
template <typename In, typename Out, bool kProd>
void CumRun(const Tensor& x, const Tensor& out, const ScanShape& s) {
  using Acc = cum_acc_t<Out>;
  const In* in = x.data_as<const In>();
  Out* o = out.data_as<Out>();
  ScanLoop<Acc>(
      s, [] { return Acc(kProd ? 1 : 0); },
      [&](Acc& a, int64_t off, int64_t) {
        if constexpr (kProd) {
          a = kernels::MulWrap(a, kernels::Widen<Acc>(in[off]));
        } else {
          a = kernels::AddWrap(a, kernels::Widen<Acc>(in[off]));
        }
        o[off] = kernels::Convert<Out>(a);
      });
}

template <bool kProd>
Tensor CumSumProd(const char* op, const Tensor& self, int64_t dim,
                  const std::optional<DType>& dtype) {
  dim = WrapDim(dim, self.ndim(), op);
  // Integers and bool give int64, read as they are; otherwise the input is cast to the result
  // dtype first.
  const bool widen = !dtype && IsIntegral(self.dtype(), /*include_bool=*/true);
  const DType out_dtype = dtype ? *dtype : widen ? DType::kInt64 : self.dtype();
  Tensor out = Tensor::Empty(self.shape(), out_dtype);
  if (out.numel() == 0) return out;
  Tensor x = (widen ? self : Cast(self, out_dtype)).contiguous();
  ScanShape s = ShapeOf(x, dim);
  if (IsComplex(out_dtype)) {
    kernels::complex::Scan(kProd, x, out, s.O, s.L, s.I);
    return out;
  }
  if (widen) {
    TB_DISPATCH(x.dtype(), op, TB_TYPES_INT_BOOL,
                [&] { CumRun<scalar_t, int64_t, kProd>(x, out, s); });
  } else {
    TB_DISPATCH(out_dtype, op, TB_TYPES_ALL, [&] { CumRun<scalar_t, scalar_t, kProd>(x, out, s); });
  }
  return out;
}

Tensor CumSum(const Tensor& self, int64_t dim, const std::optional<DType>& dtype) {
  return CumSumProd<false>("aten::cumsum", self, dim, dtype);
}

Tensor CumProd(const Tensor& self, int64_t dim, const std::optional<DType>& dtype) {
  return CumSumProd<true>("aten::cumprod", self, dim, dtype);
}

template <bool kMax>
std::tuple<Tensor, Tensor> CumExtremum(const char* op, const Tensor& self, int64_t dim) {
  dim = WrapDim(dim, self.ndim(), op);
  Tensor x = self.contiguous();
  Tensor values = Tensor::Empty(self.shape(), self.dtype());
  Tensor indices = Tensor::Empty(self.shape(), DType::kInt64);
  if (values.numel() == 0) return {values, indices};
  ScanShape s = ShapeOf(x, dim);
  TB_DISPATCH(self.dtype(), op, TB_TYPES_ALL, [&] {
    using T = scalar_t;
    using V = kernels::opmath_t<T>;
    struct Acc {
      V v;
      int64_t i;
    };
    const T* in = x.data_as<const T>();
    T* vo = values.data_as<T>();
    int64_t* io = indices.data_as<int64_t>();
    auto init = [] { return Acc{V(), -1}; };
    ScanLoop<Acc>(s, init, [&](Acc& a, int64_t off, int64_t r) {
      const V v = kernels::Widen<V>(in[off]);
      bool take = a.i < 0;
      if constexpr (std::is_floating_point_v<V>) {
        // torch: a NaN always takes over; nothing replaces a NaN but a later NaN.
        take = take || std::isnan(v) || (!std::isnan(a.v) && (kMax ? v >= a.v : v <= a.v));
      } else {
        take = take || (kMax ? v >= a.v : v <= a.v);
      }
      if (take) a = Acc{v, r};
      vo[off] = kernels::Convert<T>(a.v);
      io[off] = a.i;
    });
  });
  return {values, indices};
}

std::tuple<Tensor, Tensor> CumMax(const Tensor& self, int64_t dim) {
  return CumExtremum<true>("aten::cummax", self, dim);
}

std::tuple<Tensor, Tensor> CumMin(const Tensor& self, int64_t dim) {
  return CumExtremum<false>("aten::cummin", self, dim);
}

// log(exp(x) + exp(acc)) as torch's _log_add_exp_helper: NaN in acc propagates; two equal
// infinities give x.
template <typename A>
A LogAddExpAcc(A x, A acc) {
  const A lo = std::isnan(acc) ? acc : std::min(x, acc);
  const A hi = std::isnan(acc) ? acc : std::max(x, acc);
  if (lo != hi || std::isfinite(lo)) return std::log1p(std::exp(lo - hi)) + hi;
  return x;
}

using Z = std::complex<double>;

// logcumsumexp of a complex tensor, accumulated in complex128 (torch's acc_type).
template <typename T>
void LogCumSumExpComplex(const Tensor& x, const Tensor& out, const ScanShape& s) {
  const T* in = x.data_as<const T>();
  T* o = out.data_as<T>();
  using R = typename T::value_type;
  ScanLoop<Z>(
      s, [] { return Z(-std::numeric_limits<double>::infinity(), 0); },
      [&](Z& a, int64_t off, int64_t) {
        a = kernels::complex::LogAddExpOne(Z(in[off].real(), in[off].imag()), a);
        o[off] = T(static_cast<R>(a.real()), static_cast<R>(a.imag()));
      });
}

Tensor LogCumSumExp(const Tensor& self, int64_t dim) {
  const char* op = "aten::logcumsumexp";
  dim = WrapDim(dim, self.ndim(), op);
  if (IsComplex(self.dtype())) {
    Tensor out = Tensor::Empty(self.shape(), self.dtype());
    if (out.numel() == 0) return out;
    const Tensor x = self.contiguous();
    if (self.dtype() == DType::kComplex64) {
      LogCumSumExpComplex<std::complex<float>>(x, out, ShapeOf(x, dim));
    } else {
      LogCumSumExpComplex<std::complex<double>>(x, out, ShapeOf(x, dim));
    }
    return out;
  }
  TB_CHECK_SUPPORTED(IsFloatingPoint(self.dtype()))
      << op << ": dtype " << DTypeName(self.dtype()) << " is not supported";
  Tensor out = Tensor::Empty(self.shape(), self.dtype());
  if (out.numel() == 0) return out;
  const Tensor x = self.contiguous();
  const ScanShape s = ShapeOf(x, dim);
  TB_DISPATCH(self.dtype(), op, TB_TYPES_FLOAT, [&] {
    using T = scalar_t;
    using Acc = cum_acc_t<T>;
    const T* in = x.data_as<const T>();
    T* o = out.data_as<T>();
    ScanLoop<Acc>(
        s, [] { return -std::numeric_limits<Acc>::infinity(); },
        [&](Acc& a, int64_t off, int64_t) {
          a = LogAddExpAcc<Acc>(kernels::Widen<Acc>(in[off]), a);
          o[off] = kernels::Convert<T>(a);
        });
  });
  return out;
}

}  // namespace

TB_REGISTER_KERNELS(scan) {
  table.RegisterKernel("aten::logcumsumexp", DeviceType::kCPU, Boxed<&LogCumSumExp>(), TB_HERE);
  table.RegisterKernel("aten::_logcumsumexp", DeviceType::kCPU, Boxed<&LogCumSumExp>(), TB_HERE);
  table.RegisterKernel("aten::cumsum", DeviceType::kCPU, Boxed<&CumSum>(), TB_HERE);
  table.RegisterKernel("aten::cumprod", DeviceType::kCPU, Boxed<&CumProd>(), TB_HERE);
  table.RegisterKernel("aten::cummax", DeviceType::kCPU, Boxed<&CumMax>(), TB_HERE);
  table.RegisterKernel("aten::cummin", DeviceType::kCPU, Boxed<&CumMin>(), TB_HERE);
}

}  // namespace tb
