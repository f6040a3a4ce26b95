"""Indexing kernels against torch's CPU kernels (kernels/index_reduce.cc, search.cc, unique.cc).

index_add / index_copy / index_fill / index_reduce and their in-place forms, put, take,
masked_select, nonzero_static, searchsorted, bucketize, histc, histogram, bincount, and the
unique family: torch's OpInfo samples (gradients too, in float64), duplicate indices applied in
index order (deterministic, as torch's CPU loop), out-of-range indices and bad arguments raising
errors that name the op, and calls from several threads."""

from __future__ import annotations

import threading

import pytest
import torch
from conftest import check_opinfo_samples, opinfo_cases

import tensorbridge as tb

# Kernel tests: an op the table lost raises rather than running torch's own kernel.
pytestmark = pytest.mark.usefixtures("no_fallback")

FAMILY = {
    f"aten::{n}"
    for n in [
        "index_add", "index_add_", "index_copy", "index_copy_", "index_reduce", "index_reduce_",
        "index_fill.int_Scalar", "index_fill.int_Tensor", "index_fill_.int_Scalar",
        "index_fill_.int_Tensor", "put", "put_", "take", "masked_select", "nonzero_static",
        "searchsorted.Tensor", "searchsorted.Scalar", "bucketize.Tensor", "bucketize.Scalar",
        "histc", "histogram.bins_tensor", "histogram.bin_ct", "bincount", "_unique2", "_unique",
        "unique_dim", "unique_consecutive", "unique_dim_consecutive", "masked_scatter_backward",
        "_unsafe_masked_index", "_unsafe_masked_index_put_accumulate", "segment_reduce",
        "_segment_reduce_backward", "_histogramdd_bin_edges", "_histogramdd_from_bin_cts",
        "_histogramdd_from_bin_tensors",
    ]
}  # fmt: skip
OPINFOS = [
    "index_add", "index_copy", "index_fill", "index_reduce", "put", "take", "masked_select",
    "nonzero_static", "searchsorted", "bucketize", "histc", "histogram", "bincount", "unique",
    "unique_consecutive", "masked_scatter", "_unsafe_masked_index_put_accumulate",
    "_segment_reduce", "histogramdd",
]  # fmt: skip
OPINFO_DTYPES = (torch.float32, torch.float64, torch.int64, torch.bool)


@pytest.mark.parametrize(("info", "dtype"), opinfo_cases(OPINFOS, OPINFO_DTYPES))
def test_opinfo_samples(info, dtype):
    check_opinfo_samples(info, dtype, FAMILY, max_samples=12)


def _tb(x):
    return tb.from_dlpack(x.detach()) if isinstance(x, torch.Tensor) else x


def tbcall(name, *args, **kwargs):
    out = tb.call(name, *[_tb(a) for a in args], **{k: _tb(v) for k, v in kwargs.items()})
    if isinstance(out, tuple):
        return tuple(torch.from_dlpack(t) for t in out)
    return torch.from_dlpack(out)


def test_index_add_duplicates_accumulate_in_index_order():
    # float32 sums depend on order: the table adds in index order, as torch's CPU kernel does.
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 1000, generator=g)
    src = torch.randn(64, 1000, generator=g) * 1e4
    idx = torch.randint(0, 4, (64,), generator=g)
    expected = torch.index_add(x, 0, idx, src, alpha=0.5)
    for _ in range(3):
        assert torch.equal(tbcall("aten::index_add", x, 0, idx, src, alpha=0.5), expected)
    # along an inner dim, on a non-contiguous self
    xt = x.t()
    expected = torch.index_add(xt, 1, idx, src.t())
    assert torch.equal(tbcall("aten::index_add", xt, 1, idx, src.t()), expected)


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_index_reduce_equals_torch(reduce, include_self, dtype):
    g = torch.Generator().manual_seed(1)
    x = (torch.randn(5, 3, generator=g) * 5).to(dtype)
    src = (torch.randn(7, 3, generator=g) * 5).to(dtype)
    idx = torch.tensor([0, 2, 2, 4, 0, 0, 1])
    expected = x.index_reduce(0, idx, src, reduce, include_self=include_self)
    got = tbcall("aten::index_reduce", x, 0, idx, src, reduce, include_self=include_self)
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


def test_in_place_forms_write_into_self():
    x = torch.zeros(4, 3)
    out = tb.call("aten::index_add_", _tb(x), 0, _tb(torch.tensor([1, 1])), _tb(torch.ones(2, 3)))
    assert torch.from_dlpack(out).data_ptr() == x.data_ptr()
    assert torch.equal(x[1], torch.full((3,), 2.0)) and x[0].sum() == 0
    tb.call("aten::index_fill_.int_Scalar", _tb(x), 1, _tb(torch.tensor([-1])), 7.0)
    assert torch.equal(x[:, 2], torch.full((4,), 7.0))
    tb.call("aten::put_", _tb(x), _tb(torch.tensor([0, 0])), _tb(torch.tensor([1.0, 2.0])), True)
    assert x[0, 0] == 3.0


def test_searchsorted_sides_sorter_and_nan():
    seq = torch.tensor([[1.0, 3.0, 3.0, 5.0, float("nan")], [0.0, 0.0, 2.0, 4.0, 8.0]])
    v = torch.tensor([[3.0, float("nan"), 0.0], [0.0, 4.0, 9.0]])
    for kw in ({}, {"right": True}, {"side": "right"}, {"out_int32": True}):
        torch.testing.assert_close(
            tbcall("aten::searchsorted.Tensor", seq, v, **kw), torch.searchsorted(seq, v, **kw)
        )
    shuffled = torch.tensor([5.0, 1.0, 7.0, 3.0, 4.0])
    order = torch.argsort(shuffled)
    assert torch.equal(
        tbcall("aten::searchsorted.Tensor", shuffled, v[0], sorter=order),
        torch.searchsorted(shuffled, v[0], sorter=order),
    )
    with pytest.raises(ValueError, match="searchsorted: side and right can't be set to opposites"):
        tbcall("aten::searchsorted.Tensor", seq, v, right=True, side="left")


def test_unique_orders_nan_last_and_counts():
    x = torch.tensor([3.0, float("nan"), 1.0, 3.0, float("nan"), -0.0, 0.0])
    got = tbcall("aten::_unique2", x, True, True, True)
    expected = torch.ops.aten._unique2(x, True, True, True)
    for a, b in zip(got, expected, strict=True):
        torch.testing.assert_close(a, b, equal_nan=True)
    m = torch.tensor([[1, 2], [0, 5], [1, 2], [0, 5], [0, 1]])
    for dim in (0, 1):
        got = tbcall("aten::unique_dim", m, dim, True, True, True)
        for a, b in zip(got, torch.ops.aten.unique_dim(m, dim, True, True, True), strict=True):
            assert torch.equal(a, b)
        got = tbcall("aten::unique_consecutive", m, True, True, dim)
        expected = torch.ops.aten.unique_consecutive(m, True, True, dim)
        for a, b in zip(got, expected, strict=True):
            assert torch.equal(a, b)


def test_histograms_equal_torch():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(1000, generator=g, dtype=torch.float64)
    torch.testing.assert_close(tbcall("aten::histc", x, 17, -1.0, 2.0), torch.histc(x, 17, -1, 2))
    torch.testing.assert_close(tbcall("aten::histc", x, 9), torch.histc(x, 9))
    w = torch.rand(1000, generator=g, dtype=torch.float64)
    got = tbcall("aten::histogram.bin_ct", x, 13, weight=w, density=True)
    for a, b in zip(got, torch.histogram(x, 13, weight=w, density=True), strict=True):
        torch.testing.assert_close(a, b)
    pts = torch.randn(300, 3, generator=g, dtype=torch.float64)
    got = tbcall("aten::_histogramdd_from_bin_cts", pts, [3, 4, 5], density=True)
    torch.testing.assert_close(got, torch.histogramdd(pts, [3, 4, 5], density=True).hist)
    i = torch.randint(0, 9, (200,), generator=g)
    assert torch.equal(tbcall("aten::bincount", i, minlength=12), torch.bincount(i, minlength=12))
    wf = torch.rand(200, generator=g)
    torch.testing.assert_close(tbcall("aten::bincount", i, wf), torch.bincount(i, wf))


def test_segment_reduce_empty_segments_and_initial():
    data = torch.tensor([[1.0, float("nan"), 3.0, 4.0], [2.0, 2.0, -1.0, 0.0]]).t()
    lengths = torch.tensor([1, 0, 3])
    for reduce in ("sum", "prod", "mean", "max", "min"):
        for initial in (None, 2.0):
            got = tbcall("aten::segment_reduce", data, reduce, lengths=lengths, initial=initial)
            expected = torch.segment_reduce(data, reduce, lengths=lengths, initial=initial)
            torch.testing.assert_close(got, expected, equal_nan=True)
    with pytest.raises(ValueError, match="segment_reduce: expected all rows of lengths"):
        tbcall("aten::segment_reduce", data, "sum", lengths=torch.tensor([1, 1]))


def test_errors_name_the_op():
    x = torch.zeros(3, 4)
    with pytest.raises(IndexError, match=r"aten::index_add: index 3 is out of range"):
        tbcall("aten::index_add", x, 0, torch.tensor([0, 3]), torch.ones(2, 4))
    with pytest.raises(IndexError, match=r"aten::index_copy: index -1 is out of range"):
        tbcall("aten::index_copy", x, 0, torch.tensor([-1]), torch.ones(1, 4))
    with pytest.raises(IndexError, match=r"aten::take: index 12 is out of range"):
        tbcall("aten::take", x, torch.tensor([12]))
    with pytest.raises(IndexError, match=r"aten::put: index -13 is out of range"):
        tbcall("aten::put", x, torch.tensor([-13]), torch.ones(1))
    with pytest.raises(TypeError, match=r"aten::index_add: self \(float32\) and source"):
        tbcall("aten::index_add", x, 0, torch.tensor([0]), torch.ones(1, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match="aten::index_add: source of shape"):
        tbcall("aten::index_add", x, 0, torch.tensor([0]), torch.ones(1, 5))
    with pytest.raises(ValueError, match="index_reduce: reduce argument must be one of"):
        tbcall("aten::index_reduce", x, 0, torch.tensor([0]), torch.ones(1, 4), "sum")
    with pytest.raises(TypeError, match="masked_select: expected BoolTensor for mask"):
        tbcall("aten::masked_select", x, torch.ones(3, 4, dtype=torch.uint8))
    with pytest.raises(ValueError, match="bincount only supports 1-d non-negative"):
        tbcall("aten::bincount", torch.tensor([1, -1]))
    with pytest.raises(ValueError, match="histc: max must be larger than min"):
        tbcall("aten::histc", x, 4, 3.0, 1.0)


def test_calls_from_several_threads_agree():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(64, 256, generator=g)
    src = torch.randn(512, 256, generator=g)
    idx = torch.randint(0, 64, (512,), generator=g)
    expected = torch.index_add(x, 0, idx, src)
    results, errors = [], []

    def work():
        try:
            for _ in range(5):
                results.append(tbcall("aten::index_add", x, 0, idx, src))
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 20
    assert all(torch.equal(r, expected) for r in results)
