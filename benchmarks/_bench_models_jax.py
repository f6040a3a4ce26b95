"""The JAX columns of ``bench_models.py``: a zoo model run from JAX, next to torch eager.

- jax fwd: ``tb.call_torch`` of the model inside ``jax.jit`` (int32 token ids, the FFI
  custom call running the captured plan) vs the model in torch eager under ``no_grad``;
- jax step: ``tb.functionalize`` and one ``jax.jit`` step of ``jax.value_and_grad`` of
  ``zoo.loss_of`` plus an optax SGD-with-momentum update vs the same step in torch eager
  (forward, ``backward()``, ``torch.optim.SGD(momentum=0.9).step()``).

Both in eval mode with dropout off (``tensorbridge._zoo_jax``); correctness is
``zoo.check``'s ``"jax_jit"`` / ``"jax_train"`` judgement (error within ``zoo.TOLERANCE`` and
0 host callbacks), the timed runs are counted too: a host callback in them is reported.
"""

from __future__ import annotations

import copy

import torch

import tensorbridge as tb
from _bench_util import NA, measure_interleaved, ratio
from tensorbridge import _zoo_jax, zoo


def _ok_cell(name: str, mode: str, size: str):
    try:
        r = zoo.check(name, mode, size)
    except Exception as e:
        return NA(f"{type(e).__name__}: {str(e).strip()[:200]}", label=type(e).__name__), None
    return ("ok" if r.ok else f"WRONG {r.max_error:.1e}"), r


def jax_column(name: str, model, inputs, args) -> dict:
    import jax

    res: dict = {}
    before = tb.diagnostics.call_torch_metrics()
    res["fwd_ok"], fwd = _ok_cell(name, "jax_jit", args.size)
    res["step_ok"], step = _ok_cell(name, "jax_train", args.size)
    res["detail"] = {"jax_jit": fwd and fwd.detail, "jax_train": step and step.detail}
    jin = _zoo_jax.jax_inputs(inputs)
    static = _zoo_jax.static_kwargs(model)

    def torch_forward():
        def run():
            with torch.no_grad():
                return model(**inputs)

        return run

    def jax_forward():
        f = jax.jit(_zoo_jax.forward_fn(copy.deepcopy(model)))
        return lambda: f(jin).block_until_ready()

    def torch_step():
        m = copy.deepcopy(model)
        opt = torch.optim.SGD(
            [p for p in m.parameters() if p.requires_grad],
            lr=_zoo_jax.LR,
            momentum=_zoo_jax.MOMENTUM,
        )

        def run():
            opt.zero_grad(set_to_none=True)
            loss = zoo.loss_of(m(**inputs))
            loss.backward()
            opt.step()
            return loss

        return run

    def jax_step():
        m = copy.deepcopy(model)
        with torch.no_grad():
            shape = zoo.first_output(m(**inputs, **static)).shape
        params, opt_state, step_fn = _zoo_jax.train_step_fn(m, shape)
        state = [params, opt_state]

        def run():
            state[0], state[1], value, _ = step_fn(state[0], state[1], jin)
            return value.block_until_ready()

        return run

    kw = dict(repeats=args.repeats, target_s=args.target_s, budget_s=args.budget_s)
    fwd_t = measure_interleaved([("torch", torch_forward), ("tb", jax_forward)], **kw)
    step_t = measure_interleaved([("torch", torch_step), ("tb", jax_step)], **kw)
    after = tb.diagnostics.call_torch_metrics()
    res["callbacks"] = after["callback_runs"] - before["callback_runs"]
    res["times"] = {"fwd": fwd_t, "step": step_t}
    res["vs"] = {
        "fwd": ratio(fwd_t["torch"], fwd_t["tb"]),
        "step": ratio(step_t["torch"], step_t["tb"]),
    }
    return res
