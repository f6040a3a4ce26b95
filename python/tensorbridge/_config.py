"""Run-time configuration: which composite ops run whole, and what happens to ops the table lacks."""

from __future__ import annotations

import os
from collections.abc import Iterable

from tensorbridge import _C

_FALLBACK_MODES = ("allow", "warn", "error")
_JIT_MODES = ("auto", "ffi", "callback")


def _normalize(op: str) -> str:
    op = op.strip()
    return op[: -len(".default")] if op.endswith(".default") else op


class Config:
    """``tensorbridge.config``.

    ``legal_ops``: the backend-legal composites, which run whole (one kernel) instead of being
    decomposed into simpler ops. Default: every composite that has a kernel. Assign a smaller
    set to decompose the others from their next call on (eager calls and compiled plans alike).
    The environment variable ``TENSORBRIDGE_DECOMPOSE=aten::gelu,aten::_softmax`` removes ops
    from the set when tensorbridge is imported.

    ``fallback``: what happens to an op the table has no kernel for. ``"allow"`` (default) runs
    PyTorch's own CPU kernel on zero-copy views and counts it in ``metrics()``; ``"warn"`` does
    the same with one warning per op; ``"error"`` raises ``NotImplementedError`` naming the op.

    ``jit_mode``: how ``call_torch`` runs a torch function inside ``jax.jit``. ``"ffi"``: a
    plan captured once, run by an XLA FFI custom call with no Python per call (an error when
    the function cannot be captured); ``"callback"``: ``jax.pure_callback``; ``"auto"``
    (default): the FFI where the function can be captured, the callback otherwise.

    ``ffi_threads``: OpenMP threads the kernels of one FFI handler call may use (default 1;
    0: OpenMP's default). XLA runs the handler on its own worker threads, which share the cores
    with XLA's thread pool, so a team of OpenMP threads there oversubscribes the machine;
    raise it for plans of large kernels on a machine with idle cores.
    """

    def __init__(self) -> None:
        self._fallback = "allow"
        self._jit_mode = "auto"
        self._ffi_threads = 1

    @staticmethod
    def composites() -> dict[str, dict]:
        """Every composite op: whether it has a whole kernel and whether it is legal now."""
        return {c["op"]: c for c in _C._composites()}

    @property
    def legal_ops(self) -> frozenset[str]:
        return frozenset(
            op for op, c in self.composites().items() if c["legal"] and c["has_kernel"]
        )

    @legal_ops.setter
    def legal_ops(self, ops: Iterable[str]) -> None:
        wanted = {_normalize(o) for o in ops}
        composites = self.composites()
        unknown = wanted - composites.keys()
        if unknown:
            raise ValueError(
                f"not composite ops: {sorted(unknown)}; the composites are {sorted(composites)}"
            )
        for op in composites:
            _C._set_legal(op, op in wanted)

    def decompose(self, *ops: str) -> None:
        """Takes `ops` out of the legal set (they are decomposed from their next call on)."""
        self.legal_ops = self.legal_ops - {_normalize(o) for o in ops}

    def reset_legal_ops(self) -> None:
        """Every composite with a kernel runs whole again."""
        for op in self.composites():
            _C._set_legal(op, True)

    @property
    def fallback(self) -> str:
        return self._fallback

    @fallback.setter
    def fallback(self, mode: str) -> None:
        if mode not in _FALLBACK_MODES:
            raise ValueError(f"config.fallback must be one of {_FALLBACK_MODES}, got {mode!r}")
        self._fallback = mode

    @property
    def ffi_threads(self) -> int:
        return self._ffi_threads

    @ffi_threads.setter
    def ffi_threads(self, n: int) -> None:
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValueError(f"config.ffi_threads must be an int >= 0, got {n!r}")
        _C._ffi_set_threads(n)
        self._ffi_threads = n

    @property
    def jit_mode(self) -> str:
        return self._jit_mode

    @jit_mode.setter
    def jit_mode(self, mode: str) -> None:
        if mode not in _JIT_MODES:
            raise ValueError(f"config.jit_mode must be one of {_JIT_MODES}, got {mode!r}")
        self._jit_mode = mode


config = Config()


def _apply_environment() -> None:
    names = os.environ.get("TENSORBRIDGE_DECOMPOSE", "")
    ops = [n for n in names.split(",") if n.strip()]
    if ops:
        config.decompose(*ops)
