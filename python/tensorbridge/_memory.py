"""Memory of compiled plans: the bytes each plan value takes (from the captured graph's sizes),
summed by the plan's liveness into ``Plan.peak_bytes``, and the buffer cache sized by them.

Liveness follows the buffers, not the graph's values: a view keeps its base's buffer alive
(``Plan.set_value_base``), and the saved activations a backward plan takes are handed over by
the caller and freed at their last use there, so they count in its peak from its start
(inputs given bytes). A training step runs its forward plan, then its backward plan: its peak
is the larger of the two plans' peaks (the forward's counts the activations it saves, which
live to its end; the backward's counts them until their last use).

A plan run allocates its results from tensorbridge's cache of freed blocks. In a steady state
the blocks a step frees are those it allocated, so the cache must hold the step's peak: blocks
are rounded up to their size class (at most 1/8 more) and a step allocates some blocks besides
its plans' results (copies, eager calls between the plans), so the cache's limit is set to
``HEADROOM`` times the largest peak of the compilations built so far, and at least
``MIN_LIMIT`` (``TB_HOST_CACHE_MB`` in the environment or ``config.host_cache_limit``, when
set, decides instead).
"""

from __future__ import annotations

import os

import torch

from tensorbridge import _C
from tensorbridge._config import config

__all__ = [
    "HEADROOM",
    "MIN_LIMIT",
    "input_storages",
    "is_view",
    "limit_for",
    "nbytes",
    "plan_built",
    "record",
    "record_saved",
    "set_bytes",
]

HEADROOM = 1.25  # the cache's limit over the largest step's peak
MIN_LIMIT = 64 << 20  # the least limit compiled plans set (eager calls share the cache)
_need = 0  # the largest peak of one compilation's plans so far
_aten = torch.ops.aten
_VIEWS = {_aten.view.default, _aten._unsafe_view.default, _aten.reshape.default}


def nbytes(meta) -> int:
    """Bytes of the buffers of a graph value (a tensor, or a list or tuple of them)."""
    if isinstance(meta, torch.Tensor):
        try:
            return int(meta.untyped_storage().nbytes())
        except Exception:  # a fake or symbolic tensor without a plain storage
            try:
                return int(meta.numel()) * meta.element_size()
            except Exception:
                return 0
    if isinstance(meta, (list, tuple)):
        return sum(nbytes(m) for m in meta)
    return 0


def set_bytes(plan, value: int, nbytes: int) -> None:
    """Gives the plan the bytes of one of its values (see ``Plan.set_value_bytes``)."""
    plan.set_value_bytes(value, nbytes)


def is_view(node: torch.fx.Node) -> bool:
    """Whether the node's result shares its first argument's memory."""
    target = node.target
    return bool(getattr(target, "is_view", False)) or target in _VIEWS


def record(plan, outs: list, node: torch.fx.Node, base=None) -> None:
    """Gives the plan the bytes of a node's results; a view's result takes none and keeps
    ``base`` (the plan value of the memory it views, where known) alive."""
    if is_view(node):
        if isinstance(base, int) and len(outs) == 1:
            plan.set_value_base(outs[0], base)
        return
    meta = node.meta.get("val")
    if len(outs) == 1:
        set_bytes(plan, outs[0], nbytes(meta))
    elif isinstance(meta, (list, tuple)) and len(meta) == len(outs):
        for v, m in zip(outs, meta, strict=True):
            set_bytes(plan, v, nbytes(m))


def _storage_key(meta):
    try:
        return meta.untyped_storage()._cdata
    except Exception:
        return None


def input_storages(gm: torch.fx.GraphModule) -> set:
    """The (fake) storages of a graph's inputs: a forward graph's parameters and user inputs,
    which the backward graph of the same trace shares."""
    keys = {_storage_key(n.meta.get("val")) for n in gm.graph.nodes if n.op == "placeholder"}
    keys.discard(None)
    return keys


def record_saved(plan, gm: torch.fx.GraphModule, env: dict, primal_storages=()) -> None:
    """Gives a backward plan the bytes of the activations the forward plan saved for it: its
    inputs other than the primal inputs (parameters, the user's inputs) and the tangents,
    counted once per buffer, and none for a view of a primal input (``primal_storages``: the
    forward graph's ``input_storages``)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    seen = set(primal_storages)
    for n in placeholders:
        if n.name.startswith("primals"):
            seen.add(_storage_key(n.meta.get("val")))
    seen.discard(None)
    for n in placeholders:
        meta = n.meta.get("val")
        if n.name.startswith(("primals", "tangents")) or not isinstance(meta, torch.Tensor):
            continue
        key = _storage_key(meta)
        if key is not None and key in seen:
            continue
        seen.add(key)
        value = env.get(n)
        if isinstance(value, int):
            set_bytes(plan, value, nbytes(meta))


def limit_for(need: int) -> int:
    """The cache limit compiled plans set for a step that needs ``need`` bytes at its peak."""
    return max(int(need * HEADROOM), MIN_LIMIT)


def plan_built(plans: list) -> None:
    """Sizes the buffer cache by the plans of the compilations built so far: ``limit_for``
    the largest peak of one compilation's plans (forward and backward run one after the
    other), unless the user set the limit."""
    global _need
    _need = max([_need, *(p.peak_bytes for p in plans)])
    if os.environ.get("TB_HOST_CACHE_MB") or config._host_cache_limit_set:
        return
    limit = limit_for(_need)
    if limit != _C.memory_stats()["cache_limit_bytes"]:
        _C.set_host_cache_limit(limit)
