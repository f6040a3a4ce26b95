"""``functionalize``: a torch module as a pure JAX function of its trainable parameters, for
``jax.grad``, optax and the rest of a JAX training loop.

The module's state is split as ``torch.func.functional_call`` and flax's variable collections
split it: the trainable parameters (floating point, ``requires_grad``) become a dict of JAX
arrays that JAX differentiates and optimizers update; everything else (buffers such as
``position_ids`` or batch-norm statistics, frozen parameters) is state that is never
differentiated. By default that state stays in the module: the captured plan binds it once,
zero-copy, as constants. With ``buffers=True`` it is handed out as a second dict that ``apply``
takes as an argument.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, overload

import torch

from tensorbridge._call_torch import torch_function

__all__ = ["functionalize"]


def _trainable(p: torch.Tensor) -> bool:
    return p.requires_grad and (p.is_floating_point() or p.is_complex())


def _to_jax(t: torch.Tensor):
    import jax.numpy as jnp

    # A copy JAX owns: optimizer steps make new arrays, and the module's tensors stay its own.
    return jnp.array(jnp.from_dlpack(t.detach().contiguous()), copy=True)


@overload
def functionalize(
    module: torch.nn.Module, *, buffers: Literal[False] = False, jit_mode: str | None = None
) -> tuple[dict[str, Any], Callable[..., Any]]: ...
@overload
def functionalize(
    module: torch.nn.Module, *, buffers: Literal[True], jit_mode: str | None = None
) -> tuple[dict[str, Any], dict[str, Any], Callable[..., Any]]: ...
def functionalize(
    module: torch.nn.Module, *, buffers: bool = False, jit_mode: str | None = None
) -> (
    tuple[dict[str, Any], Callable[..., Any]]
    | tuple[dict[str, Any], dict[str, Any], Callable[..., Any]]
):
    """``params, apply = functionalize(module)``: the module's trainable parameters as a dict of
    JAX arrays (name -> array, the names of ``named_parameters``), and a pure function
    ``apply(params, *inputs, **kwargs)`` that runs the module with them. ``apply`` is jitted;
    it works under ``jax.jit``, ``jax.grad``, ``jax.vmap`` and with optax, and returns the
    module's output as a JAX pytree (tensors become arrays in the same dicts, tuples and
    ``ModelOutput``s). Inputs are arrays; keyword arguments may also be Python values
    (``output_hidden_states=True``), fixed for the trace they are given to.

    Buffers and frozen parameters (``requires_grad=False``, or not floating point) are not
    among ``params``: they stay in the module, bound into the captured plan zero-copy (the
    plan reads the module's memory). ``buffers=True`` returns ``params, buffers, apply``
    instead, with that state as a second dict and ``apply(params, buffers, *inputs)``.

    ``jit_mode`` is that of ``call_torch``."""
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"functionalize takes a torch.nn.Module, got {type(module).__name__}")
    trainable = {n: p for n, p in module.named_parameters() if _trainable(p)}
    state: dict[str, torch.Tensor] = {
        n: p for n, p in module.named_parameters() if n not in trainable
    }
    state.update(dict(module.named_buffers()))
    params = {n: _to_jax(p) for n, p in trainable.items()}
    name = type(module).__name__

    if buffers:

        def run_with_buffers(params_, buffers_, *args, **kwargs):
            return torch.func.functional_call(module, {**params_, **buffers_}, args, kwargs)

        return (
            params,
            {n: _to_jax(t) for n, t in state.items()},
            _applier(run_with_buffers, name, jit_mode),
        )

    def run(params_, *args, **kwargs):
        return torch.func.functional_call(module, params_, args, kwargs)

    return params, _applier(run, name, jit_mode)


_STATIC = (bool, int, float, str, type(None))


def _applier(run, name: str, jit_mode):
    """``apply``: `run` jitted, with keyword arguments that are Python values (``bool``,
    ``int``, ``float``, ``str``, None: ``output_hidden_states=True``) bound as constants, one
    jitted function per distinct set of them; array arguments are traced."""
    import jax

    jitted: dict = {}

    def apply(*args, **kwargs):
        static = {k: v for k, v in kwargs.items() if isinstance(v, _STATIC)}
        arrays = {k: v for k, v in kwargs.items() if k not in static}
        key = tuple(sorted((k, type(v), v) for k, v in static.items()))
        f = jitted.get(key)
        if f is None:

            def bound(*a, **k):
                return run(*a, **k, **static)

            bound.__name__ = name
            f = jitted[key] = jax.jit(torch_function(bound, jit_mode=jit_mode))
        return f(*args, **arrays)

    apply.__name__ = f"apply({name})"
    return apply
