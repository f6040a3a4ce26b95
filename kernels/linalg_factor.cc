// Matrix factorizations on LAPACK, for float32, float64, complex64 and complex128: Cholesky
// (aten::linalg_cholesky_ex, aten::cholesky), LU (aten::linalg_lu_factor_ex, aten::linalg_lu,
// aten::lu_unpack), QR (aten::linalg_qr, aten::geqrf, aten::linalg_householder_product,
// aten::ormqr) and LDL^T (aten::linalg_ldl_factor_ex).
//
// Each works on a column-major copy of its input (kernels/linalg_internal.h), one matrix of the
// batch after another; results are batches of column-major matrices as torch's are. LAPACK's info
// per matrix is returned (the _ex ops) or raised as torch raises it.
#include <string>
#include <tuple>
#include <vector>

#include "dispatch/op_table.h"
#include "kernels/linalg_internal.h"

namespace tb::kernels::linalg {
namespace {

// ---- Cholesky ---------------------------------------------------------------------------------

std::tuple<Tensor, Tensor> CholeskyEx(const Tensor& a, bool upper, bool check_errors,
                                      const char* op) {
  CheckMatrix(a, op, true);
  const Dims batch = BatchShape(a);
  const int64_t nb = BatchCount(batch), n = a.size(-1);
  Tensor l = ColMajorCopy(a);
  Tensor info = Int32Zeros(batch);
  ForType(a.dtype(), [&](auto t) {
    using T = decltype(t);
    T* p = l.data_as<T>();
    Int* inf = info.data_as<Int>();
    for (int64_t b = 0; b < nb && n > 0; ++b)
      potrf(upper ? 'U' : 'L', n, p + b * n * n, n, &inf[b]);
    KeepTriangle(p, nb, n, n, upper);
  });
  if (check_errors) CheckErrors(info, std::string("torch.") + op + "_ex", a.ndim() == 2);
  return {l, info};
}

std::tuple<Tensor, Tensor> LinalgCholeskyEx(const Tensor& a, bool upper, bool check_errors) {
  return CholeskyEx(a, upper, check_errors, "linalg.cholesky");
}

Tensor Cholesky(const Tensor& a, bool upper) {
  auto [l, info] = CholeskyEx(a, upper, false, "cholesky");
  CheckErrors(info, "cholesky", a.ndim() == 2);
  return l;
}

// ---- LU ---------------------------------------------------------------------------------------

std::tuple<Tensor, Tensor, Tensor> LuFactorEx(const Tensor& a, bool pivot, bool check_errors) {
  constexpr const char* kOp = "linalg.lu_factor";
  CheckMatrix(a, kOp);
  TB_CHECK(pivot, NotImplementedError)
      << kOp << ": LU without pivoting is not implemented on the CPU";
  const Dims batch = BatchShape(a);
  const int64_t nb = BatchCount(batch), m = a.size(-2), n = a.size(-1), k = std::min(m, n);
  Tensor lu = ColMajorCopy(a);
  Tensor piv = Int32Zeros(Concat(batch, {k}));
  Tensor info = Int32Zeros(batch);
  ForType(a.dtype(), [&](auto t) {
    using T = decltype(t);
    T* p = lu.data_as<T>();
    for (int64_t b = 0; b < nb && k > 0; ++b) {
      getrf(m, n, p + b * m * n, m, piv.data_as<Int>() + b * k, info.data_as<Int>() + b);
    }
  });
  if (check_errors) CheckErrors(info, "torch.linalg.lu_factor_ex", a.ndim() == 2);
  return {lu, piv, info};
}

// P, L, U of A = P L U from a factorization (LU, pivots), each part only when asked for (an
// empty tensor otherwise, as torch).
std::tuple<Tensor, Tensor, Tensor> Unpack(const Tensor& lu_in, const Tensor& pivots,
                                          bool unpack_data, bool unpack_pivots, const char* op) {
  CheckMatrix(lu_in, op);
  TB_CHECK(pivots.dtype() == DType::kInt32, TypeError)
      << op << ": pivots must be int32, got " << DTypeName(pivots.dtype());
  const Dims batch = BatchShape(lu_in);
  const int64_t nb = BatchCount(batch), m = lu_in.size(-2), n = lu_in.size(-1), k = std::min(m, n);
  TB_CHECK(pivots.ndim() >= 1 && pivots.size(-1) == k, ValueError)
      << op << ": pivots must have shape batch + (" << k << ",), got " << pivots.ToString();
  Tensor lu = ColMajorCopy(lu_in);
  Tensor empty = Tensor::Empty({0}, lu_in.dtype());
  Tensor p_out = empty, l_out = empty, u_out = empty;
  ForType(lu_in.dtype(), [&](auto t) {
    using T = decltype(t);
    const T* src = lu.data_as<const T>();
    if (unpack_data) {
      l_out = ColMajor(batch, m, k, lu.dtype());
      u_out = ColMajor(batch, k, n, lu.dtype());
      T* l = l_out.data_as<T>();
      T* u = u_out.data_as<T>();
      for (int64_t b = 0; b < nb; ++b) {
        const T* s = src + b * m * n;
        T* lb = l + b * m * k;
        T* ub = u + b * k * n;
        for (int64_t j = 0; j < k; ++j) {
          for (int64_t i = 0; i < m; ++i) lb[j * m + i] = i > j ? s[j * m + i] : T(i == j);
        }
        for (int64_t j = 0; j < n; ++j) {
          for (int64_t i = 0; i < k; ++i) ub[j * k + i] = i <= j ? s[j * m + i] : T(0);
        }
      }
    }
    if (unpack_pivots) {
      Tensor pv = pivots.expand(Concat(batch, {k})).contiguous();
      p_out = ColMajor(batch, m, m, lu.dtype());
      T* pm = p_out.data_as<T>();
      std::vector<int64_t> perm(m);
      for (int64_t b = 0; b < nb; ++b) {
        const int32_t* ip = pv.data_as<const int32_t>() + b * k;
        for (int64_t i = 0; i < m; ++i) perm[i] = i;
        for (int64_t i = 0; i < k; ++i) {
          const int64_t r = ip[i] - 1;
          TB_CHECK(r >= 0 && r < m, ValueError)
              << op << ": pivots must be in [1, " << m << "], got " << ip[i];
          std::swap(perm[i], perm[r]);
        }
        // P^T A = L U, row i of P^T A being row perm[i] of A: P[perm[i], i] = 1.
        T* pb = pm + b * m * m;
        std::fill(pb, pb + m * m, T(0));
        for (int64_t i = 0; i < m; ++i) pb[i * m + perm[i]] = T(1);
      }
    }
  });
  return {p_out, l_out, u_out};
}

std::tuple<Tensor, Tensor, Tensor> LuUnpack(const Tensor& lu, const Tensor& pivots,
                                            bool unpack_data, bool unpack_pivots) {
  return Unpack(lu, pivots, unpack_data, unpack_pivots, "lu_unpack");
}

std::tuple<Tensor, Tensor, Tensor> LinalgLu(const Tensor& a, bool pivot) {
  auto [lu, piv, info] = LuFactorEx(a, pivot, false);
  return Unpack(lu, piv, true, true, "linalg.lu");
}

// ---- QR ---------------------------------------------------------------------------------------

// Reference LAPACK's geqrf / orgqr (OpenBLAS ships them) take matrices of up to 128 columns
// one reflector at a time with level-2 BLAS. Up to that size the small path below works in
// blocks of kQrBlock reflectors instead: a block is factored (geqr2) or formed (org2r) unblocked,
// then applied to the columns after it at once with level-3 BLAS (larft + larfb). Same reflectors,
// same Q to rounding; float32 64x64 geqrf + orgqr: 71 -> 42 us, 128x128: 336 -> 166 us. Above the
// limit LAPACK's own blocking is as fast or faster.
constexpr int64_t kSmallQrLimit = 128, kQrBlock = 8;

// geqrf of one column-major m x n matrix (lda m) by blocks; work holds n * kQrBlock elements.
template <typename T>
void GeqrfSmall(T* a, Int m, Int n, T* tau, T* work) {
  const Int k = std::min(m, n);
  T t[kQrBlock * kQrBlock];
  Int info;
  for (Int i = 0; i < k; i += kQrBlock) {
    const Int ib = std::min<Int>(kQrBlock, k - i), rest = n - i - ib;
    T* v = a + i + static_cast<int64_t>(i) * m;
    geqr2(m - i, ib, v, m, tau + i, work, &info);
    if (rest == 0) continue;
    larft('F', 'C', m - i, ib, v, m, tau + i, t, ib);
    larfb('L', kAdjoint<T>, 'F', 'C', m - i, rest, ib, v, m, t, ib,
          v + static_cast<int64_t>(ib) * m, m, work, rest);
  }
}

// orgqr of one column-major m x n matrix (lda m) holding k reflectors, by blocks from the last
// (as LAPACK's blocked orgqr does); work holds n * kQrBlock elements.
template <typename T>
void OrgqrSmall(T* a, Int m, Int n, Int k, const T* tau, T* work) {
  T t[kQrBlock * kQrBlock];
  Int info;
  auto at = [&](Int i, Int j) -> T& { return a[i + static_cast<int64_t>(j) * m]; };
  // Columns past the reflectors: the identity's, below row k.
  if (k < n) org2r(m - k, n - k, 0, &at(k, k), m, tau + k, work, &info);
  for (Int j = k; j < n; ++j) std::fill(&at(0, j), &at(k, j), T(0));
  for (Int i = k == 0 ? -1 : (k - 1) / kQrBlock * kQrBlock; i >= 0; i -= kQrBlock) {
    const Int ib = std::min<Int>(kQrBlock, k - i), rest = n - i - ib;
    T* v = &at(i, i);
    if (rest > 0) {
      larft('F', 'C', m - i, ib, v, m, tau + i, t, ib);
      larfb('L', 'N', 'F', 'C', m - i, rest, ib, v, m, t, ib, v + static_cast<int64_t>(ib) * m, m,
            work, rest);
    }
    org2r(m - i, ib, ib, v, m, tau + i, work, &info);
    for (Int j = i; j < i + ib; ++j) std::fill(&at(0, j), &at(i, j), T(0));
  }
}

// geqrf on each matrix of `a` (column-major, m x n, lda m, `stride` elements apart, overwritten)
// into tau (batch x k).
template <typename T>
void Geqrf(T* a, int64_t stride, T* tau, int64_t nb, int64_t m, int64_t n) {
  const int64_t k = std::min(m, n);
  if (k == 0) return;
  Int info;
  if (n <= kSmallQrLimit) {
    std::vector<T> work(n * kQrBlock);
    for (int64_t b = 0; b < nb; ++b) GeqrfSmall(a + b * stride, m, n, tau + b * k, work.data());
    return;
  }
  T query;
  geqrf(m, n, a, m, tau, &query, -1, &info);
  std::vector<T> work(Lwork(query));
  for (int64_t b = 0; b < nb; ++b) {
    geqrf(m, n, a + b * stride, m, tau + b * k, work.data(), static_cast<Int>(work.size()), &info);
  }
}

// orgqr on each matrix (column-major, m x n, lda m, `stride` elements apart) with k reflectors.
template <typename T>
void Orgqr(T* a, int64_t stride, const T* tau, int64_t tau_stride, int64_t nb, int64_t m, int64_t n,
           int64_t k) {
  if (m == 0 || n == 0) return;
  Int info;
  if (n <= kSmallQrLimit) {
    std::vector<T> work(n * kQrBlock);
    for (int64_t b = 0; b < nb; ++b) {
      OrgqrSmall(a + b * stride, m, n, k, tau + b * tau_stride, work.data());
    }
    return;
  }
  T query;
  orgqr(m, n, k, a, m, tau, &query, -1, &info);
  std::vector<T> work(Lwork(query));
  for (int64_t b = 0; b < nb; ++b) {
    orgqr(m, n, k, a + b * stride, m, tau + b * tau_stride, work.data(),
          static_cast<Int>(work.size()), &info);
  }
}

std::tuple<Tensor, Tensor> Geqrf_(const Tensor& a) {
  CheckMatrix(a, "geqrf");
  const Dims batch = BatchShape(a);
  const int64_t nb = BatchCount(batch), m = a.size(-2), n = a.size(-1);
  Tensor qr = ColMajorCopy(a);
  Tensor tau = Tensor::Zeros(Concat(batch, {std::min(m, n)}), a.dtype());
  ForType(a.dtype(), [&](auto t) {
    using T = decltype(t);
    Geqrf(qr.data_as<T>(), m * n, tau.data_as<T>(), nb, m, n);
  });
  return {qr, tau};
}

std::tuple<Tensor, Tensor> LinalgQr(const Tensor& a, const std::string& mode) {
  constexpr const char* kOp = "linalg.qr";
  CheckMatrix(a, kOp);
  TB_CHECK(mode == "reduced" || mode == "complete" || mode == "r", ValueError)
      << kOp << ": qr received unrecognized mode '" << mode
      << "' but expected one of 'reduced' (default), 'r', or 'complete'";
  const Dims batch = BatchShape(a);
  const int64_t nb = BatchCount(batch), m = a.size(-2), n = a.size(-1), k = std::min(m, n);
  const bool complete = mode == "complete";
  const int64_t qcols = complete ? m : k, rrows = complete ? m : k;
  // One buffer wide enough for A (n columns) and for Q (qcols columns).
  const int64_t w = std::max(n, qcols);
  Tensor buf = w == n ? ColMajorCopy(a) : ColMajor(batch, m, w, a.dtype());
  if (w != n) buf.slice(buf.ndim() - 1, 0, n).copy_from(a);
  Tensor tau = Tensor::Empty(Concat(batch, {k}), a.dtype());
  Tensor r = ColMajor(batch, rrows, n, a.dtype());
  ForType(a.dtype(), [&](auto t) {
    using T = decltype(t);
    T* p = buf.data_as<T>();
    Geqrf(p, m * w, tau.data_as<T>(), nb, m, n);  // the buffer's matrices are m * w apart
    T* rp = r.data_as<T>();
    for (int64_t b = 0; b < nb; ++b) {
      const T* s = p + b * m * w;
      T* rb = rp + b * rrows * n;
      for (int64_t j = 0; j < n; ++j) {
        for (int64_t i = 0; i < rrows; ++i) rb[j * rrows + i] = i <= j ? s[j * m + i] : T(0);
      }
    }
    if (mode != "r") Orgqr(p, m * w, tau.data_as<T>(), k, nb, m, qcols, k);
  });
  if (mode == "r") return {Tensor::Empty({0}, a.dtype()), r};
  const int64_t nd = buf.ndim();
  return {qcols == w ? buf : buf.slice(nd - 1, 0, qcols), r};
}

Tensor HouseholderProduct(const Tensor& a, const Tensor& tau) {
  constexpr const char* kOp = "torch.linalg.householder_product";
  CheckMatrix(a, kOp);
  CheckSameDType(a, tau, kOp, "tau");
  const int64_t m = a.size(-2), n = a.size(-1), k = tau.ndim() ? tau.size(-1) : 0;
  TB_CHECK(m >= n, ValueError) << kOp
                               << ": input.shape[-2] must be greater than or equal to "
                                  "input.shape[-1]";
  TB_CHECK(n >= k, ValueError) << kOp
                               << ": input.shape[-1] must be greater than or equal to "
                                  "tau.shape[-1]";
  TB_CHECK(tau.ndim() == a.ndim() - 1, ValueError)
      << kOp << ": Expected tau to have one dimension less than input, but got tau.ndim equal to "
      << tau.ndim() << " and input.ndim is equal to " << a.ndim();
  const Dims batch = BatchShape(a);
  const int64_t nb = BatchCount(batch);
  Tensor q = ColMajorCopy(a);
  Tensor tv = tau.expand(Concat(batch, {k})).contiguous();
  ForType(a.dtype(), [&](auto t) {
    using T = decltype(t);
    Orgqr(q.data_as<T>(), m * n, tv.data_as<const T>(), k, nb, m, n, k);
  });
  return q;
}

Tensor Ormqr(const Tensor& a, const Tensor& tau, const Tensor& c, bool left, bool transpose) {
  constexpr const char* kOp = "torch.ormqr";
  CheckMatrix(a, kOp);
  CheckMatrix(c, kOp, false, "other");
  CheckSameDType(a, tau, kOp, "tau");
  CheckSameDType(a, c, kOp, "other");
  const int64_t m = c.size(-2), n = c.size(-1), k = tau.ndim() ? tau.size(-1) : 0;
  const int64_t nq = left ? m : n;
  TB_CHECK(a.size(-2) == nq, ValueError)
      << kOp << ": input.shape[-2] must be equal to other.shape[" << (left ? -2 : -1) << "]";
  TB_CHECK(k <= nq && k <= a.size(-1), ValueError)
      << kOp
      << ": tau.shape[-1] must be less than or equal to input.shape[-2] and "
         "input.shape[-1]";
  const Dims batch = BatchShape(c);
  const int64_t nb = BatchCount(batch);
  Tensor ac = ColMajorCopy(a, batch);
  Tensor tv = tau.expand(Concat(batch, {k})).contiguous();
  Tensor out = ColMajorCopy(c);
  const int64_t ka = a.size(-1);
  ForType(a.dtype(), [&](auto t) {
    using T = decltype(t);
    if (m == 0 || n == 0) return;
    T query;
    Int info;
    const char side = left ? 'L' : 'R', tr = transpose ? kAdjoint<T> : 'N';
    ormqr(side, tr, m, n, k, ac.data_as<T>(), nq, tv.data_as<T>(), out.data_as<T>(), m, &query, -1,
          &info);
    std::vector<T> work(Lwork(query));
    for (int64_t b = 0; b < nb; ++b) {
      ormqr(side, tr, m, n, k, ac.data_as<T>() + b * nq * ka, nq, tv.data_as<T>() + b * k,
            out.data_as<T>() + b * m * n, m, work.data(), static_cast<Int>(work.size()), &info);
    }
  });
  return out;
}

// ---- LDL^T ------------------------------------------------------------------------------------

std::tuple<Tensor, Tensor, Tensor> LdlFactorEx(const Tensor& a, bool hermitian, bool check_errors) {
  constexpr const char* kOp = "torch.linalg.ldl_factor_ex";
  CheckMatrix(a, kOp, true);
  const Dims batch = BatchShape(a);
  const int64_t nb = BatchCount(batch), n = a.size(-1);
  Tensor ld = ColMajorCopy(a);
  Tensor piv = Int32Zeros(Concat(batch, {n}));
  Tensor info = Int32Zeros(batch);
  ForType(a.dtype(), [&](auto t) {
    using T = decltype(t);
    if (n == 0) return;
    T* p = ld.data_as<T>();
    // Complex A: Hermitian (hetrf) or complex symmetric (sytrf) as `hermitian` says; one
    // factorization for real A.
    auto factor = [&](T* m, Int* ip, T* work, Int lwork, Int* inf) {
      if constexpr (kIsComplex<T>) {
        if (hermitian) return hetrf('L', n, m, n, ip, work, lwork, inf);
      }
      sytrf('L', n, m, n, ip, work, lwork, inf);
    };
    T query;
    Int qinfo;
    factor(p, piv.data_as<Int>(), &query, -1, &qinfo);
    std::vector<T> work(Lwork(query));
    for (int64_t b = 0; b < nb; ++b) {
      factor(p + b * n * n, piv.data_as<Int>() + b * n, work.data(), static_cast<Int>(work.size()),
             info.data_as<Int>() + b);
    }
    KeepTriangle(p, nb, n, n, false);
  });
  if (check_errors) CheckErrors(info, kOp, a.ndim() == 2);
  return {ld, piv, info};
}

}  // namespace

TB_REGISTER_KERNELS(linalg_factor) {
  const DeviceType cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::linalg_cholesky_ex", cpu, Boxed<&LinalgCholeskyEx>(), TB_HERE);
  table.RegisterKernel("aten::cholesky", cpu, Boxed<&Cholesky>(), TB_HERE);
  table.RegisterKernel("aten::linalg_lu_factor_ex", cpu, Boxed<&LuFactorEx>(), TB_HERE);
  table.RegisterKernel("aten::linalg_lu", cpu, Boxed<&LinalgLu>(), TB_HERE);
  table.RegisterKernel("aten::lu_unpack", cpu, Boxed<&LuUnpack>(), TB_HERE);
  table.RegisterKernel("aten::linalg_qr", cpu, Boxed<&LinalgQr>(), TB_HERE);
  table.RegisterKernel("aten::geqrf", cpu, Boxed<&Geqrf_>(), TB_HERE);
  table.RegisterKernel("aten::linalg_householder_product", cpu, Boxed<&HouseholderProduct>(),
                       TB_HERE);
  table.RegisterKernel("aten::ormqr", cpu, Boxed<&Ormqr>(), TB_HERE);
  table.RegisterKernel("aten::linalg_ldl_factor_ex", cpu, Boxed<&LdlFactorEx>(), TB_HERE);
}

}  // namespace tb::kernels::linalg
