"""``tensorbridge.load_exported``: a ``torch.export`` program run on a tensorbridge plan."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from tensorbridge._compile import _decompositions, compile_graph

__all__ = ["load_exported"]


def load_exported(ep: torch.export.ExportedProgram) -> Callable[..., Any]:
    """A callable that runs a ``torch.export`` program on a tensorbridge plan (built once).

    Parameters, buffers and constants are bound from the program's state; buffers the program
    mutates (batch-norm statistics) are written back after each call."""
    from torch.export.graph_signature import InputKind, OutputKind

    ep = ep.run_decompositions(_decompositions(autograd=False))
    run = compile_graph(ep.graph_module, inference=True)
    sig = ep.graph_signature
    state = {**ep.state_dict, **ep.constants}
    n_user = sum(1 for s in sig.input_specs if s.kind == InputKind.USER_INPUT)

    def call(*args):
        if len(args) != n_user:
            raise TypeError(f"the exported program takes {n_user} inputs, got {len(args)}")
        it = iter(args)
        flat = [
            next(it) if s.kind == InputKind.USER_INPUT else state[s.target] for s in sig.input_specs
        ]
        outs = run(flat)
        user = []
        for spec, out in zip(sig.output_specs, outs, strict=True):
            if spec.kind == OutputKind.BUFFER_MUTATION:
                state[spec.target].copy_(out)
            elif spec.kind == OutputKind.USER_OUTPUT:
                user.append(out)
        return user[0] if len(user) == 1 else tuple(user)

    call.plan = getattr(run, "plan", None)  # type: ignore[attr-defined]  # None: one plan per input shape (see run.plans)
    return call
