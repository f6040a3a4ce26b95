"""Memory of compiled plans: the bytes each plan value takes (from the captured graph's sizes),
summed by the plan's liveness into ``Plan.peak_bytes``, and the buffer cache sized by them.

A plan run allocates its results from tensorbridge's cache of freed blocks. In a steady state
the blocks a step frees are those it allocated, so the cache must hold the bytes of every result
of one compilation's plans (forward and backward run as one step): a compilation that needs more
than the cache's limit raises the limit to that (``TB_HOST_CACHE_MB`` in the environment or
``config.host_cache_limit``, when set, decides instead). The limit is never lowered below its
default: a step allocates blocks besides its plans' results (copies, the optimizer's reads), and
a cache sized to the results alone misses on them.
"""

from __future__ import annotations

import os
import weakref

import torch

from tensorbridge import _C
from tensorbridge._config import config

__all__ = ["nbytes", "plan_built", "record", "set_bytes"]

_need = 0  # the cache limit set: the largest total of one compilation's plans so far
_totals: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # plan -> bytes of its results
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
    _totals[plan] = _totals.get(plan, 0) + nbytes


def record(plan, outs: list, node: torch.fx.Node) -> None:
    """Gives the plan the bytes of a node's results (none for a view of its input's memory)."""
    target = node.target
    if getattr(target, "is_view", False) or target in _VIEWS:
        return
    meta = node.meta.get("val")
    if len(outs) == 1:
        set_bytes(plan, outs[0], nbytes(meta))
    elif isinstance(meta, (list, tuple)) and len(meta) == len(outs):
        for v, m in zip(outs, meta, strict=True):
            set_bytes(plan, v, nbytes(m))


def plan_built(plans: list) -> None:
    """Raises the buffer cache's limit to the bytes of all the results of one compilation's
    plans just built, when they need more than the limit."""
    global _need
    need = sum(_totals.get(p, 0) for p in plans)
    if need <= _need:
        return
    _need = need
    if os.environ.get("TB_HOST_CACHE_MB") or config._host_cache_limit_set:
        return
    if _need > _C.memory_stats()["cache_limit_bytes"]:
        _C.set_host_cache_limit(_need)
