"""``torch.compile(model, backend="tensorbridge")``: captured graphs built once into C++ plans.

Dynamo captures and guards the Python code; AOT autograd lowers each graph to ATen (forward,
and backward for training) with PyTorch's core decomposition table minus the backend-legal
composites, so gelu, silu, softmax, layer_norm and their backward ops stay single nodes. Each
ATen graph becomes one ``_C.Plan``, built once when the graph is compiled: every call binds
the inputs zero-copy through DLPack and runs the plan in C++ with the GIL released.
"""

from __future__ import annotations

import collections
import operator

import torch

from tensorbridge import _C
from tensorbridge._config import config

__all__ = ["backend", "compile_graph", "load_exported", "plan_metrics"]

_stats = collections.Counter()
_plans: list = []


def plan_metrics() -> dict:
    """Counters of the compile backend: ``graphs`` captured by dynamo (distinct), ``compilations``
    (backend calls: a graph captured again for new shapes or failed guards counts as a
    ``recompilation``), ``plans_built`` (forward and backward plans) and ``plan_calls``."""
    return {"graphs": _stats["graphs"], "compilations": _stats["compilations"],
            "recompilations": _stats["compilations"] - _stats["graphs"],
            "plans_built": _stats["plans_built"], "plan_calls": _stats["plan_calls"]}


def reset_plan_metrics() -> None:
    _stats.clear()
    _graph_ids.clear()


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


class _Builder:
    def __init__(self, gm: torch.fx.GraphModule):
        self.gm = gm
        self.plan = _C.Plan()
        self.env: dict = {}

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
        if target is operator.getitem:
            src, index = n.args
            v = self.env[src]
            self.env[n] = v[index] if isinstance(v, list) else (v, index)
            return
        if not isinstance(target, torch._ops.OpOverload):
            raise NotImplementedError(f"tensorbridge plans run ATen ops; node {n.name} calls {target}")
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
        # One value (a Tensor, or a Tensor[] that getitem indexes), or one value per result.
        self.env[n] = outs[0] if len(outs) == 1 else outs

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
                self.plan.set_outputs([self.arg(o) if o is not None else ("const", None) for o in outs])
            else:
                raise NotImplementedError(f"tensorbridge plans: unsupported node kind {n.op}")
        self.plan.finalize()
        return self.plan

    def _attr_const(self, n):
        # A tensor attribute is a constant of the plan, held as an Array (no copy when it
        # is contiguous).
        value = operator.attrgetter(n.target)(self.gm)
        v = self.plan.add_node("aten::alias", [_const(value)], 1, n.name)
        self.env[n] = v[0]


def _to_array(x):
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


def compile_graph(gm: torch.fx.GraphModule, example_inputs=None):
    """Builds the plan of an ATen FX graph once and returns the function that runs it."""
    plan = _Builder(gm).build()
    _stats["plans_built"] += 1
    _plans.append(plan)

    def run(args):
        # Boxed calling convention: the list is cleared so inputs can be freed early.
        _stats["plan_calls"] += 1
        inputs = [_to_array(a) for a in args]
        args.clear()
        return [_to_torch(o) for o in plan.run(inputs)]

    run.plan = plan
    run._boxed_call = True
    return run


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
    # Composites taken out of the legal set are decomposed in the graph itself.
    for op, fn in decomposition_table.items():
        base = op.name().split(".")[0]
        if base in composites and base not in legal:
            table[op] = fn
    return table


_graph_ids = set()


def backend(gm: torch.fx.GraphModule, example_inputs):
    """The torch.compile backend: AOT autograd to ATen, then one plan per graph."""
    from torch._dynamo.backends.common import aot_autograd

    key = tuple(str(n.target) for n in gm.graph.nodes)
    _stats["compilations"] += 1
    if key not in _graph_ids:
        _graph_ids.add(key)
        _stats["graphs"] += 1
    return aot_autograd(
        fw_compiler=compile_graph, bw_compiler=compile_graph, decompositions=_decompositions()
    )(gm, example_inputs)


def load_exported(ep: torch.export.ExportedProgram):
    """A callable that runs a ``torch.export`` program on a tensorbridge plan (built once).

    Parameters, buffers and constants are bound from the program's state; buffers the program
    mutates (batch-norm statistics) are written back after each call."""
    from torch.export.graph_signature import InputKind, OutputKind

    ep = ep.run_decompositions(_decompositions(autograd=False))
    run = compile_graph(ep.graph_module)
    sig = ep.graph_signature
    state = {**ep.state_dict, **ep.constants}
    n_user = sum(1 for s in sig.input_specs if s.kind == InputKind.USER_INPUT)

    def call(*args):
        if len(args) != n_user:
            raise TypeError(f"the exported program takes {n_user} inputs, got {len(args)}")
        it = iter(args)
        flat = [next(it) if s.kind == InputKind.USER_INPUT else state[s.target] for s in sig.input_specs]
        outs = run(flat)
        user = []
        for spec, out in zip(sig.output_specs, outs):
            if spec.kind == OutputKind.BUFFER_MUTATION:
                state[spec.target].copy_(out)
            elif spec.kind == OutputKind.USER_OUTPUT:
                user.append(out)
        return user[0] if len(user) == 1 else tuple(user)

    call.plan = run.plan
    return call
