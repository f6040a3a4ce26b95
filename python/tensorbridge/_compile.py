"""``torch.compile(model, backend="tensorbridge")``: captured graphs built once into C++ plans.

Dynamo captures and guards the Python code; AOT autograd lowers each graph to ATen (forward,
and backward for training) with PyTorch's core decomposition table minus the backend-legal
composites, so gelu, silu, softmax, layer_norm and their backward ops stay single nodes. Each
ATen graph becomes one ``_C.Plan``, built once when the graph is compiled: every call binds
the inputs zero-copy through DLPack and runs the plan in C++ with the GIL released.
"""

from __future__ import annotations

import collections
import copy
import operator
import re
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any

import torch

from tensorbridge import _C, _compile_cache, _epilogue, _fuse, _joint, _memory
from tensorbridge._compile_state import install_fusion_alias, state
from tensorbridge._config import config

__all__ = [
    "backend",
    "compile_graph",
    "compiled_metrics",
    "explain",
    "plan_metrics",
]


def plan_metrics(fn: Callable | None = None) -> dict:
    """With ``fn`` (a ``torch.compile``'d module or function): ``compiled_metrics(fn)``.
    Without: counters of the compile backend: ``graphs`` captured by dynamo (distinct), ``compilations``
    (backend calls: a graph captured again for new shapes or failed guards counts as a
    ``recompilation``), ``plans_built`` (forward and backward plans; ``shape_plans`` of them
    built for the concrete shapes of a graph traced with symbolic sizes), ``plan_calls``, and
    ``cache_saves`` / ``cache_hits``: graphs stored in and plans built from the on-disk compile
    cache (``config.compile_cache``)."""
    if fn is not None:
        return compiled_metrics(fn)
    stats = state.stats
    return {
        "graphs": stats["graphs"],
        "compilations": stats["compilations"],
        "recompilations": stats["compilations"] - stats["graphs"],
        "plans_built": stats["plans_built"],
        "shape_plans": stats["shape_plans"],
        "plan_calls": state.plan_calls(),
        "cache_saves": stats["cache_saves"],
        "cache_hits": stats["cache_hits"],
    }


def reset_plan_metrics() -> None:
    """Sets the counters of ``plan_metrics()`` back to zero (plans already built stay)."""
    state.reset()


def _const(x):
    """A graph constant in the form _C.Plan takes."""
    if isinstance(x, torch.Tensor):
        return ("const", _C.from_dlpack(x.detach().contiguous()))
    if isinstance(x, torch.device):
        return ("const", "cpu")
    if isinstance(x, (torch.layout, torch.memory_format)):
        return ("const", str(x)[6:])
    if isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        raise NotImplementedError("tensorbridge plans take static shapes (dynamic=False)")
    return ("const", x)


_aten = torch.ops.aten


class _Builder:
    """Builds the plan of an ATen FX graph. ``contiguous_io``: the caller hands over and takes
    back contiguous buffers (as XLA does), so inputs traced with other strides are copied into
    them, and outputs need no particular layout (dynamo's guards ensure the inputs' strides
    otherwise, and its callers see the outputs' strides)."""

    def __init__(
        self,
        gm: torch.fx.GraphModule,
        contiguous_io: bool = False,
        inference: bool = False,
        saved_from=None,
    ):
        self.gm = gm
        # An AOT autograd backward graph takes saved activations: the storages of its forward
        # graph's inputs (``_memory.input_storages``), whose views it also takes.
        self.saved_from = saved_from
        self.contiguous_io = contiguous_io
        self.plan = _C.Plan()
        self.env: dict = {}
        found = _epilogue.find(gm, inference) if config.fusion else {"fused": {}, "skipped": {}}
        self.fused, self.skipped = found["fused"], found["skipped"]
        # Packed weights: (plan input position, pack id), checked by _epilogue.Prepacked.
        pairs = _epilogue.assign_packs(self.fused.values())
        inputs = [n for n in gm.graph.nodes if n.op == "placeholder"]
        self.packs = [(inputs.index(n), pack) for n, pack in pairs]
        # Identical dtype casts of one value (autocast casts an input once per reader).
        self.casts: dict = {}
        # Chains of element-wise nodes the epilogues leave run as one fused node each
        # (tensorbridge._fuse).
        # Convolution gradients of zero-padded inputs (tensorbridge._joint).
        self.padded = _joint.PaddedBackwards(gm)
        self.pointwise = (
            _fuse.Emitter(gm, {*self.fused, *self.skipped, *self.padded.all()})
            if config.fusion
            else None
        )

    def arg(self, x, list_kind: str = "list"):
        if isinstance(x, torch.fx.Node):
            v = self.env[x]
            if isinstance(v, tuple):  # (value, index): a getitem of a list result
                return ("item", v[0], v[1])
            return ("value", v)
        if isinstance(x, (list, tuple)) and any(isinstance(i, torch.fx.Node) for i in x):
            kind = "optlist" if any(i is None for i in x) else list_kind
            return (kind, [self.arg(i) if i is not None else ("const", None) for i in x])
        return _const(x)

    def node(self, n: torch.fx.Node):
        target = n.target
        if n in self.skipped:
            return  # runs inside the fused node of its chain (emitted at the chain's end)
        if self.padded.emit(self, n):
            return
        if n in self.fused:
            e = self.fused[n]
            args = [self.arg(a) if isinstance(a, torch.fx.Node) else _const(a) for a in e.args]
            outs = self.plan.add_node(e.op, args, 1, n.name)
            _memory.record(self.plan, outs, n)
            self.env[n] = outs[0]
            return
        if target is operator.getitem:
            src, index = n.args
            v = self.env[src]
            self.env[n] = v[index] if isinstance(v, list) else (v, index)  # type: ignore[index]
            return
        if self.pointwise is not None and self.pointwise.handles(n):
            self.pointwise.emit(self, n)
            return
        if config.fusion and _epilogue.noop_pad(n):
            self.env[n] = self.env[n.args[0]]  # a copy no one writes: read the input itself
            return
        cast = _epilogue._dtype_cast(n) if target == _aten._to_copy.default else None
        if any(u.op == "output" for u in n.users):
            cast = None  # a result of the graph: its own memory
        if cast is not None and isinstance(n.args[0], torch.fx.Node):
            key = (n.args[0], cast)
            if key in self.casts:
                self.env[n] = self.casts[key]
                return
        if not isinstance(target, torch._ops.OpOverload):
            raise NotImplementedError(
                f"tensorbridge plans run ATen ops; node {n.name} calls {target}"
            )
        schema = target._schema
        name = schema.name + (f".{schema.overload_name}" if schema.overload_name else "")
        args = []
        for i, a in enumerate(schema.arguments):
            if i < len(n.args) and not a.kwarg_only:
                value = n.args[i]
            elif a.name in n.kwargs:
                value = n.kwargs[a.name]
            elif a.has_default_value():
                value = a.default_value
            else:
                raise ValueError(f"{name}: node {n.name} lacks argument {a.name}")
            is_opt_list = str(a.type) == "List[Optional[Tensor]]"
            args.append(self.arg(value, "optlist" if is_opt_list else "list"))
        returns = schema.returns
        list_return = len(returns) == 1 and str(returns[0].type).startswith("List[")
        outs = self.plan.add_node(name, args, 1 if list_return else len(returns), n.name)
        _memory.record(self.plan, outs, n, self._base_of(n))
        # One value (a Tensor, or a Tensor[] that getitem indexes), or one value per result.
        self.env[n] = outs[0] if len(outs) == 1 else outs
        if cast is not None:
            self.casts[(n.args[0], cast)] = self.env[n]

    def _base_of(self, n: torch.fx.Node):
        """The plan value whose memory a view node views (its first argument's), or None."""
        src = n.args[0] if n.args else None
        v = self.env.get(src) if isinstance(src, torch.fx.Node) else None
        return v[0] if isinstance(v, tuple) else v

    def build(self):
        for n in self.gm.graph.nodes:
            if n.op == "placeholder":
                self.env[n] = self.plan.add_input(n.name)
            elif n.op == "get_attr":
                self.env[n] = None
                self._attr_const(n)
            elif n.op == "call_function":
                self.node(n)
            elif n.op == "output":
                outs = n.args[0]
                outs = outs if isinstance(outs, (list, tuple)) else (outs,)
                self.plan.set_outputs(
                    [self.arg(o) if o is not None else ("const", None) for o in outs]
                )
            else:
                raise NotImplementedError(f"tensorbridge plans: unsupported node kind {n.op}")
        if self.saved_from is not None:
            _memory.record_saved(self.plan, self.gm, self.env, self.saved_from)
        self._expect_strides()
        self.plan.finalize()
        return self.plan

    def _expect_strides(self):
        """Gives the plan the graph's strides of every value whose layout the graph depends
        on: the inputs of views and as_strided, and the outputs (which AOT autograd may view
        again, and which a backward graph reads with the strides it was traced with); for a
        view, the value it views."""
        need: list = []
        for n in self.gm.graph.nodes:
            if n.op == "placeholder" and self.contiguous_io:
                meta = n.meta.get("val")
                if isinstance(meta, torch.Tensor) and all(
                    isinstance(x, int) for x in meta.stride()
                ):
                    if not meta.is_contiguous():
                        self.plan.expect_strides(self.env[n], list(meta.stride()))
            if n.op == "output" and not self.contiguous_io:
                outs = n.args[0]
                need.extend(outs if isinstance(outs, (list, tuple)) else (outs,))
            elif n.op == "call_function" and n.target in _LAYOUT_SENSITIVE:
                need.append(n.args[0])
        done = set()
        for src in need:
            if not isinstance(src, torch.fx.Node):
                continue
            # A view's layout follows its base's: the first node up its chain of views that
            # computes a value is the one to check. A chain that starts at an input or a
            # constant keeps that memory's own layout (bound as it is, no copy).
            while (
                src.op == "call_function"
                and _memory.is_view(src)
                and isinstance(src.args[0], torch.fx.Node)
            ):
                src = src.args[0]
            if src in done or src.op != "call_function":
                continue
            done.add(src)
            value = self.env.get(src)
            meta = src.meta.get("val")
            if not isinstance(value, int) or not isinstance(meta, torch.Tensor):
                continue
            strides = meta.stride()
            if all(isinstance(x, int) for x in strides):
                self.plan.expect_strides(value, list(strides))

    def _attr_const(self, n):
        # A tensor attribute is a constant of the plan, held as an Array (no copy when it
        # is contiguous).
        value = operator.attrgetter(n.target)(self.gm)
        v = self.plan.add_node("aten::alias", [_const(value)], 1, n.name)
        self.env[n] = v[0]


# Ops whose result depends on their input's strides, not only on its values.
_LAYOUT_SENSITIVE = {
    _aten.view.default,
    _aten._unsafe_view.default,
    _aten.view.dtype,
    _aten.as_strided.default,
    _aten.as_strided_scatter.default,
    _aten.view_as_real.default,
    _aten.view_as_complex.default,
    _aten._reshape_alias.default,
}

_PLAIN_TENSORS = (torch.Tensor, torch.nn.Parameter)


def _to_array(x):
    if type(x) in _PLAIN_TENSORS:
        # Zero-copy; no detach() needed (the plan never records autograd history), which
        # saves a tensor object per input and call.
        return _C.from_dlpack(x)
    if isinstance(x, torch.Tensor):
        from tensorbridge._tensor import Tensor

        if isinstance(x, Tensor):
            return x._array
        return _C.from_dlpack(x.detach())
    return x


def _to_torch(x):
    if isinstance(x, _C.Array):
        return torch.from_dlpack(x)
    return x


def _symbolic(gm: torch.fx.GraphModule) -> bool:
    """Whether the graph was traced with symbolic sizes (dynamo's automatic dynamic shapes,
    ``dynamic=True``, ``mark_dynamic``, an export with ``dynamic_shapes``)."""
    sym = (torch.SymInt, torch.SymFloat, torch.SymBool)
    for n in gm.graph.nodes:
        if n.op != "placeholder":
            continue
        v = n.meta.get("val", n.meta.get("example_value"))
        if isinstance(v, sym):
            return True
        if isinstance(v, torch.Tensor) and any(
            isinstance(s, torch.SymInt) for s in (*v.shape, *v.stride())
        ):
            return True
    return False


def _signature(args) -> tuple:
    """What a plan specialized to these call arguments depends on."""
    return tuple(
        (tuple(a.shape), a.stride(), a.dtype) if isinstance(a, torch.Tensor) else (type(a), a)
        for a in args
    )


def _specialize(gm: torch.fx.GraphModule, args) -> torch.fx.GraphModule:
    """The graph with the sizes of ``args``: it runs once on fake tensors of those shapes (no
    data read or written), every node that computes a size (or returns nothing, as size
    assertions do) is replaced by the value it took, and the tensor inputs remain.

    (Not a re-trace with make_fx: that sets a process-wide flag under which every other
    thread's compiled calls fail while the trace runs.)"""
    from torch._subclasses.fake_tensor import FakeTensorMode

    values: dict = {}

    class Record(torch.fx.Interpreter):
        def run_node(self, n):
            values[n] = out = super().run_node(n)
            return out

    # The graph's constants (get_attr tensors) are real: they are read as fake copies.
    with FakeTensorMode(allow_non_fake_inputs=True):
        fake_args = [
            torch.empty_strided(a.shape, a.stride(), dtype=a.dtype)
            if isinstance(a, torch.Tensor)
            else a
            for a in args
        ]
        Record(gm).run(*fake_args)
    graph = copy.deepcopy(gm.graph)
    node_of = dict(zip(gm.graph.nodes, graph.nodes, strict=True))
    sym = (torch.SymInt, torch.SymFloat, torch.SymBool)
    for old, n in node_of.items():
        v = values.get(old)
        if isinstance(v, torch.Tensor):
            n.meta["val"] = v  # the concrete sizes and strides (see _Builder._expect_strides)
        if n.op == "output" or isinstance(v, (torch.Tensor, list, tuple)):
            continue
        if isinstance(v, sym):
            raise NotImplementedError(
                f"tensorbridge plans take static shapes; node {n.name} computes a size that "
                f"depends on the data ({v})"
            )
        n.replace_all_uses_with(v)
        graph.erase_node(n)
    graph.lint()
    return torch.fx.GraphModule(gm, graph)


# Shape-specialized plans kept per symbolic graph; the least recently used is dropped beyond.
MAX_SHAPE_PLANS = 32


def compile_graph(
    gm: torch.fx.GraphModule,
    example_inputs=None,
    *,
    record=None,
    kind="forward",
    inference: bool = False,
):
    """Builds the plan of an ATen FX graph once and returns the function that runs it.
    ``record`` (a ``_Compilation``) collects the plan for ``explain``. ``inference``: no
    autograd graph reads the results, so weights the plan packs stay packed between calls
    while their version counters do not move (see ``tensorbridge._epilogue``).

    Plans take static shapes. A graph traced with symbolic sizes gets one plan per distinct
    set of input shapes and strides, built at the first call with them (the graph specialized
    to those sizes, see ``_specialize``), kept for the next (up to ``MAX_SHAPE_PLANS`` per
    graph)."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    # AOT autograd calls its compilers inside the fake mode it traced with; the graph's
    # constants (get_attr tensors: causal masks, rotary tables, 0-element tensors) are real
    # tensors, and the plan binds them as memory, so the plan is built outside that mode.
    with unset_fake_temporarily():
        if _symbolic(gm):
            return _shape_specializing(gm, record, kind, inference)
        return _compile_static(gm, record, kind, inference=inference)


def _shape_specializing(gm, record, kind, inference):
    runs: collections.OrderedDict = collections.OrderedDict()
    lock = threading.Lock()  # threads calling with a new shape at once build its plan once

    def build(args, key):
        with lock:
            r = runs.get(key)
            if r is not None:
                return r
            static = _specialize(gm, args)
            tensor_at = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
            r = runs[key] = (
                _compile_static(static, record, kind, specialized=key, inference=inference),
                tensor_at,
            )
            state.stats["shape_plans"] += 1
            if len(runs) > MAX_SHAPE_PLANS:
                _, (old, _) = runs.popitem(last=False)
                if record is not None:  # the plan and its buffers go with the last reference
                    record.plans.remove(old.entry)
                    record.evicted += 1
            return r

    def run(args):
        key = _signature(args)
        r = runs.get(key)
        if r is None:
            r = build(args, key)
        else:
            with lock:  # most recently used last
                if key in runs:
                    runs.move_to_end(key)
        fn, tensor_at = r
        tensors = [args[i] for i in tensor_at]
        args.clear()
        return fn(tensors)

    run._boxed_call = True  # type: ignore[attr-defined]
    run.plans = lambda: [fn.plan for fn, _ in runs.values()]  # type: ignore[attr-defined]
    return run


def _compile_static(gm, record, kind, specialized=None, inference=False):
    saved_from = None
    if kind == "backward":
        saved_from = getattr(record, "input_storages", set())
    builder = _Builder(gm, inference=inference, saved_from=saved_from)
    if kind == "forward" and record is not None:
        record.input_storages = _memory.input_storages(gm)
    plan = builder.build()
    state.add_plan(plan, kind)
    entry = {"kind": kind, "plan": plan}
    if builder.pointwise is not None:
        entry["groups"] = builder.pointwise.described
    if specialized is not None:
        entry["shapes"] = [list(k[0]) for k in specialized if isinstance(k[0], tuple)]
    if record is not None:
        record.plans.append(entry)
    # the plans of one compilation (forward and backward) run as one step
    _memory.plan_built([e["plan"] for e in record.plans] if record is not None else [plan])

    run_torch = plan.run_torch
    calls = entry["calls"] = [0]
    state.call_boxes.append(calls)

    def run(args):
        # Boxed calling convention: run_torch empties the list so inputs can be freed early.
        # Plain torch tensors go in and come out zero-copy in C++; other inputs through
        # _to_array.
        calls[0] += 1
        return run_torch(args, _to_array)

    if builder.packs:
        prepacked = _epilogue.Prepacked(*map(list, zip(*builder.packs, strict=True)))

        def run(args):  # the same, after the version check of the packed weights
            calls[0] += 1
            prepacked.check(args)
            return run_torch(args, _to_array)

        run.prepacked = prepacked  # type: ignore[attr-defined]

    run.plan = plan  # type: ignore[attr-defined]
    run.entry = entry  # type: ignore[attr-defined]
    run._boxed_call = True  # type: ignore[attr-defined]
    return run


# relu's backward is threshold_backward; decomposed, it is a le and a where over the whole
# activation (two passes, an extra buffer), so it stays whole where a kernel serves it. The CPU
# flash attention op decomposed is the full [L, S] score matrix; whole, it is the fused kernel.
_KEEP_WHOLE = (
    _aten.native_batch_norm_backward.default,
    _aten.threshold_backward.default,
    _aten._scaled_dot_product_flash_attention_for_cpu.default,
)

# Core decompositions that are wrong under autograd. The one of the CPU flash attention op
# (meant for export) returns the attention weights where the op returns its logsumexp, which
# the op's own backward (still taken from its derivative formula) then reads: the gradients
# of q, k and v come out wrong. Inductor excludes it for the same reason; a plan runs the op
# whole instead.
_NOT_UNDER_AUTOGRAD = ("aten::_scaled_dot_product_flash_attention_for_cpu",)


def _decompositions(autograd: bool = True) -> dict:
    from torch._decomp import core_aten_decompositions, decomposition_table

    table = dict(core_aten_decompositions())
    if autograd:
        for op in list(table):
            if hasattr(op, "name") and op.name() in _NOT_UNDER_AUTOGRAD:
                del table[op]
    composites = config.composites()
    legal = config.legal_ops
    for op in list(table):
        name = op.name() if hasattr(op, "name") else str(op)
        base = name.split(".")[0]
        if base in legal:
            del table[op]  # legal composites reach the plan whole
    # Ops the table serves with a kernel of their own stay whole although the core table
    # decomposes them.
    for op in _KEEP_WHOLE:
        name = op.name()
        if _C.has_kernel(name):
            table.pop(op, None)
    # Composites taken out of the legal set are decomposed in the graph itself.
    for op, fn in decomposition_table.items():
        base = op.name().split(".")[0]
        if base in composites and base not in legal:
            table[op] = fn
    return table


class _Compilation:
    """One backend call: the frame dynamo compiled, for which inputs, and the plans built."""

    def __init__(self, owner, code, inputs, recompilation):
        # the compiled module or function when dynamo saw it (held weakly), else None
        self._owner = weakref.ref(owner) if owner is not None else None
        self.code = code
        self.inputs = inputs
        self.recompilation = recompilation
        self.plans: list = []
        self.input_storages: set = set()  # of the forward graph (see _memory.input_storages)
        self.evicted = 0  # shape-specialized plans dropped (MAX_SHAPE_PLANS)

    @property
    def owner(self):
        return self._owner() if self._owner is not None else None


def _current_frame():
    """(owner, code) of the frame dynamo is compiling: ``torch.compile(module)`` runs the module
    through a shared wrapper frame whose local ``fn`` is the module itself."""
    try:
        from torch._dynamo import external_utils
        from torch._dynamo.symbolic_convert import InstructionTranslator

        tx = InstructionTranslator.current_tx()
        code = tx.f_code
    except Exception:  # not inside dynamo (a direct backend call)
        return None, None
    owner = None
    if code is external_utils.wrap_inline(len).__code__:
        owner = tx.f_locals.get("fn")
    return owner, code


def _describe_input(x) -> str:
    if isinstance(x, torch.Tensor):
        dt = str(x.dtype).replace("torch.", "")
        return f"{dt}{list(x.shape)}"
    return type(x).__name__


def backend(gm: torch.fx.GraphModule, example_inputs: list) -> Callable[..., Any]:
    """The ``torch.compile`` backend, registered as ``backend="tensorbridge"``: AOT autograd
    lowers each captured graph to ATen, and each ATen graph (forward, and backward when
    training) is built once into a C++ plan that later calls run with the GIL released."""
    from torch._dynamo.backends.common import aot_autograd

    key = tuple(str(n.target) for n in gm.graph.nodes)
    state.stats["compilations"] += 1
    if key not in state.graph_ids:
        state.graph_ids.add(key)
        state.stats["graphs"] += 1
    owner, code = _current_frame()
    frame_key = (id(owner) if owner is not None else None, code, key)
    record = _Compilation(
        owner, code, [_describe_input(x) for x in example_inputs], frame_key in state.frames_seen
    )
    state.frames_seen.add(frame_key)
    state.compilations.append(record)

    def fw(g, inputs):
        return compile_graph(g, inputs, record=record, kind="forward", inference=not needs_autograd)

    def bw(g, inputs):
        return compile_graph(g, inputs, record=record, kind="backward")

    # AOT autograd's own test: a training graph only when grad mode is on (dynamo guards on it)
    # and an input requires grad. Inference graphs may take every core decomposition.
    needs_autograd = torch.is_grad_enabled() and any(
        isinstance(x, torch.Tensor) and x.requires_grad for x in example_inputs
    )
    kw = {}
    if needs_autograd:
        from torch._functorch.partitioners import (
            default_partition,
            min_cut_rematerialization_partition,
        )

        base = min_cut_rematerialization_partition if config.recompute else default_partition
        kw["partition_fn"] = _joint.partition_fn(base, min_cut=config.recompute)
    decompositions = _decompositions(needs_autograd)
    fw, bw, scope = _compile_cache.compilers(record, fw, bw, decompositions, needs_autograd)
    with scope:
        compiled = aot_autograd(
            fw_compiler=fw, bw_compiler=bw, decompositions=decompositions, **kw
        )(gm, example_inputs)
    return _wrapped_tangents(compiled) if needs_autograd else compiled


class _WrapTangents(torch.autograd.Function):
    """Identity on a compiled graph's tensorbridge.Tensor outputs whose backward turns plain
    gradients into tensorbridge.Tensors (zero-copy). AOT autograd traced these outputs'
    tangents as tensorbridge.Tensors, but the autograd engine makes the zero gradient of an
    output that the loss does not use (a model's key/value cache beside its logits) as a
    plain tensor, which AOT autograd's backward refuses."""

    @staticmethod
    def forward(ctx, *outs):
        return tuple(o.view_as(o) for o in outs)

    @staticmethod
    def backward(ctx, *grads):
        from tensorbridge._tensor import Tensor

        return tuple(
            Tensor(_C.from_dlpack(g.detach())) if type(g) in _PLAIN_TENSORS else g for g in grads
        )


def _wrapped_tangents(compiled: Callable[..., Any]) -> Callable[..., Any]:
    """``compiled`` with _WrapTangents over its outputs when two or more of them are
    tensorbridge.Tensors that require grad (with one, the loss is that output)."""
    from tensorbridge._tensor import Tensor

    def run(*args):
        outs = compiled(*args)
        if not torch.is_grad_enabled() or not isinstance(outs, (list, tuple)):
            return outs
        at = [i for i, o in enumerate(outs) if isinstance(o, Tensor) and o.requires_grad]
        if len(at) < 2:
            return outs
        new = list(outs)
        for i, o in zip(at, _WrapTangents.apply(*(outs[i] for i in at)), strict=True):
            new[i] = o
        return type(outs)(new) if isinstance(outs, tuple) else new

    run._boxed_call = getattr(compiled, "_boxed_call", False)  # type: ignore[attr-defined]
    return run


def _codes_of(fn):
    """The original callable behind ``torch.compile(fn)`` and the code objects its frames run."""
    orig = getattr(fn, "_orig_mod", None) or getattr(fn, "_torchdynamo_orig_callable", None) or fn
    codes = set()
    if isinstance(orig, torch.nn.Module):
        for m in orig.modules():
            forward = getattr(type(m).forward, "__code__", None)
            if forward is not None:
                codes.add(forward)
    else:
        f = getattr(orig, "__func__", orig)
        if getattr(f, "__code__", None) is not None:
            codes.add(f.__code__)
    return orig, codes


def _belongs(record: _Compilation, orig, codes) -> bool:
    if record._owner is not None:
        owner = record.owner
        # Dynamo reuses one compiled frame for modules of the same class (parameters are
        # inputs), so a plan built for one instance serves the others too.
        return owner is orig or (
            isinstance(owner, torch.nn.Module)
            and isinstance(orig, torch.nn.Module)
            and type(owner) is type(orig)
        )
    c = record.code
    if c is None:
        return False
    # Graph breaks continue in resume functions dynamo names after the function they resume.
    return c in codes or any(
        c.co_filename == k.co_filename
        and c.co_name.startswith(f"torch_dynamo_resume_in_{k.co_name}_at_")
        for k in codes
    )


def _records_of(fn) -> list:
    orig, codes = _codes_of(fn)
    return [r for r in state.compilations if _belongs(r, orig, codes)]


def compiled_metrics(fn) -> dict:
    """The compile backend's counters for one ``torch.compile``'d module or function:
    ``compilations`` (frames dynamo handed the backend), ``recompilations`` (a frame compiled
    again: new shapes or failed guards), ``plans_built`` (``shape_plans`` of them for the
    concrete shapes of a graph traced with symbolic sizes) and ``plan_calls``."""
    records = _records_of(fn)
    return {
        "compilations": len(records),
        "recompilations": sum(r.recompilation for r in records),
        "plans_built": sum(len(r.plans) + r.evicted for r in records),
        "shape_plans": sum(sum("shapes" in p for p in r.plans) + r.evicted for r in records),
        "plan_calls": sum(p["calls"][0] for r in records for p in r.plans),
    }


_FALLBACK_LINE = re.compile(r" = ([\w:.]+)\(.*\)  \[fallback")


def explain_compiled(fn) -> str:
    """Every plan built for a ``torch.compile(..., backend="tensorbridge")`` module or function:
    its nodes with their kernels (composites, decompositions and fallbacks marked), fused
    nodes, slots and their reuse, and the counters of ``compiled_metrics``."""
    orig, _ = _codes_of(fn)
    what = (
        type(orig).__name__
        if isinstance(orig, torch.nn.Module)
        else getattr(orig, "__qualname__", repr(orig))
    )
    records = _records_of(fn)
    if not records:
        return (
            f"{what}: no tensorbridge plans built yet (call the torch.compile'd {what} "
            f"with backend='tensorbridge' first)"
        )
    m = compiled_metrics(fn)
    lines = [
        f"{what}: {m['compilations']} compilations ({m['recompilations']} recompilations), "
        f"{m['plans_built']} plans built, {m['plan_calls']} plan calls"
    ]
    for i, r in enumerate(records, 1):
        frame = r.code.co_name if r.code is not None else "?"
        if r.owner is not None:
            frame = (
                f"{type(r.owner).__name__}.forward"
                if isinstance(r.owner, torch.nn.Module)
                else getattr(r.owner, "__qualname__", frame)
            )
        again = " (recompilation)" if r.recompilation else ""
        lines.append(f"compilation {i}{again}: frame {frame}, inputs {', '.join(r.inputs)}")
        for e in r.plans:
            p = e["plan"]
            dump = p.dump()
            counts = {k: p.count(k) for k in ("kernel", "composite", "decomposition", "fallback")}
            fused = dump.count("= tensorbridge::")
            fallbacks = _FALLBACK_LINE.findall(dump)
            shapes = ""
            if "shapes" in e:
                shapes = " for input shapes " + ", ".join(str(x) for x in e["shapes"])
            lines.append(
                f"  {e['kind']} plan{shapes}, {e['calls'][0]} calls: {p.num_nodes} nodes ("
                + ", ".join(f"{v} {k}" for k, v in counts.items())
                + f"; {fused} fused); {p.num_values} values in {p.num_slots} slots "
                f"({p.num_values - p.num_slots} reuse a freed slot); {p.restrides} results "
                "copied into the graph's strides"
            )
            lines.append("  fallback nodes: " + (", ".join(fallbacks) if fallbacks else "none"))
            lines.append(f"  peak {p.peak_bytes} bytes of the plan's results alive at once")
            groups = e.get("groups", [])
            lines.append(f"  {len(groups)} fused pointwise groups")
            for node, ops, outs in groups:
                lines.append(f"    {node}: {ops} ({outs} outputs written)")
            lines.extend("    " + line for line in dump.rstrip().splitlines())
    return "\n".join(lines)


def explain(what: str | Callable) -> str:
    """``explain("aten::op")``: which path the next CPU call of the op takes and why.
    ``explain(compiled)`` for a ``torch.compile(..., backend="tensorbridge")`` module or
    function: every plan built for it (see ``explain_compiled``)."""
    if isinstance(what, str):
        return _C.explain(what)
    return explain_compiled(what)


install_fusion_alias(sys.modules[__name__])
