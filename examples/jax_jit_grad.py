"""Call a torch function from a ``jax.jit`` + ``jax.grad`` function.

``tb.call_torch(fn, *arrays)`` runs torch function ``fn`` on JAX arrays. Inside ``jax.jit``
it is captured once per input signature into a tensorbridge plan that an XLA FFI custom call
runs, with no Python per call; ``jax.grad`` differentiates through it with a forward and a
backward plan. ``tb.diagnostics.call_torch_metrics()`` says which path ran.

    python examples/jax_jit_grad.py [--quick]
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np
import torch

import tensorbridge as tb


def torch_layer(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """A torch function: a layer with a smooth nonlinearity, reduced to a scalar."""
    return torch.nn.functional.gelu(x @ w).pow(2).mean()


def jax_layer(x: jax.Array, w: jax.Array) -> jax.Array:
    """The same function in JAX, for comparison."""
    return jnp.mean(jax.nn.gelu(x @ w, approximate=False) ** 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer timed calls")
    calls = 20 if parser.parse_args().quick else 1000

    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((32, 64), np.float32))
    w = jnp.asarray(rng.standard_normal((64, 16), np.float32) * 0.2)

    loss_and_grad = jax.jit(jax.value_and_grad(lambda w: tb.call_torch(torch_layer, x, w)))
    reference = jax.jit(jax.value_and_grad(lambda w: jax_layer(x, w)))
    value, grad = loss_and_grad(w)
    ref_value, ref_grad = reference(w)
    np.testing.assert_allclose(float(value), float(ref_value), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(grad), np.asarray(ref_grad), rtol=1e-4, atol=1e-6)

    times = {}
    for name, f in (("call_torch", loss_and_grad), ("pure JAX", reference)):
        jax.block_until_ready(f(w))
        t0 = time.perf_counter()
        for _ in range(calls):
            out = f(w)
        jax.block_until_ready(out)
        times[name] = (time.perf_counter() - t0) / calls * 1e6

    m = tb.diagnostics.call_torch_metrics()
    print(f"loss {float(value):.6f}, gradient {grad.shape} matches JAX's own")
    print(", ".join(f"{k} {v:.1f} us per value_and_grad" for k, v in times.items()))
    print(f"{m['ffi_runs']} XLA FFI plan runs, {m['callback_runs']} host callbacks")
    assert m["ffi_runs"] > 0 and m["callback_runs"] == 0, m


if __name__ == "__main__":
    main()
