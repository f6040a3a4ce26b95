"""tensorbridge: run PyTorch's ATen ops on arrays other frameworks own, without copying them.

The pieces available now:

* ``Array`` and ``from_dlpack``: wrap a numpy / torch / JAX array (any DLPack producer)
  zero-copy, and hand it back through ``__dlpack__``.
* ``call("aten::add.Tensor", a, b, 1)``: run one op of the C++ table by its ATen name.
* ``ops()``, ``explain(op)``, ``metrics()``, ``metrics_report()``, ``reset_metrics()``.
"""

from __future__ import annotations

from tensorbridge import _C
from tensorbridge._C import (
    Array,
    call,
    dump,
    explain,
    from_dlpack,
    metrics,
    onednn_info,
    ops,
    reset_metrics,
    set_profiling,
)

__version__ = _C.__version__

__all__ = [
    "Array",
    "__version__",
    "call",
    "dump",
    "explain",
    "from_dlpack",
    "metrics",
    "metrics_report",
    "onednn_info",
    "ops",
    "reset_metrics",
    "set_profiling",
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
