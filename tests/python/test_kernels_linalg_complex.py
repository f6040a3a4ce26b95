"""Linear algebra kernels on complex64 / complex128 (kernels/linalg_*.cc, LAPACK's c* / z*
routines) and the general eigendecomposition (kernels/linalg_eig.cc, geev) of every dtype.

* Each ATen op called directly through ``tb.call`` and compared with ``torch.ops.aten``'s CPU
  result. Where a result is defined only up to a phase per column (Q, U / Vh, eigenvectors) it is
  checked as torch's own tests check it: by reconstruction (Q R, U diag(S) Vh, V diag(L) V^H,
  A V = V diag(L)), unitarity and absolute values.
* Adjoints are conjugate transposes: lu_solve's four (left, adjoint) forms, ormqr's transpose,
  cholesky_inverse's mirrored triangle, LDL^T with hermitian True (hetrf) and False (sytrf).
* Real outputs of complex inputs (singular values, Hermitian eigenvalues, log |det|, lstsq's
  residuals) have the value dtype; eig of real inputs gives complex results.
* Errors name the op and the dtype; svd refuses NaN and infinity (gesdd may not return); OpInfo sweeps of the family through the table; threads.
"""

from __future__ import annotations

import functools
import threading

import pytest
import torch
from conftest import check_opinfo_samples, opinfo_cases
from test_kernels_linalg import (
    BLOCKED_QR,
    FAMILY,
    SWEEP,
    TALL_BLOCKED_QR,
    _close,
    _gen,
    _rand,
    _spd,
    _sym,
    tbcall,
)

pytestmark = pytest.mark.usefixtures("no_fallback")

CDTYPES = [torch.complex64, torch.complex128]


# test_kernels_linalg's makers, complex128 unless a test names the dtype.
_crand = functools.partial(_rand, dtype=torch.complex128)
_hpd = functools.partial(_spd, dtype=torch.complex128)  # Hermitian positive definite
_herm = functools.partial(_sym, dtype=torch.complex128)


def _tol(dtype):
    return {"atol": 1e-4, "rtol": 1e-4} if dtype == torch.complex64 else {}


def _check(name, *args, tol=None, **kwargs):
    base, _, ov = name.removeprefix("aten::").partition(".")
    op = getattr(torch.ops.aten, base)
    expected = getattr(op, ov) if ov else op
    _close(tbcall(name, *args, **kwargs), expected(*args, **kwargs), **(tol or {}))


SQUARE = [(4, 4), (3, 5, 5), (2, 3, 1, 1), (0, 3, 3)]
RECT = [(5, 3), (3, 5), (2, 4, 4), (2, 6, 2), (2, 2, 5)]


# ---- deterministic results: compared with torch's directly --------------------------------------


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("shape", SQUARE)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky(dtype, shape, upper):
    a = _hpd(*shape, dtype=dtype)
    tol = _tol(dtype)
    _check("aten::linalg_cholesky_ex", a, upper=upper, tol=tol)
    _check("aten::cholesky", a, upper, tol=tol)
    factor = torch.linalg.cholesky(a, upper=upper)
    _check("aten::cholesky_inverse", factor, upper, tol=tol)
    b = _crand(*shape[:-1], 2, dtype=dtype, seed=1)
    _check("aten::cholesky_solve", b, factor, upper, tol=tol)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("shape", SQUARE + RECT)
def test_lu_family(dtype, shape):
    a = _crand(*shape, dtype=dtype)
    tol = _tol(dtype)
    _check("aten::linalg_lu_factor_ex", a, tol=tol)
    _check("aten::linalg_lu", a, tol=tol)
    lu, piv = torch.linalg.lu_factor(a)
    for data, pivots in [(True, True), (True, False), (False, True)]:
        _check("aten::lu_unpack", lu, piv, data, pivots)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("shape", SQUARE)
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
def test_solves(dtype, shape, left, adjoint):
    n = shape[-1]
    a = _crand(*shape, dtype=dtype) + 3 * torch.eye(n, dtype=dtype)
    b = _crand(*shape[:-2], *((n, 3) if left else (3, n)), dtype=dtype, seed=1)
    lu, piv = torch.linalg.lu_factor(a)
    tol = _tol(dtype)
    _check("aten::linalg_lu_solve", lu, piv, b, left=left, adjoint=adjoint, tol=tol)
    # The solution, checked against the equation itself: op(A) X = B or X op(A) = B.
    x = tbcall("aten::linalg_lu_solve", lu, piv, b, left=left, adjoint=adjoint)
    op_a = a.mH if adjoint else a
    torch.testing.assert_close(op_a @ x if left else x @ op_a, b, **tol)
    _check("aten::_linalg_solve_ex", a, b, left=left, tol=tol)
    _check("aten::_linalg_solve_ex", a.mT, b, left=left, tol=tol)
    _check("aten::linalg_inv_ex", a, tol=tol)
    _check("aten::_linalg_det", a, tol=tol)
    _check("aten::_linalg_det", a.mT, tol=tol)
    sign, logabs, *_ = tbcall("aten::_linalg_slogdet", a)
    assert logabs.dtype == a.real.dtype and sign.dtype == dtype
    _check("aten::_linalg_slogdet", a, tol=tol)
    _check("aten::_linalg_slogdet", a.mT, tol=tol)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_singular_det_and_errors(dtype):
    a = _crand(2, 3, 3, dtype=dtype)
    a[1, 2] = 0  # singular: a zero row
    _check("aten::_linalg_det", a, tol=_tol(dtype))
    sign, logabs, *_ = tbcall("aten::_linalg_slogdet", a)
    assert sign[1].item() == 0 and logabs[1].item() == float("-inf")
    with pytest.raises(RuntimeError, match=r"\(Batch element 1\).*singular"):
        tbcall("aten::linalg_inv_ex", a, check_errors=True)
    not_pd = -_hpd(3, 3, dtype=dtype)
    with pytest.raises(RuntimeError, match="not positive-definite"):
        tbcall("aten::linalg_cholesky_ex", not_pd, check_errors=True)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unit", [False, True])
def test_triangular(dtype, upper, left, unit):
    n = 5
    a = _crand(2, n, n, dtype=dtype) + 4 * torch.eye(n, dtype=dtype)
    a = a.triu() if upper else a.tril()
    b = _crand(2, *((n, 3) if left else (3, n)), dtype=dtype, seed=1)
    tol = _tol(dtype)
    for aa in (a, a.mT.contiguous().mT):  # C-contiguous (read as A^T) and column-major A
        _check(
            "aten::linalg_solve_triangular",
            aa,
            b,
            upper=upper,
            left=left,
            unitriangular=unit,
            tol=tol,
        )
    if left:
        for transpose in (False, True):
            _check("aten::triangular_solve", b, a, upper, transpose, unit, tol=tol)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("shape", [(5, 3), (2, 4, 3), (3, 3), *TALL_BLOCKED_QR])
def test_geqrf_ormqr_householder(dtype, shape):
    a = _crand(*shape, dtype=dtype)
    tol = _tol(dtype)
    _check("aten::geqrf", a, tol=tol)
    qr, tau = torch.geqrf(a)
    _check("aten::linalg_householder_product", qr, tau, tol=tol)
    c = _crand(*shape[:-2], shape[-2], 2, dtype=dtype, seed=1)
    for transpose in (False, True):
        _check("aten::ormqr", qr, tau, c, True, transpose, tol=tol)
    c = _crand(*shape[:-2], 2, shape[-2], dtype=dtype, seed=1)
    _check("aten::ormqr", qr, tau, c, False, True, tol=tol)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("hermitian", [False, True])
def test_ldl(dtype, hermitian):
    a = _herm(2, 5, 5, dtype=dtype) if hermitian else _crand(2, 5, 5, dtype=dtype)
    if not hermitian:
        a = a + a.mT  # complex symmetric
    tol = _tol(dtype)
    _check("aten::linalg_ldl_factor_ex", a, hermitian=hermitian, tol=tol)
    ld, piv = torch.linalg.ldl_factor(a, hermitian=hermitian)
    b = _crand(2, 5, 3, dtype=dtype, seed=1)
    _check("aten::linalg_ldl_solve", ld, piv, b, hermitian=hermitian, tol=tol)
    x = tbcall("aten::linalg_ldl_solve", ld, piv, b, hermitian=hermitian)
    torch.testing.assert_close(a @ x, b, **tol)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("driver", [None, "gelsy", "gels", "gelsd", "gelss"])
@pytest.mark.parametrize(("m", "n"), [(6, 3), (3, 3), (3, 6)])
def test_lstsq(dtype, driver, m, n):
    a = _crand(2, m, n, dtype=dtype)
    b = _crand(2, m, 2, dtype=dtype, seed=1)
    x, res, rank, sv = tbcall("aten::linalg_lstsq", a, b, driver=driver)
    ex = torch.linalg.lstsq(a, b, driver=driver)
    tol = _tol(dtype)
    torch.testing.assert_close(x, ex.solution, **tol)
    assert res.dtype == a.real.dtype and sv.dtype == a.real.dtype
    torch.testing.assert_close(res, ex.residuals, **tol)
    torch.testing.assert_close(rank, ex.rank)
    torch.testing.assert_close(sv, ex.singular_values, **tol)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_matrix_exp_cross_eye(dtype):
    tol = _tol(dtype)
    for scale in (1e-3, 0.1, 1.0, 8.0):  # each Taylor degree and scaling-and-squaring
        _check("aten::linalg_matrix_exp", scale * _crand(2, 5, 5, dtype=dtype), tol=tol)
    _check("aten::linalg_matrix_exp", _crand(30, 30, dtype=dtype) / 10, tol=tol)  # BLAS products
    x, y = _crand(4, 3, dtype=dtype), _crand(1, 3, dtype=dtype, seed=1)
    _check("aten::linalg_cross", x, y, tol=tol)
    _check("aten::linalg_cross", x.mT, y.mT, dim=0, tol=tol)
    _check("aten::eye.m", 3, 4, dtype=dtype)
    for value in (float("inf"), float("nan")):  # NaN results, as torch's
        x = _crand(3, 3, dtype=dtype)
        x[0, 0] = value
        _check("aten::linalg_matrix_exp", x, tol={"equal_nan": True})


# ---- results defined up to a phase: reconstruction ----------------------------------------------


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("shape", [*RECT, (0, 3, 2), *BLOCKED_QR])
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr(dtype, shape, mode):
    a = _crand(*shape, dtype=dtype)
    q, r = tbcall("aten::linalg_qr", a, mode)
    eq, er = torch.linalg.qr(a, mode=mode)
    assert (q.shape, r.shape) == (eq.shape, er.shape)
    tol = _tol(dtype)
    torch.testing.assert_close(r.abs(), er.abs(), **tol)
    if mode != "r":
        torch.testing.assert_close(q @ r, a, **tol)
        eye = torch.eye(q.shape[-1], dtype=dtype).expand(*q.shape[:-2], -1, -1)
        torch.testing.assert_close(q.mH @ q, eye, **tol)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("shape", [*RECT, (4, 4), (0, 2, 3)])
@pytest.mark.parametrize("full", [False, True])
def test_svd(dtype, shape, full):
    a = _crand(*shape, dtype=dtype)
    u, s, vh = tbcall("aten::_linalg_svd", a, full)
    eu, es, evh = torch.linalg.svd(a, full_matrices=full)
    assert (u.shape, s.shape, vh.shape) == (eu.shape, es.shape, evh.shape)
    assert s.dtype == a.real.dtype
    tol = _tol(dtype)
    torch.testing.assert_close(s, es, **tol)
    k = s.shape[-1]
    torch.testing.assert_close((u[..., :k] * s.unsqueeze(-2)) @ vh[..., :k, :], a, **tol)
    torch.testing.assert_close(u[..., :k].abs(), eu[..., :k].abs(), **tol)
    torch.testing.assert_close(vh[..., :k, :].abs(), evh[..., :k, :].abs(), **tol)
    _, s2, _ = tbcall("aten::_linalg_svd", a, full, False)
    torch.testing.assert_close(s2, es, **tol)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh(dtype, uplo):
    a = _herm(3, 6, 6, dtype=dtype)
    w, v = tbcall("aten::_linalg_eigh", a, uplo)
    ew, ev = torch.linalg.eigh(a, UPLO=uplo)
    assert w.dtype == a.real.dtype
    tol = _tol(dtype)
    torch.testing.assert_close(w, ew, **tol)
    torch.testing.assert_close((v * w.unsqueeze(-2).to(dtype)) @ v.mH, a, **tol)
    torch.testing.assert_close(v.abs(), ev.abs(), **tol)
    w2, v2 = tbcall("aten::_linalg_eigh", a, uplo, False)
    torch.testing.assert_close(w2, ew, **tol)
    assert v2.shape == (0,)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, *CDTYPES])
def test_eig(dtype):
    a = torch.randn(3, 6, 6, dtype=dtype, generator=_gen(0))
    w, v = tbcall("aten::linalg_eig", a)
    ew, ev = torch.linalg.eig(a)
    cdt = ew.dtype
    assert w.dtype == v.dtype == cdt
    assert (w.imag != 0).any()  # real input: conjugate pairs, expanded from geev's (re, im) columns
    tol = {"atol": 1e-4, "rtol": 1e-4} if cdt == torch.complex64 else {}
    torch.testing.assert_close(w, ew, **tol)  # LAPACK's order, as torch's
    torch.testing.assert_close(a.to(cdt) @ v, v * w.unsqueeze(-2), **tol)
    torch.testing.assert_close(v.abs(), ev.abs(), **tol)
    norms = torch.linalg.vector_norm(v, dim=-2)
    torch.testing.assert_close(norms, torch.ones_like(norms), **tol)
    torch.testing.assert_close(tbcall("aten::_linalg_eigvals", a), ew, **tol)
    empty_w, empty_v = tbcall("aten::linalg_eig", torch.ones(2, 0, 0, dtype=dtype))
    assert empty_w.shape == (2, 0) and empty_v.shape == (2, 0, 0)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("hermitian", [False, True])
def test_pinv(dtype, hermitian):
    a = _herm(2, 5, 5, dtype=dtype) if hermitian else _crand(2, 5, 3, dtype=dtype)
    a[0, -1] = a[0, 0]  # a rank-deficient matrix in the batch
    if hermitian:
        a[0, :, -1] = a[0, :, 0]
    tol = _tol(dtype)
    expected = torch.linalg.pinv(a, hermitian=hermitian)
    _close(tbcall("aten::linalg_pinv.atol_rtol_tensor", a, hermitian=hermitian), expected, **tol)
    atol = torch.tensor([0.5, 0.0], dtype=torch.float64)
    _close(
        tbcall("aten::linalg_pinv.atol_rtol_tensor", a, atol=atol, hermitian=hermitian),
        torch.linalg.pinv(a, atol=atol, hermitian=hermitian),
        **tol,
    )


# ---- errors, threads ----------------------------------------------------------------------------


def test_errors_name_op_and_dtype():
    half = torch.eye(3, dtype=torch.float16)
    with pytest.raises(
        TypeError, match=r"linalg\.eig: Expected a floating point or complex.*float16"
    ):
        tbcall("aten::linalg_eig", half)
    with pytest.raises(
        TypeError, match=r"linalg\.inv: Expected a floating point or complex.*int64"
    ):
        tbcall("aten::linalg_inv_ex", torch.eye(3, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"linalg\.eig: A must be batches of square matrices"):
        tbcall("aten::linalg_eig", torch.ones(2, 3, dtype=torch.complex64))
    with pytest.raises(
        TypeError, match=r"solve: Expected B to have the dtype.*complex64.*complex128"
    ):
        tbcall(
            "aten::_linalg_solve_ex",
            torch.eye(3, dtype=torch.complex64),
            torch.ones(3, 1, dtype=torch.complex128),
        )
    with pytest.raises(TypeError, match="pinv: atol tensor of complex type"):
        tbcall(
            "aten::linalg_pinv.atol_rtol_tensor",
            torch.eye(3, dtype=torch.complex64),
            atol=torch.zeros((), dtype=torch.complex64),
        )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, *CDTYPES])
@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_svd_non_finite(dtype, value):
    """gesdd can loop forever on an infinity: a non-finite matrix raises (LAPACK 3.10's info -4,
    torch's message) before it reaches LAPACK."""
    a = torch.randn(2, 3, 3, dtype=dtype, generator=_gen(0))
    a[1, 0, 0] = value
    with pytest.raises(RuntimeError, match=r"svd: \(Batch element 1\).*non-finite values"):
        tbcall("aten::_linalg_svd", a)
    with pytest.raises(RuntimeError, match="non-finite values"):
        tbcall("aten::_linalg_svd", a[1], False, False)


def test_threads():
    """Calls from several threads (the GIL released in the kernels) give each its own result."""
    mats = [_crand(48, 48, seed=i) for i in range(8)]
    expected = [torch.linalg.eigvals(m) for m in mats]
    results: dict[int, torch.Tensor] = {}

    def work(i):
        for _ in range(3):
            results[i] = tbcall("aten::_linalg_eigvals", mats[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(8):
        torch.testing.assert_close(results[i], expected[i])


# ---- OpInfo sweeps ------------------------------------------------------------------------------

CFAMILY = FAMILY | {"aten::eye", "aten::eye.m"}
CSWEEP = [
    *SWEEP,
    *("linalg.matrix_power", "linalg.matrix_exp", "matrix_exp", "cross", "linalg.cond"),
    *("linalg.matrix_norm", "norm.nuc", "svd", "qr", "lu", "lu_solve"),
]


@pytest.mark.parametrize(("opinfo", "dtype"), opinfo_cases(CSWEEP, CDTYPES))
def test_opinfo_linalg_complex(opinfo, dtype):
    check_opinfo_samples(opinfo, dtype, CFAMILY, max_samples=8)
