"""torchax's import for the benchmarks that compare with it (bench_eager, bench_compile,
bench_call_torch): the plain import, or, where torchax refers to ATen overloads this torch no
longer has, the import with those overloads resolving to inert placeholders."""

from __future__ import annotations

import sys

__all__ = ["import_torchax"]


def import_torchax():
    """(torchax, env, note) or (None, None, reason).

    torchax 0.0.13 builds tables keyed by ATen overloads at import time and when its
    environment is created, and some of those overloads (the named-dimension ones such as
    ``aten::prod.dim_Dimname``) no longer exist in torch 2.13, so a plain ``import torchax``
    raises AttributeError. We first try the plain import; if it fails, we retry once with the
    missing overloads resolving to inert placeholders during the import and the creation of
    the default environment only (those entries name ops our benchmarks never call), and say
    so in the header. Note: importing torchax turns off torch's MultiheadAttention fast path
    (``torch.backends.mha.set_fastpath_enabled(False)``) for the whole process.
    """
    try:
        import torchax

        env = torchax.default_env()
        return (
            torchax,
            env,
            f"{torchax.__version__} (plain import)" + _hide_jax_accelerator(torchax),
        )
    except Exception as first:
        first_reason = f"{type(first).__name__}: {first}"
    for name in [m for m in sys.modules if m == "torchax" or m.startswith("torchax.")]:
        del sys.modules[name]
    import torch._ops as _ops

    missing: list[str] = []
    orig = _ops.OpOverloadPacket.__getattr__

    def getattr_or_placeholder(self, key):
        try:
            return orig(self, key)
        except AttributeError:
            if key.startswith("__"):
                raise
            missing.append(f"{self._qualified_op_name}.{key}")
            return _MissingOverload(f"{self._qualified_op_name}.{key}")

    _ops.OpOverloadPacket.__getattr__ = getattr_or_placeholder
    try:
        import torchax

        env = torchax.default_env()
    except Exception as e:
        return (
            None,
            None,
            f"import failed: {first_reason}; with the overload shim: {type(e).__name__}: {e}",
        )
    finally:
        _ops.OpOverloadPacket.__getattr__ = orig
    uniq = sorted(set(missing))
    note = (
        f"{torchax.__version__}, imported with a compatibility shim: its plain import fails on this "
        f"torch ({first_reason.splitlines()[0]}); {len(uniq)} overloads absent from torch "
        f"{_torch_version()} were replaced by inert placeholders ({', '.join(uniq[:3])}, ...)"
    )
    return torchax, env, note + _hide_jax_accelerator(torchax)


def _hide_jax_accelerator(torchax) -> str:
    """torchax registers its "jax" device as torch's privateuse1 accelerator and reports it as
    available; torch.compile (dynamo) then asks torch.accelerator for that device's current
    stream at every trace and fails ("PyTorch is not linked with support for jax devices").
    torchax itself never asks; we make the device report itself unavailable, so that
    torch.compile works in a process that imported torchax."""
    try:
        import torch

        torchax.device_module.is_available = lambda: False
        if torch.accelerator.is_available():
            return "; torch.accelerator still reports the jax device (torch.compile may fail)"
        return (
            "; its 'jax' device is reported unavailable to torch.accelerator "
            "(else torch.compile fails in this process)"
        )
    except Exception as e:
        return f"; could not hide the jax accelerator from torch.compile ({e})"


class _MissingOverload:
    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"<overload {self.name} missing from this torch>"


def _torch_version() -> str:
    import torch

    return torch.__version__
