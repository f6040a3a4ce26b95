"""The fast paths of the eager route: result wrappers made by the libtorch-linked maker
(python/torch_device/wrapper.cc) and by torch.Tensor._make_wrapper_subclass, which must give
the same tensors; torch's lookup of torch_dispatch rules done in C++."""

import contextlib
import gc
import weakref

import numpy as np
import pytest
import torch
from conftest import on_threads

import tensorbridge as tb
from tensorbridge import _C, _tensor

_ADDRESS, _WHY = _tensor._wrapper_library()


@pytest.fixture(params=["fast", "torch"])
def maker(request):
    """Runs a test with each maker of result wrappers, and restores the default after."""
    if request.param == "fast" and _ADDRESS is None:
        pytest.skip(f"no libtorch-linked wrapper maker in this build: {_WHY}")
    _tensor._fast_wrappers(request.param == "fast")
    yield request.param
    _tensor._fast_wrappers(True)


def _reference(r: torch.Tensor) -> torch.Tensor:
    """What torch.Tensor._make_wrapper_subclass makes for r's Array."""
    a = r.array
    dtype = r.dtype
    return torch.Tensor._make_wrapper_subclass(tb.Tensor, a.shape, strides=a.strides, dtype=dtype)


DTYPES = [np.float32, np.float64, np.float16, np.int8, np.int16, np.int32, np.int64, np.uint8]


@pytest.mark.parametrize("np_dtype", [*DTYPES, np.bool_, np.complex64])
def test_results_describe_their_array(maker, np_dtype):
    x = (np.arange(24) % 5).astype(np_dtype).reshape(2, 3, 4)
    a = tb.wrap(x)
    results = [
        a.clone(),
        a.transpose(0, 2),
        a[:, 1:, ::2],
        a[:, None].expand(2, 5, 3, 4),
        a[0, 0, 0],
        a[:, :0],
        a.reshape(24)[3:4],
        a.permute(2, 0, 1).contiguous(),
    ]
    for r in results:
        assert type(r) is tb.Tensor
        want = _reference(r)
        assert r.shape == want.shape == tuple(r.array.shape)
        assert r.stride() == want.stride() == tuple(r.array.strides)
        assert r.dtype == want.dtype and r.device == torch.device("cpu")
        assert r.is_contiguous() == want.is_contiguous()
        assert r.storage_offset() == 0 and not r.requires_grad
        assert torch._C._dispatch_keys(r) == torch._C._dispatch_keys(want)
        nbytes = torch.Tensor.untyped_storage(r).nbytes()
        assert nbytes == torch.Tensor.untyped_storage(want).nbytes()
        np.testing.assert_array_equal(tb.to_numpy(r), tb.to_torch(r).numpy())


def test_views_share_memory_and_results_compute(maker):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = tb.wrap(x)
    v = a.t()
    assert v.data_ptr() == a.data_ptr() == x.ctypes.data
    s = a[1:, 2:]
    assert s.data_ptr() == x.ctypes.data + (4 + 2) * 4
    v[0, 1] = 100.0  # writes the numpy array through the view
    assert x[1, 0] == 100.0
    r = (a * 2 + 1).sum(dim=0)
    np.testing.assert_array_equal(tb.to_numpy(r), (x * 2 + 1).sum(axis=0))
    assert type(r + 1) is tb.Tensor  # results dispatch to tensorbridge like any wrapper


def test_autograd_through_results(maker):
    gen = torch.Generator().manual_seed(0)
    w0, x0 = torch.randn(5, 3, generator=gen), torch.randn(4, 3, generator=gen)
    w = tb.wrap(w0.clone(), requires_grad=True)
    y = torch.nn.functional.linear(tb.wrap(x0.clone()), w).relu().t().sum()
    y.backward()
    wt = w0.clone().requires_grad_()
    torch.nn.functional.linear(x0, wt).relu().t().sum().backward()
    assert type(w.grad) is tb.Tensor
    torch.testing.assert_close(tb.to_torch(w.grad), wt.grad)
    assert float(y.detach()) == pytest.approx(
        float(torch.nn.functional.linear(x0, w0).relu().sum())
    )


def test_errors_are_the_same(maker):
    a = tb.wrap(np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match=r"aten::add.Tensor: shapes \[2, 3\] \[4\]"):
        torch.add(a, tb.wrap(np.ones(4, np.float32)))
    with pytest.raises(ValueError, match=r"view: shape \[4\] is invalid for 6 elements"):
        a.view(4)


def test_threads_make_results_concurrently(maker):
    x = np.arange(64, dtype=np.float32).reshape(8, 8)

    def work(k):
        a = tb.wrap(x + k)
        for _ in range(200):
            r = (a.t() + 1)[k % 8]
            assert r.shape == (8,) and r.stride() == (8,)
            np.testing.assert_array_equal(tb.to_numpy(r), (x + k).T[k % 8] + 1)

    on_threads(work, 4)


# ---- the wrappers' storage: the wrapped memory (libtorch-linked maker only) ------------------

requires_maker = pytest.mark.skipif(
    _ADDRESS is None, reason=f"no libtorch-linked wrapper maker in this build: {_WHY}"
)


def _storage_ptr(t: torch.Tensor) -> int:
    return torch.Tensor.untyped_storage(t).data_ptr()  # the wrapper's own, not to_torch's


class _PassThrough(torch.utils._python_dispatch.TorchDispatchMode):
    """A mode that changes nothing: under it, ops take __torch_dispatch__ (eager.cc), not the
    Python-key kernels."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


@requires_maker
@pytest.mark.parametrize("route", ["python_key", "torch_dispatch"])
def test_wrappers_store_the_wrapped_memory(route, no_fallback):
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    a = tb.wrap(x)
    assert _storage_ptr(a) == x.ctypes.data and a.storage_offset() == 0
    assert torch.Tensor.untyped_storage(a).nbytes() == x.nbytes
    mode = _PassThrough() if route == "torch_dispatch" else contextlib.nullcontext()
    with mode:
        results = [a + 1, a[1:, ::2], a.t(), torch.mm(a.t(), a), a.reshape(24)[5:]]
    for r in results:
        assert type(r) is tb.Tensor
        assert _storage_ptr(r) == r.data_ptr() == r.array.data_ptr != 0
        last = sum((n - 1) * s for n, s in zip(r.shape, r.stride(), strict=True)) + 1
        assert torch.Tensor.untyped_storage(r).nbytes() == last * r.element_size()
    assert _storage_ptr(results[1]) == x[1:, ::2].ctypes.data  # views: the same memory


@requires_maker
def test_torch_cpp_reads_the_wrapped_memory(no_fallback):
    # torch's own C++ code reads a wrapper's storage: tensor_split's CompositeImplicit
    # decomposition reads its index tensor there, to_dlpack exports it.
    x = np.arange(20, dtype=np.float64).reshape(10, 2)
    a = tb.wrap(x)
    for idx in (np.array([2, 5, 7]), np.array(3)):
        got = torch.tensor_split(a, tb.wrap(idx))
        want = torch.tensor_split(torch.from_numpy(x), torch.from_numpy(idx))
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert type(g) is tb.Tensor
            torch.testing.assert_close(tb.to_torch(g), w, rtol=0, atol=0)
    v = a.t()[:, 1:]
    back = torch.from_dlpack(torch.utils.dlpack.to_dlpack(v))
    assert back.data_ptr() == x[1:].T.ctypes.data and back.stride() == (1, 2)
    torch.testing.assert_close(back, torch.from_numpy(x).t()[:, 1:], rtol=0, atol=0)


@requires_maker
def test_wrapper_storage_keeps_the_memory_alive():
    x = np.arange(8, dtype=np.float32)
    gone = []
    weakref.finalize(x, gone.append, True)
    t = tb.wrap(x)[2:]
    capsule = torch.utils.dlpack.to_dlpack(t)
    del x, t
    gc.collect()
    assert not gone  # the capsule holds the wrapper's storage, which holds the array
    back = torch.from_dlpack(capsule)
    assert back.tolist() == [2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
    del capsule, back
    gc.collect()
    assert gone


def test_tensor_with_the_torch_maker_still_works():
    # Without the libtorch-linked maker a wrapper's storage holds no memory; ops still run.
    _tensor._fast_wrappers(False)
    try:
        a = tb.wrap(np.arange(6.0))
        with pytest.raises(RuntimeError, match="invalid python storage"):
            _storage_ptr(a)
        np.testing.assert_array_equal(tb.to_numpy(a * 2), np.arange(6.0) * 2)
    finally:
        _tensor._fast_wrappers(True)


def test_switching_the_maker():
    assert _tensor._fast_wrappers(False) == "switched off"
    try:
        assert type(tb.wrap(np.ones(3)) + 1) is tb.Tensor
    finally:
        why = _tensor._fast_wrappers(True)
    assert why == _WHY
    assert (why == "") == (_ADDRESS is not None)


# ---- torch_dispatch rules (torch.library.register_torch_dispatch) --------------------------


def test_rule_lookup_is_installed_and_answers_as_torch():
    from torch._library import simple_registry

    assert simple_registry.find_torch_dispatch_rule is _C._find_torch_dispatch_rule
    find = _C._find_torch_dispatch_rule
    add = torch.ops.aten.add.Tensor
    simple_registry.singleton.find(add.__qualname__)  # an entry without rules
    assert find(add, tb.Tensor) is None
    assert find(torch.ops.aten.sub.Tensor, tb.Tensor) is None  # maybe no entry at all

    class Other(torch.Tensor):
        pass

    def rule(*args):
        return None

    handle = simple_registry.singleton.find(add.__qualname__).torch_dispatch_rules.register(
        Other, rule
    )
    try:
        assert find(add, Other) is rule and find(add, tb.Tensor) is None
    finally:
        handle.destroy()
    assert find(add, Other) is None
    with pytest.raises(TypeError, match="find_torch_dispatch_rule"):
        find(add)
    with pytest.raises(AttributeError, match="__qualname__"):
        find(object(), tb.Tensor)


def test_registered_rule_runs_for_wrapped_tensors():
    lib = torch.library.Library("tbfastpath", "FRAGMENT")
    try:
        lib.define("twice(Tensor x) -> Tensor")
        lib.impl("twice", lambda x: x * 2, "CompositeExplicitAutograd")
        op = torch.ops.tbfastpath.twice.default
        x = tb.wrap(np.arange(3, dtype=np.float32))
        calls = []

        def rule(cls, func, types, args, kwargs):
            calls.append((cls, func))
            return args[0] + 100

        assert _C._find_torch_dispatch_rule(op, tb.Tensor) is None
        rules = torch.library.Library("tbfastpath", "FRAGMENT")  # destroyed: the rule goes
        rules._register_torch_dispatch_rule("twice", tb.Tensor, rule)
        assert _C._find_torch_dispatch_rule(op, tb.Tensor) is rule
        r = op(x)
        assert calls == [(tb.Tensor, op)]
        np.testing.assert_array_equal(tb.to_numpy(r), np.arange(3) + 100)
        rules._destroy()
        assert _C._find_torch_dispatch_rule(op, tb.Tensor) is None
        r = op(x)
        assert len(calls) == 1 and type(r) is tb.Tensor
        np.testing.assert_array_equal(tb.to_numpy(r), np.arange(3) * 2)
    finally:
        lib._destroy()
