// Complex matrix products (declared in kernels/complex_internal.h): batched GEMM on BLAS
// cgemm / zgemm (OpenBLAS, as torch's CPU build), and dot / vdot accumulated in
// complex<double>. Reached from kernels/matmul.cc's BatchedGemm, SmallBatchedGemm and DotImpl,
// so mm, addmm, bmm, baddbmm, mv, addmv, dot and vdot (and what decomposes into them: matmul,
// linear, einsum, ...) all take it.
#include <algorithm>
#include <complex>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>

#include "kernels/complex_internal.h"
#include "kernels/linalg_internal.h"  // cgemm_ / zgemm_

namespace tb::kernels::complex {
namespace {

// How BLAS reads a logical row-major R x C matrix with element strides (sr, sc): as stored
// ('N', row-major with leading dimension ld) or transposed ('T', column-major); nullopt when
// neither (a copy is needed).
struct Layout {
  char trans;
  lapack_int ld;
};

std::optional<Layout> LayoutOf(int64_t rows, int64_t cols, int64_t sr, int64_t sc) {
  const int64_t max_ld = std::numeric_limits<lapack_int>::max();
  if ((sc == 1 || cols <= 1) && (rows <= 1 || sr >= std::max<int64_t>(1, cols))) {
    const int64_t ld = rows <= 1 ? std::max<int64_t>(1, cols) : sr;
    if (ld <= max_ld) return Layout{'N', static_cast<lapack_int>(ld)};
  }
  if ((sr == 1 || rows <= 1) && (cols <= 1 || sc >= std::max<int64_t>(1, rows))) {
    const int64_t ld = cols <= 1 ? std::max<int64_t>(1, rows) : sc;
    if (ld <= max_ld) return Layout{'T', static_cast<lapack_int>(ld)};
  }
  return std::nullopt;
}

// A [B, R, C] operand BLAS can read per batch (a dense copy when the strides do not allow it).
Tensor Readable(const Tensor& t) {
  if (LayoutOf(t.size(1), t.size(2), t.stride(1), t.stride(2))) return t;
  Tensor c = Tensor::Empty(t.shape(), t.dtype());
  c.copy_from(t);
  return c;
}

template <typename T>
void GemmBatches(const Tensor& out, const Tensor& a, const Tensor& b, T alpha, T beta) {
  const lapack_int m = static_cast<lapack_int>(out.size(1)),
                   n = static_cast<lapack_int>(out.size(2)), k = static_cast<lapack_int>(a.size(2));
  const Layout la = *LayoutOf(a.size(1), a.size(2), a.stride(1), a.stride(2));
  const Layout lb = *LayoutOf(b.size(1), b.size(2), b.stride(1), b.stride(2));
  const Layout lc = *LayoutOf(out.size(1), out.size(2), out.stride(1), out.stride(2));
  const T* pa = a.data_as<const T>();
  const T* pb = b.data_as<const T>();
  T* pc = static_cast<T*>(out.mutable_data());
  for (int64_t i = 0; i < out.size(0); ++i) {
    // Row-major C = A B is column-major C^T = B^T A^T.
    const T* ai = pa + i * a.stride(0);
    const T* bi = pb + i * b.stride(0);
    T* ci = pc + i * out.stride(0);
    if constexpr (std::is_same_v<T, std::complex<float>>) {
      cgemm_(&lb.trans, &la.trans, &n, &m, &k, &alpha, bi, &lb.ld, ai, &la.ld, &beta, ci, &lc.ld, 1,
             1);
    } else {
      zgemm_(&lb.trans, &la.trans, &n, &m, &k, &alpha, bi, &lb.ld, ai, &la.ld, &beta, ci, &lc.ld, 1,
             1);
    }
  }
}

}  // namespace

void Gemm(const char* op, const Tensor& out, const Tensor& a, const Tensor& b,
          std::complex<double> alpha, std::complex<double> beta) {
  if (out.numel() == 0) return;
  const DType dt = out.dtype();
  TB_CHECK_SUPPORTED(dt == DType::kComplex64 || dt == DType::kComplex128)
      << op << ": dtype " << DTypeName(dt) << " is not supported";
  const int64_t limit = std::numeric_limits<lapack_int>::max();
  TB_CHECK(out.size(1) <= limit && out.size(2) <= limit && a.size(2) <= limit, ValueError)
      << op << ": matrix sizes beyond " << limit << " are not supported";
  const Tensor ra = Readable(a), rb = Readable(b);
  // C must be written row-major ('N'): otherwise into a dense temporary, copied back.
  const std::optional<Layout> lc = LayoutOf(out.size(1), out.size(2), out.stride(1), out.stride(2));
  const bool direct = lc && lc->trans == 'N' && out.stride(0) != 0;
  Tensor c = out;
  if (!direct) {
    c = Tensor::Empty(out.shape(), dt);
    if (beta != 0.0) c.copy_from(out);
  }
  if (dt == DType::kComplex64) {
    GemmBatches<std::complex<float>>(c, ra, rb, std::complex<float>(alpha),
                                     std::complex<float>(beta));
  } else {
    GemmBatches<std::complex<double>>(c, ra, rb, alpha, beta);
  }
  if (!direct) out.copy_from(c);
}

namespace {

// c10::complex's textbook product.
template <typename T>
T Mul(T x, T y) {
  return {x.real() * y.real() - x.imag() * y.imag(), x.real() * y.imag() + x.imag() * y.real()};
}

template <typename T>
void SmallGemmLoop(const Tensor& out, const Tensor& a, const Tensor& b, std::complex<double> alpha,
                   std::complex<double> beta, bool plain) {
  using R = typename T::value_type;
  const T ta(static_cast<R>(alpha.real()), static_cast<R>(alpha.imag()));
  const T tb(static_cast<R>(beta.real()), static_cast<R>(beta.imag()));
  const int64_t nb = out.size(0), m = out.size(1), n = out.size(2), k = a.size(2);
  const T* pa = a.data_as<const T>();
  const T* pb = b.data_as<const T>();
  T* pc = static_cast<T*>(out.mutable_data());
  const int64_t a0 = a.stride(0), a1 = a.stride(1), a2 = a.stride(2);
  const int64_t b0 = b.stride(0), b1 = b.stride(1), b2 = b.stride(2);
  const int64_t c0 = out.stride(0), c1 = out.stride(1), c2 = out.stride(2);
  for (int64_t bi = 0; bi < nb; ++bi) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        T acc(0);
        for (int64_t x = 0; x < k; ++x) {
          acc += Mul(pa[bi * a0 + i * a1 + x * a2], pb[bi * b0 + x * b1 + j * b2]);
        }
        T& r = pc[bi * c0 + i * c1 + j * c2];
        if (plain) {
          r = acc;
        } else if (beta == 0.0) {
          r = Mul(ta, acc);
        } else {
          r = Mul(r, tb) + Mul(ta, acc);
        }
      }
    }
  }
}

}  // namespace

void SmallGemm(const Tensor& out, const Tensor& a, const Tensor& b, std::complex<double> alpha,
               std::complex<double> beta, bool plain) {
  if (out.dtype() == DType::kComplex64) {
    SmallGemmLoop<std::complex<float>>(out, a, b, alpha, beta, plain);
  } else {
    SmallGemmLoop<std::complex<double>>(out, a, b, alpha, beta, plain);
  }
}

Tensor Dot(const char* op, const Tensor& a, const Tensor& b, bool conj_a) {
  Tensor out = Tensor::Empty({}, a.dtype());
  const int64_t n = a.size(0), sa = a.stride(0), sb = b.stride(0);
  auto run = [&](auto zero) {
    using T = decltype(zero);
    const T* x = a.data_as<const T>();
    const T* y = b.data_as<const T>();
    std::complex<double> acc = 0;
    for (int64_t i = 0; i < n; ++i) {
      const std::complex<double> u(x[i * sa]), v(y[i * sb]);
      acc += (conj_a ? std::conj(u) : u) * v;
    }
    *out.data_as<T>() = T(acc);
  };
  if (a.dtype() == DType::kComplex64) {
    run(std::complex<float>());
  } else if (a.dtype() == DType::kComplex128) {
    run(std::complex<double>());
  } else {
    TB_DECLINE << op << ": dtype " << DTypeName(a.dtype()) << " is not supported";
  }
  return out;
}

}  // namespace tb::kernels::complex
