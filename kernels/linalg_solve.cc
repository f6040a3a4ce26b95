// Linear systems, inverses and determinants on LAPACK / BLAS, for float32, float64, complex64 and
// complex128: aten::linalg_lu_solve,
// aten::_linalg_solve_ex, aten::linalg_inv_ex, aten::_linalg_det, aten::_linalg_slogdet,
// aten::linalg_solve_triangular, aten::triangular_solve, aten::cholesky_solve,
// aten::cholesky_inverse, aten::linalg_ldl_solve and aten::linalg_lstsq (drivers gelsy, gels,
// gelsd, gelss).
//
// The batch dims of the two operands broadcast, as torch's. A right-hand solve X A = B is the
// left-hand solve A^T X^T = B^T: the right-hand side is copied transposed into column-major
// storage and the result handed back as a transposed view. Adjoints are conjugate transposes.
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "dispatch/op_table.h"
#include "kernels/linalg_internal.h"
#include "kernels/promote_broadcast.h"

namespace tb::kernels::linalg {
namespace {

Tensor Transposed(const Tensor& t) { return t.transpose(t.ndim() - 2, t.ndim() - 1); }

// Conjugates the n elements at p (nothing for a real T).
template <typename T>
void ConjInPlace(T* p, int64_t n) {
  if constexpr (kIsComplex<T>) {
    for (int64_t i = 0; i < n; ++i) p[i] = std::conj(p[i]);
  }
}

// The broadcast batch shape of two matrix operands.
Dims BroadcastBatch(const Tensor& a, const Tensor& b, const char* op) {
  return BroadcastShapes({BatchShape(a), BatchShape(b)}, op);
}

// Solves with an LU factorization (column-major `lu`, int32 `piv`, both of batch `batch`) for
// each column-major right-hand side in `x` (n x nrhs), in place.
template <typename T>
void LuSolveInPlace(const Tensor& lu, const Tensor& piv, const Tensor& x, int64_t nb, int64_t n,
                    int64_t nrhs, char trans) {
  if (n == 0 || nrhs == 0) return;
  const T* a = lu.data_as<const T>();
  const Int* ip = piv.data_as<const Int>();
  T* xp = x.data_as<T>();
  Int info;
  for (int64_t b = 0; b < nb; ++b) {
    getrs(trans, n, nrhs, a + b * n * n, n, ip + b * n, xp + b * n * nrhs, n, &info);
  }
}

// X with A X = B (left) or X A = B, A = P L U given by (LU, pivots).
Tensor LuSolve(const Tensor& lu, const Tensor& pivots, const Tensor& b, bool left, bool adjoint,
               const char* op) {
  CheckMatrix(lu, op, true, "LU");
  CheckMatrix(b, op, false, "B");
  CheckSameDType(lu, b, op, "B");
  TB_CHECK(pivots.dtype() == DType::kInt32, TypeError)
      << op << ": pivots should be a Tensor of scalar type int32, got "
      << DTypeName(pivots.dtype());
  const int64_t n = lu.size(-1);
  TB_CHECK(b.size(left ? -2 : -1) == n, ValueError)
      << op << ": Incompatible shapes of A and B for the equation " << (left ? "AX = B" : "XA = B")
      << " (" << lu.size(-2) << "x" << n << " and " << b.size(-2) << "x" << b.size(-1) << ")";
  TB_CHECK(pivots.ndim() >= 1 && pivots.size(-1) == n, ValueError)
      << op << ": pivots must have shape batch + (" << n << ",), got " << pivots.ToString();
  const Dims batch = BroadcastBatch(lu, b, op);
  const int64_t nb = BatchCount(batch);
  Tensor luc = ColMajorCopy(lu, batch);
  Tensor piv = pivots.expand(Concat(batch, {n})).contiguous();
  // Left: op(A) X = B, op(A) = A or A^H. Right: X A = B <=> A^T X^T = B^T, and
  // X A^H = B <=> A X^H = B^H (B conjugated on the way in, X on the way out).
  Tensor rhs = left ? b : Transposed(b);
  const int64_t nrhs = rhs.size(-1);
  Tensor x = ColMajorCopy(rhs, batch);
  ForType(lu.dtype(), [&](auto t) {
    using T = decltype(t);
    const char trans = (left != adjoint) ? 'N' : (left ? kAdjoint<T> : 'T');
    const bool conj = !left && adjoint;
    if (conj) ConjInPlace(x.data_as<T>(), x.numel());
    LuSolveInPlace<T>(luc, piv, x, nb, n, nrhs, trans);
    if (conj) ConjInPlace(x.data_as<T>(), x.numel());
  });
  return left ? x : Transposed(x);
}

Tensor LinalgLuSolve(const Tensor& lu, const Tensor& pivots, const Tensor& b, bool left,
                     bool adjoint) {
  return LuSolve(lu, pivots, b, left, adjoint, "torch.linalg.lu_solve");
}

// LU factorizations of every matrix of `a` (column-major copy, pivots, info).
std::tuple<Tensor, Tensor, Tensor> Factor(const Tensor& a) {
  const Dims batch = BatchShape(a);
  const int64_t nb = BatchCount(batch), n = a.size(-1);
  Tensor lu = ColMajorCopy(a);
  Tensor piv = Int32Zeros(Concat(batch, {n}));
  Tensor info = Int32Zeros(batch);
  ForType(a.dtype(), [&](auto t) {
    using T = decltype(t);
    T* p = lu.data_as<T>();
    for (int64_t b = 0; b < nb && n > 0; ++b) {
      getrf(n, n, p + b * n * n, n, piv.data_as<Int>() + b * n, info.data_as<Int>() + b);
    }
  });
  return {lu, piv, info};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> SolveEx(const Tensor& a, const Tensor& b, bool left,
                                                   bool check_errors) {
  constexpr const char* kOp = "torch.linalg.solve";
  CheckMatrix(a, kOp, true);
  TB_CHECK(b.ndim() >= 1, ValueError)
      << kOp << ": The input tensor B must have at least 1 dimensions.";
  CheckSameDType(a, b, kOp, "B");
  // B is a (batch of) vector(s) when it is 1-D or has A's shape without its last dim.
  bool vector = b.ndim() == 1;
  if (b.ndim() == a.ndim() - 1) {
    vector = true;
    for (int64_t i = 0; i < b.ndim(); ++i) vector = vector && b.size(i) == a.size(i);
  }
  Tensor bm = vector ? b.unsqueeze(left ? b.ndim() : b.ndim() - 1) : b;
  auto [lu, piv, info] = Factor(a);
  if (check_errors) CheckErrors(info, "torch.linalg.solve_ex", a.ndim() == 2);
  Tensor x = LuSolve(lu, piv, bm, left, false, kOp);
  if (vector) x = x.squeeze(left ? x.ndim() - 1 : x.ndim() - 2);
  return {x, lu, piv, info};
}

std::tuple<Tensor, Tensor> InvEx(const Tensor& a, bool check_errors) {
  constexpr const char* kOp = "linalg.inv";
  CheckMatrix(a, kOp, true);
  const Dims batch = BatchShape(a);
  const int64_t nb = BatchCount(batch), n = a.size(-1);
  auto [lu, piv, info] = Factor(a);
  if (check_errors) CheckErrors(info, "torch.linalg.inv_ex", a.ndim() == 2);
  Tensor inv = ColMajor(batch, n, n, a.dtype());
  // Structured bindings captured by name: C++17 lets a lambda capture them only so.
  ForType(a.dtype(), [&, &lu = lu, &piv = piv](auto t) {
    using T = decltype(t);
    T* p = inv.data_as<T>();
    for (int64_t b = 0; b < nb; ++b) {
      T* m = p + b * n * n;
      std::fill(m, m + n * n, T(0));
      for (int64_t i = 0; i < n; ++i) m[i * n + i] = T(1);
    }
    LuSolveInPlace<T>(lu, piv, inv, nb, n, n, 'N');
  });
  return {inv, info};
}

// Sign (+1 / -1, 0 when singular; for complex A det / |det|) and log |det| (of the value dtype)
// of each factorized matrix, in the dtype's precision as torch (product of the diagonal's signs
// and sum of log |u_ii|).
std::tuple<Tensor, Tensor, Tensor, Tensor> SlogdetParts(const Tensor& a, const char* op,
                                                        bool want_det, Tensor* det) {
  CheckMatrix(a, op, true);
  const Dims batch = BatchShape(a);
  const int64_t nb = BatchCount(batch), n = a.size(-1);
  // As torch: a real C-contiguous A is factorized as A^T (the same determinant), a complex A as
  // itself; the backward reads LU and pivots that way.
  const bool factor_t = a.is_contiguous() && !IsComplex(a.dtype());
  auto [lu, piv, info] = Factor(factor_t ? Transposed(a) : a);
  Tensor sign = Tensor::Empty(batch, a.dtype());
  Tensor logabs = Tensor::Empty(batch, ValueDType(a.dtype()));
  if (want_det) *det = Tensor::Empty(batch, a.dtype());
  // Structured bindings captured by name: C++17 lets a lambda capture them only so.
  ForType(a.dtype(), [&, &lu = lu, &piv = piv](auto t) {
    using T = decltype(t);
    using R = Real<T>;
    const T* p = lu.data_as<const T>();
    const Int* ip = piv.data_as<const Int>();
    for (int64_t b = 0; b < nb; ++b) {
      const T* m = p + b * n * n;
      T s = 1, prod = 1;
      R la = 0;
      for (int64_t i = 0; i < n; ++i) {
        const T d = m[i * n + i];
        if (ip[b * n + i] != i + 1) s = -s;
        if constexpr (kIsComplex<T>) {
          const R ad = std::abs(d);
          s *= ad == R(0) ? T(0) : d / ad;
        } else {
          s *= d > 0 ? T(1) : (d < 0 ? T(-1) : (std::isnan(d) ? d : T(0)));
        }
        la += std::log(std::abs(d));
        prod *= d;
      }
      sign.data_as<T>()[b] = s;
      logabs.data_as<R>()[b] = la;
      if (want_det) {
        T perm = 1;
        for (int64_t i = 0; i < n; ++i) {
          if (ip[b * n + i] != i + 1) perm = -perm;
        }
        det->data_as<T>()[b] = perm * prod;
      }
    }
  });
  return {sign, logabs, lu, piv};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> LinalgSlogdet(const Tensor& a) {
  Tensor unused;
  return SlogdetParts(a, "linalg.slogdet", false, &unused);
}

std::tuple<Tensor, Tensor, Tensor> LinalgDet(const Tensor& a) {
  Tensor det;
  auto [sign, logabs, lu, piv] = SlogdetParts(a, "linalg.det", true, &det);
  return {det, lu, piv};
}

// ---- triangular systems -----------------------------------------------------------------------

// X with op(A) X = B (left) or X op(A) = B, A triangular; batch dims broadcast.
Tensor TriangularSolve(const Tensor& a, const Tensor& b, bool upper, bool left, bool transpose,
                       bool unitriangular, const char* op) {
  CheckMatrix(a, op, true);
  CheckMatrix(b, op, false, "B");
  CheckSameDType(a, b, op, "B");
  const int64_t n = a.size(-1);
  TB_CHECK(b.size(left ? -2 : -1) == n, ValueError)
      << op << ": Incompatible shapes of A and B for the equation " << (left ? "AX = B" : "XA = B")
      << " (" << n << "x" << n << " and " << b.size(-2) << "x" << b.size(-1) << ")";
  const Dims batch = BroadcastBatch(a, b, op);
  const int64_t nb = BatchCount(batch), m = b.size(-2), k = b.size(-1);
  // A C-contiguous A is read in place as the column-major A^T: op(A) = op'(A^T), the other
  // triangle.
  const ReadOperand ac = ReadOnly(a, batch);
  const bool up = upper != ac.transposed, tr = transpose != ac.transposed;
  Tensor x = ColMajorCopy(b, batch);
  ForType(a.dtype(), [&](auto t) {
    using T = decltype(t);
    if (m == 0 || k == 0) return;
    const T* ap = ac.t.data_as<const T>();
    T* xp = x.data_as<T>();
    for (int64_t i = 0; i < nb; ++i) {
      trsm(left ? 'L' : 'R', up ? 'U' : 'L', tr ? 'T' : 'N', unitriangular ? 'U' : 'N', m, k,
           ap + i * n * n, n, xp + i * m * k, m);
    }
  });
  return x;
}

Tensor LinalgSolveTriangular(const Tensor& a, const Tensor& b, bool upper, bool left,
                             bool unitriangular) {
  return TriangularSolve(a, b, upper, left, false, unitriangular, "torch.linalg.solve_triangular");
}

std::tuple<Tensor, Tensor> TriangularSolveLegacy(const Tensor& b, const Tensor& a, bool upper,
                                                 bool transpose, bool unitriangular) {
  constexpr const char* kOp = "torch.triangular_solve";
  Tensor x = TriangularSolve(a, b, upper, true, transpose, unitriangular, kOp);
  return {x, ColMajorCopy(a, BroadcastBatch(a, b, kOp))};
}

// ---- Cholesky and LDL^T solves ----------------------------------------------------------------

Tensor CholeskySolve(const Tensor& b, const Tensor& l, bool upper) {
  constexpr const char* kOp = "torch.cholesky_solve";
  CheckMatrix(l, kOp, true, "input2");
  CheckMatrix(b, kOp, false, "input");
  CheckSameDType(l, b, kOp, "input");
  const int64_t n = l.size(-1);
  TB_CHECK(b.size(-2) == n, ValueError)
      << kOp << ": Incompatible matrix sizes for cholesky_solve: each A matrix is " << n << " by "
      << n << " but each b matrix is " << b.size(-2) << " by " << b.size(-1);
  const Dims batch = BroadcastBatch(l, b, kOp);
  const int64_t nb = BatchCount(batch), k = b.size(-1);
  Tensor lc = ColMajorCopy(l, batch);
  Tensor x = ColMajorCopy(b, batch);
  ForType(l.dtype(), [&](auto t) {
    using T = decltype(t);
    if (n == 0 || k == 0) return;
    Int info;
    for (int64_t i = 0; i < nb; ++i) {
      potrs(upper ? 'U' : 'L', n, k, lc.data_as<T>() + i * n * n, n, x.data_as<T>() + i * n * k, n,
            &info);
    }
  });
  return x;
}

Tensor CholeskyInverse(const Tensor& l, bool upper) {
  constexpr const char* kOp = "torch.cholesky_inverse";
  CheckMatrix(l, kOp, true);
  const Dims batch = BatchShape(l);
  const int64_t nb = BatchCount(batch), n = l.size(-1);
  Tensor x = ColMajorCopy(l);
  Tensor info = Int32Zeros(batch);
  ForType(l.dtype(), [&](auto t) {
    using T = decltype(t);
    T* p = x.data_as<T>();
    for (int64_t b = 0; b < nb && n > 0; ++b) {
      T* m = p + b * n * n;
      potri(upper ? 'U' : 'L', n, m, n, info.data_as<Int>() + b);
      // potri fills one triangle of the symmetric (Hermitian) inverse: mirror it.
      for (int64_t j = 0; j < n; ++j) {
        for (int64_t i = j + 1; i < n; ++i) {
          if (upper) {
            m[j * n + i] = Conj(m[i * n + j]);
          } else {
            m[i * n + j] = Conj(m[j * n + i]);
          }
        }
      }
    }
  });
  CheckErrors(info, kOp, l.ndim() == 2);
  return x;
}

Tensor LdlSolve(const Tensor& ld, const Tensor& pivots, const Tensor& b, bool hermitian) {
  constexpr const char* kOp = "torch.linalg.ldl_solve";
  CheckMatrix(ld, kOp, true, "LD");
  CheckMatrix(b, kOp, false, "B");
  CheckSameDType(ld, b, kOp, "B");
  TB_CHECK(pivots.dtype() == DType::kInt32, TypeError)
      << kOp << ": Expected pivots to be integers. Got " << DTypeName(pivots.dtype());
  const int64_t n = ld.size(-1);
  TB_CHECK(b.size(-2) == n && pivots.ndim() >= 1 && pivots.size(-1) == n, ValueError)
      << kOp << ": Incompatible shapes: LD " << ld.ToString() << ", pivots " << pivots.ToString()
      << ", B " << b.ToString();
  const Dims batch = BroadcastBatch(ld, b, kOp);
  const int64_t nb = BatchCount(batch), k = b.size(-1);
  Tensor lc = ColMajorCopy(ld, batch);
  Tensor piv = pivots.expand(Concat(batch, {n})).contiguous();
  Tensor x = ColMajorCopy(b, batch);
  ForType(ld.dtype(), [&](auto t) {
    using T = decltype(t);
    if (n == 0 || k == 0) return;
    Int info;
    for (int64_t i = 0; i < nb; ++i) {
      const T* a = lc.data_as<T>() + i * n * n;
      const Int* ip = piv.data_as<Int>() + i * n;
      T* xi = x.data_as<T>() + i * n * k;
      if constexpr (kIsComplex<T>) {
        if (hermitian) {
          hetrs('L', n, k, a, n, ip, xi, n, &info);
          continue;
        }
      }
      sytrs('L', n, k, a, n, ip, xi, n, &info);
    }
  });
  return x;
}

// ---- least squares ----------------------------------------------------------------------------

std::tuple<Tensor, Tensor, Tensor, Tensor> Lstsq(const Tensor& a, const Tensor& b,
                                                 std::optional<double> rcond,
                                                 const std::optional<std::string>& driver_opt) {
  constexpr const char* kOp = "torch.linalg.lstsq";
  CheckMatrix(a, kOp);
  CheckSameDType(a, b, kOp, "b");
  const std::string driver = driver_opt.value_or("gelsy");
  TB_CHECK(driver == "gelsy" || driver == "gels" || driver == "gelsd" || driver == "gelss",
           ValueError)
      << kOp << ": parameter `driver` should be one of (gels, gelsy, gelsd, gelss), got " << driver;
  // b is a (batch of) vector(s) when 1-D or of A's shape without its last dim.
  bool vector = b.ndim() == 1;
  if (b.ndim() == a.ndim() - 1) {
    vector = true;
    for (int64_t i = 0; i < b.ndim(); ++i) vector = vector && b.size(i) == a.size(i);
  }
  Tensor bm = vector ? b.unsqueeze(b.ndim()) : b;
  CheckMatrix(bm, kOp, false, "b");
  const int64_t m = a.size(-2), n = a.size(-1), k = bm.size(-1), rows = std::max(m, n);
  TB_CHECK(bm.size(-2) == m, ValueError)
      << kOp << ": input.size(-2) should match other.size(-2), got " << m << " and " << bm.size(-2);
  const Dims batch = BroadcastBatch(a, bm, kOp);
  const int64_t nb = BatchCount(batch);
  const bool svd = driver == "gelsd" || driver == "gelss";
  Tensor ac = ColMajorCopy(a, batch);
  // The drivers read B (m rows) and write X (n rows) in one max(m, n)-row buffer; rows n..m
  // then hold the residual components (full rank, m > n).
  Tensor xb = Tensor::Zeros(Concat(batch, {k, rows}), a.dtype());
  const int64_t nd = xb.ndim();
  xb = xb.transpose(nd - 2, nd - 1);
  xb.slice(nd - 2, 0, m).copy_from(bm.expand(Concat(batch, {m, k})));
  Tensor rank =
      driver == "gels" ? Tensor::Empty({0}, DType::kInt64) : Tensor::Zeros(batch, DType::kInt64);
  const DType vdt = ValueDType(a.dtype());
  Tensor sv = svd ? Tensor::Zeros(Concat(batch, {std::min(m, n)}), vdt) : Tensor::Empty({0}, vdt);
  Tensor info = Int32Zeros(batch);
  ForType(a.dtype(), [&](auto t) {
    using T = decltype(t);
    using R = Real<T>;
    if (m == 0 || n == 0 || k == 0) return;
    const R rc = rcond ? static_cast<R>(*rcond)
                       : std::numeric_limits<R>::epsilon() * static_cast<R>(std::max(m, n));
    const int64_t mn = std::min(m, n);
    std::vector<Int> jpvt(n);
    Int r = 0, iq = 1;
    T query = 0;
    R rquery = 0;
    T* ap = ac.data_as<T>();
    T* xp = xb.data_as<T>();
    R* sp = svd ? sv.data_as<R>() : nullptr;
    std::vector<R> s1(mn);
    // The real workspace of the complex drivers: gelsy 2n, gelss 5 min(m, n), gelsd as its
    // workspace query reports.
    std::vector<R> rwork(std::max<int64_t>({1, 2 * n, 5 * mn}));
    // Workspace query, then one call per matrix.
    auto call = [&](int64_t i, T* work, Int lwork, R* rw, Int* iwork, Int* inf) {
      T* ai = ap + i * m * n;
      T* xi = xp + i * rows * k;
      R* si = sp ? sp + i * mn : s1.data();
      if (driver == "gels") {
        gels('N', m, n, k, ai, m, xi, rows, work, lwork, inf);
      } else if (driver == "gelsy") {
        std::fill(jpvt.begin(), jpvt.end(), 0);
        gelsy(m, n, k, ai, m, xi, rows, jpvt.data(), rc, &r, work, lwork, rw, inf);
      } else if (driver == "gelsd") {
        gelsd(m, n, k, ai, m, xi, rows, si, rc, &r, work, lwork, rw, iwork, inf);
      } else {
        gelss(m, n, k, ai, m, xi, rows, si, rc, &r, work, lwork, rw, iwork, inf);
      }
      if (driver != "gels" && lwork != -1) rank.data_as<int64_t>()[i] = r;
    };
    Int qinfo = 0;
    rwork[0] = 0;
    call(0, &query, -1, rwork.data(), &iq, &qinfo);
    rquery = rwork[0];
    std::vector<T> work(Lwork(query));
    if (driver == "gelsd") rwork.resize(std::max<size_t>(rwork.size(), Lwork(rquery)));
    std::vector<Int> iwork(std::max<Int>(1, iq));
    for (int64_t i = 0; i < nb; ++i) {
      call(i, work.data(), static_cast<Int>(work.size()), rwork.data(), iwork.data(),
           info.data_as<Int>() + i);
    }
  });
  CheckErrors(info, kOp, info.numel() <= 1);
  // Residuals (sums of squares of rows n..m of the buffer) where torch gives them: m > n, a
  // driver other than gelsy, and for gelsd / gelss every matrix of full rank.
  Tensor residuals = Tensor::Empty({0}, vdt);
  bool with_residuals = m > n && driver != "gelsy";
  if (with_residuals && svd) {
    for (int64_t i = 0; i < nb; ++i) with_residuals &= rank.data_as<int64_t>()[i] == n;
  }
  if (with_residuals) {
    residuals = Tensor::Empty(Concat(batch, {k}), vdt);
    ForType(a.dtype(), [&](auto t) {
      using T = decltype(t);
      using R = Real<T>;
      const T* xp = xb.data_as<const T>();
      R* rp = residuals.data_as<R>();
      for (int64_t i = 0; i < nb; ++i) {
        for (int64_t j = 0; j < k; ++j) {
          const T* col = xp + i * rows * k + j * rows;
          R acc = 0;
          for (int64_t r = n; r < m; ++r) acc += std::norm(col[r]);
          rp[i * k + j] = acc;
        }
      }
    });
  }
  Tensor x = xb.slice(nd - 2, 0, n);
  if (vector) x = x.squeeze(nd - 1);
  return {x, residuals, rank, sv};
}

}  // namespace

TB_REGISTER_KERNELS(linalg_solve) {
  const DeviceType cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::linalg_lu_solve", cpu, Boxed<&LinalgLuSolve>(), TB_HERE);
  table.RegisterKernel("aten::_linalg_solve_ex", cpu, Boxed<&SolveEx>(), TB_HERE);
  table.RegisterKernel("aten::linalg_inv_ex", cpu, Boxed<&InvEx>(), TB_HERE);
  table.RegisterKernel("aten::_linalg_det", cpu, Boxed<&LinalgDet>(), TB_HERE);
  table.RegisterKernel("aten::_linalg_slogdet", cpu, Boxed<&LinalgSlogdet>(), TB_HERE);
  table.RegisterKernel("aten::linalg_solve_triangular", cpu, Boxed<&LinalgSolveTriangular>(),
                       TB_HERE);
  table.RegisterKernel("aten::triangular_solve", cpu, Boxed<&TriangularSolveLegacy>(), TB_HERE);
  table.RegisterKernel("aten::cholesky_solve", cpu, Boxed<&CholeskySolve>(), TB_HERE);
  table.RegisterKernel("aten::cholesky_inverse", cpu, Boxed<&CholeskyInverse>(), TB_HERE);
  table.RegisterKernel("aten::linalg_ldl_solve", cpu, Boxed<&LdlSolve>(), TB_HERE);
  table.RegisterKernel("aten::linalg_lstsq", cpu, Boxed<&Lstsq>(), TB_HERE);
}

}  // namespace tb::kernels::linalg
