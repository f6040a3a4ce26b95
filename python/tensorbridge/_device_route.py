"""The device route (a prototype): tensorbridge as PyTorch's ``PrivateUse1`` backend.

The C++ library ``libtb_torch_device.so`` (``python/torch_device/device.cc``, built beside
``_C`` when torch's CMake config is found, never part of a wheel) registers a device that
torch's dispatcher reaches in C++: tensors on device ``tensorbridge`` are torch tensors over
the memory of wrapped arrays; the table's kernels serve the ops they cover, torch's CPU
kernels the rest (on zero-copy CPU views), and autograd is torch's own.

``load()`` renames ``PrivateUse1`` to ``tensorbridge``, which torch allows once per process
and which makes it torch's accelerator for the rest of the process: tests run it in a
separate process.
"""

from __future__ import annotations

import os
import types
from pathlib import Path
from typing import Any

import torch

from tensorbridge import _C

_LIB_NAME = "libtb_torch_device.so"
_registered: list[str] | None = None


def library_path() -> Path | None:
    """The device-route library of this build, or None where the build made none."""
    path = Path(os.path.realpath(_C.__file__)).parent / _LIB_NAME
    return path if path.is_file() else None


def _device_module() -> types.ModuleType:
    """``torch.tensorbridge``: what torch asks of a device's module (lazy initialisation,
    device count, random seeds: random ops run on the CPU generator)."""
    mod = types.ModuleType("torch.tensorbridge")
    mod._lazy_init = lambda: None  # type: ignore[attr-defined]
    mod.is_initialized = lambda: True  # type: ignore[attr-defined]
    mod.is_available = lambda: True  # type: ignore[attr-defined]
    mod.device_count = lambda: 1  # type: ignore[attr-defined]
    mod.current_device = lambda: 0  # type: ignore[attr-defined]
    mod._is_in_bad_fork = lambda: False  # type: ignore[attr-defined]
    mod.manual_seed_all = lambda seed: None  # type: ignore[attr-defined]
    mod.get_amp_supported_dtype = lambda: [torch.bfloat16]  # type: ignore[attr-defined]
    return mod


def load() -> list[str]:
    """Loads the library (once), names the device ``tensorbridge`` and registers the table's
    kernels for it; returns the aten ops the table serves on the device."""
    global _registered
    if _registered is not None:
        return _registered
    path = library_path()
    if path is None:
        raise RuntimeError(
            "the tensorbridge device route is not built: it needs torch's CMake config at "
            "build time (TB_BUILD_TORCH_DEVICE, python/CMakeLists.txt)"
        )
    built = path.with_suffix(".torch_version").read_text().strip()
    if built != torch.__version__.split("+")[0]:
        raise RuntimeError(
            f"the tensorbridge device route was built against torch {built}; this is torch "
            f"{torch.__version__} (libtorch's C++ ABI is one release's): rebuild tensorbridge"
        )
    torch.ops.load_library(str(path))
    torch.utils.rename_privateuse1_backend("tensorbridge")
    torch._register_device_module("tensorbridge", _device_module())
    _registered = list(torch.ops.tensorbridge_device.register_table([]))
    return _registered


def to_device(x: Any) -> torch.Tensor:
    """A tensor on device ``tensorbridge`` over the memory of ``x`` (any array ``tb.wrap``
    takes, or a CPU torch tensor), without a copy."""
    load()
    if not isinstance(x, torch.Tensor):
        from tensorbridge._tensor import to_torch, wrap

        x = to_torch(wrap(x))
    return torch.ops.tensorbridge_device.device_view(x.detach())


def cpu_view(t: torch.Tensor) -> torch.Tensor:
    """A CPU torch tensor over the memory of a ``tensorbridge`` device tensor (no copy);
    ``cpu_view(t).numpy()`` is the numpy view."""
    return torch.ops.tensorbridge_device.cpu_view(t.detach())


def fallback_counts() -> dict[str, int]:
    """Calls per aten op that ran torch's CPU kernel (the fallback) since the last call of
    this function, which resets them."""
    names, counts = torch.ops.tensorbridge_device.fallback_counts()
    return dict(zip(names, counts, strict=True))


def module_to_device(module: torch.nn.Module) -> torch.nn.Module:
    """Moves ``module``'s parameters and buffers onto device ``tensorbridge`` in place, each
    over the memory it had (no copies; a parameter shared by several modules stays shared);
    returns ``module``."""
    load()
    moved: dict[int, torch.Tensor] = {}

    def move(t: torch.Tensor, parameter: bool) -> torch.Tensor:
        if id(t) not in moved:
            d = to_device(t)
            moved[id(t)] = torch.nn.Parameter(d, t.requires_grad) if parameter else d
        return moved[id(t)]

    for m in module.modules():
        for name, p in m._parameters.items():
            if p is not None:
                m._parameters[name] = move(p, True)  # type: ignore[assignment]
        for name, b in m._buffers.items():
            if b is not None:
                m._buffers[name] = move(b, False)
    return module
