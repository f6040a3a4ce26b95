"""Distance, fold and grid-sampling kernels (kernels/distance.cc, fold.cc, grid_sample.cc).

aten::_cdist_forward, aten::_pdist_forward, aten::col2im, aten::im2col and aten::grid_sampler_2d
called through ``tb.call`` on random inputs and compared with ``torch.ops.aten.<op>``, over their
arguments (p-norms incl. 0 and inf, cdist's compute_mode, col2im's geometry, grid_sampler's
interpolation/padding modes and align_corners), plus the argument errors. The OpInfo sweeps
(cdist, nn.functional.pdist, grid_sampler_2d, nn.functional.grid_sample and, for col2im, the
gradient of nn.functional.unfold) run in test_opinfo.py / ``python -m tensorbridge.coverage``.
"""

from __future__ import annotations

import math

import pytest
import torch

import tensorbridge as tb

# Kernel tests: an op the table lost raises rather than running torch's own kernel.
pytestmark = pytest.mark.usefixtures("no_fallback")


def _to_tb(x):
    if isinstance(x, torch.Tensor):
        return tb.from_dlpack(x.detach())
    return x


def tbcall(name, *args):
    return torch.from_dlpack(tb.call(name, *[_to_tb(a) for a in args]))


def check(name, *args, rtol=None, atol=None):
    op = getattr(torch.ops.aten, name.removeprefix("aten::"))
    expected = op(*args)
    actual = tbcall(name, *args)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, name
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=True)
    return actual


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


FLOATS = [torch.float32, torch.float64]
P_VALUES = [0.0, 0.5, 1.0, 2.0, 3.0, math.inf]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("p", P_VALUES)
def test_cdist(dtype, p):
    x1 = torch.randn(2, 5, 7, dtype=dtype)
    x2 = torch.randn(2, 4, 7, dtype=dtype)
    if p == 0:  # some equal features, so p=0 counts fewer than all
        x2[..., :3] = x1[:, :4, :3]
    for mode in (None, 0, 1, 2):
        check("aten::_cdist_forward", x1, x2, p, mode)


@pytest.mark.parametrize("dtype", FLOATS)
def test_cdist_matmul_path_and_broadcast(dtype):
    # More than 25 rows: p=2 with compute_mode None/0 takes torch's matrix-product formula.
    x1 = torch.randn(3, 1, 30, 6, dtype=dtype)
    x2 = torch.randn(4, 27, 6, dtype=dtype)
    for mode in (None, 0, 1, 2):
        check("aten::_cdist_forward", x1, x2, 2.0, mode, rtol=1e-4, atol=1e-4)
    check("aten::_cdist_forward", x1, x2, 1.0, None)
    # Equal rows: the product formula clamps tiny negative squares to zero, as torch.
    d = tbcall("aten::_cdist_forward", x2[0], x2[0], 2.0, 1)
    assert not torch.isnan(d).any()
    # Empty sides and zero features.
    check("aten::_cdist_forward", torch.randn(0, 3, dtype=dtype), x2[0, :, :3], 2.0, None)
    check(
        "aten::_cdist_forward",
        torch.randn(4, 0, dtype=dtype),
        torch.randn(2, 0, dtype=dtype),
        2.0,
        None,
    )


def test_cdist_errors():
    x = torch.randn(3, 4)
    with pytest.raises(ValueError, match=r"_cdist_forward.*non-negative p"):
        tbcall("aten::_cdist_forward", x, x, -1.0, None)
    with pytest.raises(ValueError, match=r"_cdist_forward.*compute_mode"):
        tbcall("aten::_cdist_forward", x, x, 2.0, 5)
    with pytest.raises(ValueError, match=r"_cdist_forward.*same number of columns"):
        tbcall("aten::_cdist_forward", x, torch.randn(3, 5), 2.0, None)
    with pytest.raises(ValueError, match=r"_cdist_forward.*at least 2D"):
        tbcall("aten::_cdist_forward", torch.randn(4), x, 2.0, None)
    with pytest.raises(ValueError, match=r"_cdist_forward.*same dtype"):
        tbcall("aten::_cdist_forward", x, x.double(), 2.0, None)
    with pytest.raises(NotImplementedError, match=r"_cdist_forward.*bfloat16"):
        tbcall("aten::_cdist_forward", x.bfloat16(), x.bfloat16(), 2.0, None)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("p", [*P_VALUES, 1.5])
def test_cdist_backward(dtype, p):
    x1 = torch.randn(2, 1, 5, 4, dtype=dtype)
    x2 = torch.randn(3, 6, 4, dtype=dtype)
    x2[0, 0] = x1[0, 0, 0]  # a zero distance
    dist = torch.ops.aten._cdist_forward(x1, x2, p, 2)
    grad = torch.randn_like(dist)
    check("aten::_cdist_backward", grad, x1, x2, p, dist)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("p", [*P_VALUES, 1.5])
def test_pdist_backward(dtype, p):
    x = torch.randn(7, 4, dtype=dtype)
    x[3] = x[1]  # a zero distance
    dist = torch.ops.aten._pdist_forward(x, p)
    grad = torch.randn_like(dist)
    check("aten::_pdist_backward", grad, x, p, dist)


def test_distance_backward_errors():
    x = torch.randn(3, 4)
    with pytest.raises(ValueError, match=r"_pdist_backward.*elements"):
        tbcall("aten::_pdist_backward", torch.randn(2), x, 2.0, torch.randn(2))
    with pytest.raises(ValueError, match=r"_cdist_backward.*dtype"):
        tbcall("aten::_cdist_backward", torch.randn(3, 3).double(), x, x, 2.0, torch.randn(3, 3))
    with pytest.raises(ValueError, match=r"_cdist_backward.*shape"):
        tbcall("aten::_cdist_backward", torch.randn(3, 2), x, x, 2.0, torch.randn(3, 2))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("p", P_VALUES)
def test_pdist(dtype, p):
    x = torch.randn(9, 5, dtype=dtype)
    if p == 0:
        x[1, :2] = x[0, :2]
    check("aten::_pdist_forward", x, p)
    check("aten::_pdist_forward", x[:1], p)  # one row: no pairs
    check("aten::_pdist_forward", torch.randn(4, 0, dtype=dtype), p)  # zero features


def test_pdist_errors():
    with pytest.raises(ValueError, match=r"_pdist_forward.*non-negative p"):
        tbcall("aten::_pdist_forward", torch.randn(3, 4), -2.0)
    with pytest.raises(ValueError, match=r"_pdist_forward.*2D"):
        tbcall("aten::_pdist_forward", torch.randn(3, 4, 2), 2.0)
    with pytest.raises(NotImplementedError, match=r"_pdist_forward.*int64"):
        tbcall("aten::_pdist_forward", torch.ones(3, 4, dtype=torch.int64), 2.0)


COL2IM_CASES = [
    # (input shape, output_size, kernel_size, dilation, padding, stride)
    ((2, 3 * 4, 4), [3, 3], [2, 2], [1, 1], [0, 0], [1, 1]),
    ((1, 2 * 6, 9), [5, 6], [2, 3], [2, 1], [1, 1], [2, 2]),
    ((2 * 9, 16), [4, 4], [3, 3], [1, 1], [1, 1], [1, 1]),  # unbatched
    ((0, 4, 9), [4, 4], [2, 2], [1, 1], [0, 0], [1, 1]),  # empty batch
]


@pytest.mark.parametrize("dtype", [*FLOATS, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("case", range(len(COL2IM_CASES)))
def test_col2im(dtype, case):
    shape, *geometry = COL2IM_CASES[case]
    x = torch.randn(shape).to(dtype)
    check("aten::col2im", x, *geometry, rtol=0, atol=0)  # same additions in the same order


def test_col2im_matches_fold_of_unfold():
    x = torch.randn(2, 3, 7, 6, dtype=torch.float64)
    cols = torch.nn.functional.unfold(x, (3, 2), dilation=(1, 2), padding=1, stride=(2, 1))
    got = tbcall("aten::col2im", cols, [7, 6], [3, 2], [1, 2], [1, 1], [2, 1])
    torch.testing.assert_close(
        got,
        torch.nn.functional.fold(cols, (7, 6), (3, 2), dilation=(1, 2), padding=1, stride=(2, 1)),
    )


def test_col2im_errors():
    with pytest.raises(ValueError, match=r"col2im.*divisible"):
        tbcall("aten::col2im", torch.randn(1, 5, 4), [3, 3], [2, 2], [1, 1], [0, 0], [1, 1])
    with pytest.raises(ValueError, match=r"col2im.*sliding blocks"):
        tbcall("aten::col2im", torch.randn(1, 4, 5), [3, 3], [2, 2], [1, 1], [0, 0], [1, 1])
    with pytest.raises(ValueError, match=r"col2im.*stride"):
        tbcall("aten::col2im", torch.randn(1, 4, 4), [3, 3], [2, 2], [1, 1], [0, 0], [0, 1])
    with pytest.raises(ValueError, match=r"col2im.*2-D or 3-D"):
        tbcall("aten::col2im", torch.randn(4), [3, 3], [2, 2], [1, 1], [0, 0], [1, 1])
    with pytest.raises(NotImplementedError, match=r"col2im.*int64"):
        tbcall(
            "aten::col2im",
            torch.ones(1, 4, 4, dtype=torch.int64),
            [3, 3],
            [2, 2],
            [1, 1],
            [0, 0],
            [1, 1],
        )


IM2COL_CASES = [
    # (input shape, kernel_size, dilation, padding, stride)
    ((2, 3, 4, 5), [2, 2], [1, 1], [0, 0], [1, 1]),
    ((1, 2, 7, 6), [3, 2], [1, 2], [1, 1], [2, 1]),
    ((2, 5, 5), [3, 3], [1, 1], [1, 1], [2, 2]),  # unbatched
    ((0, 2, 4, 4), [2, 2], [1, 1], [0, 0], [1, 1]),  # empty batch
]


@pytest.mark.parametrize("dtype", [*FLOATS, torch.bfloat16, torch.float16, torch.bool])
@pytest.mark.parametrize("case", range(len(IM2COL_CASES)))
def test_im2col(dtype, case):
    shape, *geometry = IM2COL_CASES[case]
    x = (torch.randn(shape) * 4).to(dtype)
    check("aten::im2col", x, *geometry, rtol=0, atol=0)


def test_im2col_errors():
    with pytest.raises(ValueError, match=r"im2col.*sliding blocks"):
        tbcall("aten::im2col", torch.randn(1, 2, 2, 2), [3, 3], [1, 1], [0, 0], [1, 1])
    with pytest.raises(ValueError, match=r"im2col.*3-D or 4-D"):
        tbcall("aten::im2col", torch.randn(2, 2), [1, 1], [1, 1], [0, 0], [1, 1])
    with pytest.raises(ValueError, match=r"im2col.*dilation"):
        tbcall("aten::im2col", torch.randn(1, 2, 4, 4), [2, 2], [0, 1], [0, 0], [1, 1])
    with pytest.raises(NotImplementedError, match=r"im2col.*int64"):
        tbcall(
            "aten::im2col",
            torch.ones(1, 2, 4, 4, dtype=torch.int64),
            [2, 2],
            [1, 1],
            [0, 0],
            [1, 1],
        )


MODES = [(i, p, a) for i in range(3) for p in range(3) for a in (False, True)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize(("interp", "padding", "align"), MODES)
def test_grid_sampler_2d(dtype, interp, padding, align):
    x = torch.randn(2, 3, 5, 7, dtype=dtype)
    grid = torch.rand(2, 4, 6, 2, dtype=dtype) * 3 - 1.5  # inside and outside [-1, 1]
    grid[0, 0, :3] = torch.tensor([[-1.0, -1.0], [1.0, 1.0], [0.0, 0.0]], dtype=dtype)
    check("aten::grid_sampler_2d", x, grid, interp, padding, align)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("interp", range(3))
def test_grid_sampler_2d_reduced_floats(dtype, interp):
    x = torch.randn(1, 2, 6, 5).to(dtype)
    grid = (torch.rand(1, 3, 4, 2) * 2.4 - 1.2).to(dtype)
    for padding in range(3):
        check("aten::grid_sampler_2d", x, grid, interp, padding, False, rtol=2e-2, atol=2e-2)


def test_grid_sampler_2d_noncontiguous_and_empty():
    x = torch.randn(2, 7, 5, 3).permute(0, 3, 1, 2)
    grid = torch.rand(2, 2, 4, 3)[..., :2] * 2 - 1
    check("aten::grid_sampler_2d", x, grid, 0, 0, False)
    check("aten::grid_sampler_2d", x, grid[:, :0], 0, 1, True)


def test_grid_sampler_2d_errors():
    x, grid = torch.randn(1, 2, 3, 3), torch.randn(1, 2, 2, 2)
    with pytest.raises(ValueError, match=r"grid_sampler_2d.*interpolation_mode"):
        tbcall("aten::grid_sampler_2d", x, grid, 3, 0, False)
    with pytest.raises(ValueError, match=r"grid_sampler_2d.*padding_mode"):
        tbcall("aten::grid_sampler_2d", x, grid, 0, 3, False)
    with pytest.raises(ValueError, match=r"grid_sampler_2d.*same batch size"):
        tbcall("aten::grid_sampler_2d", x, torch.randn(2, 2, 2, 2), 0, 0, False)
    with pytest.raises(ValueError, match=r"grid_sampler_2d.*size 2 in its last"):
        tbcall("aten::grid_sampler_2d", x, torch.randn(1, 2, 2, 3), 0, 0, False)
    with pytest.raises(ValueError, match=r"grid_sampler_2d.*same dtype"):
        tbcall("aten::grid_sampler_2d", x, grid.double(), 0, 0, False)
    with pytest.raises(ValueError, match=r"grid_sampler_2d.*4-D"):
        tbcall("aten::grid_sampler_2d", x[0], grid, 0, 0, False)
    with pytest.raises(NotImplementedError, match=r"grid_sampler_2d.*int64"):
        tbcall("aten::grid_sampler_2d", x.long(), grid.long(), 0, 0, False)
