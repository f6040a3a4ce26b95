"""Binary, comparison and ternary element-wise kernels (kernels/binary*.cc, kernels/compare.cc,
kernels/ternary.cc): PyTorch's OpInfo samples through the table, plus in-place and out= forms,
aliasing, strided / broadcast / 0-d / empty inputs, type promotion and error messages."""

from __future__ import annotations

import pytest
import torch
from conftest import check_family_samples

import tensorbridge as tb
from tensorbridge._opinfo import find_opinfos, run_samples
from tensorbridge.testing import TableMode

# Kernel tests: an op the table lost raises rather than running torch's own kernel.
pytestmark = pytest.mark.usefixtures("no_fallback")

# OpInfos of this family (every variant of each name, e.g. div.trunc_rounding).
OPINFO_NAMES = [
    "add",
    "sub",
    "rsub",
    "mul",
    "div",
    "true_divide",
    "floor_divide",
    "pow",
    "float_power",
    "maximum",
    "minimum",
    "fmax",
    "fmin",
    "fmod",
    "remainder",
    "atan2",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "bitwise_left_shift",
    "bitwise_right_shift",
    "logical_and",
    "logical_or",
    "logical_xor",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "where",
    "clamp",
    "clamp_min",
    "clamp_max",
    "lerp",
    "addcmul",
    "addcdiv",
    "hypot",
    "copysign",
    "xlogy",
]
OPINFOS = find_opinfos(OPINFO_NAMES)
DTYPES = [torch.float32, torch.float64, torch.int64, torch.bool]

# Ops of this family: anything else a sample falls back to belongs to another family.
OURS = {f"aten::{n}" for n in OPINFO_NAMES} | {
    f"aten::{n}.{o}"
    for n in OPINFO_NAMES
    for o in ("Tensor", "Scalar", "Tensor_Tensor", "Tensor_Scalar", "Tensor_mode", "self")
}


def _opinfo_id(o):
    return o.name + (f".{o.variant_test_name}" if o.variant_test_name else "")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).replace("torch.", ""))
@pytest.mark.parametrize("opinfo", OPINFOS, ids=_opinfo_id)
def test_opinfo_samples(opinfo, dtype):
    check_family_samples(run_samples(opinfo, dtype), OURS)


def test_family_opinfos_found():
    assert len(OPINFOS) >= len(OPINFO_NAMES)  # div has three variants


# ---- direct calls ----------------------------------------------------------------------------


def _arg(a):
    return tb.from_dlpack(a) if isinstance(a, torch.Tensor) else a


def _call(op, *args, **kwargs):
    """tb.call on torch tensors (zero-copy both ways)."""
    out = tb.call(op, *[_arg(a) for a in args], **{k: _arg(v) for k, v in kwargs.items()})
    return torch.from_dlpack(out)


def _run(fn, *args):
    """fn(*args) through the table; also checks nothing fell back."""
    with TableMode() as mode:
        r = fn(*args)
    assert not mode.fallbacks, dict(mode.fallbacks)
    return r


def _check(fn, *args):
    """fn through the table equals fn in torch (on fresh clones of the inputs)."""
    expected = fn(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    actual = _run(fn, *[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    torch.testing.assert_close(actual, expected, equal_nan=True)
    return actual


# ---- in-place forms and aliasing --------------------------------------------------------------

INPLACE = {
    "add_": lambda x, y: x.add_(y, alpha=0.5),
    "sub_": lambda x, y: x.sub_(y, alpha=2),
    "mul_": lambda x, y: x.mul_(y),
    "div_": lambda x, y: x.div_(y),
    "div_floor": lambda x, y: x.div_(y, rounding_mode="floor"),
    "pow_": lambda x, y: x.pow_(2),
    "addcmul_": lambda x, y: x.addcmul_(y, y, value=-0.5),
    "addcdiv_": lambda x, y: x.addcdiv_(y, y * y + 1, value=0.1),
    "lerp_": lambda x, y: x.lerp_(y, 0.3),
    "lerp_tensor": lambda x, y: x.lerp_(y, y),
    "clamp_": lambda x, y: x.clamp_(-0.5, 0.5),
    "clamp_min_": lambda x, y: x.clamp_min_(0.1),
    "clamp_max_": lambda x, y: x.clamp_max_(0.1),
    "fmod_": lambda x, y: x.fmod_(0.7),
    "eq_": lambda x, y: x.eq_(y),
}


@pytest.mark.parametrize("name", sorted(INPLACE))
def test_inplace_returns_self_and_writes_its_memory(name):
    x = torch.randn(5, 7, dtype=torch.float64)
    y = torch.randn(5, 7, dtype=torch.float64)
    expected = INPLACE[name](x.clone(), y)
    z = x.clone()
    ptr = z.data_ptr()
    with TableMode() as mode:
        r = INPLACE[name](z, y)
    assert r is z and z.data_ptr() == ptr
    assert not mode.fallbacks, dict(mode.fallbacks)
    torch.testing.assert_close(z, expected)


def test_inplace_self_aliasing():
    x = torch.randn(4, 6)
    for fn in (
        lambda t: t.add_(t),
        lambda t: t.mul_(t),
        lambda t: t.sub_(t, alpha=0.5),
        lambda t: t.div_(t),
        lambda t: t.addcmul_(t, t),
        lambda t: t.lerp_(t, t),
    ):
        _check(fn, x)


def test_inplace_on_strided_view_touches_only_the_view():
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    expected = base.clone()
    expected[::2, 1::2] += 100
    view = base[::2, 1::2]
    _run(lambda v: v.add_(100), view)
    torch.testing.assert_close(base, expected)


def test_overlapping_input_is_read_before_it_is_written():
    # The input overlaps the output shifted by one: computed into a temporary, then copied.
    x = torch.arange(10, dtype=torch.float64)
    r = _call("aten::add_.Tensor", x[1:], x[:-1])
    expected = torch.arange(1, 10, dtype=torch.float64) + torch.arange(9, dtype=torch.float64)
    torch.testing.assert_close(r, expected)
    sq = torch.arange(16, dtype=torch.float32).reshape(4, 4)
    expected = sq * sq.t()
    _call("aten::mul_.Tensor", sq, sq.t())
    torch.testing.assert_close(sq, expected)


def test_inplace_with_broadcast_other_and_wider_dtype():
    x = torch.randn(3, 4)
    _check(lambda a, b: a.add_(b), x, torch.randn(4, dtype=torch.float64))  # computed in f64
    _check(lambda a, b: a.mul_(b), torch.arange(6).reshape(2, 3), torch.tensor([1, 2, 3]))
    _check(lambda a: a.lt_(0.5), x)  # bool result written into float32 self


def test_out_variants():
    a, b = torch.randn(3, 4), torch.randn(4)
    for op, fn in [
        ("aten::add.out", torch.add),
        ("aten::sub.out", torch.sub),
        ("aten::mul.out", torch.mul),
        ("aten::div.out", torch.div),
    ]:
        out = torch.empty(3, 4, dtype=torch.float64)
        r = _call(op, a, b, out=out)
        assert r.data_ptr() == out.data_ptr()
        torch.testing.assert_close(out, fn(a, b).double())
    # The output may be strided.
    out = torch.zeros(4, 3).t()
    _call("aten::add.out", a, b, out=out)
    torch.testing.assert_close(out, a + b)


# ---- promotion, strides, 0-d and empty ----------------------------------------------------------


def test_type_promotion_with_python_numbers_and_zero_dim_tensors():
    i = torch.arange(-3, 3)
    x = torch.randn(6)
    u8 = torch.arange(250, 256, dtype=torch.uint8)
    cases = [
        (lambda: i + 2.5, torch.float32),
        (lambda: i * 2, torch.int64),
        (lambda: torch.tensor([True, False]) + 1, torch.int64),
        (lambda: u8 + 10, torch.uint8),
        (lambda: u8 + i, torch.int64),
        (lambda: x + torch.tensor(1.5, dtype=torch.float64), torch.float32),
        (lambda: i + torch.tensor(1.5, dtype=torch.float64), torch.float64),
        (lambda: i / 2, torch.float32),
        (lambda: i // 2, torch.int64),
        (lambda: x.bfloat16() + x.half(), torch.float32),
        (lambda: i < 0.5, torch.bool),
        (lambda: torch.where(i > 0, i, x), torch.float32),
        (lambda: 2 ** i.abs(), torch.int64),
        (lambda: torch.atan2(i, i + 10), torch.float32),
        (lambda: i.clamp(min=0.5), torch.float32),
    ]
    for fn, dtype in cases:
        expected = fn()
        with TableMode():
            actual = fn()
        assert actual.dtype == dtype == expected.dtype
        torch.testing.assert_close(actual, expected)


def test_bool_arithmetic_follows_torch():
    t = torch.tensor([True, False, True, False])
    f = torch.tensor([True, True, False, False])
    for fn in (
        lambda: t + f,
        lambda: t * f,
        lambda: torch.add(t, f, alpha=True),
        lambda: torch.maximum(t, f),
        lambda: t / f,
        lambda: t ^ f,
        lambda: t == f,
    ):
        torch.testing.assert_close(_run(fn), fn(), equal_nan=True)


@pytest.mark.parametrize(
    "fn",
    [
        lambda a, b: a + b,
        lambda a, b: a * b,
        lambda a, b: a / b,
        lambda a, b: a % b,
        lambda a, b: torch.maximum(a, b),
        lambda a, b: a >= b,
        lambda a, b: torch.atan2(a, b),
        lambda a, b: torch.where(a > 0, a, b),
        lambda a, b: torch.lerp(a, b, 0.25),
    ],
    ids=["add", "mul", "div", "remainder", "maximum", "ge", "atan2", "where", "lerp"],
)
def test_non_contiguous_and_broadcast_inputs(fn):
    x = torch.randn(6, 8, 3, dtype=torch.float64)
    y = torch.randn(8, 6, dtype=torch.float64) + 3
    _check(fn, x.transpose(0, 2)[:, :, ::2], y[:, ::2])  # [3, 8, 3] with [8, 3]
    _check(fn, x.flip(1), x.permute(0, 1, 2))  # negative strides
    _check(fn, x[:, :1, :], x[:1, :, 1:2])  # both broadcast
    _check(fn, x.expand(2, 6, 8, 3), torch.tensor(1.5, dtype=torch.float64))


def test_large_inputs_take_the_parallel_loops():
    a = torch.randn(300, 257)
    b = torch.randn(257)
    _check(lambda p, q: p * q + 1, a, b)
    _check(lambda p, q: torch.addcdiv(p, p, q * q + 1, value=0.5), a, b)
    _check(lambda p: (p > 0) & (p < 0.5), a)


def test_broadcast_copies_and_casts_over_many_short_rows():
    """The element loop's rows: broadcast along the row (a held input), many short rows whose
    outer index is counted up (split across threads mid-row when large), casts on the way."""
    g = torch.Generator().manual_seed(1)
    for src, shape in [
        ((1, 48, 1, 1), (2, 48, 32, 32)),
        ((1, 1, 7), (33, 129, 7)),
        ((5, 1, 3, 1), (5, 70, 3, 300)),
        ((1,), (100_003,)),
    ]:
        x = torch.randn(src, generator=g)
        for fn in (
            lambda t, s=shape: t.expand(s).contiguous(),
            lambda t, s=shape: t.expand(s).to(torch.float64),
            lambda t, s=shape: t.expand(s).to(torch.bfloat16),
            lambda t, s=shape: t.expand(s) * 2 + 1,
            lambda t, s=shape: t.expand(s).movedim(0, -1).contiguous(),
        ):
            _check(fn, x)


def test_zero_dim_and_empty():
    for fn in (
        lambda a, b: a + b,
        lambda a, b: a * b,
        lambda a, b: a < b,
        lambda a, b: torch.pow(a, b),
        lambda a, b: torch.where(a > 0, a, b),
    ):
        for a, b in (
            (torch.tensor(0.75), torch.tensor(-2.0)),
            (torch.empty(0), torch.empty(0)),
            (torch.empty(3, 0, 2), torch.empty(2)),
            (torch.tensor(2.0), torch.empty(0)),
        ):
            r = _run(fn, a, b)
            e = fn(a, b)
            assert r.shape == e.shape and r.dtype == e.dtype
            torch.testing.assert_close(r, e)


@pytest.mark.parametrize(
    "dtype",
    [
        torch.bool,
        torch.int8,
        torch.int16,
        torch.int64,
        torch.float16,
        torch.bfloat16,
        torch.float32,
        torch.float64,
    ],
)
def test_where_dense_broadcast_and_scalar_operands(dtype):
    """where's row loop: a dense random condition (bit selection), a condition broadcast along
    the row (a copy of one side), scalar operands on either side, strided rows, and every
    element size; the result equals torch's bit for bit (NaN, -0.0 and infinities kept)."""
    g = torch.Generator().manual_seed(0)

    def values(*shape):
        v = torch.randn(*shape, generator=g) * 3
        if dtype.is_floating_point:
            v[..., :4] = torch.tensor([float("nan"), -0.0, float("inf"), -float("inf")])
        return v.to(dtype)

    x, y = values(3, 5, 69), values(3, 5, 69)
    dense = torch.rand(3, 5, 69, generator=g) > 0.5
    row = torch.rand(3, 5, 1, generator=g) > 0.5
    scalar = torch.tensor(1, dtype=dtype)
    cases = [
        (dense, x, y),
        (row, x, y),
        (dense[:, :, ::2], x[:, :, ::2], y.flip(2)[:, :, ::2]),
        (dense, x, scalar),
        (dense, scalar, y),
        (dense, scalar, scalar),
        (row, scalar, y[:, :, ::3]),
        (dense.transpose(1, 2), x.transpose(1, 2), y.transpose(1, 2)),
        (dense[:, :, :1].expand(3, 5, 69), x, y),
    ]
    for c, a, b in cases:
        actual = _run(torch.where, c, a, b)
        expected = torch.where(c, a, b)
        assert actual.dtype == expected.dtype and actual.shape == expected.shape
        bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[dtype.itemsize]
        assert torch.equal(actual.view(bits), expected.view(bits))


def test_where_uint8_condition_selects_on_any_nonzero_byte():
    c = torch.tensor([0, 1, 2, 255, 0, 128], dtype=torch.uint8)
    a, b = torch.arange(6.0), -torch.arange(6.0) - 1
    with pytest.warns(UserWarning, match="uint8"):
        expected = torch.where(c, a, b)
    actual = _run(torch.where, c, a, b)
    torch.testing.assert_close(actual, expected)


def test_integer_edge_cases():
    imin = torch.tensor([-(2**63), 7, -7])
    _check(lambda a: a // -1, imin)  # wraps instead of trapping
    # torch's own CPU kernels trap (SIGFPE) on INT64_MIN % -1 and on trunc division by -1;
    # ours give 0 and the wrapped quotient.
    assert _run(lambda a: a % -1, imin).tolist() == [0, 0, 0]
    trunc = _run(lambda a: torch.div(a, -1, rounding_mode="trunc"), imin)
    assert trunc.tolist() == [-(2**63), -7, 7]
    _check(lambda a: a * 4, torch.tensor([2**62]))  # wraps like torch
    _check(lambda a: a + 1, torch.tensor([127], dtype=torch.int8))
    _check(lambda a: a << 70, torch.tensor([1, -1]))  # out-of-range shifts
    _check(lambda a, b: a >> b, torch.tensor([-64, -64]), torch.tensor([3, 70]))
    _check(torch.pow, torch.tensor([-1, -1, 2, 1, 3]), torch.tensor([-1, -2, -1, -5, 3]))


def test_special_float_values():
    nan, inf = float("nan"), float("inf")
    a = torch.tensor([nan, 1.0, -0.0, inf, -inf, 2.0])
    b = torch.tensor([1.0, nan, 0.0, inf, 3.0, -0.0])
    for fn in (
        torch.maximum,
        torch.minimum,
        torch.fmax,
        torch.fmin,
        torch.fmod,
        torch.remainder,
        torch.atan2,
        torch.copysign,
        torch.xlogy,
        torch.hypot,
        lambda p, q: torch.div(p, q, rounding_mode="floor"),
        torch.eq,
        torch.lt,
    ):
        _check(fn, a, b)
    _check(lambda p: p.clamp(float("nan"), 1.0), a)
    _check(lambda p: p.clamp(2.0, -1.0), a)
    _check(lambda p, q: p.clamp(q, q + 1), a, b)


# ---- errors -----------------------------------------------------------------------------------


def test_errors_name_the_op_and_the_problem():
    f, i, t = torch.ones(2, 3), torch.arange(3), torch.tensor([True, False])
    with pytest.raises(ValueError, match=r"aten::add.Tensor.*cannot be broadcast"):
        _call("aten::add.Tensor", f, torch.ones(4))
    with pytest.raises(TypeError, match="alpha must not be a floating point"):
        _call("aten::add.Tensor", i, i, alpha=0.5)
    with pytest.raises(TypeError, match="boolean alpha"):
        _call("aten::add.Tensor", f, f, alpha=True)
    with pytest.raises(TypeError, match="with two bool tensors is not supported"):
        _call("aten::sub.Tensor", t, t)
    with pytest.raises(TypeError, match="with a bool tensor is not supported"):
        _call("aten::rsub.Scalar", t, 1)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        _call("aten::div.Tensor_mode", i, torch.tensor([1, 0, 1]), rounding_mode="floor")
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        _call("aten::remainder.Scalar", i, 0)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        _call("aten::fmod.Tensor", i, torch.zeros(3, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"rounding_mode.*'round'"):
        _call("aten::div.Tensor_mode", f, f, rounding_mode="round")
    with pytest.raises(ValueError, match=r"output with shape \[3, 3\] doesn't match.*\[2, 3\]"):
        _call("aten::add.out", f, f, out=torch.empty(3, 3))
    with pytest.raises(ValueError, match=r"output with shape \[3\] doesn't match.*\[2, 3\]"):
        _call("aten::mul_.Tensor", torch.ones(3), f)
    with pytest.raises(TypeError, match="float32 can't be cast to the desired output type int64"):
        _call("aten::mul_.Scalar", i, 1.5)
    with pytest.raises(TypeError, match="can't be cast"):
        _call("aten::div.out", i, i, out=torch.empty(3, dtype=torch.int64))
    with pytest.raises(ValueError, match="single memory location"):
        _call("aten::add_.Scalar", torch.ones(1, 3).expand(4, 3), 1)
    with pytest.raises(TypeError, match=r"aten::bitwise_and.*float32"):
        _call("aten::bitwise_and.Tensor", f, f)
    with pytest.raises(TypeError, match=r"aten::bitwise_left_shift.*bool"):
        _call("aten::bitwise_left_shift.Tensor", t, t)
    with pytest.raises(ValueError, match="negative integer powers"):
        _call("aten::pow.Tensor_Scalar", i, -1)
    with pytest.raises(TypeError, match=r"condition to be a boolean tensor.*float32"):
        _call("aten::where.self", f, f, f)
    with pytest.raises(ValueError, match="at least one of 'min' or 'max'"):
        _call("aten::clamp", f)
    with pytest.raises(TypeError, match="expected dtype float32 for `end`"):
        _call("aten::lerp.Scalar", f, f.double(), 0.5)
    with pytest.raises(TypeError, match="integer division with addcdiv"):
        _call("aten::addcdiv", f[0], i, i)
    with pytest.raises(TypeError, match=r"hypot.*floating"):
        _call("aten::hypot", i, i)
    u8 = torch.tensor([1, 200], dtype=torch.uint8)
    with pytest.raises(ValueError, match="max = 300 cannot be converted"):
        _call("aten::clamp", u8, None, 300)
    with pytest.raises(ValueError, match="alpha = 300 cannot be converted"):
        _call("aten::add.Tensor", u8, u8, alpha=300)
    # Negative values wrap into unsigned types, as torch allows.
    torch.testing.assert_close(_call("aten::clamp", u8, -5), u8.clamp(-5))


def test_read_only_destination_is_refused():
    import numpy as np

    a = np.ones(3, dtype=np.float32)
    a.flags.writeable = False
    ro = tb.from_dlpack(a)
    assert ro.read_only
    with pytest.raises(BufferError, match="read-only"):
        tb.call("aten::add_.Scalar", ro, 1)
    with pytest.raises(BufferError, match="read-only"):
        tb.call("aten::mul.out", tb.from_dlpack(torch.ones(3)), 2.0, out=ro)
    # Read-only inputs are fine: only the output is written.
    r = torch.from_dlpack(tb.call("aten::add.Tensor", ro, ro))
    torch.testing.assert_close(r, torch.full((3,), 2.0))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("alpha", [0.3, 2.5, -1.7])
@pytest.mark.parametrize("op", ["aten::add.Tensor", "aten::sub.Tensor"])
def test_reduced_float_add_with_alpha_rounds_once(op, alpha, dtype):
    # torch's vectorized loop computes x + round(alpha) * y in float and rounds once; 4096
    # elements are whole vectors in one chunk, so every element takes that loop: the same bits.
    # Rounding alpha * y first (torch's scalar loop) differs in about a quarter of them.
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4096, generator=g).to(dtype)
    y = torch.randn(4096, generator=g).to(dtype)
    want = (torch.add if op == "aten::add.Tensor" else torch.sub)(x, y, alpha=alpha)
    got = _call(op, x, y, alpha=alpha)
    assert got.dtype == dtype
    assert torch.equal(got, want), (got != want).sum().item()
