"""Reductions, scans and sorting (kernels/reduce*.cc, scan.cc, sort.cc) against torch.

Each OpInfo of the family runs its CPU samples through the table (TableMode) for float32,
float64, int64 and bool and must pass at least 95% of them; targeted tests cover keepdim,
negative dims, non-contiguous and empty inputs, NaN, ties, long rows and parallel paths.
"""

from __future__ import annotations

import math

import pytest
import torch
from conftest import check_family_samples

from tensorbridge._opinfo import find_opinfos, run_samples
from tensorbridge.testing import TableMode

# Kernel tests: an op the table lost raises rather than running torch's own kernel.
pytestmark = pytest.mark.usefixtures("no_fallback")

# The ATen overloads this family registers.
FAMILY_OPS = {
    "aten::" + n
    for n in """sum sum.dim_IntList nansum mean mean.dim prod prod.dim_int count_nonzero
    count_nonzero.dim_IntList any any.dim any.dims all all.dim all.dims amax amin max min
    max.dim min.dim argmax argmin aminmax var.correction std.correction var.dim std.dim var std
    var_mean.correction std_mean.correction var_mean.dim std_mean.dim var_mean std_mean
    logsumexp linalg_vector_norm norm.Scalar norm.ScalarOpt_dim cumsum cumprod cummax cummin
    sort sort.stable topk kthvalue median median.dim nanmedian nanmedian.dim""".split()
}

OPINFO_NAMES = [
    "sum",
    "mean",
    "prod",
    "amax",
    "amin",
    "max.reduction_with_dim",
    "max.reduction_no_dim",
    "min.reduction_with_dim",
    "min.reduction_no_dim",
    "argmax",
    "argmin",
    "any",
    "all",
    "var",
    "std",
    "var_mean",
    "std_mean",
    "logsumexp",
    "linalg.vector_norm",
    "norm",
    "count_nonzero",
    "cumsum",
    "cumprod",
    "cummax",
    "cummin",
    "sort",
    "topk",
    "argsort",
    "aminmax",
    "nansum",
    "median",
    "nanmedian",
    "kthvalue",
]
# OpInfo variants of these names that belong to other families (max.binary: aten::maximum,
# norm.nuc: SVD).
FOREIGN_VARIANTS = {("max", "binary"), ("min", "binary"), ("norm", "nuc")}

DTYPES = [torch.float32, torch.float64, torch.int64, torch.bool]


def _opinfos():
    out = []
    for o in find_opinfos(OPINFO_NAMES):
        if (o.name, o.variant_test_name) in FOREIGN_VARIANTS:
            continue
        name = o.name + (f".{o.variant_test_name}" if o.variant_test_name else "")
        out.append(pytest.param(o, id=name))
    return out


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).replace("torch.", ""))
@pytest.mark.parametrize("opinfo", _opinfos())
def test_opinfo(opinfo, dtype):
    check_family_samples(run_samples(opinfo, dtype), FAMILY_OPS)


# ---- targeted -----------------------------------------------------------------------------------


def _table(fn, *args, **kwargs):
    """fn(*args) through the table, strict: every ATen op must be served."""
    with TableMode(strict=True):
        return fn(*args, **kwargs)


def _check(fn, *args, **kwargs):
    expected = fn(*args, **kwargs)
    actual = _table(fn, *args, **kwargs)
    torch.testing.assert_close(actual, expected, equal_nan=True, check_stride=False)
    return actual


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [0, -1, (0, 2), (-1, -3), (1,), None])
def test_keepdim_negative_dims(dim, keepdim):
    x = torch.randn(3, 4, 5, dtype=torch.float64)
    kw = {"keepdim": keepdim}
    if dim is None:
        _check(lambda t: torch.sum(t), x)
        _check(lambda t: torch.amax(t, dim=(), keepdim=keepdim), x)
    else:
        _check(lambda t: torch.sum(t, dim, **kw), x)
        _check(lambda t: torch.mean(t, dim, **kw), x)
        _check(lambda t: torch.amax(t, dim, **kw), x)
        _check(lambda t: torch.var(t, dim, correction=0, **kw), x)
        _check(lambda t: torch.logsumexp(t, dim, **kw), x)
        _check(lambda t: torch.linalg.vector_norm(t, 3, dim, **kw), x)
        _check(lambda t: torch.any(t > 0, dim, **kw), x)
    if isinstance(dim, int):
        _check(lambda t: torch.max(t, dim, **kw), x)
        _check(lambda t: torch.argmin(t, dim, **kw), x)
        _check(lambda t: torch.prod(t, dim, **kw), x)
        _check(lambda t: torch.median(t, dim, **kw), x)


def _noncontiguous():
    base = torch.randn(7, 6, 5)
    return {
        "transposed": base.transpose(0, 2),
        "sliced": base[::2, 1:, ::2],
        "permuted": base.permute(1, 2, 0),
        "expanded": torch.randn(6, 1, 5).expand(6, 4, 5),
        # runs of 8 that merge with no neighbour (grouped-query attention's gradient layout)
        "runs": torch.randn(3, 2, 7, 8).permute(0, 2, 1, 3),
    }


@pytest.mark.parametrize("kind", ["transposed", "sliced", "permuted", "expanded", "runs"])
def test_noncontiguous(kind):
    x = _noncontiguous()[kind]
    for dim in [0, 1, 2, (0, 2), (0, 1)]:
        _check(lambda t, dim=dim: torch.sum(t, dim), x)
        _check(lambda t, dim=dim: torch.std_mean(t, dim), x)
        _check(lambda t, dim=dim: torch.amin(t, dim), x)
    for dim in [0, 1, 2]:
        _check(lambda t, dim=dim: torch.max(t, dim), x)
        _check(lambda t, dim=dim: torch.cumsum(t, dim), x)
        _check(lambda t, dim=dim: torch.cummax(t, dim), x)
        _check(lambda t, dim=dim: torch.sort(t, dim=dim, stable=True), x)
        _check(lambda t, dim=dim: torch.topk(t, 2, dim), x)
    _check(lambda t: torch.argmax(t), x)
    _check(lambda t: torch.sum(t), x)


def test_empty():
    e = torch.empty(0, 3)
    assert _check(lambda t: t.sum(), e).item() == 0
    assert _check(lambda t: t.prod(), e).item() == 1
    _check(lambda t: t.sum(0), e)
    _check(lambda t: t.prod(0), e)
    _check(lambda t: t.amax(1), e)  # reduces a non-empty dim: empty result
    _check(lambda t: t.mean(0), e)  # NaN
    _check(lambda t: t.var(0), e)
    _check(lambda t: t.logsumexp(0), e)
    _check(lambda t: t.any(0), e)
    _check(lambda t: t.all(0), e)
    _check(lambda t: t.cumsum(0), e)
    _check(lambda t: t.sort(0), e)
    for fn in [
        lambda t: t.amax(0),
        lambda t: t.amax(),
        lambda t: t.max(),
        lambda t: t.max(0),
        lambda t: t.argmax(),
        lambda t: t.aminmax(),
    ]:
        with pytest.raises(
            (IndexError, RuntimeError), match=r"Expected reduction dim|cannot compute aminmax"
        ):
            _table(fn, e)


def test_nan_propagation():
    nan = float("nan")
    x = torch.tensor([[1.0, nan, 3.0, nan], [4.0, 2.0, 8.0, -1.0]])
    for fn in [
        lambda t: t.amax(1),
        lambda t: t.amin(1),
        lambda t: t.max(1),
        lambda t: t.min(1),
        lambda t: t.argmax(1),
        lambda t: t.argmin(1),
        lambda t: t.max(),
        lambda t: t.aminmax(),
        lambda t: t.cummax(1),
        lambda t: t.cummin(1),
        lambda t: t.sort(1),
        lambda t: t.sort(1, descending=True),
        lambda t: t.topk(2, 1),
        lambda t: t.nansum(1),
        lambda t: t.median(1),
        lambda t: t.nanmedian(1),
        lambda t: t.logsumexp(1),
        lambda t: t.sum(1),
        lambda t: torch.linalg.vector_norm(t, float("inf"), 1),
    ]:
        _check(fn, x)


def test_ties_match_torch():
    torch.manual_seed(0)
    x = torch.randint(0, 4, (8, 100))
    _check(lambda t: t.sort(1), x)
    _check(lambda t: t.sort(1, descending=True), x)
    _check(lambda t: t.argsort(1), x)
    _check(lambda t: t.topk(5, 1), x)
    _check(lambda t: t.topk(40, 1, largest=False), x)
    _check(lambda t: t.kthvalue(30, 1), x)
    _check(lambda t: t.median(1), x)
    _check(lambda t: t.max(1), x)
    _check(lambda t: t.cummin(1), x)


def _check_ref(fn, x, rtol=1.3e-6):
    """fn(x) through the table against fn in float64 (torch's own float32 result may be less
    accurate than the check: its vector_norm is off by 3.6e-5 on the row below)."""
    ref = fn(x.double())
    actual = _table(fn, x)
    torch.testing.assert_close(actual.double(), ref, rtol=rtol, atol=1e-5)


def test_long_rows_float32_accuracy():
    torch.manual_seed(0)
    x = torch.rand(3_000_001)
    _check(lambda t: t.sum(), x)
    _check(lambda t: t.mean(), x)
    _check(lambda t: t.var(), x)
    _check_ref(lambda t: t.sum(), x)
    _check_ref(lambda t: torch.linalg.vector_norm(t), x)
    _check_ref(lambda t: t.cumsum(0)[-5:], x)
    _check(lambda t: t.reshape(1000, -1).sum(0), x[:3_000_000])
    _check(lambda t: t.reshape(-1, 1000).sum(1), x[:3_000_000])
    _check(lambda t: t.to(torch.bfloat16).sum(), x)


def test_short_rows_sum_in_torch_order():
    """Rows shorter than torch's vector width add in the order of torch's scalar row_sum (four
    chains, tail into the first): the same rounding bit for bit (cov's norm factor cancels, so
    one ulp shows there)."""
    torch.manual_seed(0)
    x = torch.rand(1000, 3, dtype=torch.float32)
    other_order = (x[:, 0] + x[:, 2]) + x[:, 1]
    assert not torch.equal(other_order, x.sum(1))  # rows where the order shows exist
    assert torch.equal(_table(torch.sum, x, 1), torch.sum(x, 1))
    for n in range(1, 8):
        y = torch.rand(200, n, dtype=torch.float32) * 1000
        assert torch.equal(_table(torch.sum, y, 1), torch.sum(y, 1)), n


@pytest.mark.parametrize(
    "shape,dim",
    [
        ((200_000, 3), 0),
        ((3, 200_000), 1),
        ((64, 3000, 7), 1),
        ((2, 500, 300), (0, 2)),
        ((100_000, 40), 0),
        ((40, 100_000), 1),
    ],
)
def test_parallel_paths(shape, dim):
    torch.manual_seed(0)
    # Positive data for sums: with cancellation two float32 summation orders differ by more
    # than assert_close allows near zero, whoever is more accurate.
    _check(lambda t: t.sum(dim), torch.rand(shape))
    x = torch.randn(shape)
    _check(lambda t: t.amax(dim), x)
    _check(lambda t: t.std(dim), x)
    _check(lambda t: (t > 2).any(dim), x)
    if isinstance(dim, int):
        _check(lambda t: t.argmax(dim), x)
        _check(lambda t: t.cumsum(dim), x)


def test_dtypes():
    i = torch.arange(-5, 7, dtype=torch.int32).reshape(3, 4)
    assert _check(lambda t: t.sum(), i).dtype == torch.int64
    assert _check(lambda t: t.sum(1, dtype=torch.float64), i).dtype == torch.float64
    assert _check(lambda t: t.prod(0), i).dtype == torch.int64
    assert _check(lambda t: t.cumsum(1), i).dtype == torch.int64
    assert _check(lambda t: t.amax(1), i).dtype == torch.int32
    assert _check(lambda t: t.mean(dtype=torch.float32), i).dtype == torch.float32
    assert _check(lambda t: t.count_nonzero(1), i).dtype == torch.int64
    assert _check(lambda t: (t > 0).sum(0), i).dtype == torch.int64
    assert _check(lambda t: t.logsumexp(1), i).dtype == torch.float32
    u = torch.tensor([0, 3, 0], dtype=torch.uint8)
    assert _check(lambda t: t.any(), u).dtype == torch.uint8
    b = torch.tensor([[1.5, -2.25], [3.0, 0.5]], dtype=torch.bfloat16)
    assert _check(lambda t: t.sum(0), b).dtype == torch.bfloat16
    _check(lambda t: t.mean(1), b)
    _check(lambda t: t.sort(1), b)
    with pytest.raises(RuntimeError, match=r"aten::mean: could not infer output dtype.*int32"):
        _table(lambda t: t.mean(), i)
    with pytest.raises(RuntimeError, match=r"aten::var.correction: .*floating point.*int32"):
        _table(lambda t: t.var(), i)
    with pytest.raises(IndexError, match=r"aten::sum.dim_IntList: dimension 3 out of range"):
        _table(lambda t: t.sum(3), i)
    with pytest.raises(RuntimeError, match="dim 1 appears multiple times"):
        _table(lambda t: t.sum((1, -1)), i)
    # As torch: no argmax, topk, kthvalue or median of bool.
    for fn in [
        lambda t: t.argmax(),
        lambda t: t.topk(1),
        lambda t: t.kthvalue(1),
        lambda t: t.median(),
        lambda t: t.median(0),
    ]:
        with pytest.raises(
            RuntimeError, match=r"(not|does not) support(ed)? bool|implemented for bool"
        ):
            _table(fn, u > 0)


def test_zero_dim_and_norm_overloads():
    s = torch.tensor(2.5)
    _check(lambda t: t.sum(0, keepdim=True), s)
    _check(lambda t: t.max(-1), s)
    _check(lambda t: t.cumsum(0), s)
    _check(lambda t: t.sort(), s)
    _check(lambda t: t.argmax(0), s)
    x = torch.randn(4, 5)
    _check(lambda t: torch.ops.aten.norm.Scalar(t, 3), x)
    _check(lambda t: torch.ops.aten.norm.ScalarOpt_dim(t, None, [1], True), x)
    _check(lambda t: torch.ops.aten.var.dim(t, [0], False), x)
    _check(lambda t: torch.ops.aten.std_mean(t), x)
    _check(lambda t: torch.ops.aten.var_mean.dim(t, [1], True, True), x)
    assert math.isinf(_table(lambda t: torch.var(t, correction=7), torch.arange(5.0)).item())
