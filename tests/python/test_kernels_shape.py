"""Shape, view, copy, indexing, scatter/gather, factory and padding kernels against torch.

Kernels: kernels/shape_views.cc, shape_copies.cc, copy.cc, index.cc, index_mask.cc, scatter.cc,
factory.cc, pad.cc. Each OpInfo of the family runs its CPU samples through the table
(TableMode) for float32, float64, int64 and bool and must pass at least 95% of them.
Targeted tests check that view ops alias their input, that in-place ops refuse read-only
memory, that indices are bounds-checked, that cat promotes like torch, and the paths the
samples do not reach (overlapping copies, negative strides, large inputs, factories' dtypes).
"""

from __future__ import annotations

import os
import sys
import warnings

import numpy as np
import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
from conftest import check_family_samples, requires_jax

import tensorbridge as tb
from tensorbridge._opinfo import find_opinfos, run_samples
from tensorbridge.testing import TableMode

# Kernel tests: an op the table lost raises rather than running torch's own kernel.
pytestmark = pytest.mark.usefixtures("no_fallback")

# The ATen overloads this family registers.
FAMILY_OPS = {
    "aten::" + n
    for n in """view _unsafe_view reshape _reshape_alias alias detach lift_fresh as_strided
    expand permute select.int slice.Tensor narrow squeeze squeeze.dim squeeze.dims unsqueeze
    transpose.int t diagonal unfold split_with_sizes split.Tensor unbind.int sym_size.int
    sym_stride.int sym_numel sym_storage_offset cat stack flip roll repeat tril triu tril_
    triu_ clone lift_fresh_copy _to_copy copy copy_ fill.Scalar fill_.Scalar fill.Tensor
    fill_.Tensor zero_ _local_scalar_dense empty.memory_format empty_strided zeros ones full
    scalar_tensor empty_like zeros_like ones_like full_like new_empty new_zeros new_ones
    new_full arange arange.start arange.start_step linspace constant_pad_nd reflection_pad1d
    reflection_pad2d reflection_pad3d replication_pad1d replication_pad2d replication_pad3d
    index.Tensor _unsafe_index.Tensor index_put _unsafe_index_put index_put_ index_select
    nonzero embedding embedding_dense_backward masked_fill.Scalar masked_fill.Tensor
    masked_fill_.Scalar masked_fill_.Tensor masked_scatter masked_scatter_ gather scatter.src
    scatter.value scatter.reduce scatter.value_reduce scatter_add scatter_reduce.two
    scatter_.src scatter_.value scatter_.reduce scatter_.value_reduce scatter_add_
    scatter_reduce_.two select_scatter slice_scatter diagonal_scatter
    as_strided_scatter unsafe_split.Tensor unsafe_split_with_sizes select_backward
    slice_backward""".split()
}

OPINFO_NAMES = """view reshape view_as reshape_as expand expand_as permute select narrow squeeze
unsqueeze transpose t diagonal split split_with_sizes unbind clone contiguous to cat stack hstack
vstack flip roll repeat nn.functional.pad index_select gather scatter scatter_add scatter_reduce
masked_fill masked_scatter nonzero select_scatter slice_scatter diagonal_scatter __getitem__
index_put take_along_dim nn.functional.embedding tril triu fill zero_ new_zeros new_ones new_full
zeros_like ones_like full_like arange unsafe_split unsafe_chunk""".split()
# Ops the samples need that this family cannot serve: aten::embedding_renorm_ (max_norm
# samples of nn.functional.embedding) has no schema in dispatch/aten_schemas.txt, so the table
# cannot register it; aten::remainder.Scalar (take_along_dim) belongs to the arithmetic family.

DTYPES = [torch.float32, torch.float64, torch.int64, torch.bool]


def _opinfos(names):
    out = []
    for o in find_opinfos(names):
        name = o.name + (f".{o.variant_test_name}" if o.variant_test_name else "")
        out.append(pytest.param(o, id=name))
    return out


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).replace("torch.", ""))
@pytest.mark.parametrize("opinfo", _opinfos(OPINFO_NAMES))
def test_opinfo(opinfo, dtype):
    check_family_samples(run_samples(opinfo, dtype), FAMILY_OPS)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).replace("torch.", ""))
def test_new_empty_shapes(dtype):
    # new_empty's values are undefined: compare shape and dtype only.
    (o,) = find_opinfos(["new_empty"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        samples = list(o.sample_inputs("cpu", dtype))
    assert samples
    for s in samples:
        expected = o(s.input, *s.args, **s.kwargs)
        with TableMode(strict=True):
            actual = o(s.input, *s.args, **s.kwargs)
        assert actual.shape == expected.shape and actual.dtype == expected.dtype


# ---- helpers --------------------------------------------------------------------------------


def _np(x):
    return np.from_dlpack(x)


def _table(fn, *args, **kwargs):
    """fn(*args) through the table, strict: every ATen op must be served."""
    with TableMode(strict=True):
        return fn(*args, **kwargs)


def _check(fn, *args, **kwargs):
    expected = fn(*args, **kwargs)
    actual = _table(fn, *args, **kwargs)
    torch.testing.assert_close(actual, expected, equal_nan=True, check_stride=False)


# ---- views alias their input -----------------------------------------------------------------

VIEW_CALLS = [
    ("aten::view", ([12],)),
    ("aten::_unsafe_view", ([2, 6],)),
    ("aten::reshape", ([4, 3],)),
    ("aten::_reshape_alias", ([4, 3], [3, 1])),
    ("aten::alias", ()),
    ("aten::detach", ()),
    ("aten::lift_fresh", ()),
    ("aten::as_strided", ([2, 2], [4, 1], 5)),
    ("aten::expand", ([2, 3, 4],)),
    ("aten::permute", ([1, 0],)),
    ("aten::select.int", (0, 1)),
    ("aten::slice.Tensor", (1, 1, 3)),
    ("aten::narrow", (0, 1, 2)),
    ("aten::squeeze", ()),
    ("aten::squeeze.dim", (0,)),
    ("aten::squeeze.dims", ([0, 1],)),
    ("aten::unsqueeze", (1,)),
    ("aten::transpose.int", (0, 1)),
    ("aten::t", ()),
    ("aten::diagonal", (1,)),
    ("aten::unfold", (1, 2, 1)),
]


@pytest.mark.parametrize("op,args", VIEW_CALLS, ids=[c[0] for c in VIEW_CALLS])
def test_view_ops_alias(op, args):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    r = _np(tb.call(op, a, *args))
    assert np.shares_memory(r, a), op
    before = a.copy()
    r.flat[-1] = -100.0  # a write through the view shows in the input
    assert (a != before).sum() == 1 and a.min() == -100.0


@pytest.mark.parametrize(
    "op,args",
    [
        ("aten::split_with_sizes", ([1, 3], 1)),
        ("aten::split.Tensor", (2, 0)),
        ("aten::unsafe_split_with_sizes", ([1, 3], 1)),
        ("aten::unsafe_split.Tensor", (2, 0)),
        ("aten::unbind.int", (1,)),
    ],
)
def test_list_views_alias(op, args):
    a = np.arange(12, dtype=np.int64).reshape(3, 4)
    parts = tb.call(op, a, *args)
    assert len(parts) >= 2
    for p in parts:
        p = _np(p)
        assert np.shares_memory(p, a)
        p.flat[0] = -1
    assert (a == -1).sum() == len(parts)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_select_and_slice_backward_equal_torch(dtype):
    # The gradients of select and slice (autograd of a.select / a[1:5:2] on a wrapped tensor).
    g = torch.arange(24).to(dtype)
    for sizes, dim, index in (([3, 4, 2], 1, 2), ([3, 4, 2], -1, -1), ([5], 0, 4)):
        grad = torch.ones([n for i, n in enumerate(sizes) if i != dim % len(sizes)], dtype=dtype)
        _check(torch.ops.aten.select_backward, grad, sizes, dim, index)
    _check(torch.ops.aten.slice_backward, g[:12].reshape(3, 2, 2), [3, 5, 2], 1, 1, 5, 2)
    _check(torch.ops.aten.slice_backward, g[:6].reshape(3, 2), [3, 2], 0, 0, 9223372036854775807, 1)
    with pytest.raises(ValueError, match="select_backward"):
        tb.call("aten::select_backward", torch.ones(2, 3), [3, 4, 2], 1, 0)  # wrong grad shape


def test_gru_training_runs_in_the_table():
    # GRU's gradients split its gates with unsafe_split and take select_backward: both in the
    # table; the wrapped parameters get the same gradients as torch's.
    torch.manual_seed(0)
    ref = torch.nn.GRU(4, 6, batch_first=True)
    ours = tb.wrap_module(torch.nn.GRU(4, 6, batch_first=True))
    ours.load_state_dict(ref.state_dict())
    x = torch.randn(2, 5, 4)
    tb.diagnostics.reset_metrics()
    ours(tb.wrap(x))[0].sum().backward()
    ref(x)[0].sum().backward()
    for (n, p), q in zip(ours.named_parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(tb.to_torch(p.grad), q.grad, rtol=1e-5, atol=1e-5, msg=n)
    m = tb.diagnostics.metrics()
    assert m["aten::unsafe_split.Tensor"]["kernel"] > 0
    assert sum(v["fallback"] for v in m.values()) == 0


def test_views_of_read_only_stay_read_only():
    a = np.arange(6.0)
    a.flags.writeable = False
    v = tb.call("aten::view", a, [2, 3])
    assert v.read_only
    with pytest.raises(BufferError, match=r"read-only tensor of shape \[2, 3\]"):
        tb.call("aten::fill_.Scalar", v, 1.0)


def test_views_through_torch_alias():
    x = torch.arange(12.0).view(3, 4)
    with TableMode(strict=True):
        y = x.t()[1:, ::2].unsqueeze(0)
        y[0, 0, 0] = 99.0
    assert x[0, 1] == 99.0


def test_sym_queries():
    a = np.zeros((3, 5), dtype=np.float32)
    assert tb.call("aten::sym_size.int", a, -1) == 5
    assert tb.call("aten::sym_stride.int", a, 0) == 5
    assert tb.call("aten::sym_numel", a) == 15
    assert tb.call("aten::sym_storage_offset", a) == 0
    assert tb.call("aten::_local_scalar_dense", np.array([2.5])) == 2.5
    assert tb.call("aten::_local_scalar_dense", np.array(True)) is True
    with pytest.raises(IndexError, match="aten::sym_size: dimension specified as 0"):
        tb.call("aten::sym_size.int", np.array(1.0), 0)
    with pytest.raises(ValueError, match="15 elements cannot be converted to Scalar"):
        tb.call("aten::_local_scalar_dense", a)


# ---- copies ---------------------------------------------------------------------------------


def test_copy_into_read_only_numpy_raises():
    dst = np.zeros(4, dtype=np.float32)
    dst.flags.writeable = False
    for op, args in [
        ("aten::copy_", (np.ones(4),)),
        ("aten::fill_.Scalar", (1.0,)),
        ("aten::zero_", ()),
        ("aten::index_put_", ([np.array([0])], np.ones(1, np.float32))),
        ("aten::masked_fill_.Scalar", (np.ones(4, bool), 1.0)),
        ("aten::scatter_.value", (0, np.array([1]), 2.0)),
    ]:
        with pytest.raises(BufferError, match=r"read-only tensor of shape \[4\]"):
            tb.call(op, dst, *args)
    assert (dst == 0).all()
    empty = np.zeros(0, dtype=np.float32)
    empty.flags.writeable = False
    with pytest.raises(BufferError, match=r"read-only tensor of shape \[0\]"):
        tb.call("aten::copy_", empty, np.zeros(0))


@requires_jax
def test_copy_into_jax_raises():
    import jax.numpy as jnp

    dst = jnp.zeros(3, dtype=jnp.float32)
    with pytest.raises(BufferError, match=r"read-only.*copy=True"):
        tb.call("aten::copy_", dst, np.ones(3, np.float32))
    assert float(dst.sum()) == 0.0


def test_copy_converts_and_broadcasts():
    dst = np.zeros((2, 3), dtype=np.int32)
    out = tb.call("aten::copy_", dst, np.array([1.7, -2.7, 3.2]))
    assert np.shares_memory(_np(out), dst)
    np.testing.assert_array_equal(dst, [[1, -2, 3], [1, -2, 3]])
    f = _np(tb.call("aten::copy", np.zeros((2, 2), np.float64), np.array([True, False])))
    np.testing.assert_array_equal(f, [[1.0, 0.0], [1.0, 0.0]])
    assert f.dtype == np.float64


def test_copy_overlapping_self():
    x = torch.arange(10.0)
    expected = x.clone()
    expected.copy_(expected.flip(0))
    _table(lambda: x.copy_(x.flip(0)))
    torch.testing.assert_close(x, expected)
    y = torch.arange(10)
    _table(lambda: y[1:].copy_(y[:-1]))
    torch.testing.assert_close(y, torch.tensor([0, 0, 1, 2, 3, 4, 5, 6, 7, 8]))


@pytest.mark.parametrize(
    "src",
    [
        torch.float32,
        torch.float64,
        torch.bfloat16,
        torch.int64,
        torch.int32,
        torch.uint8,
        torch.bool,
    ],
)
@pytest.mark.parametrize(
    "dst", [torch.float32, torch.float64, torch.int64, torch.int8, torch.bool, torch.float16]
)
def test_to_copy_dtypes(src, dst):
    x = (torch.linspace(-3, 3, 13) * 2.6).to(src)
    _check(lambda: x.to(dst))
    _check(lambda: x[::2].to(dst))


def test_clone_non_contiguous_and_negative_strides():
    a = np.arange(24, dtype=np.int16).reshape(2, 3, 4)[:, ::-1, 1::2].transpose(2, 0, 1)
    c = _np(tb.call("aten::clone", a))
    assert not np.shares_memory(c, a)
    np.testing.assert_array_equal(c, a)
    # Dense, in a's stride order (torch's preserve_format; strides (2, 12, -4) elements sort
    # as -4 < 2 < 12): strides (3, 6, 1) elements.
    assert c.strides == (6, 12, 2)
    c = _np(tb.call("aten::clone", a, memory_format="contiguous_format"))
    assert c.flags.c_contiguous
    np.testing.assert_array_equal(c, a)


# ---- indexing ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "op,args",
    [
        ("aten::index.Tensor", ([np.array([0, 3])],)),
        ("aten::index.Tensor", ([None, np.array([-5])],)),
        ("aten::index_put", ([np.array([3])], np.zeros(1, np.float32))),
        ("aten::index_select", (1, np.array([0, 4]))),
        ("aten::index_select", (0, np.array([-1]))),
        ("aten::gather", (0, np.array([[3, 0, 0, 0]]))),
        ("aten::scatter.value", (1, np.array([[4]]), 1.0)),
        ("aten::scatter_add", (0, np.array([[-1]]), np.ones((1, 1), np.float32))),
        ("aten::embedding", (np.array([[1, 7]]),)),
        ("aten::select.int", (0, 3)),
        ("aten::select_scatter", (np.zeros(4, np.float32), 0, -4)),
    ],
)
def test_index_out_of_bounds_raises(op, args):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    with pytest.raises(IndexError, match=r"index -?\d+ (is )?out of (bounds|range) for dimension"):
        tb.call(op, a, *args)


def test_index_mask_shape_mismatch_raises():
    with pytest.raises(IndexError, match=r"aten::index: the shape of the mask \[4\]"):
        tb.call("aten::index.Tensor", np.zeros((3, 4)), [np.ones((4,), bool)])
    with pytest.raises(IndexError, match="aten::index: too many indices"):
        tb.call("aten::index.Tensor", np.zeros(3), [np.array([0]), np.array([0])])


def test_advanced_indexing_matches_torch():
    x = torch.arange(3 * 3 * 4 * 5, dtype=torch.float64).view(3, 3, 4, 5)
    i = torch.tensor([[0, 2], [1, -1]])
    j = torch.tensor([1, 0])
    m = torch.tensor([True, False, True])
    xs = x.transpose(0, 1).contiguous().transpose(0, 1)  # x's values, non-contiguous
    for key in [
        (i,),
        (slice(None), i),
        (slice(None), i, j),
        (i, slice(None), j),
        (Ellipsis, j),
        (1, m),
        (slice(None), m, slice(None), j),
        (x > 50,),
        (None, i, None, j),
        (torch.tensor(1),),
    ]:
        _check(lambda k=key: x[k])
        _check(lambda k=key: xs[k])


def test_index_put_accumulate_and_duplicates_match_torch():
    idx = torch.tensor([0, 2, 0, 0, 1])
    vals = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0])
    for acc in (False, True):
        _check(lambda a=acc: torch.zeros(3).index_put_((idx,), vals, accumulate=a))
        _check(lambda a=acc: torch.zeros(3, 2).index_put((idx,), vals[:, None], accumulate=a))
    b = torch.zeros(4, dtype=torch.bool)
    _check(lambda: b.clone().index_put_((torch.tensor([1, 1]),), torch.tensor(True), True))
    _check(
        lambda: torch.zeros(2, 3).index_put_(
            (torch.tensor([[True, False, True], [False, True, False]]),),
            torch.tensor([1.0, 2.0, 3.0]),
        )
    )
    z = torch.zeros(2, 3)
    _check(lambda: z.clone().index_put_((torch.tensor(True),), torch.tensor(7.0)))


def test_index_large_parallel():
    x = torch.randn(300, 500)
    idx = torch.randint(-300, 300, (4000,))
    _check(lambda: x[idx])
    cols = idx % 500
    _check(lambda: x[:, cols])
    g = torch.randint(0, 500, (300, 700))
    _check(lambda: torch.gather(x, 1, g))
    src = x[:, :400].abs()
    _check(lambda: x.scatter_add(1, g[:, :400], src))
    _check(lambda: x.repeat(2, 3))
    _check(lambda: torch.tril(x, 7))
    _check(lambda: torch.nn.functional.pad(x[None], (3, 4, 5, 6), mode="reflect"))


def test_embedding_backward_matches_torch():
    g = torch.randn(2, 5, 3, dtype=torch.float64)
    ind = torch.tensor([[0, 2, 2, 4, 1], [2, 2, 0, 3, 3]])
    for pad, scale in [(-1, False), (2, False), (0, True)]:
        _check(lambda p=pad, s=scale: torch.ops.aten.embedding_dense_backward(g, ind, 6, p, s))


# ---- cat / stack promote like torch -------------------------------------------------------------


@pytest.mark.parametrize(
    "a,b",
    [
        (torch.int32, torch.float64),
        (torch.bool, torch.int64),
        (torch.int8, torch.uint8),
        (torch.float16, torch.bfloat16),
        (torch.bool, torch.float32),
        (torch.int64, torch.float16),
    ],
)
def test_cat_promotes_like_torch(a, b):
    x = torch.tensor([[1, 0, 2]]).to(a)
    y = torch.tensor([[3, 1, 0], [0, 2, 1]]).to(b)
    _check(lambda: torch.cat([x, y]))
    _check(lambda: torch.cat([x, y[:1]], dim=1))
    _check(lambda: torch.stack([x, y[:1]], dim=-1))
    _check(lambda: torch.cat([torch.zeros(0, dtype=b), x]))  # 1-d empties are skipped


def test_cat_shape_errors():
    with pytest.raises(ValueError, match="aten::cat: sizes of tensors must match"):
        tb.call("aten::cat", [np.zeros((2, 3)), np.zeros((2, 4))])
    with pytest.raises(ValueError, match="aten::cat: zero-dimensional tensor"):
        tb.call("aten::cat", [np.zeros(()), np.zeros(())])


# ---- factories ---------------------------------------------------------------------------------


def test_factory_default_dtypes():
    assert _np(tb.call("aten::full", [2], 3)).dtype == np.int64
    assert _np(tb.call("aten::full", [2], 3.0)).dtype == np.float32
    assert _np(tb.call("aten::full", [2], True)).dtype == np.bool_
    assert _np(tb.call("aten::zeros", [2, 2])).dtype == np.float32
    assert _np(tb.call("aten::scalar_tensor", 3)).dtype == np.float32
    assert _np(tb.call("aten::arange", 5)).dtype == np.int64
    assert _np(tb.call("aten::arange.start_step", 0, 1, 0.25)).dtype == np.float32
    s = _np(tb.call("aten::empty_strided", [2, 3], [1, 2], dtype=torch.float64))
    assert s.shape == (2, 3) and s.strides == (8, 16)


def test_factories_match_torch():
    for fn in [
        lambda: torch.arange(-3, 11, 3),
        lambda: torch.arange(0.5, 3.1, 0.7),
        lambda: torch.arange(10, 0, -3, dtype=torch.float64),
        lambda: torch.arange(0, 1, 0.1, dtype=torch.bfloat16),
        lambda: torch.arange(1.5, 9.7, dtype=torch.int32),
        lambda: torch.full((2, 3), -7, dtype=torch.int8),
        lambda: torch.ones(2, 3),
        lambda: torch.zeros(4, dtype=torch.bool),
        lambda: torch.linspace(-1, 2, 7),
        lambda: torch.linspace(0, 10, 4, dtype=torch.int64),
        lambda: torch.scalar_tensor(2.5, dtype=torch.float64),
    ]:
        _check(fn)
    with pytest.raises(ValueError, match="aten::arange: step must be nonzero"):
        tb.call("aten::arange.start_step", 0, 5, 0)
    with pytest.raises(ValueError, match=r"aten::arange: .*inconsistent with step sign"):
        tb.call("aten::arange.start_step", 0, 5, -1)


# ---- misc ------------------------------------------------------------------------------------


def test_scatter_reduce_include_self_false_and_mean():
    x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    idx = torch.tensor([[0, 0, 2], [1, 1, 1]])
    src = torch.tensor([[10.0, 20.0, float("nan")], [1.0, -2.0, 3.0]])
    xl, srcl = x.long(), src.nan_to_num().long()
    for red in ["sum", "prod", "mean", "amax", "amin"]:
        for inc in (True, False):
            _check(lambda r=red, i=inc: x.scatter_reduce(1, idx, src, r, include_self=i))
            _check(lambda r=red, i=inc: xl.scatter_reduce(1, idx, srcl, r, include_self=i))


def test_masked_ops_broadcast_and_in_place():
    x = torch.arange(6.0).view(2, 3)
    m = torch.tensor([True, False, True])
    _check(lambda: x.masked_fill(m, -1.0))
    _check(lambda: torch.zeros(3).masked_fill(torch.tensor([[True], [False]]), 2.0))
    _check(lambda: x.clone().masked_fill_(m, torch.tensor(5)))
    _check(lambda: x.masked_scatter(m, torch.arange(10.0, 20.0)))
    _check(lambda: x.clone().masked_scatter_(m, torch.arange(10.0, 20.0)))
    with pytest.raises(ValueError, match="aten::masked_scatter: the mask selects 3 elements"):
        tb.call("aten::masked_scatter", np.zeros(3), np.ones(3, bool), np.zeros(2))


def test_pad_and_roll_edge_cases():
    x = torch.arange(24.0).view(2, 3, 4)
    _check(lambda: torch.constant_pad_nd(x, [-1, 2, 0, -2], 9.0))
    _check(lambda: torch.nn.functional.pad(x, (3, 3), mode="reflect"))
    _check(lambda: torch.nn.functional.pad(x, (-1, 5, 2, 0), mode="replicate"))
    _check(lambda: torch.roll(x, (5, -7), (0, 2)))
    _check(lambda: torch.roll(x, 7))
    _check(lambda: torch.flip(x, (0, -1)))
    with pytest.raises(ValueError, match="aten::reflection_pad1d: padding size should be less"):
        tb.call("aten::reflection_pad1d", np.zeros((1, 3)), [3, 0])


def test_device_arguments():
    with pytest.raises(NotImplementedError, match="aten::zeros: argument 'device': device 'cuda'"):
        tb.call("aten::zeros", [2], device="cuda")
    assert _np(tb.call("aten::zeros", [2], device="cpu")).shape == (2,)


def test_sizes_and_offsets_past_int64_raise_or_clamp(no_fallback):
    # Found by the fuzz test under UBSan: products of huge sizes, strides and diagonals
    # overflowed int64 inside the checks meant to reject them.
    big = 2**62
    t = tb.wrap(np.arange(12, dtype=np.float32).reshape(3, 4))
    with pytest.raises(ValueError, match="as_strided"):
        torch.as_strided(t, (2**61, 2), (5, 1))
    with pytest.raises(ValueError, match="is invalid for 12 elements"):
        t.reshape(big, 3, -1)
    plain = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    for k in (big, -big, 2**63 - 1, -(2**63)):
        torch.testing.assert_close(tb.to_torch(torch.tril(t, k)), torch.tril(plain, k))
        torch.testing.assert_close(tb.to_torch(torch.triu(t, k)), torch.triu(plain, k))
