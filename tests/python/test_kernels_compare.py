"""aten::isin (kernels/compare.cc) against torch's CPU kernel: every overload, dtypes, NaN,
invert, empty tensors, the OpInfo samples, and generation's stopping check (which calls it
each step) running in the table."""

from __future__ import annotations

import pytest
import torch

import tensorbridge as tb
from tensorbridge._opinfo import find_opinfos, run_samples

# A kernel the table lost would otherwise run torch's and compare torch with itself.
pytestmark = pytest.mark.usefixtures("no_fallback")


def _t(x):
    return torch.from_dlpack(x)


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int64, torch.uint8]
)
@pytest.mark.parametrize("invert", [False, True])
@pytest.mark.parametrize("shapes", [((5, 7), (6,)), ((0,), (3,)), ((4,), (0,)), ((2, 3), (2, 2))])
def test_isin_equals_torch(dtype, invert, shapes):
    g = torch.Generator().manual_seed(0)
    e = (torch.randn(shapes[0], generator=g) * 4).to(dtype)
    t = (torch.randn(shapes[1], generator=g) * 4).to(dtype)
    if e.numel() > 2 and t.numel() > 1:
        e.view(-1)[1] = t.view(-1)[-1]  # one sure member
        if dtype.is_floating_point:
            e.view(-1)[0] = float("nan")  # NaN belongs to no set, not even one holding NaN
            t.view(-1)[0] = float("nan")
    want = torch.isin(e, t, invert=invert)
    got = _t(tb.call("aten::isin.Tensor_Tensor", e, t, invert=invert))
    assert got.dtype == torch.bool and torch.equal(got, want)


def test_isin_scalar_overloads_and_promotion():
    e = torch.arange(6)
    assert torch.equal(_t(tb.call("aten::isin.Tensor_Scalar", e, 3)), torch.isin(e, 3))
    t = torch.tensor([1.5, 2.0])
    assert torch.equal(_t(tb.call("aten::isin.Scalar_Tensor", 2, t)), torch.isin(2, t))
    # int elements against float test elements compare in the promoted dtype
    assert torch.equal(_t(tb.call("aten::isin.Tensor_Tensor", e, t)), torch.isin(e, t))
    # a non-contiguous elements tensor
    x = torch.arange(24).view(4, 6).t()
    s = torch.tensor([0, 7, 23])
    assert torch.equal(_t(tb.call("aten::isin.Tensor_Tensor", x, s)), torch.isin(x, s))


def test_isin_rejects_complex():
    z = torch.ones(3, dtype=torch.complex64)
    with pytest.raises(NotImplementedError, match="aten::isin: not implemented for complex64"):
        tb.call("aten::isin.Tensor_Tensor", z, z)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_isin_opinfo_samples(dtype):
    (info,) = find_opinfos(["isin"])
    r = run_samples(info, dtype)
    assert r.total == r.available >= 2  # torch makes 2 samples per dtype
    assert [(s.index, s.message) for s in r.samples if s.status != "pass" or s.fallbacks] == []
