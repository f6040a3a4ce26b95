"""The zoo from JAX: the ``"jax_jit"`` and ``"jax_train"`` modes of ``tensorbridge.zoo.check``.

- ``"jax_jit"``: ``tb.call_torch`` of the model inside ``jax.jit``, its inputs JAX arrays
  (token ids and other integer inputs as int32 arrays, as JAX holds them without x64), the
  main output compared with torch eager on the same weights and inputs;
- ``"jax_train"``: ``tb.functionalize(model)``, then one ``jax.jit`` step of
  ``jax.value_and_grad`` of ``zoo.loss_of`` and an optax SGD-with-momentum update, compared
  with torch autograd and ``torch.optim.SGD`` on a copy of the model: the loss, every
  gradient (scaled by the model's largest gradient, ``zoo.grad_error``) and every updated
  parameter (scaled by the model's largest parameter).

Both modes run with dropout off and the model in eval mode (batch norm reads its running
statistics: a JAX function does not write module state in place). ``Result.detail`` holds the
``call_torch_metrics()`` deltas of the checked calls; a run that took a host callback (or ran
no FFI plan) is not ok.
"""

from __future__ import annotations

import copy

import numpy as np
import torch

LR = 0.1
MOMENTUM = 0.9


def jax_inputs(inputs: dict) -> dict:
    """The model's inputs as JAX arrays: integer tensors as int32, others as they are."""
    import jax.numpy as jnp

    out = {}
    for k, v in inputs.items():
        a = v.numpy()
        if np.issubdtype(a.dtype, np.integer):
            a = a.astype(np.int32)
        out[k] = jnp.asarray(a)
    return out


def _target(shape) -> np.ndarray:
    # The fixed random target of zoo.loss_of, drawn the same way.
    gen = torch.Generator().manual_seed(1234)
    return torch.randn(tuple(shape), generator=gen).numpy()


def static_kwargs(model) -> dict:
    """Keyword arguments fixed for the JAX runs: no KV cache object among the outputs (a JAX
    function returns arrays only)."""
    import inspect

    return (
        {"use_cache": False} if "use_cache" in inspect.signature(model.forward).parameters else {}
    )


def jax_loss(apply, target, static: dict):
    """``loss(params, inputs)``: ``zoo.loss_of`` written in JAX on ``apply``'s output."""
    import jax.numpy as jnp

    from tensorbridge.zoo import first_output

    def loss(params, inputs):
        y = jnp.asarray(first_output(apply(params, **inputs, **static)), jnp.float32)
        return jnp.mean((y - target) ** 2)

    return loss


def forward_fn(model):
    """``f(inputs)``: the model's main output through ``call_torch`` (to be jitted)."""
    import tensorbridge as tb
    from tensorbridge.zoo import first_output

    def torch_fn(**kw):
        return first_output(model(**kw))

    def f(inputs):
        return tb.call_torch(torch_fn, **inputs)

    return f


def train_step_fn(model, out_shape):
    """``(params, opt_state, step)``: the functionalized model (its main output of shape
    ``out_shape``), the optimizer state and one jitted
    ``value_and_grad`` + optax SGD-with-momentum step ``step(params, opt_state, inputs) ->
    (params, opt_state, loss, grads)``."""
    import jax
    import optax

    import tensorbridge as tb

    params, apply = tb.functionalize(model)
    loss = jax_loss(apply, _target(out_shape), static_kwargs(model))
    tx = optax.sgd(LR, momentum=MOMENTUM)

    @jax.jit
    def step(p, s, inputs):
        value, g = jax.value_and_grad(loss)(p, inputs)
        updates, s = tx.update(g, s, p)
        return optax.apply_updates(p, updates), s, value, g

    return params, tx.init(params), step


def torch_train_step(model, inputs, opt):
    """One torch step: ``zoo.loss_of``, autograd, ``opt.step()``; the loss and the gradients."""
    from tensorbridge.zoo import loss_of

    opt.zero_grad(set_to_none=True)
    loss = loss_of(model(**inputs))
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    opt.step()
    return loss.detach(), grads


def _metrics_delta(before: dict) -> dict:
    import tensorbridge as tb

    after = tb.diagnostics.call_torch_metrics()
    return {k: after[k] - before.get(k, 0) for k in ("ffi_runs", "callback_runs")}


def check_jax(name: str, mode: str, size: str):
    """``(ok, max_error, detail, calls)`` of one model in ``"jax_jit"`` or ``"jax_train"``:
    ``detail`` names the errors and the FFI and host-callback runs (``calls``, a dict)."""
    import jax

    import tensorbridge as tb
    from tensorbridge.zoo import TOLERANCE, _rel_error, build, first_output, grad_error

    model, inputs = build(name, size)
    jin = jax_inputs(inputs)
    if mode == "jax_jit":
        with torch.no_grad():
            want = first_output(model(**inputs))
        f = jax.jit(forward_fn(model))
        before = tb.diagnostics.call_torch_metrics()
        got = jax.block_until_ready(f(jin))
        m = _metrics_delta(before)
        err = _rel_error(torch.from_numpy(np.array(got)), want)
    elif mode == "jax_train":
        reference = copy.deepcopy(model)
        with torch.no_grad():
            shape = first_output(model(**inputs)).shape
        params, opt_state, step = train_step_fn(model, shape)
        before = tb.diagnostics.call_torch_metrics()
        new_params, _, loss, grads = jax.block_until_ready(step(params, opt_state, jin))
        m = _metrics_delta(before)
        opt = torch.optim.SGD(
            [p for p in reference.parameters() if p.requires_grad], lr=LR, momentum=MOMENTUM
        )
        want_loss, want_grads = torch_train_step(reference, inputs, opt)
        got_grads = {k: torch.from_numpy(np.array(v)) for k, v in grads.items()}
        trainable = {n: p for n, p in reference.named_parameters() if p.requires_grad}
        if set(got_grads) != set(trainable):
            missing = sorted(set(trainable) ^ set(got_grads))
            raise AssertionError(f"{name}: gradients of different parameters: {missing[:5]}")
        # A parameter the loss does not reach (a pooler behind an unused output): torch
        # leaves its gradient None, JAX gives zeros.
        for n, p in trainable.items():
            if n not in want_grads:
                want_grads[n] = torch.zeros_like(p)
        scale = max(float(p.detach().abs().max()) for p in reference.parameters())
        p_err = max(
            float(np.abs(np.array(new_params[n]) - p.detach().numpy()).max()) / scale
            for n, p in reference.named_parameters()
            if n in new_params
        )
        errs = {
            "loss": _rel_error(torch.tensor(float(loss)), want_loss),
            "grads": grad_error(got_grads, want_grads),
            "params": p_err,
        }
        err = max(errs.values())
    else:
        raise ValueError(f"unknown JAX mode {mode!r}: jax_jit or jax_train")
    ok = err <= TOLERANCE and m["callback_runs"] == 0 and m["ffi_runs"] > 0
    detail = f"ffi runs {m['ffi_runs']}, host callbacks {m['callback_runs']}"
    if mode == "jax_train":
        detail = ", ".join(f"{k} {v:.1e}" for k, v in errs.items()) + "; " + detail
    return ok, err, detail, m
