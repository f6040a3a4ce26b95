"""call_torch: torch functions on numpy and JAX arrays, also under jit, grad and vmap, through
both jit paths (the XLA FFI custom call running a captured plan, and jax.pure_callback)."""

import functools

import numpy as np
import pytest
import torch
from conftest import requires_jax

import tensorbridge as tb

pytestmark = requires_jax

MODES = ["ffi", "callback"]


def torch_mlp(x, w1, b1, w2, b2):
    return torch.tanh(x @ w1 + b1) @ w2 + b2


def jax_mlp(x, w1, b1, w2, b2):
    import jax.numpy as jnp

    return jnp.tanh(x @ w1 + b1) @ w2 + b2


def _params(seed=0):
    rng = np.random.default_rng(seed)
    return [
        rng.standard_normal(s).astype(np.float32) * 0.3 for s in [(6, 16), (16,), (16, 3), (3,)]
    ]


def test_numpy_in_numpy_out_zero_copy():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    seen = {}

    def f(t):
        seen["ptr"] = tb.to_torch(t).data_ptr()
        return t * 2

    out = tb.call_torch(f, x)
    assert isinstance(out, np.ndarray)
    np.testing.assert_array_equal(out, x * 2)
    assert seen["ptr"] == x.ctypes.data


@pytest.mark.parametrize("dt", [np.uint16, np.uint32, np.uint64])
def test_unsigned_arrays_that_wrap_accepts_call_torch_accepts(dt):
    """One dtype table: every dtype ``tb.wrap`` takes, ``call_torch`` takes too."""
    x = np.arange(6, dtype=dt).reshape(2, 3)
    assert tb.wrap(x).dtype == getattr(torch, np.dtype(dt).name)
    out = tb.call_torch(lambda t: t.t(), x)
    assert out.dtype == dt and np.shares_memory(out, x)
    np.testing.assert_array_equal(out, x.T)
    np.testing.assert_array_equal(tb.call_torch(lambda t: t.flip(0), x), x[::-1])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dt", ["uint16", "uint32"])
def test_unsigned_jax_arrays_under_jit(mode, dt):
    import jax
    import jax.numpy as jnp

    x = jnp.arange(6, dtype=dt).reshape(2, 3)
    out = jax.jit(lambda a: tb.call_torch(lambda t: t.flip(0), a, jit_mode=mode))(x)
    assert out.dtype == x.dtype
    np.testing.assert_array_equal(out, np.asarray(x)[::-1])


def test_eager_jax_in_jax_out():
    import jax
    import jax.numpy as jnp

    x = jnp.asarray(np.random.default_rng(1).standard_normal((5, 6)).astype(np.float32))
    params = [jnp.asarray(p) for p in _params()]
    out = tb.call_torch(torch_mlp, x, *params)
    assert isinstance(out, jax.Array)
    np.testing.assert_allclose(out, jax_mlp(x, *params), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", MODES)
def test_jit_forward_and_loss(mode):
    import jax
    import jax.numpy as jnp

    x = jnp.asarray(np.random.default_rng(2).standard_normal((5, 6)).astype(np.float32))
    params = [jnp.asarray(p) for p in _params()]
    f = jax.jit(lambda x, *p: jnp.mean(tb.call_torch(torch_mlp, x, *p, jit_mode=mode) ** 2))
    ref = jnp.mean(jax_mlp(x, *params) ** 2)
    np.testing.assert_allclose(f(x, *params), ref, rtol=1e-5)


@pytest.mark.parametrize("mode", MODES)
def test_jit_grad_matches_jax(mode):
    import jax
    import jax.numpy as jnp

    x = jnp.asarray(np.random.default_rng(3).standard_normal((5, 6)).astype(np.float32))
    params = [jnp.asarray(p) for p in _params()]

    def loss(p, fn):
        return jnp.sum(fn(x, *p) ** 2)

    ours = jax.jit(
        jax.grad(lambda p: loss(p, lambda *a: tb.call_torch(torch_mlp, *a, jit_mode=mode)))
    )(params)
    ref = jax.grad(lambda p: loss(p, jax_mlp))(params)
    for a, b in zip(ours, ref, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", MODES)
def test_vmap_over_a_batch_axis(mode):
    import jax
    import jax.numpy as jnp

    xs = jnp.asarray(np.random.default_rng(4).standard_normal((7, 5, 6)).astype(np.float32))
    params = [jnp.asarray(p) for p in _params()]
    ours = jax.vmap(lambda x: tb.call_torch(torch_mlp, x, *params, jit_mode=mode))(xs)
    ref = jax.vmap(lambda x: jax_mlp(x, *params))(xs)
    np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-5)
    ours_jit = jax.jit(jax.vmap(lambda x: tb.call_torch(torch_mlp, x, *params, jit_mode=mode)))(xs)
    np.testing.assert_allclose(ours_jit, ref, rtol=1e-5, atol=1e-5)


def test_ffi_vmap_runs_one_batched_plan_and_composes_with_grad():
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(9)
    xs = jnp.asarray(rng.standard_normal((3, 7, 5, 6)).astype(np.float32))
    params = [jnp.asarray(p) for p in _params()]

    def ours(x, *p):
        return tb.call_torch(torch_mlp, x, *p, jit_mode="ffi")

    # One custom call on the whole batch (the plan of torch.func.vmap of the function), not a
    # loop of per-element calls.
    v = jax.jit(jax.vmap(ours, in_axes=(0, None, None, None, None)))
    text = v.lower(xs[0], *params).as_text()
    assert text.count("custom_call @tensorbridge_plan") == 1 and "while" not in text
    assert "tensorbridge_plan(%arg0, %arg1, %arg2, %arg3, %arg4)" in text
    ref = jax.vmap(lambda x: jax_mlp(x, *params))(xs[0])
    np.testing.assert_allclose(v(xs[0], *params), ref, rtol=1e-5, atol=1e-5)

    # Nested vmap, every argument batched on the outer axis.
    w1s = jnp.stack([params[0] * (i + 1) for i in range(3)])
    inner = (0, None)
    nested = jax.jit(jax.vmap(jax.vmap(lambda x, w1: ours(x, w1, *params[1:]), inner)))
    want = jax.vmap(jax.vmap(lambda x, w1: jax_mlp(x, w1, *params[1:]), inner))(xs, w1s)
    np.testing.assert_allclose(nested(xs, w1s), want, rtol=1e-5, atol=1e-5)

    # Per-example gradients (vmap of grad) and the gradient of a vmapped loss (grad of vmap).
    def loss(p, x, fn):
        return jnp.sum(fn(x, *p) ** 2)

    per_ex = jax.jit(jax.vmap(jax.grad(lambda p, x: loss(p, x, ours)), in_axes=(None, 0)))
    want = jax.vmap(jax.grad(lambda p, x: loss(p, x, jax_mlp)), in_axes=(None, 0))(params, xs[0])
    for a, b in zip(per_ex(params, xs[0]), want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    batch_loss = jax.jit(jax.grad(lambda p: jnp.sum(jax.vmap(lambda x: loss(p, x, ours))(xs[0]))))
    want = jax.grad(lambda p: jnp.sum(jax.vmap(lambda x: loss(p, x, jax_mlp))(xs[0])))(params)
    ffi0, cb0 = _counts()
    for a, b in zip(batch_loss(params), want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    assert _counts()[1] == cb0 and _counts()[0] > ffi0


@pytest.mark.parametrize("mode", MODES)
def test_optax_on_a_functionalized_module_matches_torch_sgd(mode):
    import jax
    import optax

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    ref = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    ref.load_state_dict(model.state_dict())
    params, apply = tb.functionalize(model, jit_mode=mode)
    x = np.random.default_rng(5).standard_normal((4, 6)).astype(np.float32)
    y = np.random.default_rng(6).standard_normal((4, 2)).astype(np.float32)

    def loss(p):
        return ((apply(p, x) - y) ** 2).mean()

    tx = optax.sgd(0.1)
    state = tx.init(params)
    step = jax.jit(
        lambda p, s: (lambda g: (optax.apply_updates(p, tx.update(g, s)[0]), tx.update(g, s)[1]))(
            jax.grad(loss)(p)
        )
    )
    opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for _ in range(3):
        params, state = step(params, state)
        opt.zero_grad()
        ((ref(torch.from_numpy(x)) - torch.from_numpy(y)) ** 2).mean().backward()
        opt.step()
    for name, p in ref.named_parameters():
        np.testing.assert_allclose(
            np.asarray(params[name]), p.detach().numpy(), rtol=1e-5, atol=1e-5
        )


@pytest.mark.parametrize("mode", MODES)
def test_errors_are_clear(mode):
    import jax
    import jax.numpy as jnp

    with pytest.raises(TypeError, match="numpy or JAX arrays"):
        tb.call_torch(lambda a, b: a * b, np.ones(2, np.float32), "two", jit_mode=mode)
    with pytest.raises(TypeError, match="numpy or JAX arrays"):
        jax.jit(lambda a: tb.call_torch(lambda a, b: a * b, a, "two", jit_mode=mode))(jnp.ones(2))
    with pytest.raises(TypeError, match="no torch equivalent"):
        tb.call_torch(lambda a: a, np.array(["a", "b"]), jit_mode=mode)
    with pytest.raises(TypeError, match="no torch equivalent"):
        jax.jit(lambda a: tb.call_torch(lambda t: t, a, jit_mode=mode))(
            jnp.ones(2, jnp.float8_e5m2)
        )
    with pytest.raises(ValueError, match="depend only on input shapes"):
        jax.jit(lambda a: tb.call_torch(lambda t: t[t > 0], a, jit_mode=mode))(jnp.ones(3))
    with pytest.raises(ValueError, match="jit_mode must be one of"):
        tb.call_torch(lambda t: t, np.ones(2), jit_mode="xla")


# ---- which path ran ----------------------------------------------------------------------------


def _counts():
    m = tb.diagnostics.call_torch_metrics()
    return m["ffi_runs"], m["callback_runs"]


def test_ffi_path_is_a_custom_call_and_runs_no_python():
    import jax
    import jax.numpy as jnp

    x = jnp.asarray(np.random.default_rng(7).standard_normal((5, 6)).astype(np.float32))
    params = [jnp.asarray(p) for p in _params()]
    f = jax.jit(lambda x, *p: tb.call_torch(torch_mlp, x, *p, jit_mode="ffi"))
    text = f.lower(x, *params).as_text()
    assert "custom_call @tensorbridge_plan" in text
    assert "callback" not in text
    f(x, *params).block_until_ready()  # compiled: later calls only run the executable
    ffi0, cb0 = _counts()
    for _ in range(3):
        out = f(x, *params).block_until_ready()
    ffi1, cb1 = _counts()
    assert (ffi1 - ffi0, cb1 - cb0) == (3, 0)
    np.testing.assert_allclose(out, jax_mlp(x, *params), rtol=1e-5, atol=1e-5)

    # jit(grad): the backward plan runs through the handler too.
    g = jax.jit(jax.grad(lambda p: jnp.sum(tb.call_torch(torch_mlp, x, *p, jit_mode="ffi") ** 2)))
    g(params)
    ffi0, cb0 = _counts()
    g(params)
    ffi1, cb1 = _counts()
    assert ffi1 - ffi0 >= 2 and cb1 == cb0  # forward (for the residual) and backward plans

    # The callback path is a host callback and counts callback runs instead.
    h = jax.jit(lambda x, *p: tb.call_torch(torch_mlp, x, *p, jit_mode="callback"))
    assert "tensorbridge_plan" not in h.lower(x, *params).as_text()
    h(x, *params).block_until_ready()
    ffi0, cb0 = _counts()
    h(x, *params).block_until_ready()
    assert _counts() == (ffi0, cb0 + 1)


def test_auto_mode_takes_the_ffi_and_falls_back_to_the_callback():
    import jax
    import jax.numpy as jnp

    x = jnp.asarray(np.linspace(-1, 1, 6, dtype=np.float32))
    assert tb.config.jit_mode == "auto"
    ffi0, cb0 = _counts()
    jax.jit(lambda a: tb.call_torch(torch.tanh, a))(x).block_until_ready()
    ffi1, cb1 = _counts()
    assert (ffi1 - ffi0, cb1 - cb0) == (1, 0)

    # aten::special_airy_ai has no tensorbridge kernel: its plan would run a fallback node through
    # Python, so auto mode keeps the function on the callback and says why.
    def airy(t):
        return torch.special.airy_ai(t) * 2

    out = jax.jit(lambda a: tb.call_torch(airy, a))(x)
    ffi2, cb2 = _counts()
    assert (ffi2 - ffi1, cb2 - cb1) == (0, 1)
    assert "airy_ai" in tb.diagnostics.call_torch_metrics()["callback_reasons"][-1]
    assert "fallback" in tb.diagnostics.call_torch_metrics()["callback_reasons"][-1]
    want = torch.special.airy_ai(torch.from_numpy(np.array(x))).numpy() * 2
    np.testing.assert_allclose(out, want, rtol=1e-6)
    # Forced, the FFI handler runs it (taking the GIL for the fallback node).
    out = jax.jit(lambda a: tb.call_torch(airy, a, jit_mode="ffi"))(x)
    assert _counts()[0] == ffi2 + 1
    np.testing.assert_allclose(out, want, rtol=1e-6)

    tb.config.jit_mode = "callback"
    try:
        jax.jit(lambda a: tb.call_torch(torch.tanh, a))(x).block_until_ready()
        assert _counts()[1] == cb2 + 1
    finally:
        tb.config.jit_mode = "auto"
    with pytest.raises(ValueError, match="jit_mode must be one of"):
        tb.config.jit_mode = "fast"


@pytest.mark.parametrize("mode", MODES)
def test_jit_several_outputs_dtypes_views_and_new_tensors(mode):
    import jax
    import jax.numpy as jnp

    def f(a, idx):
        return {
            "t": a.t(),
            "sum": a.sum(0),
            "gathered": a[idx],
            "count": (a > 0).sum(dtype=torch.int32),
            "offset": a + torch.arange(3, dtype=torch.float32),
            "zeros": torch.zeros(2),
        }

    a = jnp.asarray(np.random.default_rng(8).standard_normal((4, 3)))  # float32 (x64 off)
    idx = jnp.asarray(np.array([3, 0, 0], np.int32))
    out = jax.jit(lambda a, i: tb.call_torch(f, a, i, jit_mode=mode))(a, idx)
    an = np.asarray(a)
    np.testing.assert_allclose(out["offset"], an + np.arange(3))
    np.testing.assert_array_equal(out["zeros"], np.zeros(2, np.float32))
    np.testing.assert_allclose(out["t"], an.T)
    np.testing.assert_allclose(out["sum"], an.sum(0), rtol=1e-6)
    np.testing.assert_allclose(out["gathered"], an[[3, 0, 0]])
    assert out["count"].dtype == jnp.int32
    assert int(out["count"]) == int((an > 0).sum())
    # 64-bit results need jax_enable_x64 (off here): a clear error at trace time.
    if not jax.config.jax_enable_x64:
        with pytest.raises(TypeError, match="int64, which JAX holds only with jax_enable_x64"):
            jax.jit(lambda a: tb.call_torch(lambda t: (t > 0).sum(), a, jit_mode=mode))(a)


def test_ffi_threads_setting():
    import jax
    import jax.numpy as jnp

    # Large enough for the kernels to split their loops across OpenMP threads.
    xs = jnp.asarray(np.random.default_rng(10).standard_normal((64, 32, 64)).astype(np.float32))
    w = jnp.asarray(np.random.default_rng(11).standard_normal((64, 64)).astype(np.float32))
    f = jax.jit(
        jax.vmap(lambda x: tb.call_torch(lambda a, b: torch.tanh(a @ b), x, w, jit_mode="ffi"))
    )
    want = np.tanh(np.asarray(xs) @ np.asarray(w))
    assert tb.config.ffi_threads == 1
    try:
        for n in (0, 2, 1):
            tb.config.ffi_threads = n
            np.testing.assert_allclose(f(xs), want, rtol=1e-4, atol=1e-5)
    finally:
        tb.config.ffi_threads = 1
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="ffi_threads must be an int >= 0"):
            tb.config.ffi_threads = bad


def test_ffi_half_precision():
    import jax
    import jax.numpy as jnp

    for dt, tdt in ((jnp.bfloat16, torch.bfloat16), (jnp.float16, torch.float16)):
        x = jnp.asarray(np.linspace(-2, 2, 9), dt)
        out = jax.jit(lambda a: tb.call_torch(lambda t: torch.relu(t) * t, a, jit_mode="ffi"))(x)
        assert out.dtype == dt
        r = torch.from_numpy(np.linspace(-2, 2, 9)).to(tdt)
        want = (torch.relu(r) * r).float().numpy()
        np.testing.assert_array_equal(np.asarray(out, np.float32), want)


def test_ffi_refuses_writing_into_an_input():
    import jax
    import jax.numpy as jnp

    def bump(t):
        t.add_(1)
        return t * 2

    for mode in ("ffi", "auto"):
        f = jax.jit(functools.partial(tb.call_torch, bump, jit_mode=mode))
        with pytest.raises(BufferError, match="writes into its input 0"):
            f(jnp.ones(3))


def test_ffi_handler_leaves_the_callers_thread_count(tmp_path):
    # XLA may run the custom call on the calling thread; the handler's thread count
    # (config.ffi_threads, default 1) holds for the call only, so torch's setting on that
    # thread (torch.get_num_threads, which dynamo guards on) is unchanged after it. In a fresh
    # process: the first handler call on a thread is the one that used to change it.
    import subprocess
    import sys

    script = tmp_path / "threads.py"
    script.write_text(
        "import jax, jax.numpy as jnp, torch, tensorbridge as tb\n"
        "torch.set_num_threads(3)\n"
        "assert torch.get_num_threads() == 3\n"  # torch's per-thread set-up done before
        "f = jax.jit(lambda a: tb.call_torch(lambda u: torch.tanh(u) * 2, a, jit_mode='ffi'))\n"
        "for n in (3, 4):\n"
        "    f(jnp.ones(n)).block_until_ready()\n"
        "assert tb.diagnostics.call_torch_metrics()['ffi_runs'] == 2, tb.diagnostics.call_torch_metrics()\n"
        "print(torch.get_num_threads())\n"
    )
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, check=False
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-1] == "3", out.stdout
