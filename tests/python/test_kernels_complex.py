"""Complex64 / complex128 kernels (kernels/complex_*.cc and the complex branches of the
element-wise, reduction and matmul kernels): compared with torch's CPU kernels at torch's
tolerances, views checked by data pointer, ops without a complex form raising
NotImplementedError naming the op and dtype. Complex Python numbers (and 0-d complex tensors)
as Scalar arguments, with torch's promotion of real tensors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import tensorbridge as tb

# Kernel tests: an op the table lost raises rather than running torch's own kernel.
pytestmark = pytest.mark.usefixtures("no_fallback")

CDTYPES = [torch.complex64, torch.complex128]
_ids = {"ids": lambda d: str(d).replace("torch.", "")}


def _rand(*shape, dtype=torch.complex64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, dtype=dtype, generator=g)


def _check(fn, *inputs, **kw):
    """fn on wrapped inputs equals fn on the torch tensors (values, dtype and shape; NaN where
    torch has NaN)."""
    kw.setdefault("equal_nan", True)
    expected = fn(*inputs)
    got = fn(*(tb.wrap(t) for t in inputs))
    if isinstance(expected, tuple):
        for g, e in zip(got, expected, strict=True):
            torch.testing.assert_close(g, e, check_stride=False, **kw)
    else:
        assert isinstance(got, tb.Tensor)
        torch.testing.assert_close(got, expected, check_stride=False, **kw)


# ---- plumbing ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", CDTYPES, **_ids)
def test_wrap_is_zero_copy(dtype):
    t = _rand(3, 4, dtype=dtype)
    w = tb.wrap(t)
    assert w.dtype == dtype and w.data_ptr() == t.data_ptr()
    n = np.arange(6, dtype=np.complex64 if dtype == torch.complex64 else np.complex128) * (1 + 2j)
    wn = tb.wrap(n)
    assert wn.dtype == dtype and wn.data_ptr() == n.ctypes.data
    back = tb.to_numpy(wn)
    assert back.ctypes.data == n.ctypes.data
    np.testing.assert_array_equal(back, n)


@pytest.mark.parametrize("dtype", CDTYPES, **_ids)
def test_view_as_real_and_complex_share_memory(dtype):
    t = _rand(4, 6, dtype=dtype)
    w = tb.wrap(t)
    r = torch.view_as_real(w)
    assert isinstance(r, tb.Tensor) and r.data_ptr() == t.data_ptr()
    torch.testing.assert_close(r, torch.view_as_real(t))
    c = torch.view_as_complex(r)
    assert c.data_ptr() == t.data_ptr() and c.dtype == dtype
    torch.testing.assert_close(c, t)
    # Views of views: a strided slice keeps its place.
    s = torch.view_as_real(w[:, 1::2])
    assert s.data_ptr() == t[:, 1::2].data_ptr()
    torch.testing.assert_close(s, torch.view_as_real(t[:, 1::2]))
    # real / imag are views too.
    assert w.real.data_ptr() == t.data_ptr()
    torch.testing.assert_close(w.imag, t.imag)


def test_view_as_complex_errors():
    w = tb.wrap(torch.randn(3, 4))
    with pytest.raises(RuntimeError, match="last dimension of size 2"):
        torch.view_as_complex(w)
    with pytest.raises(RuntimeError, match="stride 1"):
        torch.view_as_complex(tb.wrap(torch.randn(2, 3)).T)
    with pytest.raises(RuntimeError, match="only supported for complex"):
        torch.view_as_real(tb.wrap(torch.randn(3)))


@pytest.mark.parametrize("dtype", CDTYPES, **_ids)
def test_conj_and_casts(dtype):
    t = _rand(5, dtype=dtype)
    _check(lambda x: x.conj(), t)
    _check(lambda x: torch.conj_physical(x), t)
    _check(lambda x: x.conj().resolve_conj(), t)
    _check(lambda x: x.to(torch.complex128 if dtype == torch.complex64 else torch.complex64), t)
    _check(lambda x: x.real.to(dtype), t)
    _check(lambda x: torch.complex(x.real, x.imag), t)
    _check(lambda x: torch.polar(x.abs(), x.angle()), t)
    _check(lambda x: x.angle(), torch.tensor([-1.5, 0.0, 2.0, float("nan")]))


# ---- element-wise -------------------------------------------------------------------------------

UNARY = """
    neg reciprocal exp exp2 expm1 log log2 log10 log1p sqrt rsqrt sin cos tan asin acos atan sinh
    cosh tanh asinh acosh atanh sigmoid sgn sinc abs angle isnan isinf isfinite logical_not
""".split()


@pytest.mark.parametrize("dtype", CDTYPES, **_ids)
@pytest.mark.parametrize("name", UNARY)
def test_unary(name, dtype):
    t = _rand(4, 5, dtype=dtype)
    t[0, 0] = 0
    t[1, 1] = 1e-4 + 2e-4j
    fn = getattr(torch, name)
    _check(fn, t)
    _check(fn, t.T[1:])  # strided


@pytest.mark.parametrize("dtype", CDTYPES, **_ids)
def test_unary_inplace(dtype):
    t = _rand(3, 4, dtype=dtype)
    w = tb.wrap(t.clone())
    ptr = w.data_ptr()
    w.exp_()
    assert w.data_ptr() == ptr
    torch.testing.assert_close(w, t.exp())
    with pytest.raises(RuntimeError, match="in-place aten::abs"):
        tb.wrap(t.clone()).abs_()


@pytest.mark.parametrize("dtype", CDTYPES, **_ids)
def test_binary_broadcast_and_promotion(dtype):
    a, b = _rand(3, 4, dtype=dtype), _rand(4, dtype=dtype, seed=1)
    r = torch.randn(3, 1, dtype=torch.float64 if dtype == torch.complex128 else torch.float32)
    for fn in (
        lambda x, y: x + y,
        lambda x, y: x - 2 * y,
        lambda x, y: torch.add(x, y, alpha=0.5),
        lambda x, y: x * y,
        lambda x, y: x / y,
        lambda x, y: x**y,
        lambda x, y: torch.eq(x, y),
        lambda x, y: torch.ne(x, y),
        lambda x, y: torch.where(x.real > 0, x, y),
    ):
        _check(fn, a, b)
    _check(lambda x, y: x * y + y, a, r)  # real operand promoted
    _check(lambda x: x * 2.5 - 1, a)
    _check(lambda x: torch.rsub(x, 3), a)
    for e in (2, 3, 0.5, -0.5, -1, -2, 1.7, 0):
        _check(lambda x, e=e: x**e, a)
    # complex64 with a float64 tensor gives complex128, as torch.
    _check(lambda x, y: x + y, _rand(3), torch.randn(3, dtype=torch.float64))
    _check(lambda x: torch.nonzero(x), torch.tensor([0, 1j, 0, 2 + 0j], dtype=dtype))


@pytest.mark.parametrize("dtype", CDTYPES, **_ids)
def test_binary_inplace_and_out(dtype):
    a, b = _rand(3, 4, dtype=dtype), _rand(3, 4, dtype=dtype, seed=1)
    w = tb.wrap(a.clone())
    ptr = w.data_ptr()
    w.mul_(tb.wrap(b))
    w.add_(tb.wrap(b), alpha=2)
    assert w.data_ptr() == ptr
    torch.testing.assert_close(w, a * b + 2 * b)
    out = tb.wrap(torch.empty(3, 4, dtype=dtype))
    torch.div(tb.wrap(a), tb.wrap(b), out=out)
    torch.testing.assert_close(out, a / b)
    with pytest.raises(TypeError, match="can't be cast"):
        tb.wrap(torch.zeros(3, 4)).add_(tb.wrap(b))


# ---- reductions ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", CDTYPES, **_ids)
def test_reductions(dtype):
    t = _rand(3, 4, 5, dtype=dtype)
    for x in (t, t[:, 1:3, ::2], t.transpose(0, 2)):
        _check(lambda x: x.sum(), x)
        _check(lambda x: x.sum((0, -1), keepdim=True), x)
        _check(lambda x: x.mean(1), x)
        _check(lambda x: x.prod(), x)
        _check(lambda x: x.prod(-1), x)
        _check(lambda x: x.cumsum(1), x)
        _check(lambda x: x.cumprod(0), x)
        _check(lambda x: x.var(), x)
        _check(lambda x: x.std(1, correction=0), x)
        _check(lambda x: torch.var_mean(x, -1, keepdim=True), x)
        _check(lambda x: torch.std_mean(x, (0, 1)), x)
        for ord in (2, 1, 3.5, float("inf"), float("-inf"), 0):
            _check(lambda x, o=ord: torch.linalg.vector_norm(x, o, dim=-1), x)
    assert tb.wrap(t).var().dtype == t.real.dtype
    _check(lambda x: x.sum(), _rand(dtype=dtype))  # 0-d
    _check(lambda x: x.sum(0), _rand(0, 3, dtype=dtype))  # empty


# ---- matmul -------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", CDTYPES, **_ids)
@pytest.mark.parametrize("bounds", [(0, 1 + 1j), (1 - 2j, 3 + 4j), (0.5, -2.0), (2j, 2j)])
@pytest.mark.parametrize("steps", [0, 1, 2, 7, 100])
def test_linspace(bounds, steps, dtype):
    want = torch.linspace(*bounds, steps, dtype=dtype)
    got = tb.to_torch(tb.call("aten::linspace", *bounds, steps, dtype=dtype))
    torch.testing.assert_close(got, want)
    # 0-d tensor bounds (torch.linspace's Tensor overloads)
    s, e = (tb.wrap(torch.tensor(b, dtype=dtype)) for b in bounds)
    got = torch.linspace(s, e, steps, dtype=dtype)
    assert isinstance(got, tb.Tensor)
    torch.testing.assert_close(got, want, check_stride=False)


@pytest.mark.parametrize("dtype", CDTYPES, **_ids)
@pytest.mark.parametrize("steps", [0, 1, 2, 7, 100])
@pytest.mark.parametrize("base", [10.0, 2.0, 0.5])
def test_logspace(base, steps, dtype):
    for bounds in [(0, 1 + 1j), (1 - 2j, 3 + 4j), (0.5, -2.0)]:
        want = torch.logspace(*bounds, steps, base, dtype=dtype)
        got = tb.to_torch(tb.call("aten::logspace", *bounds, steps, base, dtype=dtype))
        torch.testing.assert_close(got, want)


def test_linspace_complex_bounds_dtype():
    # complex bounds and no dtype: torch's default complex dtype; a real dtype is refused
    got = tb.to_torch(tb.call("aten::linspace", 0, 1 + 1j, 5))
    torch.testing.assert_close(got, torch.linspace(0, 1 + 1j, 5))
    with pytest.raises(TypeError, match=r"aten::linspace: complex bounds need a complex dtype"):
        tb.call("aten::linspace", 0, 1 + 1j, 5, dtype=torch.float32)


@pytest.mark.parametrize("dtype", CDTYPES, **_ids)
def test_matmul(dtype):
    a, b, c = _rand(5, 7, dtype=dtype), _rand(7, 3, dtype=dtype, seed=1), _rand(5, 3, dtype=dtype)
    ba, bb = _rand(2, 5, 7, dtype=dtype), _rand(2, 7, 3, dtype=dtype, seed=1)
    v, u = _rand(7, dtype=dtype, seed=2), _rand(7, dtype=dtype, seed=3)
    _check(lambda x, y: x @ y, a, b)
    _check(lambda x, y: y.T @ x.T, a, b)  # column-major operands
    _check(lambda x, y: x[::2, 1::2] @ y[1:9:2, ::2], _rand(9, 8, dtype=dtype), b.repeat(2, 2))
    _check(lambda s, x, y: torch.addmm(s, x, y, beta=0.5, alpha=2), c, a, b)
    _check(lambda s, x, y: torch.addmm(s[0], x, y), c, a, b)
    _check(torch.bmm, ba, bb)
    _check(lambda x, y: x @ y, ba, b)
    _check(lambda x, y: torch.baddbmm(x[..., :3], x, y, alpha=0.3), ba, bb)
    _check(lambda x, y: x @ y, a, v)
    _check(torch.dot, v, u)
    _check(torch.vdot, v, u)
    _check(lambda x, w, s: torch.nn.functional.linear(x, w, s), a, b.T, c[0])
    _check(lambda x, y: x[:, :0] @ y[:0], a, b)
    big_a, big_b = _rand(64, 80, dtype=dtype), _rand(80, 48, dtype=dtype, seed=1)
    _check(lambda x, y: x @ y, big_a, big_b)


# ---- still not served ---------------------------------------------------------------------------


def test_unserved_ops_name_op_and_dtype():
    w = tb.wrap(_rand(3))
    with pytest.raises(NotImplementedError, match=r"aten::erf.*complex64"):
        torch.erf(w)
    with pytest.raises(NotImplementedError, match=r"aten::floor.*complex64"):
        torch.floor(w)
    with pytest.raises(NotImplementedError, match=r"aten::lt.*complex64"):
        torch.lt(w, w)
    with pytest.raises(NotImplementedError, match=r"aten::cummax.*complex64"):
        torch.cummax(w, 0)


@pytest.mark.parametrize("dtype", CDTYPES, **_ids)
def test_any_all_count_nonzero(dtype):
    t = torch.tensor([[0, 1j, 0], [2, 0, 0], [0, 0, 0]], dtype=dtype)
    _check(lambda x: x.any(), t)
    _check(lambda x: x.all(1), t)
    _check(lambda x: torch.count_nonzero(x, 0), t)
    _check(lambda x: torch.count_nonzero(x), t)


# ---- complex Python scalars ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", CDTYPES, **_ids)
def test_complex_python_scalars(dtype):
    a, b = _rand(3, 4, dtype=dtype), _rand(3, 4, dtype=dtype, seed=1)
    for fn in (
        lambda x: x + (1 - 2j),
        lambda x: x - (0.5 + 1j),
        lambda x: (2 + 3j) - x,
        lambda x: x * (1j),
        lambda x: x / (3 - 4j),
        lambda x: x ** (0.5 + 0.5j),
        lambda x: x ** (2 + 0j),
        lambda x: (1.5 - 1j) ** x,
        lambda x: torch.where(x.real > 0, x, 2j),
        lambda x: torch.where(x.real > 0, 1 + 1j, x),
        lambda x: x.masked_fill(x.real > 0, 3 - 1j),
        lambda x: torch.full_like(x, 2 - 5j),
        lambda x: x.clone().fill_(-1 + 0.25j),
        lambda x: x.index_fill(1, torch.tensor([0, 2]), 1 + 2j),
    ):
        _check(fn, a)
    _check(lambda x, y: torch.add(x, y, alpha=2 - 1j), a, b)
    _check(lambda x, y: torch.sub(x, y, alpha=1j), a, b)
    _check(lambda x, y: torch.addcmul(x, x, y, value=0.5 - 2j), a, b)


def test_complex_scalar_promotes_a_real_tensor():
    for real, cdt in ((torch.float32, torch.complex64), (torch.float64, torch.complex128)):
        r = torch.randn(5, dtype=real)
        for fn in (lambda x: x + 2j, lambda x: x * (1 - 1j), lambda x: torch.where(x > 0, x, 1j)):
            _check(fn, r)
            assert fn(tb.wrap(r)).dtype == cdt
    i = torch.arange(4)
    _check(lambda x: x * (0.5 + 1j), i)  # int64 with a complex number: complex64, as torch
    assert (tb.wrap(i) * 1j).dtype == torch.complex64
    # Through the table directly: the scalar of a .Scalar overload, and the wrapped number.
    x = tb.from_dlpack(torch.ones(3))
    got = tb.call("aten::add.Scalar", x, 1 + 2j)
    torch.testing.assert_close(torch.from_dlpack(got), torch.ones(3) + (1 + 2j))
    got = tb.call("aten::mul.Tensor", x, 2j)
    torch.testing.assert_close(torch.from_dlpack(got), torch.ones(3) * 2j)


def test_complex_scalar_errors_on_real_results_as_torch():
    w = tb.wrap(torch.zeros(3))
    with pytest.raises(RuntimeError, match="cannot be converted to type"):
        w.fill_(1 + 2j)
    w.fill_(3 + 0j)  # no imaginary part: converts, as torch
    torch.testing.assert_close(w, torch.full((3,), 3.0))
    with pytest.raises(RuntimeError, match=r"aten::add.*alpha must not be a complex number"):
        torch.add(w, w, alpha=1j)
    with pytest.raises(RuntimeError, match=r"aten::addcmul.*value must not be a complex number"):
        torch.addcmul(w, w, w, value=1j)


@pytest.mark.parametrize("dtype", CDTYPES, **_ids)
def test_item_and_zero_dim_tensor_as_scalar(dtype):
    t = torch.tensor(1.5 - 2.25j, dtype=dtype)
    got = tb.wrap(t).item()
    assert isinstance(got, complex) and got == t.item()
    assert tb.call("aten::_local_scalar_dense", tb.from_dlpack(t)) == t.item()
    # A 0-d tensor where a Scalar is taken stands for its value, as in torch.
    x = _rand(4, dtype=dtype)
    got = tb.call("aten::add.Scalar", tb.from_dlpack(x), tb.from_dlpack(t))
    torch.testing.assert_close(torch.from_dlpack(got), x + t.item())
    got = tb.call("aten::full", [2, 2], tb.from_dlpack(t), dtype=dtype)
    torch.testing.assert_close(torch.from_dlpack(got), torch.full((2, 2), t.item(), dtype=dtype))


# ---- ops served for complex by bits or complex loops ----------------------------------------


@pytest.mark.parametrize("dtype", CDTYPES, **_ids)
def test_addcmul_addcdiv_lerp(dtype):
    a, b, c = (_rand(3, 4, dtype=dtype, seed=s) for s in range(3))
    _check(lambda x, y, z: torch.addcmul(x, y, z), a, b, c)
    _check(lambda x, y, z: torch.addcdiv(x, y, z, value=2), a, b, c)
    _check(lambda x, y, z: torch.addcdiv(x, y, z, value=1 + 1j), a, b, c)
    _check(lambda x, y: torch.lerp(x, y, 0.3), a, b)
    _check(lambda x, y: torch.lerp(x, y, 0.75 - 0.25j), a, b)
    _check(lambda x, y, z: torch.lerp(x, y, z), a, b, c)
    w = tb.wrap(a.clone())
    ptr = w.data_ptr()
    w.addcmul_(tb.wrap(b), tb.wrap(c), value=-1j)
    assert w.data_ptr() == ptr
    torch.testing.assert_close(w, a + (-1j) * b * c)


@pytest.mark.parametrize("dtype", CDTYPES, **_ids)
def test_index_and_scatter(dtype):
    a, src = _rand(5, 3, dtype=dtype), _rand(4, 3, dtype=dtype, seed=1)
    idx = torch.tensor([4, 0, 4, 2])  # a repeated index accumulates in order
    _check(lambda x, s: x.index_add(0, idx, s), a, src)
    _check(lambda x, s: x.index_add(0, idx, s, alpha=2 - 1j), a, src)
    _check(lambda x, s: x.index_copy(0, torch.tensor([4, 0, 1, 2]), s), a, src)
    sidx = torch.tensor([[0, 1, 2], [4, 4, 0], [1, 1, 1], [0, 3, 2]])
    _check(lambda x, s: x.scatter_add(0, sidx, s), a, src)
    _check(lambda x, s: x.scatter(0, sidx, s), a[:, :1].expand(5, 3).contiguous(), src)
    _check(lambda x, s: torch.scatter_reduce(x, 0, sidx, s, "sum"), a, src)
    _check(lambda x: torch.gather(x, 0, sidx), a)
    rows = torch.tensor([1, 3, 1])
    _check(lambda x, s: x.index_put((rows,), s[:3], accumulate=True), a, src)
    _check(lambda x, s: x.index_put((rows,), s[:3]), a, src)
    w = tb.wrap(a.clone())
    ptr = w.data_ptr()
    w.index_add_(0, idx, tb.wrap(src))
    assert w.data_ptr() == ptr
    torch.testing.assert_close(w, a.index_add(0, idx, src))


@pytest.mark.parametrize("dtype", CDTYPES, **_ids)
def test_log_add_exp_family(dtype):
    a, b = _rand(3, 5, dtype=dtype), _rand(3, 5, dtype=dtype, seed=1) * 4
    _check(lambda x, y: torch.logaddexp(x, y), a, b)
    _check(lambda x: torch.logcumsumexp(x, 1), a * 3)
    _check(lambda x: torch.logcumsumexp(x, 0), a)
    _check(lambda x: torch.logsumexp(x, 1), a * 3)
    _check(lambda x: torch.logsumexp(x, (0, 1), keepdim=True), a)
    inf = torch.tensor([complex(-math.inf, 0), complex(math.inf, 1), complex(math.nan, 0)])
    _check(lambda x: torch.logcumsumexp(x, 0), inf.to(dtype))


@pytest.mark.parametrize("dtype", CDTYPES, **_ids)
def test_scalar_weighted_products(dtype):
    a, b, c = (
        _rand(2, 3, 4, dtype=dtype),
        _rand(2, 4, 5, dtype=dtype, seed=1),
        _rand(2, 3, 5, dtype=dtype, seed=2),
    )
    _check(lambda s, x, y: torch.baddbmm(s, x, y, beta=0.5 - 1j, alpha=2 + 3j), c, a, b)
    _check(lambda s, x, y: torch.baddbmm(s, x, y, beta=0, alpha=1j), c, a, b)
    _check(lambda x, y: torch.bmm(x, y), a, b)
    m, n, v = (
        _rand(3, 4, dtype=dtype),
        _rand(4, 6, dtype=dtype, seed=1),
        _rand(3, 6, dtype=dtype, seed=2),
    )
    _check(lambda s, x, y: torch.addmm(s, x, y, beta=1 + 2j, alpha=2 + 3j), v, m, n)
    _check(lambda s, x, y: torch.addmv(s, x, y, beta=1j, alpha=0.5), v[:, 0], m, n[:, 0])
    _check(
        lambda s, x, y: torch.addr(s, x, y, beta=1 + 2j, alpha=2 - 3j), v[:, :4], m[:, 0], n[0, :4]
    )
    _check(lambda s, x, y: torch.addr(s, x, y, beta=0), v[:, :4], m[:, 0], n[0, :4])


@pytest.mark.parametrize("dtype", CDTYPES, **_ids)
def test_cross(dtype):
    a, b = _rand(4, 3, dtype=dtype), _rand(1, 3, dtype=dtype, seed=1)
    _check(lambda x, y: torch.linalg.cross(x, y), a, b)
    _check(lambda x, y: torch.linalg.cross(x, y, dim=0), a[:3].T.contiguous(), a[1:].T.contiguous())


@pytest.mark.parametrize("dtype", CDTYPES, **_ids)
def test_renorm_ldexp_silu_eye(dtype):
    a = _rand(3, 4, dtype=dtype) * 3
    _check(lambda x: torch.renorm(x, 2, 0, 1.5), a)
    _check(lambda x: torch.renorm(x, 1, 1, 0.5), a)
    _check(lambda x: torch.ldexp(x, torch.tensor([1, -2, 3, 0])), a)
    _check(lambda x, e: torch.ldexp(x, e), a, _rand(3, 4, dtype=dtype, seed=1))
    _check(lambda x: torch.nn.functional.silu(x), a)
    torch.testing.assert_close(
        torch.from_dlpack(tb.call("aten::eye.m", 3, 4, dtype=dtype)), torch.eye(3, 4, dtype=dtype)
    )
