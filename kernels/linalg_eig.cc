// The general (non-symmetric) eigendecomposition on LAPACK geev, as torch's CPU build computes
// it: aten::linalg_eig and aten::_linalg_eigvals for float32, float64, complex64 and complex128.
// Eigenvalues and eigenvectors are complex whatever the input; eigenvectors have unit 2-norm
// (LAPACK's normalization), in LAPACK's order.
//
// A real input goes to sgeev / dgeev, whose eigenvalues come as (real, imaginary) pairs and
// whose eigenvectors of a conjugate pair j, j + 1 are stored as the real and imaginary parts in
// columns j and j + 1: they are expanded to v_j = x + iy, v_{j+1} = x - iy, as torch does.
#include <complex>
#include <string>
#include <tuple>
#include <vector>

#include "dispatch/op_table.h"
#include "kernels/linalg_internal.h"

namespace tb::kernels::linalg {
namespace {

// Eigenvalues (batch x n) and, with `vectors`, right eigenvectors (column-major batch of n x n;
// an empty tensor otherwise), both of the complex dtype of `a`.
std::tuple<Tensor, Tensor> Eig(const Tensor& a, bool vectors, const char* op) {
  CheckMatrix(a, op, true);
  const Dims batch = BatchShape(a);
  const int64_t nb = BatchCount(batch), n = a.size(-1);
  const DType cdt = ComplexDType(a.dtype());
  Tensor work_a = ColMajorCopy(a);
  Tensor w = Tensor::Empty(Concat(batch, {n}), cdt);
  Tensor v = vectors ? ColMajor(batch, n, n, cdt) : Tensor::Empty({0}, cdt);
  Tensor info = Int32Zeros(batch);
  ForType(a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    using R = Real<T>;
    using C = std::complex<R>;
    if (n == 0) return;
    const char jobvr = vectors ? 'V' : 'N';
    const Int ldvr = static_cast<Int>(vectors ? n : 1);
    T* ap = work_a.data_as<T>();
    C* wp = w.data_as<C>();
    C* vp = vectors ? v.data_as<C>() : nullptr;
    T query;
    Int qinfo;
    if constexpr (kIsComplex<T>) {
      std::vector<R> rwork(2 * n);
      T dummy;
      geev(jobvr, n, ap, n, wp, vectors ? vp : &dummy, ldvr, &query, -1, rwork.data(), &qinfo);
      std::vector<T> work(Lwork(query));
      for (int64_t b = 0; b < nb; ++b) {
        geev(jobvr, n, ap + b * n * n, n, wp + b * n, vectors ? vp + b * n * n : &dummy, ldvr,
             work.data(), static_cast<Int>(work.size()), rwork.data(), info.data_as<Int>() + b);
      }
    } else {
      std::vector<R> wr(n), wi(n), vr(vectors ? n * n : 1);
      geev(jobvr, n, ap, n, wr.data(), wi.data(), vr.data(), ldvr, &query, -1, &qinfo);
      std::vector<R> work(Lwork(query));
      for (int64_t b = 0; b < nb; ++b) {
        geev(jobvr, n, ap + b * n * n, n, wr.data(), wi.data(), vr.data(), ldvr, work.data(),
             static_cast<Int>(work.size()), info.data_as<Int>() + b);
        for (int64_t j = 0; j < n; ++j) wp[b * n + j] = C(wr[j], wi[j]);
        if (!vectors) continue;
        C* vb = vp + b * n * n;
        for (int64_t j = 0; j < n; ++j) {
          const R* x = vr.data() + j * n;
          if (wi[j] == R(0) || j + 1 == n) {
            for (int64_t i = 0; i < n; ++i) vb[j * n + i] = C(x[i], R(0));
          } else {  // the pair j, j + 1: x +- iy
            const R* y = x + n;
            for (int64_t i = 0; i < n; ++i) {
              vb[j * n + i] = C(x[i], y[i]);
              vb[(j + 1) * n + i] = C(x[i], -y[i]);
            }
            ++j;
          }
        }
      }
    }
  });
  CheckErrors(info, std::string("torch.") + op, a.ndim() == 2);
  return {w, v};
}

std::tuple<Tensor, Tensor> LinalgEig(const Tensor& a) { return Eig(a, true, "linalg.eig"); }

Tensor LinalgEigvals(const Tensor& a) { return std::get<0>(Eig(a, false, "linalg.eigvals")); }

}  // namespace

TB_REGISTER_KERNELS(linalg_eig) {
  const DeviceType cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::linalg_eig", cpu, Boxed<&LinalgEig>(), TB_HERE);
  table.RegisterKernel("aten::_linalg_eigvals", cpu, Boxed<&LinalgEigvals>(), TB_HERE);
}

}  // namespace tb::kernels::linalg
