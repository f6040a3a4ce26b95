"""Max pooling's fast paths (kernels/pool_max.cc, kernels/cpu/pool_max_vec.cc) against torch.

aten::max_pool2d_with_indices runs row-major planes on a loop over interior output columns
(vectors of 4 / 8 float32 or 2 / 4 float64 columns, SSE2 / AVX2), with clipped windows at the
edges, and channels-last inputs on vectors over channels (blocks of 4 vectors, then single
vectors, then scalars). The cases below put the sizes on either side of those boundaries and
add NaNs, ties, padding, dilation, ceil_mode and channels-last layouts; values, indices and
(for the layout) the strides of the outputs must be torch's exactly. The backward follows the
same layouts. A child process repeats the sweep with TB_MAX_CPU_ISA=sse2 (the SSE2 loops).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

import tensorbridge as tb

# Kernel tests: an op the table lost raises rather than running torch's own kernel.
pytestmark = pytest.mark.usefixtures("no_fallback")

OP = "aten::max_pool2d_with_indices"
BWD = "aten::max_pool2d_with_indices_backward"

# (input shape, kernel, stride, padding, dilation, ceil_mode)
CASES = [
    ((2, 3, 32, 32), [2, 2], [2, 2], [0, 0], [1, 1], False),  # the convnet's pool
    ((1, 2, 8, 7), [2, 2], [2, 2], [0, 0], [1, 1], True),  # odd width, ceil: clipped last
    ((1, 2, 9, 9), [2, 2], [2, 2], [0, 0], [1, 1], False),  # 4 output columns: one SSE2 block
    ((1, 2, 17, 17), [2, 2], [2, 2], [0, 0], [1, 1], False),  # 8 columns: one AVX2 block
    ((1, 2, 19, 19), [2, 2], [2, 2], [0, 0], [1, 1], False),  # 8 + 1 columns
    ((1, 2, 35, 37), [2, 2], [2, 2], [1, 1], [1, 1], True),  # padding on both sides
    ((2, 2, 15, 56), [3, 3], [2, 2], [1, 1], [1, 1], False),  # ResNet's pool
    ((1, 3, 13, 21), [3, 2], [1, 1], [1, 0], [1, 1], False),  # stride 1
    ((1, 3, 13, 40), [2, 3], [3, 3], [0, 1], [1, 1], True),  # stride 3 (lanes loaded one by one)
    ((1, 2, 12, 30), [3, 2], [2, 2], [1, 1], [2, 1], False),  # dilation along H only
    ((1, 2, 12, 30), [2, 3], [2, 1], [1, 1], [1, 2], True),  # dilation along W: general loop
    ((1, 1, 1, 1), [1, 1], [1, 1], [0, 0], [1, 1], False),
    ((3, 20, 11), [2, 2], [2, 2], [1, 0], [1, 1], True),  # unbatched (C, H, W)
]


def _call(x, *args):
    out, idx = tb.call(OP, tb.from_dlpack(x), *args)
    return torch.from_dlpack(out), torch.from_dlpack(idx)


def _strides(t):
    """Strides of the dims of size > 1 (the ones a layout pins down)."""
    return [s for s, n in zip(t.stride(), t.shape, strict=True) if n > 1]


def _input(shape, dtype, kind, channels_last):
    if kind == "ties":  # few distinct values: many windows with several maxima
        x = torch.randint(-2, 3, shape).to(dtype)
    else:
        x = torch.randn(shape, dtype=dtype)
    if kind == "nan":
        x[torch.rand(shape) < 0.1] = float("nan")
        x[torch.rand(shape) < 0.05] = float("-inf")
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    return x


def check_case(shape, args, dtype, kind, channels_last):
    x = _input(shape, dtype, kind, channels_last)
    want = torch.ops.aten.max_pool2d_with_indices(x, *args)
    got = _call(x, *args)
    for g, w, name in zip(got, want, ("values", "indices"), strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape, name
        if g.is_floating_point():
            assert torch.equal(g.isnan(), w.isnan()), name
            g, w = g.nan_to_num(), w.nan_to_num()
        assert torch.equal(g, w), name
        assert _strides(g) == _strides(w), f"{name}: strides {g.stride()} != {w.stride()}"
    gy = torch.randn(want[0].shape, dtype=dtype)
    if channels_last:
        gy = gy.contiguous(memory_format=torch.channels_last)
    want_gi = torch.ops.aten.max_pool2d_with_indices_backward(gy, x, *args, want[1])
    got_gi = torch.from_dlpack(
        tb.call(BWD, tb.from_dlpack(gy), tb.from_dlpack(x), *args, tb.from_dlpack(want[1]))
    )
    assert torch.equal(got_gi, want_gi), "backward"
    assert _strides(got_gi) == _strides(want_gi), "backward strides"


DTYPES = [torch.float32, torch.float64]
KINDS = ["randn", "nan", "ties"]


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", range(len(CASES)))
def test_max_pool2d_matches_torch(case, dtype, kind, channels_last):
    shape, *args = CASES[case]
    if channels_last and len(shape) != 4:
        pytest.skip("channels_last is a 4-d layout")
    torch.manual_seed(case)
    check_case(shape, args, dtype, kind, channels_last)


# bfloat16 pools as float32 (widened, narrowed back exactly): every case, kind and layout,
# and one 3-d pooling.
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_max_pool2d_bfloat16_matches_torch(case, channels_last):
    shape, *args = CASES[case]
    if channels_last and len(shape) != 4:
        pytest.skip("channels_last is a 4-d layout")
    torch.manual_seed(case)
    for kind in KINDS:
        check_case(shape, args, torch.bfloat16, kind, channels_last)

    x = torch.randn(2, 3, 5, 6, 7, dtype=torch.bfloat16)
    x[0, 0, 0, 0, :3] = float("nan")
    args3 = ([2, 3, 2], [1, 2, 2], [1, 1, 0], [1, 1, 1], True)
    want = torch.ops.aten.max_pool3d_with_indices(x, *args3)
    got = tb.call("aten::max_pool3d_with_indices", tb.from_dlpack(x), *args3)
    for g, w in zip(map(torch.from_dlpack, got), want, strict=True):
        assert g.dtype == w.dtype and torch.equal(g.nan_to_num(), w.nan_to_num())


CL_ARGS = ([3, 2], [2, 2], [1, 1], [1, 1], True)
SSE2_CHANNELS = (3, 4, 5, 8, 9, 33)


# channel counts around the channels-last blocks: 4 vectors of 8 / 4 (AVX2 float32 / float64)
# or 4 / 2 (SSE2), single vectors, scalar tail
@pytest.mark.parametrize("channels", [1, 2, 3, 4, 5, 8, 9, 16, 31, 32, 33, 37, 64])
@pytest.mark.parametrize("dtype", DTYPES)
def test_max_pool2d_channels_last_channel_counts(channels, dtype):
    torch.manual_seed(channels)
    for kind in KINDS:
        check_case((2, channels, 7, 6), CL_ARGS, dtype, kind, True)


def test_max_pool2d_integer_and_noncontiguous():
    torch.manual_seed(0)
    x = torch.randint(-5, 5, (2, 3, 10, 12))
    args = ([2, 2], [2, 2], [0, 0], [1, 1], False)
    want = torch.ops.aten.max_pool2d_with_indices(x, *args)
    for g, w in zip(_call(x, *args), want, strict=True):
        assert torch.equal(g, w)
    y = torch.randn(2, 12, 3, 10).transpose(1, 2)  # neither contiguous nor channels-last
    want = torch.ops.aten.max_pool2d_with_indices(y, *args)
    for g, w in zip(_call(y, *args), want, strict=True):
        assert torch.equal(g, w)


CHILD = r"""
import sys
sys.path.insert(0, sys.argv[1])
import torch
import test_kernels_pool as t

n = 0
for case, (shape, *args) in enumerate(t.CASES):
    for dtype in t.DTYPES:
        for kind in t.KINDS:
            for cl in (False, True) if len(shape) == 4 else (False,):
                torch.manual_seed(case)
                t.check_case(shape, args, dtype, kind, cl)
                n += 1
for c in t.SSE2_CHANNELS:
    for dtype in t.DTYPES:
        t.check_case((2, c, 7, 6), t.CL_ARGS, dtype, "nan", True)
        n += 1
print("checked", n)
"""


def test_max_pool2d_sse2_version():
    env = dict(os.environ, TB_MAX_CPU_ISA="sse2")
    here = os.path.dirname(os.path.abspath(__file__))
    r = subprocess.run(
        [sys.executable, "-c", CHILD, here], env=env, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr[-3000:]
    n = sum(len(DTYPES) * len(KINDS) * (2 if len(c[0]) == 4 else 1) for c in CASES)
    assert f"checked {n + len(SSE2_CHANNELS) * len(DTYPES)}" in r.stdout, r.stdout
