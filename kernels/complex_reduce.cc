// Complex reductions and scans that are not two real ones side by side (declared in
// kernels/complex_internal.h): prod, cumsum / cumprod loops and the pairing of the real and
// imaginary parts' variances. Sums accumulate in complex<double>, as torch's CPU acc_type.
#include <cmath>
#include <complex>

#include "kernels/complex_internal.h"
#include "kernels/reduce_internal.h"

namespace tb::kernels::complex {
namespace {

using Z = std::complex<double>;

// c10::complex's product (no C99 Annex G inf/NaN recovery), as torch's prod and cumprod.
Z Mul(Z x, Z y) {
  return {x.real() * y.real() - x.imag() * y.imag(), x.real() * y.imag() + x.imag() * y.real()};
}

template <typename T>
struct ProdReducer {
  using In = T;
  using Acc = Z;
  static constexpr bool kPairwise = false;
  T* out;
  Acc Init(int64_t) const { return Acc(1); }
  Acc Step(Acc a, In x, int64_t) const { return Mul(a, Z(x)); }
  Acc Merge(Acc a, Acc b) const { return Mul(a, b); }
  void Write(int64_t o, Acc a) const { out[o] = T(a); }
};

template <typename Body>
void Dispatch(DType t, const char* op, Body&& body) {
  if (t == DType::kComplex64) return body(std::complex<float>());
  if (t == DType::kComplex128) return body(std::complex<double>());
  TB_DECLINE << op << ": dtype " << DTypeName(t) << " is not supported";
}

}  // namespace

Tensor Prod(const char* op, const Tensor& self, const ReduceDims& rd) {
  Tensor out = Tensor::Empty(rd.out_shape, self.dtype());
  Dispatch(self.dtype(), op, [&](auto v) {
    using T = decltype(v);
    Reduce(self, rd, ProdReducer<T>{out.data_as<T>()});
  });
  return out;
}

void Scan(bool prod, const Tensor& x, const Tensor& out, int64_t O, int64_t L, int64_t I) {
  Dispatch(x.dtype(), prod ? "aten::cumprod" : "aten::cumsum", [&](auto v) {
    using T = decltype(v);
    const T* in = x.data_as<const T>();
    T* o = out.data_as<T>();
    for (int64_t a = 0; a < O; ++a) {
      for (int64_t i = 0; i < I; ++i) {
        Z acc = prod ? Z(1) : Z(0);
        for (int64_t r = 0; r < L; ++r) {
          const int64_t off = (a * L + r) * I + i;
          acc = prod ? Mul(acc, Z(in[off])) : acc + Z(in[off]);
          o[off] = T(acc);
        }
      }
    }
  });
}

Tensor AddParts(const Tensor& parts, bool take_sqrt) {
  const Tensor p = parts.contiguous();
  const IntArrayRef s = p.shape();
  Tensor out = Tensor::Empty(IntArrayRef(s.data(), s.size() - 1), p.dtype());
  TB_DISPATCH(p.dtype(), "aten::var", TB_TYPES_F32_F64, [&] {
    using T = scalar_t;
    const T* in = p.data_as<const T>();
    T* o = out.data_as<T>();
    for (int64_t i = 0; i < out.numel(); ++i) {
      const T v = in[2 * i] + in[2 * i + 1];
      o[i] = take_sqrt ? std::sqrt(v) : v;
    }
  });
  return out;
}

}  // namespace tb::kernels::complex
