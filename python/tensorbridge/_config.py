"""Run-time configuration: every setting of the library, read and written on ``tensorbridge.config``.

Settings read from the environment at import use the one prefix ``TB_``: ``TB_DECOMPOSE`` (ops
taken out of ``config.legal_ops``), ``TB_POINTWISE_FUSION``, ``TB_PREPACK``, ``TB_RECOMPUTE`` and
``TB_COMPILE_CACHE`` (``0`` or ``1``: the first ``config.pointwise_fusion``, ``config.prepack``,
``config.recompute`` and ``config.compile_cache``) here, ``TB_HOST_CACHE_MB`` (the first ``host_cache_limit``) and
``TB_MAX_CPU_ISA`` (the widest vector code the kernels pick) in the C++ library. (``.ci/dev``'s
``TB_CACHE`` and ``TB_JOBS`` are settings of the build script, not of the library.)
"""

from __future__ import annotations

import os
import types
import warnings
from collections.abc import Iterable

from tensorbridge import _C

_FALLBACK_MODES = ("allow", "warn", "error")
JIT_MODES = ("auto", "ffi", "callback")
"""``config.jit_mode``'s values: how ``call_torch`` runs under ``jax.jit``."""

# Read as well as TB_DECOMPOSE, the name the documentation gave it first.
_DECOMPOSE_ENV = ("TB_DECOMPOSE", "TENSORBRIDGE_DECOMPOSE")
# Boolean settings read from the environment at import: variable -> Config attribute.
_BOOL_ENV = {
    "TB_POINTWISE_FUSION": "pointwise_fusion",
    "TB_PREPACK": "prepack",
    "TB_RECOMPUTE": "recompute",
    "TB_COMPILE_CACHE": "compile_cache",
}
_TRUE, _FALSE = ("1", "true", "on", "yes"), ("0", "false", "off", "no")


def _normalize(op: str) -> str:
    op = op.strip()
    return op[: -len(".default")] if op.endswith(".default") else op


class Config:
    """``tensorbridge.config``.

    ``legal_ops``: the backend-legal composites, which run whole (one kernel) instead of being
    decomposed into simpler ops. Default: every composite that has a kernel. Assign a smaller
    set to decompose the others from their next call on (eager calls and compiled plans alike).
    The environment variable ``TB_DECOMPOSE=aten::gelu,aten::_softmax`` removes ops from the set
    when tensorbridge is imported.

    ``fallback``: what happens to an op the table has no kernel for. ``"allow"`` (default) runs
    PyTorch's own CPU kernel on zero-copy views and counts it in ``metrics()``; ``"warn"`` does
    the same with one warning per op; ``"error"`` raises ``NotImplementedError`` naming the op.
    A kernel that declines its input (a dtype or device it has no loop for) is served the same
    way: ``"allow"`` and ``"warn"`` run PyTorch's kernel, counted as a fallback (and under
    ``declined`` in ``metrics()``); ``"error"`` raises ``KernelDeclinedError``, a
    ``NotImplementedError`` naming the op and the dtype.

    ``jit_mode``: how ``call_torch`` runs a torch function inside ``jax.jit``. ``"ffi"``: a
    plan captured once, run by an XLA FFI custom call with no Python per call (an error when
    the function cannot be captured); ``"callback"``: ``jax.pure_callback``; ``"auto"``
    (default): the FFI where the function can be captured, the callback otherwise.

    ``ffi_threads``: OpenMP threads the kernels of one FFI handler call may use (default 1;
    0: OpenMP's default). XLA runs the handler on its own worker threads, which share the cores
    with XLA's thread pool, so a team of OpenMP threads there oversubscribes the machine;
    raise it for plans of large kernels on a machine with idle cores.

    ``fusion``: whether the compile backend folds producer/consumer pairs into one fused node
    (``tensorbridge::addmm_act``, ``tensorbridge::convolution_relu``, ...) when it builds a plan
    (default True). False builds every node as captured; plans already built keep their nodes.

    ``pointwise_fusion``: whether, with ``fusion`` on, the plan pass also groups chains of
    elementwise ops into one ``tensorbridge::pointwise`` node each (default True; environment
    ``TB_POINTWISE_FUSION=0`` at import). Plans built from then on follow it.

    ``prepack``: whether inference plans pack constant matmul weights once, checked against the
    weight's version at each call (default True; environment ``TB_PREPACK=0`` at import). False
    keeps the captured transpose in the plan.

    ``recompute``: whether a compiled training step saves for its backward only what is
    costly to recompute (default True; environment ``TB_RECOMPUTE=0`` at import): AOT
    autograd's min-cut partitioner, as inductor uses, moves cheap element-wise ops into the
    backward plan rather than saving their results, which lowers the step's peak memory.
    False saves every intermediate the backward reads. Compilations from then on follow it.

    ``compile_cache``: whether compilations keep AOT autograd's results (the forward and
    backward graphs the plans are built from) in PyTorch's on-disk AOT autograd cache, so that
    another process compiling the same graph builds its plans without tracing it again (default
    True; environment ``TB_COMPILE_CACHE=0`` at import). PyTorch's
    ``TORCHINDUCTOR_FORCE_DISABLE_CACHES=1`` turns it off as well. See
    ``tensorbridge._compile_cache``.

    ``profiling``: whether every table call is timed (default False); while on, ``metrics()``
    reports ``time_ns`` per op.

    ``host_cache_limit``: the most bytes of freed large blocks kept for reuse (0: none); setting
    it trims the cache. Its first value comes from ``TB_HOST_CACHE_MB`` (default 512 MiB); a
    compiled step that allocates more raises it to that, unless this setting or
    ``TB_HOST_CACHE_MB`` was given.
    """

    def __init__(self) -> None:
        self._fallback = "allow"
        self._jit_mode = "auto"
        self._ffi_threads = 1
        self._fusion = True
        self._pointwise_fusion = True
        self._prepack = True
        self._recompute = True
        self._compile_cache = True
        self._profiling = False
        self._host_cache_limit_set = False  # set by the user: compiled plans leave it alone

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
        # A kernel declining its input's dtype or device falls back too, except under "error".
        _C._set_fallback_on_decline(mode != "error")

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
        if mode not in JIT_MODES:
            raise ValueError(f"config.jit_mode must be one of {JIT_MODES}, got {mode!r}")
        self._jit_mode = mode

    @property
    def fusion(self) -> bool:
        return self._fusion

    @fusion.setter
    def fusion(self, on: bool) -> None:
        if not isinstance(on, bool):
            raise ValueError(f"config.fusion must be True or False, got {on!r}")
        self._fusion = on

    @property
    def pointwise_fusion(self) -> bool:
        return self._pointwise_fusion

    @pointwise_fusion.setter
    def pointwise_fusion(self, on: bool) -> None:
        if not isinstance(on, bool):
            raise ValueError(f"config.pointwise_fusion must be True or False, got {on!r}")
        self._pointwise_fusion = on

    @property
    def prepack(self) -> bool:
        return self._prepack

    @prepack.setter
    def prepack(self, on: bool) -> None:
        if not isinstance(on, bool):
            raise ValueError(f"config.prepack must be True or False, got {on!r}")
        self._prepack = on

    @property
    def recompute(self) -> bool:
        return self._recompute

    @recompute.setter
    def recompute(self, on: bool) -> None:
        if not isinstance(on, bool):
            raise ValueError(f"config.recompute must be True or False, got {on!r}")
        self._recompute = on

    @property
    def compile_cache(self) -> bool:
        return self._compile_cache

    @compile_cache.setter
    def compile_cache(self, on: bool) -> None:
        if not isinstance(on, bool):
            raise ValueError(f"config.compile_cache must be True or False, got {on!r}")
        self._compile_cache = on

    @property
    def profiling(self) -> bool:
        return self._profiling

    @profiling.setter
    def profiling(self, on: bool) -> None:
        if not isinstance(on, bool):
            raise ValueError(f"config.profiling must be True or False, got {on!r}")
        _C.set_profiling(on)
        self._profiling = on

    @property
    def host_cache_limit(self) -> int:
        return int(_C.memory_stats()["cache_limit_bytes"])

    @host_cache_limit.setter
    def host_cache_limit(self, nbytes: int) -> None:
        if not isinstance(nbytes, int) or isinstance(nbytes, bool) or nbytes < 0:
            raise ValueError(f"config.host_cache_limit must be an int >= 0, got {nbytes!r}")
        _C.set_host_cache_limit(nbytes)
        self._host_cache_limit_set = True


config = Config()


def _env_bool(name: str) -> bool | None:
    """The boolean environment variable `name` (None when unset or empty)."""
    value = os.environ.get(name, "").strip().lower()
    if not value:
        return None
    if value in _TRUE or value in _FALSE:
        return value in _TRUE
    raise ValueError(f"{name} must be one of {_TRUE + _FALSE}, got {os.environ[name]!r}")


def _apply_environment() -> None:
    names = ",".join(os.environ.get(v, "") for v in _DECOMPOSE_ENV)
    ops = [n for n in names.split(",") if n.strip()]
    if ops:
        config.decompose(*ops)
    for name, attr in _BOOL_ENV.items():
        on = _env_bool(name)
        if on is not None:
            setattr(config, attr, on)


def _set_profiling(on: bool) -> None:
    """``tensorbridge.set_profiling(on)``, the earlier spelling of ``config.profiling = on``."""
    config.profiling = bool(on)


def _set_host_cache_limit(nbytes: int) -> None:
    """``tensorbridge.set_host_cache_limit(n)``, the earlier spelling of
    ``config.host_cache_limit = n``."""
    config.host_cache_limit = int(nbytes)


def install_setting_alias(module: types.ModuleType, name: str, setting: str) -> None:
    """Makes ``module.<name>``, a module flag the documentation named before the setting moved
    into ``config``, read and set ``config.<setting>`` (with a DeprecationWarning)."""
    message = f"{module.__name__}.{name} is now tensorbridge.config.{setting}"

    def get(_module: types.ModuleType) -> object:
        warnings.warn(message, DeprecationWarning, stacklevel=2)
        return getattr(config, setting)

    def set_(_module: types.ModuleType, value: object) -> None:
        warnings.warn(message, DeprecationWarning, stacklevel=2)
        setattr(config, setting, value)

    if type(module) is types.ModuleType:
        module.__class__ = type("_SettingAliases", (types.ModuleType,), {})
    setattr(type(module), name, property(get, set_))
