"""tensorbridge: run PyTorch's ATen ops on arrays other frameworks own, without copying them.

The pieces available now:

* ``Array`` and ``from_dlpack``: wrap a numpy / torch / JAX array (any DLPack producer)
  zero-copy, and hand it back through ``__dlpack__``.
* ``call("aten::add.Tensor", a, b, alpha=2)``: run one op of the C++ table by its ATen name,
  arguments bound against PyTorch's schema (``schema(op)``).
* ``config.legal_ops`` (which composites run whole), ``config.fallback`` (what happens to ops
  without a kernel: PyTorch's own kernel on zero-copy views, counted).
* ``register_kernel(op)``: a Python kernel over Arrays that overrides the built-in one.
* ``ops()``, ``explain(op)`` (or ``explain(compiled)``: the plans of a ``torch.compile``'d
  module or function), ``metrics()``, ``metrics_report()``, ``reset_metrics()``.
* ``memory_stats()``, ``empty_cache()``, ``set_host_cache_limit(nbytes)``: tensorbridge's
  buffers and the cache of freed large blocks it reuses (no page faults in steady state).
* ``profile(compiled)``: a ``with`` block timing every node of a compiled function's plans.
"""

from __future__ import annotations

from tensorbridge import _C, _config, _distributed, _fallback
from tensorbridge._C import (
    Array,
    call,
    dump,
    empty_cache,
    from_dlpack,
    memory_stats,
    metrics,
    onednn_info,
    ops,
    reset_metrics,
    schema,
    set_host_cache_limit,
    set_profiling,
)
from tensorbridge._compile import explain, load_exported, plan_metrics, reset_plan_metrics
from tensorbridge._config import config
from tensorbridge._functionalize import functionalize
from tensorbridge._jax import call_torch, call_torch_metrics, torch_function
from tensorbridge._profile import profile
from tensorbridge._registry import KernelHandle, register_kernel
from tensorbridge._tensor import Tensor, to_jax, to_numpy, to_torch, wrap, wrap_module

__version__ = _C.__version__

_distributed.install()  # torch.distributed's collectives on Tensor run torch's own code

__all__ = [
    "Array",
    "KernelHandle",
    "Tensor",
    "__version__",
    "call",
    "call_torch",
    "call_torch_metrics",
    "cmake_prefix_path",
    "config",
    "dump",
    "empty_cache",
    "explain",
    "from_dlpack",
    "functionalize",
    "get_include",
    "get_library",
    "load_exported",
    "load_library",
    "memory_stats",
    "metrics",
    "metrics_report",
    "onednn_info",
    "ops",
    "plan_metrics",
    "profile",
    "register_kernel",
    "reset_metrics",
    "reset_plan_metrics",
    "schema",
    "set_host_cache_limit",
    "set_profiling",
    "to_jax",
    "to_numpy",
    "to_torch",
    "torch_function",
    "wrap",
    "wrap_module",
]


def _register_compile_backend() -> None:
    """Makes ``torch.compile(..., backend="tensorbridge")`` find us once torch is imported."""
    import sys

    if "torch" in sys.modules:
        from torch._dynamo import register_backend

        from tensorbridge._compile import backend

        register_backend(name="tensorbridge")(backend)


def get_include() -> str:
    """The directory of tensorbridge's C++ headers (``#include "dispatch/op_table.h"``)."""
    import os

    return os.path.join(os.path.dirname(__file__), "include")


def _cmake_prefix_path() -> str:
    import os

    return os.path.dirname(os.path.abspath(__file__))


cmake_prefix_path: str = _cmake_prefix_path()
"""The directory to put on ``CMAKE_PREFIX_PATH`` for ``find_package(tensorbridge)``: its
``tensorbridge::core`` target is this package's libtensorbridge.so, with its headers."""


def get_library() -> str:
    """The path of libtensorbridge.so this package loaded: link C++ kernel libraries to it, so
    that what they register lands in the same op table."""
    import os

    return os.path.join(os.path.dirname(__file__), "libtensorbridge.so")


def load_library(path: str) -> None:
    """Loads a C++ shared library whose static registration blocks add kernels to the table."""
    import ctypes

    ctypes.CDLL(path)


def metrics_report() -> str:
    """The counters of ``metrics()`` as a table, one op a line, busiest first."""
    rows = sorted(metrics().items(), key=lambda kv: -kv[1]["calls"])
    cols = ("calls", "kernel", "composite", "decomposition", "fallback", "time_ns")
    width = max([len("op")] + [len(op) for op, _ in rows])
    lines = ["op".ljust(width) + "".join(c.rjust(15) for c in cols)]
    for op, m in rows:
        lines.append(op.ljust(width) + "".join(str(m[c]).rjust(15) for c in cols))
    return "\n".join(lines)


_C._set_fallback(_fallback.run)
_register_compile_backend()
_config._apply_environment()
