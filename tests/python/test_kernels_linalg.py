"""Linear algebra kernels (kernels/linalg_*.cc, LAPACK / OpenBLAS).

* Each ATen op called directly through ``tb.call`` and compared with ``torch.ops.aten`` for
  float32 / float64, batched and strided inputs. Where a result is defined only up to sign (Q,
  U / Vh, eigenvectors) it is checked as torch's own tests check it: by reconstruction
  (Q @ R, U @ diag(S) @ Vh, V @ diag(L) @ V^T), orthogonality and absolute values.
* LAPACK's info (the ``_ex`` ops) and the errors torch raises (singular, not positive-definite,
  shapes, dtypes).
* Gradients through tb.Tensor (backward composites run in the table) against torch's.
* OpInfo sweeps of the family through the table, and calls from several threads.
"""

from __future__ import annotations

import threading

import pytest
import torch
from conftest import check_opinfo_samples, opinfo_cases

import tensorbridge as tb

pytestmark = pytest.mark.usefixtures("no_fallback")

DTYPES = [torch.float32, torch.float64]


def _to_tb(x):
    if isinstance(x, torch.Tensor):
        return tb.from_dlpack(x.detach())
    return x


def _to_torch(out):
    if isinstance(out, tb.Array):
        return torch.from_dlpack(out)
    if isinstance(out, (list, tuple)):
        return tuple(_to_torch(o) for o in out)
    return out


def tbcall(name, *args, **kwargs):
    return _to_torch(
        tb.call(name, *[_to_tb(a) for a in args], **{k: _to_tb(v) for k, v in kwargs.items()})
    )


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _rand(*shape, dtype=torch.float64, seed=0):
    return torch.randn(*shape, dtype=dtype, generator=_gen(seed))


def _spd(*shape, dtype=torch.float64, seed=0):
    a = _rand(*shape, dtype=dtype, seed=seed)  # Hermitian positive definite for complex dtypes
    return a @ a.mH + shape[-1] * torch.eye(shape[-1], dtype=dtype)


def _sym(*shape, dtype=torch.float64, seed=0):
    a = _rand(*shape, dtype=dtype, seed=seed)  # Hermitian for complex dtypes
    return a + a.mH


def _close(actual, expected, **kw):
    if isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected)
        for x, y in zip(actual, expected, strict=True):
            _close(x, y, **kw)
        return
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    torch.testing.assert_close(actual, expected, check_stride=False, **kw)


def _check(name, *args, **kwargs):
    if "." in name:
        base, ov = name.removeprefix("aten::").split(".")
        expected = getattr(getattr(torch.ops.aten, base), ov)
    else:
        expected = getattr(torch.ops.aten, name.removeprefix("aten::"))
    _close(tbcall(name, *args, **kwargs), expected(*args, **kwargs))


SQUARE = [(4, 4), (3, 5, 5), (2, 3, 1, 1), (0, 3, 3)]
RECT = [(5, 3), (3, 5), (2, 4, 4), (2, 6, 2), (2, 2, 5)]
# QR works in blocks of 8 reflectors up to 128 columns (kernels/linalg_factor.cc): several blocks and
# a partial last one, tall and wide, and LAPACK's own blocking past 128 columns.
BLOCKED_QR = [(37, 21), (21, 37), (2, 16, 16), (140, 9), (9, 140), (131, 130)]
TALL_BLOCKED_QR = [s for s in BLOCKED_QR if s[-2] >= s[-1]]  # householder_product's domain


# ---- deterministic results: compared with torch's directly --------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SQUARE)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky(dtype, shape, upper):
    a = _spd(*shape, dtype=dtype)
    _check("aten::linalg_cholesky_ex", a, upper=upper)
    _check("aten::cholesky", a, upper)
    lower = torch.linalg.cholesky(a, upper=upper)
    _check("aten::cholesky_inverse", lower, upper)
    _check("aten::cholesky_solve", _rand(*shape[:-1], 2, dtype=dtype, seed=1), lower, upper)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SQUARE + RECT)
def test_lu_family(dtype, shape):
    a = _rand(*shape, dtype=dtype)
    _check("aten::linalg_lu_factor_ex", a)
    _check("aten::linalg_lu", a)
    lu, piv = torch.linalg.lu_factor(a)
    for data, pivots in [(True, True), (True, False), (False, True)]:
        _check("aten::lu_unpack", lu, piv, data, pivots)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SQUARE)
@pytest.mark.parametrize(("left", "adjoint"), [(True, False), (True, True), (False, False)])
def test_solves(dtype, shape, left, adjoint):
    a = _rand(*shape, dtype=dtype) + 3 * torch.eye(shape[-1], dtype=dtype)
    n = shape[-1]
    b = _rand(*shape[:-2], *((n, 3) if left else (3, n)), dtype=dtype, seed=1)
    lu, piv = torch.linalg.lu_factor(a)
    tol = {"atol": 1e-4, "rtol": 1e-4} if dtype == torch.float32 else {}
    _close(
        tbcall("aten::linalg_lu_solve", lu, piv, b, left=left, adjoint=adjoint),
        torch.linalg.lu_solve(lu, piv, b, left=left, adjoint=adjoint),
        **tol,
    )
    if not adjoint:
        _check("aten::_linalg_solve_ex", a, b, left=left)
        _check("aten::_linalg_solve_ex", a.mT, b, left=left)
    _check("aten::linalg_inv_ex", a)
    _check("aten::_linalg_det", a)
    _check("aten::_linalg_slogdet", a)
    _check("aten::_linalg_det", a.mT)  # not C-contiguous: torch factorizes A, not A^T
    upper = adjoint
    t = torch.triu(a) if upper else torch.tril(a)
    _check("aten::linalg_solve_triangular", t, b, upper=upper, left=left)
    _check("aten::linalg_solve_triangular", t, b, upper=upper, left=left, unitriangular=True)
    if left:
        _check("aten::triangular_solve", b, t, upper, adjoint, False)


@pytest.mark.parametrize("dtype", DTYPES)
def test_solve_vector_and_broadcast(dtype):
    a = _rand(2, 1, 4, 4, dtype=dtype) + 4 * torch.eye(4, dtype=dtype)
    _check("aten::_linalg_solve_ex", a, _rand(2, 1, 4, dtype=dtype, seed=1))  # batch of vectors
    _check("aten::_linalg_solve_ex", a[0, 0], _rand(4, dtype=dtype, seed=1))  # one vector
    _check("aten::_linalg_solve_ex", a, _rand(3, 4, 2, dtype=dtype, seed=1))  # batch (2, 3)
    t = torch.tril(a)
    _check("aten::linalg_solve_triangular", t, _rand(3, 4, 2, dtype=dtype, seed=2), upper=False)


@pytest.mark.parametrize("dtype", DTYPES)
def test_singular_and_not_positive_definite(dtype):
    a = torch.stack([torch.eye(3, dtype=dtype), torch.zeros(3, 3, dtype=dtype)])
    _check("aten::linalg_lu_factor_ex", a)
    _check("aten::_linalg_slogdet", a)
    _check("aten::_linalg_det", a)
    _, info = tbcall("aten::linalg_inv_ex", a)
    assert info.tolist() == torch.linalg.inv_ex(a).info.tolist() == [0, 1]
    with pytest.raises(RuntimeError, match=r"\(Batch element 1\): The diagonal element 1 is zero"):
        tbcall("aten::linalg_inv_ex", a, check_errors=True)
    with pytest.raises(
        RuntimeError, match="The solver failed because the input matrix is singular"
    ):
        tbcall("aten::_linalg_solve_ex", a[1], a[0], check_errors=True)
    npd = -torch.eye(3, dtype=dtype)
    _check("aten::linalg_cholesky_ex", npd)
    with pytest.raises(RuntimeError, match="leading minor of order 1 is not positive-definite"):
        tbcall("aten::cholesky", npd)
    with pytest.raises(RuntimeError, match=r"lu_factor_ex: U\[2,2\] is zero"):
        tbcall("aten::linalg_lu_factor_ex", torch.ones(3, 3, dtype=dtype), check_errors=True)
    tbcall("aten::_linalg_check_errors", torch.zeros(2, dtype=torch.int32), "x", is_matrix=False)


def test_argument_errors():
    with pytest.raises(ValueError, match=r"linalg\.cholesky: A must be batches of square matrices"):
        tbcall("aten::linalg_cholesky_ex", torch.ones(2, 3))
    with pytest.raises(ValueError, match="must have at least 2 dimensions"):
        tbcall("aten::linalg_inv_ex", torch.ones(3))
    with pytest.raises(
        TypeError, match=r"linalg\.inv: Expected a floating point or complex.*int64"
    ):
        tbcall("aten::linalg_inv_ex", torch.ones(3, 3, dtype=torch.int64))
    with pytest.raises(NotImplementedError, match="LU without pivoting"):
        tbcall("aten::linalg_lu_factor_ex", torch.ones(3, 3), pivot=False)
    with pytest.raises(ValueError, match="Incompatible shapes of A and B"):
        tbcall("aten::linalg_lu_solve", *torch.linalg.lu_factor(torch.eye(3)), torch.ones(2, 1))
    with pytest.raises(TypeError, match="dtype of the input"):
        tbcall("aten::_linalg_solve_ex", torch.eye(3), torch.ones(3, 1, dtype=torch.float64))
    with pytest.raises(ValueError, match="driver"):
        tbcall("aten::_linalg_svd", torch.eye(3), driver="gesvd")
    with pytest.raises(ValueError, match="unrecognized mode 'x'"):
        tbcall("aten::linalg_qr", torch.eye(3), "x")
    with pytest.raises(ValueError, match="must have length 3"):
        tbcall("aten::linalg_cross", torch.ones(2, 4), torch.ones(2, 4))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 3), (2, 4, 3), (3, 3), *TALL_BLOCKED_QR])
def test_geqrf_ormqr_householder(dtype, shape):
    a = _rand(*shape, dtype=dtype)
    _check("aten::geqrf", a)
    qr, tau = torch.geqrf(a)
    _check("aten::linalg_householder_product", qr, tau)
    m = shape[-2]
    c = _rand(*shape[:-2], m, 2, dtype=dtype, seed=1)
    for transpose in (False, True):
        _check("aten::ormqr", qr, tau, c, True, transpose)
        _check("aten::ormqr", qr, tau, c.mT.contiguous(), False, transpose)


@pytest.mark.parametrize("dtype", DTYPES)
def test_ldl(dtype):
    a = _sym(3, 5, 5, dtype=dtype)
    _check("aten::linalg_ldl_factor_ex", a)
    ld, piv = torch.linalg.ldl_factor(a)
    _check("aten::linalg_ldl_solve", ld, piv, _rand(3, 5, 2, dtype=dtype, seed=1))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("driver", [None, "gelsy", "gels", "gelsd", "gelss"])
@pytest.mark.parametrize(("m", "n"), [(6, 3), (3, 3), (3, 6)])
def test_lstsq(dtype, driver, m, n):
    if driver == "gels" and m < n:
        pytest.skip("gels is for full-rank A with m >= n in torch's documentation")
    a, b = _rand(2, m, n, dtype=dtype), _rand(2, m, 2, dtype=dtype, seed=1)
    tol = {"atol": 1e-4, "rtol": 1e-4} if dtype == torch.float32 else {}
    _close(
        tbcall("aten::linalg_lstsq", a, b, driver=driver),
        tuple(torch.linalg.lstsq(a, b, driver=driver)),
        **tol,
    )
    _close(
        tbcall("aten::linalg_lstsq", a, b[..., 0], driver=driver)[0],
        torch.linalg.lstsq(a, b[..., 0], driver=driver).solution,
        **tol,
    )


@pytest.mark.parametrize("dtype", DTYPES)
def test_matrix_exp_and_cross(dtype):
    a = _rand(3, 4, 4, dtype=dtype) / 2
    _close(tbcall("aten::linalg_matrix_exp", a), torch.linalg.matrix_exp(a), atol=1e-5, rtol=1e-5)
    x, y = _rand(4, 3, 2, dtype=dtype), _rand(1, 3, 2, dtype=dtype, seed=1)
    _check("aten::linalg_cross", x, y, dim=1)
    xi, yi = torch.randint(-5, 5, (4, 3), generator=_gen(0)), torch.randint(-5, 5, (4, 3))
    _check("aten::linalg_cross", xi, yi)


# ---- results up to sign: reconstruction, as torch's tests ----------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [*RECT, (0, 3, 2), *BLOCKED_QR])
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr(dtype, shape, mode):
    a = _rand(*shape, dtype=dtype)
    q, r = tbcall("aten::linalg_qr", a, mode)
    eq, er = torch.linalg.qr(a, mode=mode)
    assert q.shape == eq.shape and r.shape == er.shape
    torch.testing.assert_close(r.abs(), er.abs())
    assert torch.equal(r, r.triu())
    if mode != "r":
        torch.testing.assert_close(q @ r, a)
        eye = torch.eye(q.shape[-1], dtype=dtype)
        torch.testing.assert_close(q.mT @ q, eye.expand_as(q.mT @ q))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [*RECT, (4, 4)])
@pytest.mark.parametrize("full", [False, True])
def test_svd(dtype, shape, full):
    a = _rand(*shape, dtype=dtype)
    u, s, vh = tbcall("aten::_linalg_svd", a, full)
    eu, es, evh = torch.linalg.svd(a, full_matrices=full)
    assert (u.shape, s.shape, vh.shape) == (eu.shape, es.shape, evh.shape)
    torch.testing.assert_close(s, es)
    k = s.shape[-1]
    torch.testing.assert_close((u[..., :k] * s.unsqueeze(-2)) @ vh[..., :k, :], a)
    torch.testing.assert_close(u.abs(), eu.abs(), atol=1e-4, rtol=1e-4)
    _, s2, _ = tbcall("aten::_linalg_svd", a, full, False)
    torch.testing.assert_close(s2, es)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh(dtype, uplo):
    a = _sym(3, 6, 6, dtype=dtype)
    w, v = tbcall("aten::_linalg_eigh", a, uplo)
    ew, ev = torch.linalg.eigh(a, UPLO=uplo)
    torch.testing.assert_close(w, ew)
    torch.testing.assert_close((v * w.unsqueeze(-2)) @ v.mT, a)
    torch.testing.assert_close(v.abs(), ev.abs())
    w2, v2 = tbcall("aten::_linalg_eigh", a, uplo, False)
    torch.testing.assert_close(w2, ew)
    assert v2.shape == (0,)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("hermitian", [False, True])
def test_pinv(dtype, hermitian):
    a = _sym(2, 5, 5, dtype=dtype) if hermitian else _rand(2, 5, 3, dtype=dtype)
    a[0, -1] = a[0, 0]  # a rank-deficient matrix in the batch
    if hermitian:
        a[0, :, -1] = a[0, :, 0]
    expected = torch.linalg.pinv(a, hermitian=hermitian)
    _close(tbcall("aten::linalg_pinv.atol_rtol_tensor", a, hermitian=hermitian), expected)
    atol = torch.tensor([0.5, 0.0], dtype=torch.float64)
    _close(
        tbcall("aten::linalg_pinv.atol_rtol_tensor", a, atol=atol, hermitian=hermitian),
        torch.linalg.pinv(a, atol=atol, hermitian=hermitian),
    )


# ---- gradients through tb.Tensor ----------------------------------------------------------------
GRADS = {
    "det": (lambda a: torch.linalg.det(a), _rand),
    "slogdet": (lambda a: torch.linalg.slogdet(a).logabsdet, _rand),
    "cholesky": (lambda a: torch.linalg.cholesky(a), _spd),
    "solve": (lambda a: torch.linalg.solve(a, torch.ones(4, 2, dtype=a.dtype)), _rand),
    "inv": (lambda a: torch.linalg.inv(a), _rand),
    "qr": (lambda a: torch.linalg.qr(a)[1].abs(), _rand),
    "eigh": (lambda a: torch.linalg.eigh(a).eigenvectors.abs(), _sym),
    "svdvals": (lambda a: torch.linalg.svdvals(a), _rand),
    "pinv": (lambda a: torch.linalg.pinv(a), _rand),
    "matrix_exp": (lambda a: torch.linalg.matrix_exp(a / 4), _rand),
    "solve_triangular": (
        lambda a: torch.linalg.solve_triangular(a.tril() + 4 * torch.eye(4), a, upper=False),
        _rand,
    ),
}


@pytest.mark.parametrize("name", sorted(GRADS))
def test_gradients(name):
    fn, make = GRADS[name]
    a = make(4, 4, dtype=torch.float64, seed=5)
    x = a.clone().requires_grad_()
    out = fn(x)
    g = torch.randn(out.shape, dtype=out.dtype, generator=_gen(7))
    (expected,) = torch.autograd.grad(out, x, g)
    w = tb.wrap(a.clone()).requires_grad_()
    out_tb = fn(w)
    assert isinstance(out_tb, tb.Tensor)
    (actual,) = torch.autograd.grad(out_tb, w, tb.wrap(g))
    torch.testing.assert_close(tb.to_torch(actual), expected)


# ---- threads ------------------------------------------------------------------------------------


def test_threads():
    """Calls from several threads (the GIL released in the kernels) give each its own result."""
    mats = [_spd(64, 64, seed=i) for i in range(8)]
    expected = [torch.linalg.cholesky(m) for m in mats]
    results: dict[int, torch.Tensor] = {}

    def work(i):
        for _ in range(5):
            results[i] = tbcall("aten::linalg_cholesky_ex", mats[i])[0]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(8):
        torch.testing.assert_close(results[i], expected[i])


# ---- OpInfo sweeps ------------------------------------------------------------------------------

FAMILY = {
    "aten::_linalg_check_errors",
    "aten::linalg_cross",
    "aten::linalg_cholesky_ex",
    "aten::cholesky",
    "aten::cholesky_solve",
    "aten::cholesky_inverse",
    "aten::linalg_lu_factor_ex",
    "aten::linalg_lu",
    "aten::lu_unpack",
    "aten::linalg_lu_solve",
    "aten::linalg_qr",
    "aten::geqrf",
    "aten::ormqr",
    "aten::linalg_householder_product",
    "aten::linalg_ldl_factor_ex",
    "aten::linalg_ldl_solve",
    "aten::_linalg_solve_ex",
    "aten::linalg_inv_ex",
    "aten::_linalg_det",
    "aten::_linalg_slogdet",
    "aten::linalg_solve_triangular",
    "aten::triangular_solve",
    "aten::linalg_lstsq",
    "aten::_linalg_svd",
    "aten::_linalg_eigh",
    "aten::linalg_eig",
    "aten::_linalg_eigvals",
    "aten::linalg_pinv.atol_rtol_tensor",
    "aten::linalg_matrix_exp",
}
SWEEP = [
    "cholesky",
    "cholesky_inverse",
    "cholesky_solve",
    "linalg.cholesky",
    "linalg.cholesky_ex",
    "linalg.cross",
    "linalg.det",
    "linalg.eig",
    "linalg.eigvals",
    "linalg.eigh",
    "linalg.eigvalsh",
    "linalg.householder_product",
    "linalg.inv",
    "linalg.inv_ex",
    "linalg.ldl_factor",
    "linalg.ldl_factor_ex",
    "linalg.ldl_solve",
    "linalg.lstsq",
    "linalg.lu",
    "linalg.lu_factor",
    "linalg.lu_factor_ex",
    "linalg.lu_solve",
    "linalg.matrix_rank",
    "linalg.pinv",
    "linalg.qr",
    "linalg.slogdet",
    "linalg.solve",
    "linalg.solve_ex",
    "linalg.solve_triangular",
    "linalg.svd",
    "linalg.svdvals",
    "linalg.tensorinv",
    "linalg.tensorsolve",
    "geqrf",
    "ormqr",
    "lu_unpack",
    "triangular_solve",
    "pinverse",
    "logdet",
]


@pytest.mark.parametrize(("opinfo", "dtype"), opinfo_cases(SWEEP, DTYPES))
def test_opinfo_linalg(opinfo, dtype):
    check_opinfo_samples(opinfo, dtype, FAMILY, max_samples=8)
