"""call_torch: torch functions on numpy and JAX arrays, also under jit, grad and vmap."""

import numpy as np
import pytest
import torch

import tensorbridge as tb
from conftest import requires_jax

pytestmark = requires_jax


def torch_mlp(x, w1, b1, w2, b2):
    return torch.tanh(x @ w1 + b1) @ w2 + b2


def jax_mlp(x, w1, b1, w2, b2):
    import jax.numpy as jnp

    return jnp.tanh(x @ w1 + b1) @ w2 + b2


def _params(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) * 0.3 for s in [(6, 16), (16,), (16, 3), (3,)]]


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


def test_eager_jax_in_jax_out():
    import jax
    import jax.numpy as jnp

    x = jnp.asarray(np.random.default_rng(1).standard_normal((5, 6)).astype(np.float32))
    params = [jnp.asarray(p) for p in _params()]
    out = tb.call_torch(torch_mlp, x, *params)
    assert isinstance(out, jax.Array)
    np.testing.assert_allclose(out, jax_mlp(x, *params), rtol=1e-5, atol=1e-5)


def test_jit_forward_and_loss():
    import jax
    import jax.numpy as jnp

    x = jnp.asarray(np.random.default_rng(2).standard_normal((5, 6)).astype(np.float32))
    params = [jnp.asarray(p) for p in _params()]
    f = jax.jit(lambda x, *p: jnp.mean(tb.call_torch(torch_mlp, x, *p) ** 2))
    ref = jnp.mean(jax_mlp(x, *params) ** 2)
    np.testing.assert_allclose(f(x, *params), ref, rtol=1e-5)


def test_jit_grad_matches_jax():
    import jax
    import jax.numpy as jnp

    x = jnp.asarray(np.random.default_rng(3).standard_normal((5, 6)).astype(np.float32))
    params = [jnp.asarray(p) for p in _params()]

    def loss(p, fn):
        return jnp.sum(fn(x, *p) ** 2)

    ours = jax.jit(jax.grad(lambda p: loss(p, lambda *a: tb.call_torch(torch_mlp, *a))))(params)
    ref = jax.grad(lambda p: loss(p, jax_mlp))(params)
    for a, b in zip(ours, ref):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_vmap_over_a_batch_axis():
    import jax
    import jax.numpy as jnp

    xs = jnp.asarray(np.random.default_rng(4).standard_normal((7, 5, 6)).astype(np.float32))
    params = [jnp.asarray(p) for p in _params()]
    ours = jax.vmap(lambda x: tb.call_torch(torch_mlp, x, *params))(xs)
    ref = jax.vmap(lambda x: jax_mlp(x, *params))(xs)
    np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-5)
    ours_jit = jax.jit(jax.vmap(lambda x: tb.call_torch(torch_mlp, x, *params)))(xs)
    np.testing.assert_allclose(ours_jit, ref, rtol=1e-5, atol=1e-5)


def test_optax_on_a_functionalized_module_matches_torch_sgd():
    import jax
    import optax

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    ref = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    ref.load_state_dict(model.state_dict())
    params, apply = tb.functionalize(model)
    x = np.random.default_rng(5).standard_normal((4, 6)).astype(np.float32)
    y = np.random.default_rng(6).standard_normal((4, 2)).astype(np.float32)

    def loss(p):
        return ((apply(p, x) - y) ** 2).mean()

    tx = optax.sgd(0.1)
    state = tx.init(params)
    step = jax.jit(lambda p, s: (lambda g: (optax.apply_updates(p, tx.update(g, s)[0]),
                                            tx.update(g, s)[1]))(jax.grad(loss)(p)))
    opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for _ in range(3):
        params, state = step(params, state)
        opt.zero_grad()
        ((ref(torch.from_numpy(x)) - torch.from_numpy(y)) ** 2).mean().backward()
        opt.step()
    for name, p in ref.named_parameters():
        np.testing.assert_allclose(np.asarray(params[name]), p.detach().numpy(), rtol=1e-5, atol=1e-5)


def test_errors_are_clear():
    import jax
    import jax.numpy as jnp

    with pytest.raises(TypeError, match="numpy or JAX arrays"):
        tb.call_torch(lambda a, b: a * b, np.ones(2, np.float32), "two")
    with pytest.raises(TypeError, match="no torch equivalent"):
        tb.call_torch(lambda a: a, np.array(["a", "b"]))
    with pytest.raises(ValueError, match="depend only on input shapes"):
        jax.jit(lambda a: tb.call_torch(lambda t: t[t > 0], a))(jnp.ones(3))
