"""Train a torch model from JAX with optax.

``tb.functionalize(module)`` gives the module's trainable parameters as a dict of JAX arrays
and a pure ``apply(params, *inputs)``; ``jax.value_and_grad`` of a loss over it runs the
module's forward and backward as captured tensorbridge plans (XLA FFI custom calls inside
``jax.jit``), and optax updates the parameters like any JAX pytree.

    python examples/jax_optax_training.py [--quick]
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np
import optax
import torch

import tensorbridge as tb


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few steps only")
    steps = 5 if parser.parse_args().quick else 300

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(1, 64),
        torch.nn.GELU(),
        torch.nn.Linear(64, 64),
        torch.nn.GELU(),
        torch.nn.Linear(64, 1),
    )
    params, apply = tb.functionalize(model)

    # Fit sin(3x) on [-1, 1].
    x = jnp.linspace(-1.0, 1.0, 128, dtype=jnp.float32)[:, None]
    y = jnp.sin(3.0 * x)

    def loss_fn(p: dict[str, jax.Array]) -> jax.Array:
        return jnp.mean((apply(p, x) - y) ** 2)

    tx = optax.adam(1e-2)
    opt_state = tx.init(params)

    @jax.jit
    def step(p: dict[str, jax.Array], s: optax.OptState) -> tuple:
        loss, grads = jax.value_and_grad(loss_fn)(p)
        updates, s = tx.update(grads, s, p)
        return optax.apply_updates(p, updates), s, loss

    first = float(loss_fn(params))
    loss = jnp.asarray(first)
    for _ in range(steps):
        params, opt_state, loss = step(params, opt_state)

    # The gradient at the module's own weights (optax updated copies) against torch autograd.
    grads = jax.grad(loss_fn)(tb.functionalize(model)[0])
    xt, yt = torch.from_numpy(np.array(x)), torch.from_numpy(np.array(y))
    torch.nn.functional.mse_loss(model(xt), yt).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None
        np.testing.assert_allclose(np.asarray(grads[name]), p.grad.numpy(), rtol=1e-4, atol=1e-6)

    m = tb.diagnostics.call_torch_metrics()
    print(f"{steps} optax Adam steps: mean squared error {first:.4f} -> {float(loss):.4f}")
    print(
        f"gradients match torch autograd; {m['ffi_runs']} XLA FFI plan runs, "
        f"{m['callback_runs']} host callbacks"
    )
    assert m["ffi_runs"] > 0 and m["callback_runs"] == 0, m
    if steps >= 100:
        assert float(loss) < first / 10, (first, float(loss))


if __name__ == "__main__":
    main()
