"""Resampling, padding and pooling gradients against torch's CPU kernels
(kernels/resample_backward.cc, pool_adaptive_max.cc, shape_copy.cc, factory_space.cc).

The upsample backward ops (nearest, nearest-exact, linear, bilinear, trilinear, bicubic),
upsample_bicubic2d and the antialiased _upsample_bilinear2d_aa (+ backward), the reflection /
replication pad backward ops (negative padding too),
adaptive_max_pool2d/3d with their backward, max_unpool2d/3d, the `*_copy` view forms, rot90,
diag_embed, trace, block_diag, pixel_(un)shuffle, channel_shuffle, eye, logspace and the
tensor-bound linspace / logspace: torch's OpInfo samples (gradients in float64), then direct
comparisons and errors."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import check_opinfo_samples, opinfo_cases

import tensorbridge as tb
from tensorbridge.testing import TableMode

pytestmark = pytest.mark.usefixtures("no_fallback")

_INTERP = ["nearest", "nearest_exact", "linear", "bilinear", "trilinear", "bicubic"]
FAMILY = (
    {f"aten::upsample_{m}{d}d_backward" for m in _INTERP for d in (1, 2, 3)}
    | {f"aten::_upsample_nearest_exact{d}d_backward" for d in (1, 2, 3)}
    | {f"aten::{k}_pad{d}d_backward" for k in ("reflection", "replication") for d in (1, 2, 3)}
    | {f"aten::adaptive_max_pool{d}d{b}" for d in (2, 3) for b in ("", "_backward")}
    | {"aten::upsample_bicubic2d", "aten::max_unpool2d", "aten::max_unpool3d"}
    | {"aten::_upsample_bilinear2d_aa", "aten::_upsample_bilinear2d_aa_backward"}
    | {"aten::rot90", "aten::diag_embed", "aten::trace", "aten::block_diag", "aten::eye"}
    | {"aten::eye.m", "aten::logspace", "aten::pixel_shuffle", "aten::pixel_unshuffle"}
    | {"aten::channel_shuffle", "aten::diagonal_backward", "aten::unfold_backward"}
    | {f"aten::{n}_copy" for n in ("view", "permute", "expand", "unsqueeze", "alias", "t")}
    | {f"aten::{n}_copy" for n in ("squeeze", "diagonal", "unfold", "narrow", "as_strided")}
    | {"aten::transpose_copy.int", "aten::squeeze_copy.dim", "aten::unbind_copy.int"}
    | {"aten::split_with_sizes_copy"}
    | {f"aten::{f}.{o}" for f in ("linspace", "logspace") for o in ("Tensor_Tensor",)}
    | {f"aten::{f}.{o}" for f in ("linspace", "logspace") for o in ("Tensor_Scalar",)}
    | {f"aten::{f}.{o}" for f in ("linspace", "logspace") for o in ("Scalar_Tensor",)}
)
OPINFOS = [
    "nn.functional.interpolate", "nn.functional.upsample_bilinear",
    "nn.functional.upsample_nearest", "nn.functional.pad", "nn.functional.adaptive_max_pool1d",
    "nn.functional.adaptive_max_pool2d", "nn.functional.adaptive_max_pool3d",
    "nn.functional.max_unpool1d", "nn.functional.max_unpool2d", "nn.functional.max_unpool3d",
    "nn.functional.pixel_shuffle", "nn.functional.pixel_unshuffle",
    "nn.functional.channel_shuffle", "rot90", "diag_embed", "trace", "block_diag", "eye",
    "linspace", "logspace", "alias_copy", "as_strided_copy", "diagonal_copy", "expand_copy",
    "narrow_copy", "permute_copy", "split_with_sizes_copy", "squeeze_copy", "t_copy",
    "transpose_copy", "unbind_copy", "unfold_copy", "unsqueeze_copy", "view_copy",
    "_upsample_bilinear2d_aa",
]  # fmt: skip
OPINFO_DTYPES = (torch.float32, torch.float64, torch.int64, torch.bool)


@pytest.mark.parametrize(("info", "dtype"), opinfo_cases(OPINFOS, OPINFO_DTYPES))
def test_opinfo_samples(info, dtype):
    check_opinfo_samples(info, dtype, FAMILY, max_samples=12)


def _grads(fn, x):
    """fn(x) and d(sum(fn(x) * w))/dx, once on torch's kernels and once in the table."""
    outs = []
    w = None
    for table in (False, True):
        xi = x.detach().clone().requires_grad_()
        with TableMode() if table else torch.autograd.set_grad_enabled(True) as mode:
            y = fn(xi)
            if w is None:
                w = torch.randn(y.shape, generator=torch.Generator().manual_seed(5), dtype=y.dtype)
            (y * w).sum().backward()
        if table:
            assert not mode.fallbacks, mode.fallbacks
        outs.append((y.detach(), xi.grad))
    return outs


@pytest.mark.parametrize(
    ("mode", "size", "kw"),
    [
        ("nearest", (5, 7), {}),
        ("nearest-exact", (3, 11), {}),
        ("bilinear", (6, 9), {"align_corners": False}),
        ("bilinear", (6, 9), {"align_corners": True}),
        ("bicubic", (7, 4), {"align_corners": False}),
        ("bicubic", (7, 4), {"align_corners": True}),
        ("bilinear", (2, 3), {"antialias": True}),
        ("bicubic", (9, 2), {"antialias": False}),
    ],
)
def test_interpolate_2d_gradients_equal_torch(mode, size, kw):
    x = torch.randn(2, 3, 4, 5, dtype=torch.float64)
    (y0, g0), (y1, g1) = _grads(lambda t: F.interpolate(t, size=size, mode=mode, **kw), x)
    torch.testing.assert_close(y1, y0)
    torch.testing.assert_close(g1, g0)


@pytest.mark.parametrize(
    "dtype",
    [
        torch.bool,
        torch.uint8,
        torch.int16,
        torch.int64,
        torch.bfloat16,
        torch.float32,
        torch.complex128,
    ],
)
def test_constant_pad_layouts_and_dtypes(dtype):
    """constant_pad_nd's row writer (C-contiguous output, input rows contiguous) and its
    general path (channels-last, strided rows): positive, negative and mixed pads on the last
    dims and on outer dims, a pad covering no input, empty inputs, and a non-zero value."""
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(2, 5, 6, 7, generator=g) * 4).to(dtype)
    value = 1 if dtype != torch.bool else True
    cases = [
        (x, (0, 1, 0, 1)),
        (x, (1, 1, 1, 1)),
        (x, (0, -1, 0, -1)),
        (x, (2, -3, -1, 2, 1, 0)),  # mixed, and the channel dim
        (x, (1, 2, 0, 0, 0, 0, 1, 1)),  # every dim, the batch's too
        (x, (0, -7)),  # no input column left
        (x, (-2, 9, 0, -6)),  # no input row left
        (x[:, :, ::2], (1, 2, 3, 0)),  # strided outer dim, contiguous rows
        (x[..., ::2], (1, 1)),  # strided rows: the general path
        (x.to(memory_format=torch.channels_last), (1, 1, 2, 0)),  # general path
        (x[:, :0], (1, 1, 1, 1)),  # empty input, padded output
        (x[0, 0, 0], (3, -2)),  # 1-d
    ]
    for t, pad in cases:
        for v in (0, value):
            expected = torch.constant_pad_nd(t, pad, v)
            with TableMode() as mode:
                actual = torch.constant_pad_nd(t, pad, v)
            assert not mode.fallbacks, dict(mode.fallbacks)
            assert actual.shape == expected.shape and actual.dtype == expected.dtype, pad
            assert expected.numel() == 0 or actual.stride() == expected.stride(), pad
            assert torch.equal(actual, expected), pad


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize("pad", [(2, 1), (1, 2, 0, 3), (1, 1, 2, 0, 1, 1), (-1, 2)])
def test_pad_gradients_equal_torch(mode, pad):
    x = torch.randn(2, 3, 4, 5, 6, dtype=torch.float64)
    x = {2: x[0, 0], 4: x[0], 6: x}[len(pad)]
    (y0, g0), (y1, g1) = _grads(lambda t: F.pad(t, pad, mode=mode), x)
    torch.testing.assert_close(y1, y0)
    torch.testing.assert_close(g1, g0)


def test_adaptive_max_pool_nan_and_unpool_round_trip():
    x = torch.randn(2, 3, 7, 9)
    x[0, 0, 1, 1] = float("nan")
    with TableMode() as mode:
        y, idx = F.adaptive_max_pool2d(x, (3, 4), return_indices=True)
        back = F.max_unpool2d(y, idx, kernel_size=3, stride=2, output_size=(7, 9))
    assert not mode.fallbacks
    y0, idx0 = F.adaptive_max_pool2d(x, (3, 4), return_indices=True)
    torch.testing.assert_close(y, y0, equal_nan=True)
    assert torch.equal(idx, idx0)
    torch.testing.assert_close(
        back, F.max_unpool2d(y0, idx0, 3, 2, output_size=(7, 9)), equal_nan=True
    )


def test_copy_forms_return_new_memory():
    x = torch.arange(12.0).view(3, 4)
    for name, args in [
        ("aten::view_copy", ([4, 3],)),
        ("aten::permute_copy", ([1, 0],)),
        ("aten::expand_copy", ([2, 3, 4],)),
        ("aten::alias_copy", ()),
    ]:
        out = torch.from_dlpack(tb.call(name, tb.from_dlpack(x), *args))
        expected = getattr(torch.ops.aten, name[6:])(x, *args)
        assert out.data_ptr() != x.data_ptr() and out.is_contiguous()
        assert torch.equal(out, expected)


def test_errors_name_the_op():
    x = tb.from_dlpack(torch.zeros(2, 5, 3, 3))
    with pytest.raises(ValueError, match="pixel_shuffle expects its input's 'channel' dimension"):
        tb.call("aten::pixel_shuffle", x, 2)
    with pytest.raises(ValueError, match="channel_shuffle: Number of channels must be divisible"):
        tb.call("aten::channel_shuffle", x, 2)
    with pytest.raises(ValueError, match="rot90: expected rotation dims to be different"):
        tb.call("aten::rot90", x, 1, [1, 1])
    with pytest.raises(ValueError, match="trace: expected a matrix"):
        tb.call("aten::trace", x)
    idx = tb.from_dlpack(torch.full((2, 5, 3, 3), 40))
    with pytest.raises(IndexError, match="max_unpool2d: found an invalid max index: 40"):
        tb.call("aten::max_unpool2d", x, idx, [6, 6])
    g = tb.from_dlpack(torch.zeros(2, 3, 4))
    with pytest.raises(ValueError, match="reflection_pad1d_backward: padding size should be less"):
        tb.call("aten::reflection_pad1d_backward", g, tb.from_dlpack(torch.zeros(2, 3, 2)), [2, 0])
