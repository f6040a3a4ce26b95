"""``tensorbridge.diagnostics``: what the library did and why, and what it holds.

* ``explain(op)``: which path the next CPU call of an ATen op takes (kernel, composite,
  decomposition, fallback) and where it was registered; ``explain(compiled)``: every plan built
  for a ``torch.compile(..., backend="tensorbridge")`` module or function. ``dump()``: the table.
* ``metrics()``, ``metrics_report()``, ``reset_metrics()``: per-op counters of the table
  (``time_ns`` while ``config.profiling`` is on); ``plan_metrics()``, ``reset_plan_metrics()``:
  the compile backend's counters; ``call_torch_metrics()``: which path ``call_torch`` took
  under ``jax.jit``.
* ``profile(compiled)``: a ``with`` block timing every node of a compiled function's plans.
* ``memory_stats()``, ``empty_cache()``: tensorbridge's buffers and the cache of freed large
  blocks it reuses (its size: ``config.host_cache_limit``).
* ``onednn_info()``: the oneDNN build and the vector ISA it runs.

How far the table covers ATen's core ops: ``python -m tensorbridge.coverage``.
"""

from __future__ import annotations

from tensorbridge._C import dump, empty_cache, memory_stats, metrics, onednn_info, reset_metrics
from tensorbridge._call_torch import call_torch_metrics
from tensorbridge._compile import explain, plan_metrics, reset_plan_metrics
from tensorbridge._profile import profile

__all__ = [
    "call_torch_metrics",
    "dump",
    "empty_cache",
    "explain",
    "memory_stats",
    "metrics",
    "metrics_report",
    "onednn_info",
    "plan_metrics",
    "profile",
    "reset_metrics",
    "reset_plan_metrics",
]


def metrics_report() -> str:
    """The counters of ``metrics()`` as a table, one op a line, busiest first."""
    rows = sorted(metrics().items(), key=lambda kv: -kv[1]["calls"])
    cols = ("calls", "kernel", "composite", "decomposition", "fallback", "time_ns")
    width = max([len("op")] + [len(op) for op, _ in rows])
    lines = ["op".ljust(width) + "".join(c.rjust(15) for c in cols)]
    for op, m in rows:
        lines.append(op.ljust(width) + "".join(str(m[c]).rjust(15) for c in cols))
    return "\n".join(lines)
