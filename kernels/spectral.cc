// Discrete Fourier transforms: aten::_fft_r2c, aten::_fft_c2r, aten::_fft_c2c.
//
// A transform over several dims is a sequence of 1-D transforms, one dim at a time, each done
// by Eigen's FFT module (kissfft, any length) in double precision whatever the dtype: the input
// is read into a contiguous complex<double> buffer, transformed in place and written out as
// complex64/complex128 (or float32/float64 for c2r). As torch: r2c halves the last dim of
// `dim` to n/2+1 when onesided (otherwise fills the rest with the Hermitian mirror), c2r reads
// the first last_dim_size/2+1 entries of the last dim of `dim` as a Hermitian half spectrum,
// and `normalization` is torch's fft_norm_mode: 0 none, 1 by 1/sqrt(n), 2 by 1/n, n being the
// product of the signal sizes over `dim`.
#include <cmath>
#include <complex>
#include <cstdint>
#include <vector>

#include <unsupported/Eigen/FFT>

#include "dispatch/op_table.h"
#include "kernels/common_internal.h"
#include "kernels/dtype_internal.h"

namespace tb {
namespace {

using kernels::CheckHost;

using C = std::complex<double>;

// A contiguous complex<double> copy of a tensor's values.
struct Buffer {
  Dims shape;
  std::vector<C> data;
};

Buffer Load(const Tensor& self) {
  Tensor x = self.contiguous();
  Buffer b{Dims(x.shape()), std::vector<C>(static_cast<size_t>(x.numel()))};
  const int64_t n = x.numel();
  switch (x.dtype()) {
    case DType::kFloat32:
      for (int64_t i = 0; i < n; ++i) b.data[i] = C(x.data_as<const float>()[i], 0.0);
      break;
    case DType::kFloat64:
      for (int64_t i = 0; i < n; ++i) b.data[i] = C(x.data_as<const double>()[i], 0.0);
      break;
    case DType::kComplex64:
      for (int64_t i = 0; i < n; ++i) b.data[i] = C(x.data_as<const std::complex<float>>()[i]);
      break;
    case DType::kComplex128:
      for (int64_t i = 0; i < n; ++i) b.data[i] = x.data_as<const std::complex<double>>()[i];
      break;
    default: break;
  }
  return b;
}

// The wrapped, checked dims of `dim` (each at most once).
std::vector<int64_t> Dims_(const Tensor& self, const std::vector<int64_t>& dim, const char* op) {
  std::vector<int64_t> out;
  std::vector<bool> seen(static_cast<size_t>(self.ndim()), false);
  for (int64_t d : dim) {
    const int64_t w = WrapDim(d, self.ndim(), op);
    TB_CHECK(!seen[w], ValueError) << op << ": dim " << d << " appears more than once";
    seen[w] = true;
    out.push_back(w);
  }
  return out;
}

// Transforms `b` in place along dim d (forward: exp(-2 pi i jk/n); inverse: unscaled).
void Transform(Buffer& b, int64_t d, bool forward) {
  int64_t O = 1, I = 1;
  const int64_t L = b.shape[d];
  for (int64_t k = 0; k < static_cast<int64_t>(b.shape.size()); ++k) {
    if (k < d) O *= b.shape[k];
    if (k > d) I *= b.shape[k];
  }
  if (O * L * I == 0 || L == 1) return;  // a length-1 transform is the identity
  Eigen::FFT<double> fft;
  fft.SetFlag(Eigen::FFT<double>::Unscaled);
  std::vector<C> in(static_cast<size_t>(L)), out(static_cast<size_t>(L));
  for (int64_t o = 0; o < O; ++o) {
    for (int64_t i = 0; i < I; ++i) {
      C* base = b.data.data() + o * L * I + i;
      for (int64_t r = 0; r < L; ++r) in[r] = base[r * I];
      if (forward) {
        fft.fwd(out.data(), in.data(), L);
      } else {
        fft.inv(out.data(), in.data(), L);
      }
      for (int64_t r = 0; r < L; ++r) base[r * I] = out[r];
    }
  }
}

// Resizes dim d of `b` to n, keeping the first entries and padding with zeros.
void Resize(Buffer& b, int64_t d, int64_t n) {
  int64_t O = 1, I = 1;
  const int64_t L = b.shape[d];
  for (int64_t k = 0; k < static_cast<int64_t>(b.shape.size()); ++k) {
    if (k < d) O *= b.shape[k];
    if (k > d) I *= b.shape[k];
  }
  std::vector<C> out(static_cast<size_t>(O * n * I), C(0.0, 0.0));
  const int64_t keep = std::min(L, n);
  for (int64_t o = 0; o < O; ++o) {
    for (int64_t r = 0; r < keep; ++r) {
      for (int64_t i = 0; i < I; ++i) out[(o * n + r) * I + i] = b.data[(o * L + r) * I + i];
    }
  }
  b.shape[d] = n;
  b.data = std::move(out);
}

double Scale(int64_t normalization, double n, const char* op) {
  switch (normalization) {
    case 0: return 1.0;
    case 1: return n > 0 ? 1.0 / std::sqrt(n) : 1.0;
    case 2: return n > 0 ? 1.0 / n : 1.0;
    default:
      TB_THROW(ValueError) << op << ": normalization must be 0, 1 or 2, got " << normalization;
  }
}

// Writes `b` times `scale` into a new tensor of `dtype` (complex64/128: the values; float32/64:
// the real parts).
Tensor Store(const Buffer& b, double scale, DType dtype) {
  Tensor out = Tensor::Empty(b.shape, dtype);
  const int64_t n = out.numel();
  switch (dtype) {
    case DType::kFloat32:
      for (int64_t i = 0; i < n; ++i)
        out.data_as<float>()[i] = static_cast<float>(b.data[i].real() * scale);
      break;
    case DType::kFloat64:
      for (int64_t i = 0; i < n; ++i) out.data_as<double>()[i] = b.data[i].real() * scale;
      break;
    case DType::kComplex64:
      for (int64_t i = 0; i < n; ++i) {
        out.data_as<std::complex<float>>()[i] = std::complex<float>(b.data[i] * scale);
      }
      break;
    default:
      for (int64_t i = 0; i < n; ++i) out.data_as<std::complex<double>>()[i] = b.data[i] * scale;
      break;
  }
  return out;
}

void CheckDType(const char* op, const Tensor& self, bool complex) {
  const DType t = self.dtype();
  const bool ok = complex ? IsComplex(t) : (t == DType::kFloat32 || t == DType::kFloat64);
  TB_CHECK(ok, NotImplementedError)
      << op << ": expected a " << (complex ? "complex64 or complex128" : "float32 or float64")
      << " input, got " << DTypeName(t);
}

Tensor FftR2C(const Tensor& self, const std::vector<int64_t>& dim, int64_t normalization,
              bool onesided) {
  constexpr const char* kOp = "aten::_fft_r2c";
  CheckHost(kOp, self);
  CheckDType(kOp, self, false);
  std::vector<int64_t> dims = Dims_(self, dim, kOp);
  TB_CHECK(!dims.empty(), ValueError) << kOp << ": dim must name at least one dimension";
  Buffer b = Load(self);
  double n = 1;
  for (int64_t d : dims) {
    n *= static_cast<double>(b.shape[d]);
    Transform(b, d, true);
  }
  if (onesided) Resize(b, dims.back(), b.shape[dims.back()] / 2 + 1);
  const DType out = self.dtype() == DType::kFloat32 ? DType::kComplex64 : DType::kComplex128;
  return Store(b, Scale(normalization, n, kOp), out);
}

Tensor FftC2C(const Tensor& self, const std::vector<int64_t>& dim, int64_t normalization,
              bool forward) {
  constexpr const char* kOp = "aten::_fft_c2c";
  CheckHost(kOp, self);
  CheckDType(kOp, self, true);
  std::vector<int64_t> dims = Dims_(self, dim, kOp);
  Buffer b = Load(self);
  double n = 1;
  for (int64_t d : dims) {
    n *= static_cast<double>(b.shape[d]);
    Transform(b, d, forward);
  }
  return Store(b, Scale(normalization, n, kOp), self.dtype());
}

Tensor FftC2R(const Tensor& self, const std::vector<int64_t>& dim, int64_t normalization,
              int64_t last_dim_size) {
  constexpr const char* kOp = "aten::_fft_c2r";
  CheckHost(kOp, self);
  CheckDType(kOp, self, true);
  std::vector<int64_t> dims = Dims_(self, dim, kOp);
  TB_CHECK(!dims.empty(), ValueError) << kOp << ": dim must name at least one dimension";
  TB_CHECK(last_dim_size >= 1, ValueError)
      << kOp << ": last_dim_size must be positive, got " << last_dim_size;
  Buffer b = Load(self);
  double n = static_cast<double>(last_dim_size);
  for (size_t k = 0; k + 1 < dims.size(); ++k) {
    n *= static_cast<double>(b.shape[dims[k]]);
    Transform(b, dims[k], false);
  }
  // The last dim: the half spectrum X[0..m/2] completed by X[m-k] = conj(X[k]).
  const int64_t d = dims.back(), m = last_dim_size, half = m / 2 + 1;
  Resize(b, d, half);
  Resize(b, d, m);
  int64_t O = 1, I = 1;
  for (int64_t k = 0; k < static_cast<int64_t>(b.shape.size()); ++k) {
    if (k < d) O *= b.shape[k];
    if (k > d) I *= b.shape[k];
  }
  for (int64_t o = 0; o < O; ++o) {
    for (int64_t i = 0; i < I; ++i) {
      C* base = b.data.data() + o * m * I + i;
      for (int64_t r = half; r < m; ++r) base[r * I] = std::conj(base[(m - r) * I]);
    }
  }
  Transform(b, d, false);
  const DType out = self.dtype() == DType::kComplex64 ? DType::kFloat32 : DType::kFloat64;
  return Store(b, Scale(normalization, n, kOp), out);
}

}  // namespace

TB_REGISTER_KERNELS(spectral) {
  const DeviceType cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::_fft_r2c", cpu, Boxed<&FftR2C>(), TB_HERE);
  table.RegisterKernel("aten::_fft_c2r", cpu, Boxed<&FftC2R>(), TB_HERE);
  table.RegisterKernel("aten::_fft_c2c", cpu, Boxed<&FftC2C>(), TB_HERE);
}

}  // namespace tb
