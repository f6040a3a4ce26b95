"""Unary element-wise kernels (kernels/unary_*.cc): PyTorch's OpInfo samples through the table,
plus in-place forms, strided / 0-d / empty inputs, special values and dtype rules."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from conftest import check_family_samples

import tensorbridge as tb
from tensorbridge._opinfo import find_opinfos, run_samples
from tensorbridge.testing import TableMode

# Kernel tests: an op the table lost raises rather than running torch's own kernel.
pytestmark = pytest.mark.usefixtures("no_fallback")

# OpInfos of this family (every variant of each name, e.g. round.decimals_3).
OPINFO_NAMES = """
    abs neg sign sgn signbit reciprocal sqrt rsqrt exp exp2 expm1 log log2 log10 log1p sin cos
    tan asin acos atan sinh cosh tanh asinh acosh atanh erf erfc erfinv sigmoid logit ceil floor
    round trunc frac isnan isinf isfinite isposinf isneginf nan_to_num logical_not bitwise_not
    deg2rad rad2deg lgamma digamma sinc i0
""".split()
OPINFOS = find_opinfos(OPINFO_NAMES)
DTYPES = [torch.float32, torch.float64, torch.int64, torch.bool]

# Ops of this family (anything else a sample falls back to belongs to another family).
OURS = {f"aten::{n}" for n in [*OPINFO_NAMES, "round.decimals", "sigmoid_backward"]}


def _opinfo_id(o):
    return o.name + (f".{o.variant_test_name}" if o.variant_test_name else "")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).replace("torch.", ""))
@pytest.mark.parametrize("opinfo", OPINFOS, ids=_opinfo_id)
def test_opinfo_samples(opinfo, dtype):
    check_family_samples(run_samples(opinfo, dtype), OURS)


# The OpInfos' reference inputs are larger and hold the extremes (nan, +-inf, huge, tiny): a
# float32 run over the ops with vectorised paths or their own algorithms.
REFERENCE_OPS = """
    exp log tanh sigmoid erf erfinv digamma lgamma floor round trunc nan_to_num logit sinc i0
""".split()


@pytest.mark.parametrize("opinfo", find_opinfos(REFERENCE_OPS), ids=_opinfo_id)
def test_opinfo_reference_inputs_float32(opinfo):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        samples = list(opinfo.reference_inputs("cpu", torch.float32, requires_grad=False))
    failures = []
    for i, s in enumerate(samples):
        expected = opinfo(s.input, *s.args, **s.kwargs)
        s2 = s.transform(lambda t: t.clone() if isinstance(t, torch.Tensor) else t)
        with TableMode() as mode:
            actual = opinfo(s2.input, *s2.args, **s2.kwargs)
        try:
            torch.testing.assert_close(actual, expected, equal_nan=True, check_stride=False)
            assert not mode.fallbacks, mode.fallbacks
        except AssertionError as e:
            failures.append((i, str(e)[:200]))
    assert len(samples) > 5 and not failures, failures[:3]


def test_family_opinfos_found():
    assert len(OPINFOS) >= len(OPINFO_NAMES)  # round has several variants


# ---- direct calls ----------------------------------------------------------------------------


def _call(op, *args, **kwargs):
    """tb.call on torch tensors (zero-copy both ways)."""
    out = tb.call(
        op, *[tb.from_dlpack(a) if isinstance(a, torch.Tensor) else a for a in args], **kwargs
    )
    return torch.from_dlpack(out)


FLOAT_FNS = {
    "exp": torch.exp,
    "log": torch.log,
    "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "sin": torch.sin,
    "erf": torch.erf,
    "erfinv": torch.erfinv,
    "lgamma": torch.lgamma,
    "digamma": torch.digamma,
    "reciprocal": torch.reciprocal,
    "expm1": torch.expm1,
    "log1p": torch.log1p,
}


@pytest.mark.parametrize("name", sorted(FLOAT_FNS))
def test_inplace_returns_self_and_writes_its_memory(name):
    x = torch.rand(5, 7, dtype=torch.float64) + 0.1
    if name == "erfinv":
        x = x / 2
    expected = FLOAT_FNS[name](x)
    y = x.clone()
    ptr = y.data_ptr()
    with TableMode() as mode:
        r = getattr(y, name + "_")()
    assert r is y and y.data_ptr() == ptr
    assert mode.served[f"aten::{name}_"] == 1 and not mode.fallbacks
    torch.testing.assert_close(y, expected)


def test_inplace_on_strided_view_touches_only_the_view():
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6) / 10
    orig = base.clone()
    view = base[::2, 1::2]
    with TableMode() as mode:
        view.exp_()
    assert not mode.fallbacks
    expected = orig.clone()
    expected[::2, 1::2] = orig[::2, 1::2].exp()
    torch.testing.assert_close(base, expected)


def test_inplace_dtype_and_overlap_errors():
    with pytest.raises(TypeError, match="can't be cast"):
        _call("aten::exp_", torch.arange(3))
    with pytest.raises(ValueError, match="single memory location"):
        _call("aten::exp_", torch.ones(1, 3).expand(4, 3))
    with pytest.raises(TypeError, match="bool"):
        _call("aten::neg", torch.tensor([True, False]))
    with pytest.raises(NotImplementedError, match="bool"):
        _call("aten::abs", torch.tensor([True, False]))
    with pytest.raises(NotImplementedError, match="aten::frac: dtype int64 is not supported"):
        _call("aten::frac", torch.arange(3))
    with pytest.raises(TypeError, match="aten::bitwise_not: dtype float32 is not supported"):
        _call("aten::bitwise_not", torch.ones(3))
    with pytest.raises(NotImplementedError, match=r"aten::round.decimals: dtype int64"):
        _call("aten::round.decimals", torch.arange(3), decimals=1)


def test_logical_not_inplace_keeps_float_dtype():
    x = torch.tensor([1.5, 0.0, float("nan"), -0.0])
    r = _call("aten::logical_not_", x)
    assert r.dtype == torch.float32
    torch.testing.assert_close(x, torch.tensor([0.0, 1.0, 0.0, 1.0]))


@pytest.mark.parametrize("op", ["exp", "abs", "floor", "sigmoid", "isnan", "sign"])
def test_non_contiguous_inputs(op):
    x = torch.randn(6, 8, 3, dtype=torch.float64)
    for v in (x.transpose(0, 2), x[:, ::3, 1], x.permute(1, 2, 0)[::2], x.expand(2, 6, 8, 3)):
        torch.testing.assert_close(_call(f"aten::{op}", v), getattr(torch, op)(v))


@pytest.mark.parametrize("op", ["exp", "abs", "round", "isinf", "logical_not", "sigmoid"])
def test_zero_dim_and_empty(op):
    for x in (torch.tensor(0.75), torch.empty(0), torch.empty(3, 0, 2)):
        r = _call(f"aten::{op}", x)
        e = getattr(torch, op)(x)
        assert r.shape == e.shape and r.dtype == e.dtype
        torch.testing.assert_close(r, e)


def test_large_contiguous_threaded_and_vectorised():
    # Big enough for several threads and for the blocked (Eigen) paths; the edge values land in
    # some blocks only, so both the vectorised and the guarded scalar blocks run.
    x = torch.randn(300_000, dtype=torch.float32) * 4
    x[1000:1008] = torch.tensor([-100.0, -float("inf"), 1e-40, -0.0, -0.4, 0.5, 2.5, float("nan")])
    for op in (
        "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "reciprocal", "erf", "abs",
        "floor", "ceil", "trunc", "round",
    ):  # fmt: skip
        a = x.abs() if op in ("log", "sqrt", "rsqrt") else x
        expected = getattr(torch, op)(a)
        got = _call(f"aten::{op}", a)
        torch.testing.assert_close(got, expected, equal_nan=True, msg=op)
        # Signs of zeros and the exactness of the rounding functions.
        if op in ("floor", "ceil", "trunc", "round", "abs"):
            assert torch.equal(got.view(torch.int32), expected.view(torch.int32)), op
        # In place over the same data gives the same result.
        y = a.clone()
        _call(f"aten::{op}_", y)
        assert torch.equal(y.view(torch.int32), got.view(torch.int32)), op
    xd = x.double()
    for op in ("exp", "log", "tanh", "sigmoid", "floor"):
        a = xd.abs() if op == "log" else xd
        torch.testing.assert_close(
            _call(f"aten::{op}", a), getattr(torch, op)(a), equal_nan=True, msg=op
        )


SPECIAL = [
    float("nan"),
    float("inf"),
    -float("inf"),
    -0.0,
    0.0,
    1.0,
    -1.0,
    0.5,
    -2.5,
    2.5,
    1e-30,
    1e30,
    -100.0,
    100.0,
    1e-45,
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("op", [n for n in OPINFO_NAMES if n != "bitwise_not"])
def test_special_values(op, dtype):
    x = torch.tensor(SPECIAL, dtype=dtype)
    e = getattr(torch, op)(x)
    r = _call(f"aten::{op}", x)
    assert r.dtype == e.dtype
    tol = {"rtol": 2e-6, "atol": 1e-5} if dtype == torch.float32 else {}
    torch.testing.assert_close(r, e, equal_nan=True, **tol)
    # The signs of zeros agree too (copysign on zeros).
    if e.dtype.is_floating_point:
        zero = e == 0
        assert torch.equal(torch.signbit(r[zero]), torch.signbit(e[zero])), op


@pytest.mark.parametrize("op", ["exp", "sqrt", "sin", "sigmoid", "erf", "lgamma", "deg2rad"])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.bool])
def test_integer_inputs_promote_to_float32(op, dtype):
    x = torch.tensor([0, 1, 3, 7], dtype=torch.int64).to(dtype)
    r = _call(f"aten::{op}", x)
    assert r.dtype == torch.float32
    torch.testing.assert_close(r, getattr(torch, op)(x))


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int32, torch.int64])
def test_integer_wraparound(dtype):
    info = torch.iinfo(dtype)
    x = torch.tensor([info.min, info.min + 1, -1 if info.min < 0 else 1, 0, info.max], dtype=dtype)
    for op in (
        "abs",
        "neg",
        "sign",
        "bitwise_not",
        "floor",
        "ceil",
        "round",
        "trunc",
        "signbit",
        "nan_to_num",
        "logical_not",
        "isfinite",
    ):
        torch.testing.assert_close(_call(f"aten::{op}", x), getattr(torch, op)(x), msg=op)


def test_round_decimals_and_nan_to_num_arguments():
    x = torch.tensor([0.125, 1234.5678, -2.5, 0.5, float("nan")], dtype=torch.float64)
    for d in (-3, -1, 0, 1, 2, 3):
        torch.testing.assert_close(
            _call("aten::round.decimals", x, decimals=d), torch.round(x, decimals=d), equal_nan=True
        )
    y = torch.tensor([float("nan"), float("inf"), -float("inf"), 2.0], dtype=torch.float16)
    for kw in ({}, {"nan": 1.0}, {"posinf": 7.0, "neginf": -1e9}, {"nan": -3.0, "posinf": 1e6}):
        torch.testing.assert_close(_call("aten::nan_to_num", y, **kw), torch.nan_to_num(y, **kw))


def test_logit_eps_and_backward_helpers():
    x = torch.tensor(
        [-0.5, 0.0, -0.0, 1e-8, 0.3, 0.999, 1.0, 1.5, float("nan")], dtype=torch.float64
    )
    g = torch.linspace(-1, 1, 9, dtype=torch.float64)
    for eps in (None, 0.0, 1e-6, 0.2, -1.0):
        torch.testing.assert_close(
            _call("aten::logit", x, eps), torch.logit(x, eps), equal_nan=True
        )
        torch.testing.assert_close(
            _call("aten::logit_backward", g, x, eps),
            torch.ops.aten.logit_backward(g, x, eps),
            equal_nan=True,
        )
    y = torch.rand(4, 5)
    gy = torch.randn(5)
    torch.testing.assert_close(
        _call("aten::sigmoid_backward", gy, y), torch.ops.aten.sigmoid_backward(gy, y)
    )
    torch.testing.assert_close(
        _call("aten::tanh_backward", gy, y), torch.ops.aten.tanh_backward(gy, y)
    )


def test_autograd_through_the_table():
    x = torch.randn(10, dtype=torch.float64, requires_grad=True)
    with TableMode() as mode:
        (torch.sigmoid(x) * 1.0).sum().backward()
    assert mode.served["aten::sigmoid"] == 1 and mode.served["aten::sigmoid_backward"] == 1
    s = torch.sigmoid(x.detach())
    torch.testing.assert_close(x.grad, s * (1 - s))
    assert math.isfinite(float(x.grad.sum()))
