"""Batch norm's float32 / float64 loops (kernels/cpu/norm_batch_fast.cc) and threshold_backward's
row loop, against torch's CPU kernels: planes below and above the plane-by-plane size (16),
2-d inputs, sizes with a tail after the 16-lane blocks, sizes where the loops split across
threads, a mean far from the first element (the second statistics pass), evaluation-mode
backward, and non-contiguous operands (the general path)."""

from __future__ import annotations

import pytest
import torch

import tensorbridge as tb

# Kernel tests: an op the table lost raises rather than running torch's own kernel.
pytestmark = pytest.mark.usefixtures("no_fallback")

FLOATS = [torch.float32, torch.float64]
# 2-d, per-position sums (planes < 16), plane by plane with and without a 16-lane tail, and
# sizes above the parallel threshold (32768 elements) both ways.
SHAPES = [
    (2, 3),
    (32, 128),
    (8, 512),
    (5, 7, 3),
    (4, 3, 15),
    (4, 3, 16),
    (3, 5, 17),
    (1, 16, 32, 32),
    (2, 16, 9, 11),
    (300, 130),
    (4, 40, 17, 17),
    (2, 1, 200, 100),
]
TOL = {torch.float32: dict(rtol=1e-4, atol=1e-5), torch.float64: dict(rtol=1e-10, atol=1e-12)}


def arr(t):
    return tb.from_dlpack(t)


def tbcall(name, *args):
    args = [arr(a) if isinstance(a, torch.Tensor) else a for a in args]
    out = tb.call(name, *args)
    if isinstance(out, (tuple, list)):
        return [None if o is None else torch.from_dlpack(o) for o in out]
    return torch.from_dlpack(out)


def close(got, want, dtype):
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, **TOL[dtype], check_stride=False)


def inputs(shape, dtype, offset=0.0):
    g = torch.Generator().manual_seed(hash(shape) % 1000)
    c = shape[1]
    x = torch.randn(shape, generator=g, dtype=dtype) * 2 + offset
    w = torch.rand(c, generator=g, dtype=dtype) + 0.5
    b = torch.randn(c, generator=g, dtype=dtype)
    rm = torch.randn(c, generator=g, dtype=dtype)
    rv = torch.rand(c, generator=g, dtype=dtype) + 0.5
    dy = torch.randn(shape, generator=g, dtype=dtype)
    return x, w, b, rm, rv, dy


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_batch_norm_train_forward(shape, dtype):
    x, w, b, rm, rv, _ = inputs(shape, dtype)
    want = torch.ops.aten._native_batch_norm_legit_functional(x, w, b, rm, rv, True, 0.1, 1e-5)
    got = tbcall("aten::_native_batch_norm_legit_functional", x, w, b, rm, rv, True, 0.1, 1e-5)
    close(got, want, dtype)
    # in place: native_batch_norm updates the running statistics
    rm2, rv2, rm3, rv3 = rm.clone(), rv.clone(), rm.clone(), rv.clone()
    want = torch.ops.aten.native_batch_norm(x, None, b, rm2, rv2, True, 0.2, 1e-3)
    got = tbcall("aten::native_batch_norm", x, None, b, rm3, rv3, True, 0.2, 1e-3)
    close(got, want, dtype)
    close([rm3, rv3], [rm2, rv2], dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(4, 3, 40), (64, 3), (2, 2, 8, 8)], ids=str)
def test_batch_norm_train_forward_offset_mean(shape, dtype):
    """A large common offset, and a first element far from the mean (second pass)."""
    x, w, b, rm, rv, _ = inputs(shape, dtype, offset=1000.0)
    x.view(shape[0], shape[1], -1)[0, :, 0] = -5000.0
    want = torch.ops.aten._native_batch_norm_legit_functional(x, w, b, rm, rv, True, 0.1, 1e-5)
    got = tbcall("aten::_native_batch_norm_legit_functional", x, w, b, rm, rv, True, 0.1, 1e-5)
    # float32 outputs: torch's statistics are accurate to float rounding of mean^2-scale data
    tol = TOL[dtype] if dtype == torch.float64 else dict(rtol=1e-4, atol=1e-3)
    for g, e in zip(got, want, strict=True):
        torch.testing.assert_close(g, e, **tol)
    # the statistics against a float64 reference
    xd = x.double().transpose(0, 1).reshape(shape[1], -1)
    torch.testing.assert_close(got[1].double(), xd.mean(1), rtol=1e-6, atol=0)
    want_invstd = 1 / torch.sqrt(xd.var(1, unbiased=False) + 1e-5)
    torch.testing.assert_close(got[2].double(), want_invstd, rtol=1e-5, atol=0)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("train", [True, False])
def test_batch_norm_backward(shape, dtype, train):
    x, w, b, rm, rv, dy = inputs(shape, dtype)
    _, sm, si = torch.ops.aten.native_batch_norm(x, w, b, rm.clone(), rv.clone(), True, 0.1, 1e-5)
    sm, si = (sm, si) if train else (None, None)
    for weight, mask in [
        (w, [True, True, True]),
        (None, [True, False, False]),
        (w, [False, True, True]),
    ]:
        args = (dy, x, weight, rm, rv, sm, si, train, 1e-5, mask)
        want = torch.ops.aten.native_batch_norm_backward(*args)
        got = tbcall("aten::native_batch_norm_backward", *args)
        for g, e, m in zip(got, want, mask, strict=True):
            assert (g is not None) == m
            if m:
                torch.testing.assert_close(g, e, **TOL[dtype])


@pytest.mark.parametrize("dtype", FLOATS)
def test_batch_norm_non_contiguous(dtype):
    """Transposed / sliced operands take the general path and give torch's results."""
    base, w, b, rm, rv, dyb = inputs((6, 5, 20), dtype)
    x = base.permute(2, 1, 0)[::2]  # [10, 5, 6], not contiguous
    dy = dyb.permute(2, 1, 0)[::2]
    assert not x.is_contiguous()
    want = torch.ops.aten._native_batch_norm_legit_functional(x, w, b, rm, rv, True, 0.1, 1e-5)
    got = tbcall("aten::_native_batch_norm_legit_functional", x, w, b, rm, rv, True, 0.1, 1e-5)
    close(got, want, dtype)
    _, sm, si = want[:3]
    # (torch's backward asserts on non-contiguous operands: its reference gets copies)
    xc, dyc = x.contiguous(), dy.contiguous()
    mask = [True, True, True]
    want = torch.ops.aten.native_batch_norm_backward(dyc, xc, w, rm, rv, sm, si, True, 1e-5, mask)
    for a, b in [(dy, x), (dy, xc), (dyc, x)]:
        got = tbcall("aten::native_batch_norm_backward", a, b, w, rm, rv, sm, si, True, 1e-5, mask)
        close(got, want, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", [1, 15, 16, 17, 1000, 70001])
@pytest.mark.parametrize("threshold", [0.0, 0.1, -1.5, 1e-46])
def test_threshold_backward(n, dtype, threshold):
    g = torch.Generator().manual_seed(n)
    x = torch.randn(n, generator=g, dtype=dtype)
    gy = torch.randn(n, generator=g, dtype=dtype)
    # values at the threshold (as torch rounds it to the dtype), NaN and infinities
    x[::7] = torch.tensor(threshold, dtype=dtype)
    if n > 3:
        x[1], x[2], x[3] = float("nan"), float("inf"), float("-inf")
    want = torch.ops.aten.threshold_backward(gy, x, threshold)
    got = tbcall("aten::threshold_backward", gy, x, threshold)
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
    # a non-contiguous operand takes the general path
    want = torch.ops.aten.threshold_backward(gy[::2], x[::2], threshold)
    got = tbcall("aten::threshold_backward", gy[::2], x[::2], threshold)
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


def test_threshold_backward_shapes_and_nan_threshold():
    x = torch.randn(3, 4, 5)
    gy = torch.randn(3, 4, 5)
    for th in [0.25, float("nan")]:
        want = torch.ops.aten.threshold_backward(gy, x, th)
        got = tbcall("aten::threshold_backward", gy, x, th)
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    # broadcast gradient and mixed dtypes: the general path
    want = torch.ops.aten.threshold_backward(gy[0], x, 0.0)
    torch.testing.assert_close(tbcall("aten::threshold_backward", gy[0], x, 0.0), want)
    want = torch.ops.aten.threshold_backward(gy.double(), x, 0.1)
    torch.testing.assert_close(tbcall("aten::threshold_backward", gy.double(), x, 0.1), want)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", [1, 17, 1000, 70001])
def test_relu_row_loop(n, dtype):
    """relu on contiguous float32 / float64 runs on the same row loop (NaN stays NaN)."""
    g = torch.Generator().manual_seed(n)
    x = torch.randn(n, generator=g, dtype=dtype)
    x[::5] = 0.0
    x[::11] = -0.0
    if n > 3:
        x[1], x[2], x[3] = float("nan"), float("inf"), float("-inf")
    for t in (x, x[::3]):
        torch.testing.assert_close(
            tbcall("aten::relu", t), torch.relu(t), rtol=0, atol=0, equal_nan=True
        )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("th", [0.1, 0.3, 0.2, -0.7])
def test_threshold_forward_rounds_the_threshold_as_torch(dtype, th):
    # torch compares float32 with the threshold rounded to float32 (x = 0.1f <= 0.1 holds) and
    # the 16-bit floats in float: values next to the threshold decide it.
    torch.manual_seed(0)
    x = torch.cat([torch.tensor([0.1, 0.2, 0.3, -0.7, -1.0]), torch.randn(500)]).to(dtype)
    want = torch.threshold(x, th, 5.0)
    got = tb.to_torch(tb.call("aten::threshold", x, th, 5.0))
    assert torch.equal(got, want)
