"""The compile backend's on-disk cache: AOT autograd's results kept between processes.

What a compilation costs is mostly AOT autograd: tracing the joint forward and backward graph,
decomposing it and partitioning it (min-cut). PyTorch keeps those results on disk in its
AOT autograd cache, keyed by the graph dynamo captured, the inputs' metadata, grad mode,
autocast and PyTorch's own settings. With ``config.compile_cache`` on (the default), the
backend stores its results there too: the forward and backward ATen graphs that the plans are
built from, pickled with ``torch.fx``'s ``GraphPickler``, under a key tag of tensorbridge's own
(``torch.compiler.config.cache_key_tag``), so that its entries never meet inductor's. The tag
holds what else shapes those graphs: the library's version, the decomposition table (the
backend-legal composites), ``config.recompute`` and ``config.fusion`` (the joint-graph pass of
``_joint``) and the sources of the passes. A later process that compiles the same graph loads
them and only builds the plans (milliseconds), skipping the trace, its time and its transient
memory.

A training graph's entry holds its backward too, so with the cache on the backward plan is
built with the forward (AOT autograd's ``force_non_lazy_backward_lowering``), not at the first
backward call. Graphs with symbolic sizes are not stored (each plan is specialized per shape at run time).
``TORCHINDUCTOR_FORCE_DISABLE_CACHES=1`` or ``torch.compiler.config.force_disable_caches``
turn the cache off for every backend, ``config.compile_cache = False`` for this one. Where
PyTorch declines an entry (a graph it cannot key safely), the compilation runs as without the
cache. ``plan_metrics()`` counts ``cache_hits`` and ``cache_saves``.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import pathlib
import zlib
from collections.abc import Callable
from typing import Any

import torch

from tensorbridge import _C
from tensorbridge._compile_state import state
from tensorbridge._config import config

__all__ = ["compilers", "enabled"]

# The backend call in progress: its _Compilation (for the plans a cache hit builds) and the
# PlanCode objects it made (whose graphs are dropped once the call has stored them).
_scope: contextvars.ContextVar = contextvars.ContextVar("tensorbridge_compile_cache", default=None)

# Sources whose changes change the graphs the cache holds.
_PASS_SOURCES = ("_compile.py", "_joint.py", "_compile_cache.py")
_source_digest: str | None = None


def _sources() -> str:
    global _source_digest
    if _source_digest is None:
        h = hashlib.sha256()
        here = pathlib.Path(__file__).parent
        for name in _PASS_SOURCES:
            h.update((here / name).read_bytes())
        _source_digest = h.hexdigest()[:16]
    return _source_digest


def enabled() -> bool:
    """Whether compilations now use PyTorch's AOT autograd cache."""
    if not config.compile_cache:
        return False
    from torch._functorch._aot_autograd.autograd_cache import should_use_local_autograd_cache

    return bool(should_use_local_autograd_cache())


def key_tag(decompositions: dict, needs_autograd: bool) -> str:
    """The part of the cache key that is tensorbridge's: what shapes the stored graphs."""
    names = sorted(op.name() if hasattr(op, "name") else str(op) for op in decompositions)
    h = hashlib.sha256()
    for part in (
        _C.__version__,
        _sources(),
        repr(names),
        repr((config.recompute, config.fusion, needs_autograd)),
    ):
        h.update(part.encode())
        h.update(b"\0")
    return "tensorbridge-" + h.hexdigest()[:24]


@contextlib.contextmanager
def scope(record, tag: str):
    """Around one backend call's ``aot_autograd``: PyTorch's settings that store a result of
    ours (bundled entries, the backward compiled with the forward so that both are stored at
    once) and the key tag; drops the graphs the call's plans kept for storing."""
    from torch._functorch import config as functorch_config

    made: list = []
    token = _scope.set((record, made))
    outer = torch.compiler.config.cache_key_tag
    try:
        with (
            functorch_config.patch(
                bundled_autograd_cache=True, force_non_lazy_backward_lowering=True
            ),
            torch.compiler.config.patch(  # type: ignore[attr-defined]
                cache_key_tag=f"{outer}|{tag}" if outer else tag
            ),
        ):
            yield
    finally:
        _scope.reset(token)
        for code in made:
            code.forget_graph()


def compilers(record, fw: Callable, bw: Callable, decompositions: dict, needs_autograd: bool):
    """(fw, bw, context): the backend's compilers as AOT autograd's cache stores them and the
    context to run ``aot_autograd`` in (``scope``); the compilers as given and a null context
    when the cache is off."""
    if not enabled():
        return fw, bw, contextlib.nullcontext()
    return (
        serializable(fw, "forward", not needs_autograd),
        serializable(bw, "backward", False),
        scope(record, key_tag(decompositions, needs_autograd)),
    )


def _plan_code_type() -> type:
    """``PlanCode``, defined on first use (it subclasses inductor's ``OutputCode``, whose module
    imports inductor)."""
    global _PlanCode
    if _PlanCode is not None:
        return _PlanCode
    from torch._inductor.output_code import OutputCode

    class PlanCode(OutputCode):
        """One compiled graph as AOT autograd's cache holds it: the run function of its plan,
        and the ATen graph it was built from (pickled when stored, built again when loaded)."""

        def __init__(self, gm, kind: str, inference: bool, run) -> None:
            # in the instance's dict: wrappers copy that (boxed: the inputs come as one list)
            self._boxed_call = True
            self._gm = gm
            self._graph: bytes | None = None
            self._kind = kind
            self._inference = inference
            self._run = run

        def __call__(self, inputs):
            return self._run(inputs)

        def forget_graph(self) -> None:
            self._gm = None

        def __copy__(self):
            # AOT autograd stores a copy; the graph moves to it (the original runs the plan).
            new = PlanCode(self._gm, self._kind, self._inference, None)
            self._gm = None
            return new

        def prepare_for_serialization(self) -> None:
            from torch._functorch._aot_autograd.autograd_cache import BypassAOTAutogradCache
            from torch.fx._graph_pickler import GraphPickler, Options

            from tensorbridge._compile import _symbolic

            gm, self._gm, self._run = self._gm, None, None
            if gm is None:
                raise BypassAOTAutogradCache("tensorbridge: the graph is no longer held")
            if _symbolic(gm):
                raise BypassAOTAutogradCache("tensorbridge: graphs with symbolic sizes")
            # the plan reads each node's value (its shape, strides and dtype) and nothing else
            # of the metadata: stack traces and the rest stay out of the entry
            options = Options(
                ops_filter=_ops_filter, node_metadata_key_filter=_META_KEPT.__contains__
            )
            try:
                # compressed: PyTorch keeps each loaded entry's bytes for the process's life
                self._graph = zlib.compress(GraphPickler.dumps(gm, options), 6)
            except Exception as e:  # an op or a constant the pickler does not take
                raise BypassAOTAutogradCache(f"tensorbridge: {e}") from e
            state.stats["cache_saves"] += 1

        def post_compile(self, example_inputs, constants, graph_kwargs) -> None:
            if self._run is not None:
                return
            from torch._guards import detect_fake_mode
            from torch._subclasses.fake_tensor import FakeTensorMode
            from torch.fx._graph_pickler import GraphPickler

            from tensorbridge._compile import compile_graph

            assert self._graph is not None, "a PlanCode loaded without its graph"
            fake_mode = detect_fake_mode(example_inputs) or FakeTensorMode()
            gm = GraphPickler.loads(zlib.decompress(self._graph), fake_mode)
            assert isinstance(gm, torch.fx.GraphModule)
            scope = _scope.get()
            record = scope[0] if scope is not None else None
            self._run = compile_graph(gm, record=record, kind=self._kind, inference=self._inference)
            self._graph = None
            state.stats["cache_hits"] += 1

        def set_triton_bundle(self, triton_bundle: Any) -> None:
            pass

        def __getstate__(self):
            return {
                "_graph": self._graph,
                "_kind": self._kind,
                "_inference": self._inference,
            }

        def __setstate__(self, s) -> None:
            self.__dict__.update(s)
            self._boxed_call = True
            self._gm = None
            self._run = None

    PlanCode.__module__ = __name__
    PlanCode.__qualname__ = "PlanCode"
    _PlanCode = PlanCode
    return PlanCode


_PlanCode: type | None = None


def __getattr__(name: str) -> Any:
    # the pickled entries name the class tensorbridge._compile_cache.PlanCode
    if name == "PlanCode":
        return _plan_code_type()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_META_KEPT = frozenset({"val"})


def _ops_filter(name: str) -> bool:
    return name.startswith(("torch.ops.aten", "torch.ops.prims"))


def serializable(compile_fn: Callable, kind: str, inference: bool):
    """``compile_fn`` (graph, inputs -> run function) as AOT autograd's cacheable compiler."""
    from torch._functorch._aot_autograd.schemas import SerializableAOTDispatchCompiler

    code_type = _plan_code_type()

    def compile_(gm, inputs):
        code = code_type(gm, kind, inference, compile_fn(gm, inputs))
        scope = _scope.get()
        if scope is not None:
            scope[1].append(code)
        return code

    return SerializableAOTDispatchCompiler(code_type, compile_)
