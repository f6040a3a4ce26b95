"""The kernels on torch's Python dispatch key (python/torch_device/python_key.cc): ops on
tensorbridge.Tensors that go from torch's dispatcher to the table in C++, and every call they
do not take going to ``__torch_dispatch__`` exactly as torch's own Python fallback would
(modes, FakeTensor, other subclasses, torch_dispatch rules)."""

import contextlib
import os
import subprocess
import sys
from typing import ClassVar

import numpy as np
import pytest
import torch
from conftest import on_threads
from torch.utils._python_dispatch import TorchDispatchMode

import tensorbridge as tb
from tensorbridge import _C, _tensor

_WHY = "" if _tensor._python_key_ops() else _tensor._python_key_kernels(True)
pytestmark = pytest.mark.skipif(
    _tensor._python_key_ops() == 0, reason=f"no Python-key kernels in this build: {_WHY}"
)


def _python_route_calls(fn):
    """(fn's result, how many ops took __torch_dispatch__ while it ran)."""
    _C._eager_timing(True)
    try:
        out = fn()
    finally:
        counts = _C._eager_timing(False)
    return out, counts["ops"]


def _python_route_ops(fn, monkeypatch):
    """(fn's result, the ops that took tensorbridge.Tensor.__torch_dispatch__ while it ran)."""
    seen = []
    original = _C._torch_dispatch

    def spy(func, types, args=(), kwargs=None):
        seen.append(str(func))
        return original(func, types, args, kwargs)

    with monkeypatch.context() as m:
        m.setattr(tb.Tensor, "__torch_dispatch__", staticmethod(spy))
        out = fn()
    return out, seen


def _np(t):
    return tb.to_numpy(t) if isinstance(t, tb.Tensor) else t.detach().numpy()


@pytest.fixture
def kernels_on():
    """The kernels registered (the default), restored after a test that switches them."""
    assert _tensor._python_key_kernels(True) == ""
    yield
    assert _tensor._python_key_kernels(True) == ""


RNG = np.random.default_rng(0)
X = RNG.standard_normal((4, 6)).astype(np.float32)
Y = RNG.standard_normal((4, 6)).astype(np.float32)
W = RNG.standard_normal((6, 3)).astype(np.float32)

# (name, fn(a, b, w) on tensors): each result compared with torch's on plain tensors.
CASES = [
    ("add", lambda a, b, w: torch.add(a, b, alpha=2.5)),
    ("add scalar", lambda a, b, w: a + 3),
    ("mul", lambda a, b, w: a * b),
    ("matmul", lambda a, b, w: a @ w),
    ("relu", lambda a, b, w: torch.relu(a)),
    ("sum", lambda a, b, w: a.sum()),
    ("sum dim", lambda a, b, w: a.sum(dim=1, keepdim=True)),
    ("softmax", lambda a, b, w: torch.softmax(a, dim=-1)),
    ("layer_norm", lambda a, b, w: torch.nn.functional.layer_norm(a, (6,))),
    ("gelu", lambda a, b, w: torch.nn.functional.gelu(a)),
    ("transpose", lambda a, b, w: a.t()),
    ("slice", lambda a, b, w: a[1:, ::2]),
    ("view", lambda a, b, w: a.view(2, 12)),
    ("max dim", lambda a, b, w: torch.max(a, dim=1)),
    ("cat", lambda a, b, w: torch.cat([a, b], dim=0)),
    ("where", lambda a, b, w: torch.where(a > 0, a, b)),
    ("to float64", lambda a, b, w: a.to(torch.float64)),
]


@pytest.mark.parametrize("name,fn", CASES, ids=[c[0] for c in CASES])
def test_ops_match_torch_without_the_python_route(no_fallback, name, fn):
    a, b, w = tb.wrap(X), tb.wrap(Y), tb.wrap(W)
    got, python_calls = _python_route_calls(lambda: fn(a, b, w))
    want = fn(torch.from_numpy(X), torch.from_numpy(Y), torch.from_numpy(W))
    assert python_calls == 0, f"{name} took __torch_dispatch__"
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for g, t in zip(got, want, strict=True):
        assert type(g) is tb.Tensor and g.array is not None
        assert g.shape == t.shape and g.stride() == t.stride() and g.dtype == t.dtype
        np.testing.assert_allclose(_np(g), t.numpy(), rtol=1e-5, atol=1e-6)


def test_plain_tensor_arguments_are_zero_copy(no_fallback):
    a = tb.wrap(X.copy())
    plain = torch.from_numpy(Y.copy())
    r, python_calls = _python_route_calls(lambda: a + plain)
    assert python_calls == 0 and type(r) is tb.Tensor
    np.testing.assert_allclose(_np(r), X + Y, rtol=1e-6)
    # In place on the wrapped memory, with a plain operand: the same object comes back.
    x = X.copy()
    t = tb.wrap(x)
    out, python_calls = _python_route_calls(lambda: t.add_(plain))
    assert python_calls == 0 and out is t
    np.testing.assert_allclose(x, X + Y, rtol=1e-6)  # the numpy array itself changed


def test_out_variants_without_the_python_route(no_fallback):
    # out= into a plain tensor (DDP's gradient buckets: mul.out(grad, 1 / world, out=view)) and
    # into a tensorbridge.Tensor: the table writes the memory in place, the out tensor returns.
    a, b = tb.wrap(X.copy()), tb.wrap(Y.copy())
    bucket = torch.zeros(2 * X.size)
    view = bucket[X.size :].view(X.shape)
    r, python_calls = _python_route_calls(lambda: torch.mul(a, 0.5, out=view))
    assert python_calls == 0 and r is view
    assert view.data_ptr() == bucket.data_ptr() + X.size * 4  # written where it was
    np.testing.assert_allclose(bucket[X.size :].numpy(), (X * 0.5).ravel(), rtol=1e-6)
    assert not bucket[: X.size].any()
    target = np.zeros_like(X)
    out = tb.wrap(target)
    r, python_calls = _python_route_calls(lambda: torch.add(a, b, out=out))
    assert python_calls == 0 and r is out
    np.testing.assert_allclose(target, X + Y, rtol=1e-6)  # the numpy array itself
    flags = torch.zeros(X.shape, dtype=torch.bool)
    r, python_calls = _python_route_calls(lambda: torch.gt(a, b, out=flags))
    assert python_calls == 0 and r is flags and torch.equal(flags, torch.from_numpy(X > Y))
    # An out tensor of another shape: the table's error, as on the Python route.
    for route in (contextlib.nullcontext(), _tensor._python_route()):
        with route, pytest.raises(ValueError, match=r"aten::mul.out: output with shape \[2, 2\]"):
            torch.mul(a, 2.0, out=torch.empty(2, 2))


def test_scalar_results(no_fallback):
    a = tb.wrap(X)
    value, python_calls = _python_route_calls(lambda: a[1, 2].item())
    assert python_calls == 0 and value == pytest.approx(float(X[1, 2]))
    assert bool(tb.wrap(np.array([3.0], np.float32)) > 2)


def test_attribute_lookup_by_c_string(kernels_on):
    # tensorbridge.Tensor's tp_getattr (the lookup torch's argument parser makes of
    # __torch_function__ with a C string) gives what getattr gives, for any name and instance.
    import ctypes

    get = ctypes.pythonapi.PyObject_GetAttrString
    get.restype = ctypes.py_object
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    a = tb.wrap(X.copy())
    assert get(a, b"__torch_function__") is torch._C._disabled_torch_function_impl
    assert get(a, b"__torch_dispatch__") is tb.Tensor.__torch_dispatch__
    assert get(a, b"shape") == a.shape
    with pytest.raises(AttributeError, match="no_such_attribute"):
        get(a, b"no_such_attribute")
    assert not torch.overrides.has_torch_function((a,))

    calls = []

    class Logged(tb.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            calls.append(func.__name__)
            with torch._C.DisableTorchFunctionSubclass():
                return func(*args, **(kwargs or {}))

    logged = Logged(tb.wrap(X.copy()).array)
    assert torch.overrides.has_torch_function((logged,))
    torch.add(logged, a)
    assert "add" in calls
    # An instance attribute is found as generic lookup finds it.
    b = tb.wrap(X.copy())
    b.__torch_function__ = Logged.__torch_function__
    assert torch.overrides.has_torch_function((b,))


def test_errors_match_the_python_route(kernels_on):
    a = tb.wrap(np.ones((2, 3), np.float32))
    bad = tb.wrap(np.ones(4, np.float32))
    errors = []
    for on in (True, False):
        _tensor._python_key_kernels(on)
        with pytest.raises(ValueError) as info:
            torch.add(a, bad)
        errors.append(str(info.value))
    assert "aten::add.Tensor: shapes [2, 3] [4]" in errors[0]
    assert errors[0] == errors[1]


def test_switching_off_takes_the_python_route(kernels_on):
    a = tb.wrap(X)
    assert _tensor._python_key_kernels(False) == "switched off"
    assert _tensor._python_key_ops() == 0
    r, python_calls = _python_route_calls(lambda: a + a)
    assert python_calls == 1 and type(r) is tb.Tensor
    np.testing.assert_array_equal(_np(r), X + X)
    assert _tensor._python_key_kernels(True) == ""
    assert _tensor._python_key_ops() > 100
    _, python_calls = _python_route_calls(lambda: a + a)
    assert python_calls == 0


def test_python_route_context(no_fallback):
    a = tb.wrap(X)
    with _tensor._python_route():
        r, python_calls = _python_route_calls(lambda: a + a)
    assert python_calls == 1
    np.testing.assert_array_equal(_np(r), X + X)
    _, python_calls = _python_route_calls(lambda: a + a)
    assert python_calls == 0


def test_environment_variable_leaves_them_off():
    code = (
        "import tensorbridge as tb, numpy as np\n"
        "from tensorbridge import _tensor, _C\n"
        "assert _tensor._python_key_ops() == 0\n"
        "a = tb.wrap(np.ones(3, np.float32))\n"
        "_C._eager_timing(True); r = a + a; assert _C._eager_timing(False)['ops'] == 1\n"
        "assert type(r) is tb.Tensor\n"
    )
    env = dict(os.environ, TB_NO_PYTHON_KEY_KERNELS="1")
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=120)


# ---- calls that keep the Python route ------------------------------------------------------


class _Recorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def test_an_active_dispatch_mode_sees_every_op(no_fallback):
    a, b = tb.wrap(X), tb.wrap(Y)
    with _Recorder() as mode:
        r = torch.relu(a * b)
    # The mode sees each op; its own call of the op (the mode popped) takes the kernels.
    assert mode.ops == ["aten.mul.Tensor", "aten.relu.default"]
    assert type(r) is tb.Tensor
    np.testing.assert_allclose(_np(r), np.maximum(X * Y, 0), rtol=1e-6)


def test_fake_tensor_mode_still_fakes():
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    with FakeTensorMode():
        x = torch.empty(4, 6)
        r = torch.add(x, x) @ torch.empty(6, 3)
    assert isinstance(r, FakeTensor) and r.shape == (4, 3)
    mode = FakeTensorMode()
    fake = mode.from_tensor(torch.from_numpy(X))
    with mode:
        r = torch.relu(fake)
    assert isinstance(r, FakeTensor) and r.shape == (4, 6)


class _Other(torch.Tensor):
    """Another wrapper subclass: records its ops and runs them on its plain inner tensor."""

    ops: ClassVar[list[str]] = []

    @staticmethod
    def __new__(cls, inner):
        t = torch.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype)
        t.inner = inner
        return t

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        cls.ops.append(str(func))
        args = [a.inner if isinstance(a, _Other) else a for a in args]
        return func(*args, **(kwargs or {}))


def test_mixed_with_another_subclass(kernels_on):
    # An op with another subclass among its arguments goes to __torch_dispatch__ as without
    # the kernels: the same calls of both classes, the same result.
    a = tb.wrap(X)
    other = _Other(torch.from_numpy(Y))
    seen = []
    for on in (True, False):
        _tensor._python_key_kernels(on)
        _Other.ops.clear()
        r, python_calls = _python_route_calls(lambda: torch.mul(a, other))
        seen.append((list(_Other.ops), python_calls, type(r)))
        np.testing.assert_allclose(_np(r), X * Y, rtol=1e-6)
    assert seen[0] == seen[1]
    assert seen[0][1] >= 1 and seen[0][0]  # tensorbridge's __torch_dispatch__ and _Other's ran


def test_torch_dispatch_rules_for_aten_ops_run(kernels_on):
    a = tb.wrap(X)
    calls = []

    def rule(cls, func, types, args, kwargs):
        calls.append(func)
        return tb.wrap(np.full((4, 6), 7.0, np.float32))

    lib = torch.library.Library("aten", "FRAGMENT")
    lib._register_torch_dispatch_rule("relu", tb.Tensor, rule)
    try:
        r = torch.relu(a)
        assert calls == [torch.ops.aten.relu.default]
        np.testing.assert_array_equal(_np(r), np.full((4, 6), 7.0))
    finally:
        lib._destroy()
    r, python_calls = _python_route_calls(lambda: torch.relu(a))
    assert python_calls == 0 and len(calls) == 1
    np.testing.assert_allclose(_np(r), np.maximum(X, 0))


# ---- autograd and threads ----------------------------------------------------------------


def test_autograd_through_the_kernels(no_fallback, monkeypatch):
    a = tb.wrap(X.copy()).requires_grad_()
    w = tb.wrap(W.copy()).requires_grad_()
    ta = torch.from_numpy(X.copy()).requires_grad_()
    tw = torch.from_numpy(W.copy()).requires_grad_()

    def loss(x, y):
        return torch.nn.functional.gelu(x @ y).softmax(-1).mul(3.0).sum()

    out, python_ops = _python_route_ops(lambda: loss(a, w), monkeypatch)
    assert out.grad_fn is not None
    _, python_ops_backward = _python_route_ops(out.backward, monkeypatch)
    # No op takes __torch_dispatch__, not even the detaches of saved outputs (softmax's), which
    # torch makes through TensorImpl::shallow_copy_and_detach rather than the dispatcher.
    assert python_ops + python_ops_backward == []
    loss(ta, tw).backward()
    assert type(a.grad) is tb.Tensor and type(w.grad) is tb.Tensor
    np.testing.assert_allclose(_np(a.grad), ta.grad.numpy(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(_np(w.grad), tw.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_two_threads(no_fallback):

    def work(k):
        x = (np.arange(48, dtype=np.float32).reshape(6, 8) + k) / 10
        a, w = tb.wrap(x), tb.wrap(x.T.copy())
        for _ in range(300):
            r = torch.relu(a @ w - 1.0).sum(dim=0)
            np.testing.assert_allclose(_np(r), np.maximum(x @ x.T - 1.0, 0).sum(0), rtol=1e-5)

    on_threads(work, 2)


# ---- the kernels and __torch_dispatch__ give the same tensors --------------------------------

_SAME_ROUTE_CASES = [
    ("sub broadcast int", lambda a, i: a - i[:1].to(a.dtype)),
    ("div scalar", lambda a, i: a / 3),
    ("floor_divide int", lambda a, i: torch.floor_divide(i, 3)),
    ("clamp", lambda a, i: a.clamp(-0.5, 0.5)),
    ("masked_fill", lambda a, i: a.masked_fill(a > 0, 2.0)),
    ("gather", lambda a, i: a.gather(1, (i.abs() % 6).long())),
    ("index", lambda a, i: a[(i[:, 0].abs() % 4).long()]),
    ("embedding", lambda a, i: torch.nn.functional.embedding((i.abs() % 4).long(), a)),
    ("mean dims", lambda a, i: a.mean(dim=(0, 1))),
    ("cumsum", lambda a, i: a.cumsum(0)),
    ("argmax", lambda a, i: a.argmax(dim=1)),
    ("unbind", lambda a, i: a.unbind(0)),
    ("split", lambda a, i: a.split(2, dim=1)),
    ("permute contiguous", lambda a, i: a.t().contiguous()),
    ("expand", lambda a, i: a[:1].expand(3, 6)),
    ("eq", lambda a, i: a == a.t().t()),
    ("to int", lambda a, i: a.to(torch.int32)),
    ("mul_ in place", lambda a, i: a.clone().mul_(2)),
    ("bool any", lambda a, i: (a > 10).any()),
    ("error: shapes", lambda a, i: a + a[:, :5]),
    ("error: index", lambda a, i: a[torch.tensor([9])]),
]


@pytest.mark.parametrize("name,fn", _SAME_ROUTE_CASES, ids=[c[0] for c in _SAME_ROUTE_CASES])
def test_same_results_as_the_python_route(no_fallback, name, fn):
    a = tb.wrap(X)
    i = tb.wrap((X * 10).astype(np.int64))

    def run():
        try:
            out = fn(a, i)
        except Exception as e:  # compared between the routes
            return (type(e), str(e).split("\n")[0])
        return out if isinstance(out, tuple) else (out,)

    fast = run()
    with _tensor._python_route():
        slow, python_calls = _python_route_calls(run)
    assert name.startswith("error") == isinstance(fast[0], type)
    if isinstance(fast[0], type):
        assert fast == slow
        return
    assert python_calls >= 1  # the second run took __torch_dispatch__
    for f, s in zip(fast, slow, strict=True):
        assert type(f) is type(s) is tb.Tensor
        assert (f.shape, f.stride(), f.dtype) == (s.shape, s.stride(), s.dtype)
        np.testing.assert_array_equal(_np(f), _np(s))


# ---- shallow copies: detached copies made in C++, `x.data = y` ----------------------------------


def _storage_ptr(t: torch.Tensor) -> int:
    return torch.Tensor.untyped_storage(t).data_ptr()  # the wrapper's own, not to_torch's


def test_detached_copy_keeps_class_and_memory(no_fallback, monkeypatch):
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    a = tb.wrap(x).requires_grad_()
    y = (a * 2)[1:, ::2]  # a strided non-leaf
    # `.data` is torch's shallow_copy_and_detach itself (not an op through the dispatcher).
    for copy_of in (lambda t: t.data, lambda t: t.detach()):
        d, python_ops = _python_route_ops(lambda f=copy_of: f(y), monkeypatch)
        assert python_ops == []
        assert type(d) is tb.Tensor and not d.requires_grad and d.grad_fn is None
        assert d.shape == y.shape and d.stride() == y.stride()
        assert d.data_ptr() == y.data_ptr() == d.array.data_ptr == _storage_ptr(d)
        assert _storage_ptr(d) == _storage_ptr(y)
        np.testing.assert_array_equal(_np(d), (x * 2)[1:, ::2])
        np.testing.assert_array_equal(_np(d + 1), (x * 2)[1:, ::2] + 1)  # a normal tensor after
    leaf = tb.wrap(x)
    d = leaf.data
    with torch.no_grad():
        d[0, 0] = -5.0  # the same memory: the wrapped numpy array changes
    assert x[0, 0] == -5.0 and type(d) is tb.Tensor and d.array.data_ptr == x.ctypes.data


def test_detached_copies_are_the_python_routes(no_fallback):
    # The same tensors as torch's route (the interpreter's detach through __torch_dispatch__).
    a = tb.wrap(X).requires_grad_()
    y = torch.exp(a).t()
    fast = y.data
    with _tensor._python_detach():
        slow = y.data
    for d in (fast, slow):
        assert type(d) is tb.Tensor
    assert (fast.shape, fast.stride(), fast.data_ptr(), fast._version) == (
        slow.shape,
        slow.stride(),
        slow.data_ptr(),
        slow._version,
    )
    np.testing.assert_array_equal(_np(fast), _np(slow))


def _train_step(params, x):
    """A step whose backward unpacks saved outputs (exp, rsqrt, tanh, sigmoid, softmax)."""
    w1, w2 = params
    h = torch.tanh(x @ w1)
    h = h * torch.rsqrt((h * h).mean(-1, keepdim=True) + 1e-5)
    h = torch.nn.functional.silu(h) + torch.sigmoid(h) * torch.exp(-h)
    return torch.softmax(h @ w2, dim=-1)[:, 0].sum()


def test_training_step_equals_torch_without_python_trips(no_fallback, monkeypatch):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 6)).astype(np.float32)
    w = [rng.standard_normal(s).astype(np.float32) for s in ((6, 8), (8, 3))]
    ref = [torch.from_numpy(v.copy()).requires_grad_() for v in w]
    _train_step(ref, torch.from_numpy(x)).backward()
    grads = []
    for fast in (True, False):
        ps = [tb.wrap(v.copy()).requires_grad_() for v in w]
        route = contextlib.nullcontext() if fast else _tensor._python_detach()
        with route:
            loss, ops = _python_route_ops(lambda p=ps: _train_step(p, tb.wrap(x)), monkeypatch)
            _, ops_backward = _python_route_ops(loss.backward, monkeypatch)
        if fast:
            assert ops + ops_backward == []
        else:  # torch's route: each saved output's detach at saving and at unpacking
            assert ops + ops_backward and set(ops + ops_backward) == {"aten.detach.default"}
        for p, r in zip(ps, ref, strict=True):
            assert type(p.grad) is tb.Tensor
            np.testing.assert_allclose(_np(p.grad), r.grad.numpy(), rtol=1e-5, atol=1e-6)
        grads.append([_np(p.grad) for p in ps])
    for f, s in zip(*grads, strict=True):
        np.testing.assert_array_equal(f, s)


def test_saved_output_modified_in_place_is_caught(no_fallback):
    # The saved copy shares the output's version counter, as torch's own detach does.
    a = tb.wrap(X).requires_grad_()
    y = torch.exp(a)
    y.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_detach_under_a_mode_goes_to_the_mode(no_fallback):
    a = tb.wrap(X).requires_grad_()
    y = a * 2
    with _Recorder() as mode:
        d = y.data
    assert mode.ops == ["aten.detach.default"]
    assert type(d) is tb.Tensor and d.data_ptr() == y.data_ptr()


def test_detached_copies_from_threads(no_fallback):

    def work(k):
        x = (np.arange(48, dtype=np.float32).reshape(6, 8) + k) / 10
        for _ in range(100):
            a = tb.wrap(x).requires_grad_()
            torch.sigmoid(torch.exp(a * 0.1)).sum().backward()
            e = np.exp(x * 0.1)
            s = 1 / (1 + np.exp(-e))
            np.testing.assert_allclose(_np(a.grad), s * (1 - s) * e * 0.1, rtol=1e-4)

    on_threads(work, 2)


def test_setting_data_moves_the_array(no_fallback):
    x = tb.wrap(np.zeros((2, 3), np.float32))
    src = np.arange(6, dtype=np.float32).reshape(3, 2)
    x.data = tb.wrap(src).t()
    assert x.shape == (2, 3) and x.data_ptr() == src.ctypes.data == x.array.data_ptr
    np.testing.assert_array_equal(_np(x), src.T)
    np.testing.assert_array_equal(_np(x + 1), src.T + 1)
    plain = torch.arange(4, dtype=torch.float64)
    x.data = plain
    assert x.dtype == torch.float64 and x.data_ptr() == plain.data_ptr() == x.array.data_ptr
    np.testing.assert_array_equal(_np(x * 2), plain.numpy() * 2)
    with pytest.raises(NotImplementedError, match=r"setting a tensorbridge\.Tensor's \.data"):
        x.data = _Other(torch.zeros(4, dtype=torch.float64))


# ---- functional ops above autograd (PythonTLSSnapshot) ---------------------------------------


def test_functional_ops_above_autograd_where_nothing_is_recorded(no_fallback):
    a, b = tb.wrap(X.copy()), tb.wrap(Y.copy())
    before = _tensor._above_autograd_calls()
    with torch.no_grad():
        r = a * b
    assert _tensor._above_autograd_calls() == before + 1
    assert type(r) is tb.Tensor and not r.requires_grad and r.grad_fn is None
    np.testing.assert_allclose(_np(r), X * Y, rtol=1e-6)
    # Grad mode on, no operand wanting a gradient: nothing to record either.
    r = torch.relu(a)
    assert _tensor._above_autograd_calls() == before + 2 and r.grad_fn is None
    with torch.inference_mode():
        r = a - b
    assert _tensor._above_autograd_calls() == before + 3 and r.is_inference()
    np.testing.assert_allclose(_np(r), X - Y, rtol=1e-6)


def test_gradients_views_and_in_place_ops_stay_below(no_fallback):
    a = tb.wrap(X.copy()).requires_grad_()
    b = tb.wrap(Y.copy())
    before = _tensor._above_autograd_calls()
    r = a * b  # a gradient wanted: autograd records it
    assert r.grad_fn is not None and _tensor._above_autograd_calls() == before
    r.sum().backward()
    np.testing.assert_allclose(_np(a.grad), Y, rtol=1e-6)
    before = _tensor._above_autograd_calls()
    c = tb.wrap(X.copy())
    with torch.no_grad():
        v = c.view(2, 12)  # a view: ADInplaceOrView records its base
        version = c._version
        c.add_(b)  # in place: the version counter, shared with the view, moves
    assert v._base is c and c._version == version + 1 and v._version == c._version
    assert _tensor._above_autograd_calls() == before
    np.testing.assert_allclose(_np(v), (X + Y).reshape(2, 12), rtol=1e-6)


def test_backward_ops_run_above_autograd(no_fallback):
    # The engine runs backward functions with grad mode off: their ops are served above autograd.
    a = tb.wrap(X.copy()).requires_grad_()
    w = tb.wrap(W.copy()).requires_grad_()
    ta = torch.from_numpy(X.copy()).requires_grad_()
    tw = torch.from_numpy(W.copy()).requires_grad_()
    out = torch.tanh(a @ w).mul(2.0).sum()
    before = _tensor._above_autograd_calls()
    out.backward()
    assert _tensor._above_autograd_calls() > before
    torch.tanh(ta @ tw).mul(2.0).sum().backward()
    np.testing.assert_allclose(_np(a.grad), ta.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_np(w.grad), tw.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_functional_ops_under_autocast_and_forward_ad(monkeypatch):
    import torch.autograd.forward_ad as fwad

    monkeypatch.setattr(tb.config, "fallback", "allow")  # make_dual's aten::is_same_size
    a, w = tb.wrap(X.copy()), tb.wrap(W.copy())
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        got = a @ w
    assert got.dtype == torch.bfloat16  # autocast's kernel ran first
    np.testing.assert_allclose(_np(got.float()), X @ W, rtol=3e-2, atol=3e-2)
    # sin of a dual tensor goes through autograd (which computes the tangent with ops on plain
    # values, those served above it); a tangent lost above autograd would come back None.
    with torch.no_grad(), fwad.dual_level():
        out = torch.sin(fwad.make_dual(a, tb.wrap(np.full_like(X, 2.0))))
        primal, tangent = fwad.unpack_dual(out)
    assert tangent is not None
    np.testing.assert_allclose(_np(primal), np.sin(X), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_np(tangent), 2 * np.cos(X), rtol=1e-5, atol=1e-6)
