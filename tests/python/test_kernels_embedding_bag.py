"""aten::_embedding_bag (and _embedding_bag_forward_only) against torch's CPU kernel.

All four outputs are compared, the auxiliary ones (offset2bag, bag_size, max_indices) exactly,
since torch's backward reads them; then the OpInfo sweep of nn.functional.embedding_bag through
the table (TableMode), and argument errors.
"""

from __future__ import annotations

import pytest
import torch

import tensorbridge as tb
from tensorbridge._opinfo import find_opinfos, run_samples

# Kernel tests: an op the table lost raises rather than running torch's own kernel.
pytestmark = pytest.mark.usefixtures("no_fallback")


def _to_tb(x):
    if isinstance(x, torch.Tensor):
        return tb.from_dlpack(x.detach())
    return x


def tbcall(name, *args):
    out = tb.call(name, *[_to_tb(a) for a in args])
    return tuple(torch.from_dlpack(t) for t in out)


def _check(name, *args):
    expected = getattr(torch.ops.aten, name.removeprefix("aten::"))(*args)
    actual = tbcall(name, *args)
    assert len(actual) == 4
    torch.testing.assert_close(actual[0], expected[0], check_stride=False)
    for a, e in zip(actual[1:], expected[1:], strict=True):
        assert a.dtype == e.dtype
        assert a.tolist() == e.tolist()


INDICES = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 1, 4])
OFFSETS = [
    torch.tensor([0, 4, 4, 7]),  # an empty bag
    torch.tensor([0]),
    torch.tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]),
    torch.tensor([0, 3, 10]),  # a last offset at the end
]


@pytest.mark.parametrize("name", ["aten::_embedding_bag", "aten::_embedding_bag_forward_only"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("mode", [0, 1, 2])
@pytest.mark.parametrize("offsets", range(len(OFFSETS)))
@pytest.mark.parametrize("include_last_offset", [False, True])
@pytest.mark.parametrize("padding_idx", [-1, 4, 1])
def test_embedding_bag(name, dtype, mode, offsets, include_last_offset, padding_idx):
    w = torch.randn(10, 5, generator=torch.Generator().manual_seed(1)).to(dtype)
    off = OFFSETS[offsets]
    if include_last_offset and off[-1] != INDICES.numel():
        # torch's kernels disagree with each other when the last offset is below the number of
        # indices (the fast sum path ends the last bag there, the others at the end): the
        # documented input has the number of indices as its last offset.
        off = torch.cat([off, torch.tensor([INDICES.numel()])])
    _check(name, w, INDICES, off, False, mode, False, None, include_last_offset, padding_idx)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("padding_idx", [-1, 2])
def test_embedding_bag_per_sample_weights(dtype, padding_idx):
    g = torch.Generator().manual_seed(2)
    w = torch.randn(10, 3, generator=g, dtype=dtype)
    psw = torch.randn(INDICES.numel(), generator=g, dtype=dtype)
    _check("aten::_embedding_bag", w, INDICES, OFFSETS[0], False, 0, False, psw, False, padding_idx)


def test_embedding_bag_int32_indices_and_ties():
    w = torch.tensor([[1.0, 2.0], [1.0, 3.0], [0.0, 0.0], [5.0, 5.0]])
    i, o = torch.tensor([0, 1, 2, 2, 3]), torch.tensor([0, 2, 4])
    for mode in (0, 1, 2):
        _check("aten::_embedding_bag", w, i.int(), o.int(), False, mode, False, None, False, -1)
    # a bag of padding only
    _check("aten::_embedding_bag", w, i, o, False, 2, False, None, False, 2)


def test_embedding_bag_errors():
    w = torch.randn(4, 3)
    with pytest.raises(IndexError, match="_embedding_bag: index 7"):
        tbcall(
            "aten::_embedding_bag",
            w,
            torch.tensor([7]),
            torch.tensor([0]),
            False,
            0,
            False,
            None,
            False,
            -1,
        )
    with pytest.raises(ValueError, match="mode"):
        tbcall(
            "aten::_embedding_bag",
            w,
            torch.tensor([1]),
            torch.tensor([0]),
            False,
            3,
            False,
            None,
            False,
            -1,
        )
    with pytest.raises(NotImplementedError, match="per_sample_weights"):
        tbcall(
            "aten::_embedding_bag",
            w,
            torch.tensor([1]),
            torch.tensor([0]),
            False,
            1,
            False,
            torch.ones(1),
            False,
            -1,
        )
    with pytest.raises(TypeError, match="indices must be int32 or int64"):
        tbcall(
            "aten::_embedding_bag",
            w,
            torch.tensor([1.0]),
            torch.tensor([0]),
            False,
            0,
            False,
            None,
            False,
            -1,
        )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_opinfo_embedding_bag(dtype):
    (info,) = find_opinfos(["nn.functional.embedding_bag"])
    r = run_samples(info, dtype, grad=dtype == torch.float64)
    fails = [(i, m) for i, m in r.failures if not m.startswith("fell back")]
    assert not fails, fails
    assert "aten::_embedding_bag" in r.served or "aten::_embedding_bag_forward_only" in r.served


@pytest.mark.parametrize("mode", [0, 1, 2])
@pytest.mark.parametrize("padding_idx", [-1, 4])
@pytest.mark.parametrize("include_last_offset", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_embedding_bag_backward(mode, padding_idx, include_last_offset, dtype):
    # The auxiliary outputs come from torch's forward (offset2bag empty on its fast sum path).
    g = torch.Generator().manual_seed(3)
    w = torch.randn(10, 5, generator=g, dtype=dtype)
    off = OFFSETS[0]
    if include_last_offset:
        off = torch.cat([off, torch.tensor([INDICES.numel()])])
    fwd = torch.ops.aten._embedding_bag(
        w, INDICES, off, False, mode, False, None, include_last_offset, padding_idx
    )
    grad = torch.randn(fwd[0].shape, generator=g, dtype=dtype)
    args = (grad, INDICES, off, *fwd[1:], 10, False, mode, False, None, padding_idx)
    expected = torch.ops.aten._embedding_bag_backward(*args)
    actual = torch.from_dlpack(tb.call("aten::_embedding_bag_backward", *[_to_tb(a) for a in args]))
    torch.testing.assert_close(actual, expected, check_stride=False)
    # torch's scaling by frequency is not reproduced: refused rather than computed differently.
    args = (grad, INDICES, off, *fwd[1:], 10, True, mode, False, None, padding_idx)
    with pytest.raises(NotImplementedError, match="scale_grad_by_freq"):
        tb.call("aten::_embedding_bag_backward", *[_to_tb(a) for a in args])


@pytest.mark.parametrize("padding_idx", [-1, 4])
def test_embedding_bag_per_sample_weights_backward(padding_idx):
    g = torch.Generator().manual_seed(4)
    w = torch.randn(10, 5, generator=g, dtype=torch.float64)
    psw = torch.randn(INDICES.numel(), generator=g, dtype=torch.float64)
    off = OFFSETS[0]
    fwd = torch.ops.aten._embedding_bag(w, INDICES, off, False, 0, False, psw, False, padding_idx)
    grad = torch.randn(fwd[0].shape, generator=g, dtype=torch.float64)
    args = (grad, INDICES, off, *fwd[1:], 10, False, 0, False, psw, padding_idx)
    expected = torch.ops.aten._embedding_bag_backward(*args)
    actual = torch.from_dlpack(tb.call("aten::_embedding_bag_backward", *[_to_tb(a) for a in args]))
    torch.testing.assert_close(actual, expected, check_stride=False)
    args = (grad, w, INDICES, off, fwd[1], 0, padding_idx)
    expected = torch.ops.aten._embedding_bag_per_sample_weights_backward(*args)
    name = "aten::_embedding_bag_per_sample_weights_backward"
    actual = torch.from_dlpack(tb.call(name, *[_to_tb(a) for a in args]))
    torch.testing.assert_close(actual, expected, check_stride=False)
