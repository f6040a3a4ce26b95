"""Torch functions from numpy and JAX: jit, grad, vmap, functionalize with optax
(docs/guide/call_torch.rst)."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import torch

import tensorbridge as tb

# [numpy]
x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
y = tb.call_torch(lambda u: torch.tanh(u) * 2, x)  # numpy in, numpy out
assert isinstance(y, np.ndarray)
np.testing.assert_allclose(y, np.tanh(x) * 2, rtol=1e-6)
# [numpy end]


# [jit]
def f(a, w):
    return torch.tanh(a @ w).sum()


a = jnp.ones((32, 64), jnp.float32)
w = jnp.full((64, 16), 0.01, jnp.float32)
jitted = jax.jit(lambda a, w: tb.call_torch(f, a, w))
print(jitted(a, w))  # captured once into a plan; an XLA FFI custom call runs it
m = tb.diagnostics.call_torch_metrics()
print(m["ffi_plans"], "plans,", m["ffi_runs"], "FFI runs,", m["callback_runs"], "callbacks")
# [jit end]

# [grad]
grad_w = jax.jit(jax.grad(lambda a, w: tb.call_torch(f, a, w), argnums=1))(a, w)
expected = jax.grad(lambda a, w: jnp.tanh(a @ w).sum(), argnums=1)(a, w)
np.testing.assert_allclose(grad_w, expected, rtol=1e-5)
# [grad end]

# [vmap]
rows = jnp.arange(12, dtype=jnp.float32).reshape(4, 3)
norms = jax.vmap(lambda r: tb.call_torch(torch.linalg.vector_norm, r))(rows)
np.testing.assert_allclose(norms, jnp.linalg.norm(rows, axis=1), rtol=1e-6)
# [vmap end]


# [decorator]
@tb.torch_function
def softplus(v):
    return torch.nn.functional.softplus(v)


print(jax.jit(softplus)(jnp.zeros(3)))  # log(2) three times
# [decorator end]

# [mode]
tb.call_torch(f, a, w, jit_mode="callback")  # eager: the mode matters only under jax.jit
print(jax.jit(lambda a, w: tb.call_torch(f, a, w, jit_mode="callback"))(a, w))
assert tb.diagnostics.call_torch_metrics()["callback_runs"] >= 1
# [mode end]

# [optax]
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
params, apply = tb.functionalize(model)  # trainable parameters: a dict of JAX arrays
print(sorted(params))  # ['0.bias', '0.weight', '2.bias', '2.weight']

inputs = jax.random.normal(jax.random.key(0), (64, 3))
targets = jnp.sin(inputs.sum(axis=1, keepdims=True))


def loss_fn(p, xb, yb):
    return jnp.mean((apply(p, xb) - yb) ** 2)


tx = optax.adam(1e-2)
opt_state = tx.init(params)


@jax.jit
def train_step(p, s, xb, yb):
    loss, grads = jax.value_and_grad(loss_fn)(p, xb, yb)  # torch autograd, in plans
    updates, s = tx.update(grads, s, p)
    return optax.apply_updates(p, updates), s, loss


first = None
for _ in range(50):
    params, opt_state, loss = train_step(params, opt_state, inputs, targets)
    first = loss if first is None else first
print(f"loss {float(first):.4f} -> {float(loss):.4f}")
assert loss < first
# [optax end]
