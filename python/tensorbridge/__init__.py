"""tensorbridge: run PyTorch's ATen ops on arrays other frameworks own, without copying them.

Three ways in:

* ``wrap(x)`` / ``Tensor``: a numpy / JAX / any DLPack array as a torch tensor, zero-copy, for
  eager PyTorch code (``wrap_module`` for a module's parameters; ``to_torch``, ``to_numpy``,
  ``to_jax`` back out).
* ``torch.compile(model, backend="tensorbridge")`` (``backend``): captured graphs built once
  into C++ plans; ``load_exported`` runs a ``torch.export`` program the same way.
* ``call_torch(fn, *arrays)`` / ``torch_function(fn)``: a torch function called from numpy or
  JAX code, inside ``jax.jit``, ``jax.grad`` and ``jax.vmap`` too; ``functionalize(module)``
  makes a torch module a pure JAX function of its parameters.

The op table underneath: ``Array`` and ``from_dlpack`` (the zero-copy array type),
``call("aten::add.Tensor", a, b, alpha=2)`` (one op by its ATen name, arguments bound against
``schema(op)``), ``ops()`` and ``register_kernel(op)`` (a Python kernel over Arrays).
Settings: ``config``. What the library did and holds: ``tensorbridge.diagnostics``. C++ kernel
libraries: ``tensorbridge.cpp``.
"""

from __future__ import annotations

import typing as _typing

from tensorbridge import _C, _config, _distributed, _fallback
from tensorbridge import cpp as cpp
from tensorbridge import diagnostics as diagnostics
from tensorbridge._C import Array, KernelDeclinedError, call, from_dlpack, ops, schema
from tensorbridge._call_torch import call_torch, torch_function
from tensorbridge._compile import backend
from tensorbridge._config import config
from tensorbridge._export import load_exported
from tensorbridge._functionalize import functionalize
from tensorbridge._registry import KernelHandle, register_kernel
from tensorbridge._tensor import Tensor, to_jax, to_numpy, to_torch, wrap, wrap_module

if _typing.TYPE_CHECKING:  # the moved names of _MOVED below, typed for checkers
    from tensorbridge._C import set_host_cache_limit as set_host_cache_limit
    from tensorbridge._C import set_profiling as set_profiling
    from tensorbridge.cpp import cmake_prefix_path as cmake_prefix_path
    from tensorbridge.cpp import get_include as get_include
    from tensorbridge.cpp import get_library as get_library
    from tensorbridge.cpp import load_library as load_library
    from tensorbridge.diagnostics import call_torch_metrics as call_torch_metrics
    from tensorbridge.diagnostics import dump as dump
    from tensorbridge.diagnostics import empty_cache as empty_cache
    from tensorbridge.diagnostics import explain as explain
    from tensorbridge.diagnostics import memory_stats as memory_stats
    from tensorbridge.diagnostics import metrics as metrics
    from tensorbridge.diagnostics import metrics_report as metrics_report
    from tensorbridge.diagnostics import onednn_info as onednn_info
    from tensorbridge.diagnostics import plan_metrics as plan_metrics
    from tensorbridge.diagnostics import profile as profile
    from tensorbridge.diagnostics import reset_metrics as reset_metrics
    from tensorbridge.diagnostics import reset_plan_metrics as reset_plan_metrics

__version__ = _C.__version__

_distributed.install()  # torch.distributed's collectives on Tensor run torch's own code

__all__ = [
    "Array",
    "KernelDeclinedError",
    "KernelHandle",
    "Tensor",
    "__version__",
    "backend",
    "call",
    "call_torch",
    "config",
    "from_dlpack",
    "functionalize",
    "load_exported",
    "ops",
    "register_kernel",
    "schema",
    "to_jax",
    "to_numpy",
    "to_torch",
    "torch_function",
    "wrap",
    "wrap_module",
]

# Names this package had at its top level before they moved, kept because the documentation of
# earlier versions used them: old name -> (module, name) of its home now. Each use warns.
_MOVED = {
    **{n: ("tensorbridge.diagnostics", n) for n in diagnostics.__all__},
    **{
        n: ("tensorbridge.cpp", n)
        for n in ("cmake_prefix_path", "get_include", "get_library", "load_library")
    },
    "set_profiling": ("tensorbridge._config", "_set_profiling"),
    "set_host_cache_limit": ("tensorbridge._config", "_set_host_cache_limit"),
}
_NEW_SPELLING = {
    "set_profiling": "tensorbridge.config.profiling = on",
    "set_host_cache_limit": "tensorbridge.config.host_cache_limit = nbytes",
}


def __getattr__(name: str) -> _typing.Any:
    moved = _MOVED.get(name)
    if moved is None:
        raise AttributeError(f"module 'tensorbridge' has no attribute {name!r}")
    import importlib
    import warnings

    module, attr = moved
    new = _NEW_SPELLING.get(name, f"{module}.{attr}")
    warnings.warn(f"tensorbridge.{name} is now {new}", DeprecationWarning, stacklevel=2)
    return getattr(importlib.import_module(module), attr)


def _register_compile_backend() -> None:
    """Makes ``torch.compile(..., backend="tensorbridge")`` find us once torch is imported."""
    import sys

    if "torch" in sys.modules:
        from torch._dynamo import register_backend

        from tensorbridge._compile import backend

        register_backend(name="tensorbridge")(backend)


_C._set_fallback(_fallback.run)
_register_compile_backend()
_config._apply_environment()
