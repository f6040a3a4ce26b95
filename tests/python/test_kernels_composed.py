"""Ops of the long tail against torch's CPU kernels, with fallback="error".

Kernels: kernels/reduce_hash.cc (hash_tensor), kernels/composed.cc (native_dropout_backward, addbmm, allclose, _prelu_kernel,
_chunk_cat, _batch_norm_with_update, dist, renorm), kernels/sort.cc (mode),
kernels/shape_views.cc (the in-place metadata ops squeeze_ / unsqueeze_ / t_ / transpose_ /
swapdims_ / swapaxes_ and resize_ / resize_as_) and kernels/linalg_spectral.cc (matrix_exp in
torch's float32 precision). The OpInfo samples of each op run through the table in every real
dtype torch serves; targeted tests cover ties, edge values, aliasing and bad input.
"""

from __future__ import annotations

import itertools
import os
import sys

import numpy as np
import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
from conftest import check_opinfo_samples, opinfo_cases

import tensorbridge as tb
from tensorbridge.testing import TableMode

pytestmark = pytest.mark.usefixtures("no_fallback")

OURS = {
    "aten::native_dropout_backward",
    "aten::addbmm",
    "aten::allclose",
    "aten::_prelu_kernel",
    "aten::_chunk_cat",
    "aten::_batch_norm_with_update",
    "aten::dist",
    "aten::renorm",
    "aten::mode",
    "aten::squeeze_.dim",
    "aten::resize_",
    "aten::resize_as_",
    "aten::linalg_matrix_exp",
    "aten::hash_tensor",
}
NAMES = [
    "native_dropout_backward",
    "addbmm",
    "allclose",
    "nn.functional.prelu",
    "_chunk_cat",
    "_batch_norm_with_update",
    "dist",
    "renorm",
    "mode",
    "resize_",
    "resize_as_",
    "hash_tensor",
]
DTYPES = [torch.float32, torch.float64, torch.int64, torch.bool, torch.bfloat16, torch.float16]


@pytest.mark.parametrize(("opinfo", "dtype"), opinfo_cases(NAMES, DTYPES))
def test_opinfo_samples(opinfo, dtype):
    if dtype not in opinfo.supported_dtypes("cpu"):
        pytest.skip(f"torch's CPU {opinfo.name} does not serve {dtype}")
    check_opinfo_samples(opinfo, dtype, OURS, max_samples=6)


def _table(fn, *args, **kwargs):
    with TableMode(strict=True) as mode:
        out = fn(*args, **kwargs)
    assert mode.served, "nothing reached the table"
    return out


# ---- mode ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.int64, torch.float32, torch.float16, torch.bool])
def test_mode_ties_take_torch_value_and_index(dtype):
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 3, (7, 40), generator=g).to(dtype)  # many ties, long runs
    for dim in (0, 1, -1):
        for keepdim in (False, True):
            got = _table(torch.mode, x, dim, keepdim)
            want = torch.mode(x, dim, keepdim)
            assert torch.equal(got.values, want.values)
            assert torch.equal(got.indices, want.indices)


def test_mode_nan_scalar_and_errors():
    x = torch.tensor([[float("nan"), 1.0, float("nan"), 1.0, 2.0]])
    got, want = _table(torch.mode, x), torch.mode(x)
    torch.testing.assert_close(got.values, want.values, equal_nan=True)
    assert torch.equal(got.indices, want.indices)
    s = torch.tensor(4.0)
    assert _table(torch.mode, s).values.item() == 4.0
    with pytest.raises(IndexError, match=r"mode.*non-zero size"):
        _table(torch.mode, torch.empty(3, 0), 1)
    with pytest.raises(IndexError, match="aten::mode"):
        _table(torch.mode, torch.ones(3), 2)


# ---- in-place metadata ops and resize_ ----------------------------------------------------------


def test_inplace_metadata_ops_move_self_onto_the_view():
    def chain(t):
        t = t.clone()
        t.squeeze_(1)
        t.unsqueeze_(0)
        t.transpose_(0, 2)
        t.swapdims_(1, 2)
        t.t_() if t.ndim == 2 else t.squeeze_()
        return t

    x = torch.randn(3, 1, 4)
    got = _table(chain, x)
    assert got.shape == chain(x).shape and got.stride() == chain(x).stride()
    assert torch.equal(got, chain(x))


def test_squeeze_on_a_wrapped_tensor_keeps_the_memory():
    a = np.arange(6, dtype=np.float32).reshape(3, 1, 2)
    t = tb.wrap(a)
    t.squeeze_(1)
    assert t.shape == (3, 2) and t.data_ptr() == a.ctypes.data


def test_resize_within_the_storage_is_a_view():
    x = torch.arange(24.0).reshape(2, 3, 4)
    ptr = x.data_ptr()
    y = _table(lambda t: t.resize_(4, 6), x)
    assert y is x and x.shape == (4, 6) and x.data_ptr() == ptr
    assert torch.equal(x, torch.arange(24.0).reshape(4, 6))
    z = torch.arange(6.0)
    _table(lambda t: t.resize_(2, 2), z)
    assert torch.equal(z, torch.tensor([[0.0, 1.0], [2.0, 3.0]]))
    w = torch.zeros(2, 3)
    _table(lambda t, o: t.resize_as_(o), w, torch.empty(3, 2))
    assert w.shape == (3, 2)


def test_resize_cannot_grow_lent_memory():
    x = torch.zeros(2, 3)
    with pytest.raises(
        BufferError, match=r"aten::resize_: cannot resize .*\[2, 3\] to \[4, 4\].*cannot grow"
    ):
        _table(lambda t: t.resize_(4, 4), x)
    with pytest.raises(ValueError, match="negative dimension"):
        _table(lambda t: t.resize_(-1, 2), x)
    # A byte count past int64 raises torch's error (the fuzz test found the overflow).
    with pytest.raises(RuntimeError, match="Storage size calculation overflowed"):
        _table(lambda t: t.resize_(2**62), x)
    with pytest.raises(RuntimeError, match="Storage size calculation overflowed"):
        _table(lambda t: t.resize_(0, 2**40, 2**40), x)


# ---- composed ops -------------------------------------------------------------------------------


def test_dropout_backward_mask_and_errors():
    g = torch.randn(4, 5, dtype=torch.bfloat16)
    m = torch.rand(4, 5) > 0.5
    got = _table(torch.ops.aten.native_dropout_backward, g, m, 1 / 0.3)
    assert torch.equal(got, torch.ops.aten.native_dropout_backward(g, m, 1 / 0.3))
    with pytest.raises(TypeError, match="Mask should be Bool"):
        _table(torch.ops.aten.native_dropout_backward, g, m.float(), 2.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64])
def test_addbmm_accumulates_batches_like_torch(dtype):
    g = torch.Generator().manual_seed(1)

    def rnd(*shape):
        return (torch.randn(*shape, generator=g) * 3).to(dtype)

    s, b1, b2 = rnd(5), rnd(6, 3, 4), rnd(6, 4, 5)  # self broadcast from (5,)
    beta, alpha = (2, 3) if dtype == torch.int64 else (0.5, 1.5)
    got = _table(torch.addbmm, s, b1, b2, beta=beta, alpha=alpha)
    want = torch.addbmm(s, b1, b2, beta=beta, alpha=alpha)
    if dtype.is_floating_point and dtype != torch.bfloat16:
        torch.testing.assert_close(got, want)
    else:
        assert torch.equal(got, want)
    empty = _table(torch.addbmm, s, rnd(0, 3, 4), rnd(0, 4, 5), beta=beta)
    assert torch.equal(empty, torch.addbmm(s, rnd(0, 3, 4), rnd(0, 4, 5), beta=beta))


def test_addbmm_errors():
    s = torch.zeros(3, 5)
    with pytest.raises(ValueError, match="batch1 must be a 3D tensor"):
        _table(torch.addbmm, s, torch.zeros(3, 4), torch.zeros(2, 4, 5))
    with pytest.raises(ValueError, match="same number of batches"):
        _table(torch.addbmm, s, torch.zeros(2, 3, 4), torch.zeros(3, 4, 5))
    with pytest.raises(ValueError, match=r"Incompatible matrix sizes for bmm \(3x4 and 3x5\)"):
        _table(torch.addbmm, s, torch.zeros(2, 3, 4), torch.zeros(2, 3, 5))


def test_allclose_tolerances_nan_and_errors():
    a = torch.tensor([1.0, float("nan"), 3.0])
    for b, kw in [
        (a + 1e-6, {}),
        (a + 1e-3, {}),
        (a, {"equal_nan": True}),
        (a * (1 + 1e-4), {"rtol": 1e-3}),
        (a + 0.5, {"atol": 1.0, "equal_nan": True}),
    ]:
        assert _table(torch.allclose, a, b, **kw) == torch.allclose(a, b, **kw)
    t = torch.tensor([True, False])
    assert _table(torch.allclose, t, t) is True
    ints = torch.tensor([1, 2, 3])
    assert _table(torch.allclose, ints, ints + 1, atol=1) == torch.allclose(ints, ints + 1, atol=1)
    with pytest.raises(TypeError, match="float32 did not match float64"):
        _table(torch.allclose, a, a.double())
    with pytest.raises(ValueError, match="rtol must be greater than or equal to zero"):
        _table(torch.allclose, a, a, rtol=-1.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_prelu_per_channel_and_errors(dtype):
    x = torch.randn(2, 3, 4).to(dtype)
    x[0, 0, 0] = float("nan")
    w = torch.tensor([0.25, -1.5, 3.0]).to(dtype)
    got = _table(torch.nn.functional.prelu, x, w)
    assert torch.equal(got.isnan(), torch.nn.functional.prelu(x, w).isnan())
    torch.testing.assert_close(got, torch.nn.functional.prelu(x, w), equal_nan=True, atol=0, rtol=0)
    with pytest.raises(NotImplementedError, match="_prelu_kernel: not implemented for int64"):
        _table(torch.ops.aten._prelu_kernel, torch.ones(3, dtype=torch.int64), torch.ones(1).long())


def test_chunk_cat_pads_and_errors():
    ts = [torch.randn(3, 5), torch.randn(3, 7, 2), torch.randn(3, 1)]
    for dim, chunks in [(1, 4), (1, 1), (-1, 3), (0, 2)]:
        parts = ts if dim in (1, -1) and dim != -1 else [torch.randn(3, 5), torch.randn(4, 5)]
        if dim == -1:
            parts = [torch.randn(2, 5), torch.randn(2, 6)]
        got = _table(torch.ops.aten._chunk_cat, parts, dim, chunks)
        assert torch.equal(got, torch.ops.aten._chunk_cat(parts, dim, chunks))
    with pytest.raises(ValueError, match="positive num_chunks"):
        _table(torch.ops.aten._chunk_cat, ts, 1, 0)
    with pytest.raises(TypeError, match="same dtype"):
        _table(torch.ops.aten._chunk_cat, [torch.ones(2, 2), torch.ones(2, 2).double()], 1, 2)
    with pytest.raises(ValueError, match=r"same sizes of 0,\.\.\.,dim-1"):
        _table(torch.ops.aten._chunk_cat, [torch.ones(2, 2), torch.ones(3, 2)], 1, 2)


def test_batch_norm_with_update_updates_running_stats():
    x = torch.randn(4, 3, 5)
    w, b = torch.randn(3), torch.randn(3)
    rm, rv = torch.zeros(3), torch.ones(3)
    rm2, rv2 = rm.clone(), rv.clone()
    got = _table(torch.ops.aten._batch_norm_with_update, x, w, b, rm, rv, 0.1, 1e-5)
    want = torch.ops.aten._batch_norm_with_update(x, w, b, rm2, rv2, 0.1, 1e-5)
    for g, e in zip(got[:3], want[:3], strict=True):
        torch.testing.assert_close(g, e)
    assert got[3].dtype == torch.uint8 and got[3].numel() == 0
    torch.testing.assert_close(rm, rm2)
    torch.testing.assert_close(rv, rv2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_dist_and_renorm(dtype):
    x = (torch.randn(4, 5, 3) * 2).to(dtype)
    y = torch.randn(5, 3).to(dtype)
    for p in (1, 2, 3.5, float("inf"), 0):
        torch.testing.assert_close(_table(torch.dist, x, y, p), torch.dist(x, y, p))
    for p, dim, maxnorm in [(2, 1, 0.5), (1, -1, 3.0), (float("inf"), 0, 0.1), (3, 2, 100.0)]:
        got = _table(torch.renorm, x, p, dim, maxnorm)
        torch.testing.assert_close(got, torch.renorm(x, p, dim, maxnorm))


def test_renorm_errors():
    x = torch.randn(3, 4)
    with pytest.raises(ValueError, match="non-positive-norm not supported"):
        _table(torch.renorm, x, 0, 0, 1.0)
    with pytest.raises(ValueError, match="maxnorm to be >= 0"):
        _table(torch.renorm, x, 2, 0, -1.0)
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        _table(torch.renorm, torch.randn(3), 2, 0, 1.0)


# ---- matrix_exp ---------------------------------------------------------------------------------


@pytest.mark.parametrize("scale", [1e-9, 1e-3, 0.05, 0.3, 1.0, 3.0, 9.0])
def test_matrix_exp_float32_small_matrices_bitwise(scale):
    """5 x 5 float32 matrices (torch's OpInfo size): every Taylor degree and the squaring give
    torch's float32 result to the bit."""
    g = torch.Generator().manual_seed(2)
    for a in (torch.randn(5, 5, generator=g) * scale, torch.randn(1, 5, 5, generator=g) * scale):
        assert torch.equal(_table(torch.linalg.matrix_exp, a), torch.linalg.matrix_exp(a))


def test_matrix_exp_larger_and_16bit():
    a = torch.randn(3, 12, 12) * 0.7
    torch.testing.assert_close(_table(torch.linalg.matrix_exp, a), torch.linalg.matrix_exp(a))
    with pytest.raises(TypeError, match=r"matrix_exp.*Got float16"):
        _table(torch.linalg.matrix_exp, a.half())


# ---- 16-bit rounding as torch's ------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("n", [5, 33, 1000])
def test_log_softmax_16bit_last_dim_bitwise(dtype, n):
    """The sum of exponentials and its log round to the dtype before the subtraction, as in
    torch's CPU kernel (a row dominated by one element gives exactly 0 there)."""
    g = torch.Generator().manual_seed(n)
    x = (torch.randn(6, n, generator=g) * 4).to(dtype)
    x[0, 0] = 40.0
    assert torch.equal(_table(torch.log_softmax, x, 1), torch.log_softmax(x, 1))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_batch_norm_16bit_statistics_bitwise(dtype):
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(3, 4, 5, 6, generator=g) * 4 + 1).to(dtype)
    w, b = torch.randn(4, generator=g).to(dtype), torch.randn(4, generator=g).to(dtype)
    for eps in (1e-5, 0.5):
        rm, rv = torch.zeros(4, dtype=dtype), torch.ones(4, dtype=dtype)
        got = _table(torch.native_batch_norm, x, w, b, rm, rv, True, 0.1, eps)
        want = torch.native_batch_norm(
            x, w, b, rm.clone().zero_(), rv.clone().fill_(1), True, 0.1, eps
        )
        for a, e in zip(got, want, strict=True):
            assert torch.equal(a, e)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(
    ("fn_shape", "size"), [((2, 3, 7), (11,)), ((2, 3, 4, 3, 5), (5, 4, 6)), ((1, 2, 4, 5), (7, 3))]
)
@pytest.mark.parametrize("align_corners", [True, False])
def test_linear_upsampling_16bit_weights_bitwise(dtype, fn_shape, size, align_corners):
    """16-bit linear and trilinear upsampling round their weights to the dtype as torch's
    generic CPU kernel stores them (bilinear keeps them in float, as torch's 2-d kernel)."""
    mode = {1: "linear", 2: "bilinear", 3: "trilinear"}[len(size)]
    x = (torch.randn(fn_shape, generator=torch.Generator().manual_seed(4)) * 3).to(dtype)
    f = torch.nn.functional.interpolate
    got = _table(f, x, size=size, mode=mode, align_corners=align_corners)
    assert torch.equal(got, f(x, size=size, mode=mode, align_corners=align_corners))


# ---- hash_tensor --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "x",
    [
        torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(5)),
        torch.arange(-12, 12).reshape(4, 6),
        torch.tensor([[True, False, True], [False, False, True]]),
        torch.tensor([[1.5, -0.0, float("nan")], [2.25, float("inf"), -3.0]]).bfloat16(),
        torch.tensor([[1.5, -0.0], [2.25, -3.0]]).half(),
    ],
    ids=["float32", "int64", "bool", "bfloat16", "float16"],
)
def test_hash_tensor_bits_and_dims(x):
    for kw in ({}, {"dim": 0}, {"dim": [0, -1], "keepdim": True}, {"dim": -1}):
        got, want = _table(torch.hash_tensor, x, **kw), torch.hash_tensor(x, **kw)
        assert got.dtype == torch.uint64 and got.shape == want.shape
        assert torch.equal(got.view(torch.int64), want.view(torch.int64))


def test_hash_tensor_errors():
    with pytest.raises(ValueError, match="reduction dim to be specified"):
        _table(torch.hash_tensor, torch.empty(0, 3))
    with pytest.raises(IndexError, match="reduction dim 0 to have non-zero size"):
        _table(torch.hash_tensor, torch.empty(0, 3), 0)
    assert _table(torch.hash_tensor, torch.empty(0, 3), 1).shape == (0,)


# ---- tril_indices / triu_indices ----------------------------------------------------------------


@pytest.mark.parametrize("fn", [torch.tril_indices, torch.triu_indices], ids=lambda f: f.__name__)
def test_triangle_indices(fn):
    for args in [(0, 0), (4, 3), (3, 5, 1), (3, 5, -2), (20, 21, 0), (5, 4, -10), (4, 4, 9)]:
        for dtype in (torch.int64, torch.int32):
            got, want = _table(fn, *args, dtype=dtype), fn(*args, dtype=dtype)
            assert got.dtype == want.dtype and torch.equal(got, want)
    with pytest.raises(ValueError, match="row must be non-negative, got -1"):
        _table(fn, -1, 2)
    with pytest.raises(NotImplementedError, match="not implemented for float32"):
        _table(fn, 3, 3, dtype=torch.float32)
    for r, c, off in itertools.product(range(7), range(7), range(-8, 9)):
        assert torch.equal(_table(fn, r, c, off), fn(r, c, off)), (r, c, off)
    # The count comes in closed form: huge sizes with few indices take no time (the fuzz test
    # ran a loop over row x col for hours), and too many indices is an error.
    assert _table(fn, 2**40, 0).shape == (2, 0)
    assert _table(torch.tril_indices, 8, 2**62, 8).shape == (2, 100)
    with pytest.raises(RuntimeError, match="more indices than a tensor can hold"):
        _table(fn, 2**40, 2**40)
