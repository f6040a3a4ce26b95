"""The float32 / bfloat16 row loops of kernels/cpu/simd.cc behind hardtanh and batch norm in
inference (bfloat16 widened to float a chunk at a time and rounded once), against torch's CPU
kernels bit for bit: sizes below, at and across a chunk (512), sizes split across threads,
NaN, infinities and -0.0, in place, read-only memory and strided inputs (the element loops)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tensorbridge as tb

# Kernel tests: an op the table lost raises rather than running torch's own kernel.
pytestmark = pytest.mark.usefixtures("no_fallback")

SIZES = [0, 1, 17, 511, 512, 513, 1500, 3 * 70000]
# Bounds exact in bfloat16 (torch rounds them to the operand's type first).
BOUNDS = [(0.0, 6.0), (-0.5, 0.25), (-2.0, float("inf"))]


def _special(n, dtype):
    torch.manual_seed(n)
    x = (torch.randn(n) * 4).to(dtype)
    for i, v in enumerate([float("nan"), float("inf"), -float("inf"), -0.0, 6.0, -0.5]):
        if i < n:
            x[(i * 7919) % n] = v
    return x


def _bits_equal(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    assert torch.equal(got.isnan(), want.isnan())
    torch.testing.assert_close(got.nan_to_num(), want.nan_to_num(), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("bounds", BOUNDS)
def test_hardtanh_rows_equal_torch(dtype, n, bounds):
    x = _special(n, dtype)
    want = torch.nn.functional.hardtanh(x, *bounds)
    got = torch.from_dlpack(tb.call("aten::hardtanh", tb.from_dlpack(x.clone()), *bounds))
    _bits_equal(got, want)
    # In place: the same memory, the same values.
    y = x.clone()
    r = torch.from_dlpack(tb.call("aten::hardtanh_", tb.from_dlpack(y), *bounds))
    assert r.data_ptr() == y.data_ptr() or n == 0
    _bits_equal(y, want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_hardtanh_of_strided_inputs_and_read_only_memory(dtype):
    x = _special(6 * 40, dtype).reshape(6, 40)
    for view in (x.t(), x[:, ::3], x.expand(2, 6, 40)):
        got = torch.from_dlpack(tb.call("aten::hardtanh", tb.from_dlpack(view), -1.0, 1.0))
        _bits_equal(got, torch.nn.functional.hardtanh(view, -1.0, 1.0))
    a = np.ones(5, dtype=np.float32)
    a.flags.writeable = False
    with pytest.raises(BufferError, match="read-only"):
        tb.call("aten::hardtanh_", tb.from_dlpack(a), 0.0, 6.0)
    assert (a == 1).all()


@pytest.mark.parametrize(
    "shape", [(2, 3), (2, 16, 9, 11), (1, 3, 600), (4, 40, 17, 17), (2, 8, 1500)]
)
def test_batch_norm_inference_in_bfloat16_rounds_once(shape):
    torch.manual_seed(0)
    c = shape[1]
    x = (torch.randn(shape) * 3).bfloat16()
    x.view(-1)[0] = float("nan")
    w, b, mean = torch.randn(c), torch.randn(c), torch.randn(c)
    var = torch.rand(c) + 0.5
    eps = 1e-5
    got = tb.call(
        "aten::_native_batch_norm_legit_no_training",
        *map(tb.from_dlpack, (x, w, b, mean, var)),
        0.1,
        eps,
    )
    got = torch.from_dlpack(got[0])
    # torch's folding: scale and shift in double, applied in float, rounded once.
    invstd = 1 / torch.sqrt(var.double() + eps)
    scale = (invstd * w.double()).float()
    shift = (b.double() - mean.double() * invstd * w.double()).float()
    dims = [1, c] + [1] * (len(shape) - 2)
    _bits_equal(got, (x.float() * scale.view(dims) + shift.view(dims)).bfloat16())
    want = torch.ops.aten._native_batch_norm_legit_no_training(x, w, b, mean, var, 0.1, eps)[0]
    assert torch.equal(got.isnan(), want.isnan())
    tol = 1.6e-2 * want.float().nan_to_num().abs().max().item()
    torch.testing.assert_close(
        got.float().nan_to_num(), want.float().nan_to_num(), rtol=0, atol=tol
    )


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_bfloat16_arithmetic_rounds_once_as_torch(op):
    # Computed in float and rounded to nearest even (ties included: products and sums of
    # bfloat16 values often fall on them), NaN and infinities kept.
    a = _special(1500, torch.bfloat16).reshape(3, 500)
    b = _special(1499, torch.bfloat16)[:500]
    f = getattr(torch, op)
    for x, y in ((a, b), (a, b.expand(3, 500).contiguous()), (a.t(), b[:3]), (a, b[7])):
        got = torch.from_dlpack(tb.call(f"aten::{op}.Tensor", tb.from_dlpack(x), tb.from_dlpack(y)))
        _bits_equal(got, f(x, y))


@pytest.mark.parametrize("src", [torch.float32, torch.float64, torch.int64, torch.float16])
def test_casts_to_and_from_bfloat16_round_as_torch(src):
    torch.manual_seed(0)
    x = (torch.randn(4099, dtype=torch.float64) * 1e3).to(src)
    if src.is_floating_point:
        x[:4] = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0], dtype=src)
    got = torch.from_dlpack(tb.call("aten::_to_copy", tb.from_dlpack(x), dtype=torch.bfloat16))
    _bits_equal(got, x.to(torch.bfloat16))
    back = torch.from_dlpack(tb.call("aten::_to_copy", tb.from_dlpack(got), dtype=src))
    _bits_equal(back, got.to(src))
