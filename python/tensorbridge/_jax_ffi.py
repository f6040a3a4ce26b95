"""call_torch inside ``jax.jit`` through XLA's FFI: the torch function captured once into a plan.

Per input signature the function is traced with ``make_fx`` (on fake tensors, with the compile
backend's decomposition table, functionalized where it mutates anything) into an ATen graph,
which becomes one ``_C.Plan``; the plan is registered with the C++ FFI handler
``tensorbridge_plan`` under an integer id. Tensors the function holds rather than takes (a
module's parameters and buffers, constants) become constants of the plan that share the
tensor's memory. Inside ``jax.jit`` the function lowers to an XLA custom call of that handler:
each call wraps XLA's buffers as tensors (inputs read-only, no copy), runs the plan in C++ and
copies its outputs into XLA's result buffers, with no Python and no GIL.

The gradient is captured the same way, as a forward and a backward plan (``_jax_grad``).

A function that cannot be captured stays on ``jax.pure_callback`` (in ``jit_mode="auto"``):
output shapes that depend on data, ops the plan cannot hold, Python values in the graph, and
graphs with fallback nodes (ops without a tensorbridge kernel run PyTorch's kernel through the
Python interpreter, so the handler would have to take the GIL on XLA's thread; such functions
pay Python per call either way, and keeping the handler free of Python keeps it from
contending for the GIL with the thread that called the jitted function).
"""

from __future__ import annotations

import collections
import threading

import numpy as np
import torch
import torch.utils._pytree as torch_pytree

from tensorbridge import _C

TARGET = "tensorbridge_plan"

_stats: collections.Counter[str] = collections.Counter()
_reasons: collections.deque = collections.deque(maxlen=16)
_registered = False
_register_error: str | None = None
_lock = threading.Lock()


class CaptureError(Exception):
    """The function cannot run as a plan (the message says why)."""


def metrics() -> dict:
    """Counters of call_torch under ``jax.jit``: ``ffi_plans`` (plans captured and registered),
    ``ffi_runs`` / ``ffi_failures`` (handler calls, counted in C++), ``callback_runs`` (host
    calls through ``jax.pure_callback``), ``callback_signatures`` (signatures routed to the
    callback) and ``callback_reasons`` (why, most recent last)."""
    m = _C._ffi_metrics()
    return {
        "ffi_plans": m["plans"],
        "ffi_runs": m["runs"],
        "ffi_failures": m["failures"],
        "callback_runs": _stats["callback_runs"],
        "callback_signatures": _stats["callback_signatures"],
        "callback_reasons": list(_reasons),
    }


def count_callback_run() -> None:
    _stats["callback_runs"] += 1


def note_callback(reason: str) -> None:
    _stats["callback_signatures"] += 1
    _reasons.append(reason)


def ffi_usable(jax) -> str | None:
    """None when the FFI path can run here, otherwise why not."""
    if jax.default_backend() != "cpu":
        return f"the FFI handler runs on CPU only; JAX's default backend is {jax.default_backend()}"
    return _register(jax)


def _register(jax) -> str | None:
    """Registers the handler with XLA once; None when it is registered, otherwise why not.
    jaxlib refuses a handler compiled for an XLA FFI API version it does not support."""
    global _registered, _register_error
    with _lock:
        if not _registered and _register_error is None:
            try:
                jax.ffi.register_ffi_target(TARGET, _C._ffi_handler(), platform="cpu")
                _registered = True
            except Exception as e:  # a refused API version: jaxlib's error names both
                major, minor = _C._ffi_api_version
                _register_error = (
                    f"jaxlib {_jaxlib_version()} did not register the FFI handler, built for "
                    f"XLA FFI API {major}.{minor}: {type(e).__name__}: {e}"
                )
        return _register_error


def _jaxlib_version() -> str:
    try:
        import jaxlib

        return str(jaxlib.__version__)
    except Exception:
        return "(version unknown)"


def _trace(flat_fn, examples, grad: bool):
    """The ATen graph of flat_fn on fake tensors of the examples' metadata: traced as it runs
    (tensors the function holds -- parameters, buffers, constants -- become graph constants
    that keep the very tensor, no copy), then functionalized by a second trace of that graph
    where it mutates anything. (The first trace sees plain fake tensors, so that code which
    asks whether it is being traced -- ``transformers``' mask utilities -- knows it is.)"""
    from torch.fx.experimental.proxy_tensor import make_fx

    from tensorbridge._compile import _decompositions

    # A graph that autograd differentiates keeps the ops whose core decomposition is wrong
    # under autograd (see _compile._NOT_UNDER_AUTOGRAD) whole; a forward graph takes them all.
    decompositions = _decompositions(autograd=grad)
    ctx = torch.enable_grad() if grad else torch.no_grad()
    try:
        with ctx:
            gm = make_fx(
                flat_fn,
                decomposition_table=decompositions,
                tracing_mode="fake",
                _allow_non_fake_inputs=True,
            )(*examples)
        if _mutates(gm):
            with torch.no_grad():
                gm = make_fx(
                    torch.func.functionalize(gm),
                    decomposition_table=decompositions,
                    tracing_mode="fake",
                    _allow_non_fake_inputs=True,
                )(*examples)
    except Exception as e:  # any tracing failure means: not capturable
        raise CaptureError(f"tracing with make_fx failed: {type(e).__name__}: {e}") from e
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm


def _mutates(gm) -> bool:
    return any(
        n.op == "call_function"
        and isinstance(n.target, torch._ops.OpOverload)
        and n.target._schema.is_mutable
        for n in gm.graph.nodes
    )


def _build(gm, allow_fallback: bool):
    from tensorbridge._compile import _Builder

    for n in gm.graph.nodes:
        if n.op == "output":
            outs = n.args[0] if isinstance(n.args[0], (list, tuple)) else (n.args[0],)
            if any(not isinstance(o, torch.fx.Node) for o in outs):
                raise CaptureError("an output of the graph is not a tensor computed by the graph")
    try:
        plan = _Builder(gm, contiguous_io=True).build()  # XLA's buffers are row-major
    except Exception as e:  # ops the plan cannot hold
        raise CaptureError(f"building the plan failed: {type(e).__name__}: {e}") from e
    n_fallback = plan.count("fallback")
    if n_fallback and not allow_fallback:
        ops = ", ".join(fallback_ops(plan))
        raise CaptureError(
            f"{n_fallback} node(s) have no tensorbridge kernel and would run PyTorch's kernel "
            f"through Python (fallback: {ops}); jit_mode='ffi' runs them in the handler under "
            "the GIL"
        )
    return plan


def fallback_ops(plan) -> list:
    """The ops of a plan's fallback nodes, each once, sorted."""
    from tensorbridge._compile import _FALLBACK_LINE

    return sorted(set(_FALLBACK_LINE.findall(plan.dump())))


def _examples(shapes_dtypes, torch_dtype):
    # Uninitialized CPU tensors: make_fx turns them into fake tensors of the same metadata.
    return [torch.empty(s, dtype=torch_dtype(d)) for s, d in shapes_dtypes]


def capture_forward(fn, spec, shapes_dtypes, out_info, torch_dtype, allow_fallback) -> int:
    """Captures fn for one input signature; returns the registered plan id."""

    def flat_fn(*ts):
        args, kwargs = torch_pytree.tree_unflatten(list(ts), spec)
        return tuple(torch_pytree.tree_leaves(fn(*args, **kwargs)))

    gm = _trace(flat_fn, _examples(shapes_dtypes, torch_dtype), grad=False)
    _check_no_input_mutation(gm, fn)
    _check_outputs(gm, out_info)
    return register(_build(gm, allow_fallback))


def register(plan) -> int:
    """Keeps a plan for the FFI handler; returns its id."""
    return _C._ffi_register_plan(plan)


def fn_name(fn) -> str:
    """A torch function's name for messages (a module's class name)."""
    name = getattr(fn, "__name__", None)
    return name if isinstance(name, str) else type(fn).__name__


def _check_no_input_mutation(gm, fn) -> None:
    """Refuses a graph that writes into its inputs (XLA's buffers are immutable) or into state
    it holds (a module's buffers, bound into the plan as constants)."""
    name = fn_name(fn)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for n in gm.graph.nodes:
        if n.op != "call_function" or not isinstance(n.target, torch._ops.OpOverload):
            continue
        for i, a in enumerate(n.target._schema.arguments):
            if a.alias_info is None or not a.alias_info.is_write or i >= len(n.args):
                continue
            dst = n.args[i]
            if dst in placeholders:
                raise BufferError(
                    f"call_torch: {name} writes into its input {placeholders.index(dst)} "
                    f"in place ({n.target}); arrays under jax.jit are immutable: clone the "
                    "input first"
                )
            if isinstance(dst, torch.fx.Node) and dst.op == "get_attr":
                raise BufferError(
                    f"call_torch: {name} writes in place ({n.target}) into "
                    f"{_state_name(fn, getattr(gm, str(dst.target)))}, which it holds; state "
                    "captured under jax.jit must not change (a buffer updated in training "
                    "mode, such as batch-norm statistics: call module.eval() first)"
                )


def _state_name(fn, t) -> str:
    """Which module tensor `t` is, where fn is a module, a method of one, or a closure or
    partial over one (looked for a few closures deep); else its shape."""
    todo, seen = [(fn, 0)], set()
    while todo:
        h, depth = todo.pop(0)
        if h is None or id(h) in seen:
            continue
        seen.add(id(h))
        if isinstance(h, torch.nn.Module):
            for kind, items in (("buffer", h.named_buffers()), ("parameter", h.named_parameters())):
                for n, v in items:
                    if v.data_ptr() == t.data_ptr() and v.shape == t.shape:
                        return f"{type(h).__name__} {kind} {n!r}"
            continue
        if depth < 3:
            inner = [getattr(h, "__self__", None), getattr(h, "func", None)]
            inner += list(getattr(h, "args", None) or ())
            closure = getattr(h, "__closure__", None) or ()
            inner += [c.cell_contents for c in closure if _filled(c)]
            todo += [(i, depth + 1) for i in inner]
    return f"a tensor of shape {tuple(t.shape)}"


def _filled(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:
        return False
    return True


def _check_outputs(gm, expected) -> None:
    out = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    vals = [o.meta.get("val") if isinstance(o, torch.fx.Node) else o for o in out]
    got = [(tuple(v.shape), v.dtype) if isinstance(v, torch.Tensor) else None for v in vals]
    want = [(tuple(s), d) for s, d in expected]
    if got != want:
        raise CaptureError(f"the traced graph returns {got}, the function {want}")


def ffi_function(jax, plan_id: int, result_shapes):
    """The JAX function that runs plan `plan_id` through the FFI handler. Under ``vmap`` the
    custom call runs once per batch element inside XLA (``vmap_method="sequential"``): the
    plan holds static shapes."""
    why = _register(jax)
    if why is not None:
        raise CaptureError(why)
    call = jax.ffi.ffi_call(TARGET, result_shapes, vmap_method="sequential")
    attr = np.int64(plan_id)

    def run(*arrays):
        return call(*arrays, plan_id=attr)

    return run
