"""Pointwise fusion for compiled plans: chains of element-wise ATen nodes become one node.

``groups(gm)`` finds, in an ATen FX graph (forward or backward), groups of element-wise nodes
(add, mul, div, exp, tanh, gelu, where, comparisons, casts, the activations' backward ops, ...)
that compute tensors of one shape, with broadcasting, scalars and type promotion as ATen does;
bfloat16 and float16 values are computed in float32 (rounded only where the group writes them,
as inductor does, where ATen rounds after every op).
A group may also hold reductions over the last dimension with ``keepdim`` (``sum``, ``mean``,
``amax``) of a value of its shape, and element-wise nodes on their results (of the shape with
the last dimension 1), and ``expand`` of these back to its shape: a *row group*, whose fused
node runs one row at a time, so that an RMS norm (``pow``, ``mean``, ``add``, ``rsqrt``,
``mul``), its backward or a decomposed softmax runs as one node that reads its input once.
Each group runs as one ``tensorbridge::pointwise`` node: a small program evaluated block by
block over the output (kernels/fused_pointwise.cc), so that values read only inside the group
never reach memory. Values the rest of the graph reads (or the graph returns) are the group's
outputs and are written.

A group is built in graph order: a node joins the group of an operand while nothing outside
the group has read that group yet, so the fused node can run where its last member ran, after
every input of every member and before every reader of its outputs. An ``alias`` of a member
(how AOT autograd saves a value for the backward) does not count as a reader: it runs right
after the fused node, and its own readers count as readers of the member.
"""

from __future__ import annotations

import math
import sys

import torch

from tensorbridge import _memory
from tensorbridge._config import config, install_setting_alias

__all__ = ["Group", "groups"]

_aten = torch.ops.aten
_FLOATS = (torch.float32, torch.float64)
# 16-bit floats: computed in float32 inside a group (as ATen's kernels compute them), rounded
# where a group writes them.
_HALF = (torch.bfloat16, torch.float16)
_DTYPE_NAMES = {
    torch.float32: "float32",
    torch.float64: "float64",
    torch.bfloat16: "bfloat16",
    torch.float16: "float16",
    torch.bool: "bool",
}

_UNARY = {
    _aten.neg.default: "neg",
    _aten.exp.default: "exp",
    _aten.log.default: "log",
    _aten.tanh.default: "tanh",
    _aten.sigmoid.default: "sigmoid",
    _aten.relu.default: "relu",
    _aten.silu.default: "silu",
    _aten.sqrt.default: "sqrt",
    _aten.rsqrt.default: "rsqrt",
    _aten.abs.default: "abs",
    _aten.reciprocal.default: "reciprocal",
    _aten.erf.default: "erf",
    _aten.sin.default: "sin",
    _aten.cos.default: "cos",
    _aten.log1p.default: "log1p",
    _aten.expm1.default: "expm1",
    _aten.clone.default: "copy",
    _aten._to_copy.default: "copy",
}
_BINARY = {
    _aten.mul.Tensor: "mul",
    _aten.mul.Scalar: "mul",
    _aten.div.Tensor: "div",
    _aten.div.Scalar: "div",
    _aten.maximum.default: "max",
    _aten.minimum.default: "min",
    _aten.pow.Tensor_Tensor: "pow",
    _aten.sigmoid_backward.default: "sigmoid_bw",
    _aten.tanh_backward.default: "tanh_bw",
    _aten.silu_backward.default: "silu_bw",
}
_COMPARE = {
    _aten.gt.Tensor: "gt",
    _aten.gt.Scalar: "gt",
    _aten.lt.Tensor: "lt",
    _aten.lt.Scalar: "lt",
    _aten.ge.Tensor: "ge",
    _aten.ge.Scalar: "ge",
    _aten.le.Tensor: "le",
    _aten.le.Scalar: "le",
    _aten.eq.Tensor: "eq",
    _aten.eq.Scalar: "eq",
    _aten.ne.Tensor: "ne",
    _aten.ne.Scalar: "ne",
}
_LOGICAL = {
    _aten.logical_not.default: "not",
    _aten.bitwise_not.default: "not",
    _aten.logical_and.default: "and",
    _aten.bitwise_and.Tensor: "and",
    _aten.logical_or.default: "or",
    _aten.bitwise_or.Tensor: "or",
}
_ADD_SUB = {
    _aten.add.Tensor: "add",
    _aten.add.Scalar: "add",
    _aten.sub.Tensor: "sub",
    _aten.sub.Scalar: "sub",
}
_OTHER = {
    _aten.rsub.Scalar,
    _aten.rsub.Tensor,
    _aten.pow.Tensor_Scalar,
    _aten.gelu.default,
    _aten.gelu_backward.default,
    _aten.threshold_backward.default,
    _aten.where.self,
    _aten.clamp.default,
    _aten.hardtanh.default,
    _aten.clamp_min.default,
    _aten.clamp_max.default,
    _aten.masked_fill.Scalar,
}
# Ops whose fused float32 loop beats their own kernel: a group of one of them alone is kept.
_ALONE = {
    _aten.gelu.default,
    _aten.gelu_backward.default,
    _aten.silu_backward.default,
    _aten.sigmoid.default,
    _aten.tanh.default,
}
# Copies and casts: a lone one is left to the plan builder, which may fold it elsewhere.
_CASTS = {_aten.clone.default, _aten._to_copy.default}
# Reductions over the last dimension (keepdim): the row groups' reductions.
_REDUCE = {_aten.sum.dim_IntList: "sum", _aten.mean.dim: "mean", _aten.amax.default: "amax"}
_TARGETS = {*_UNARY, *_BINARY, *_COMPARE, *_LOGICAL, *_ADD_SUB, *_OTHER, *_REDUCE}
# Rows a row group reduces: at least _MIN_ROW elements (shorter rows run faster unfused, one
# block per row being too small a block), at most _MAX_ROW (a block is a whole row).
_MIN_ROW = 16
_MAX_ROW = 16384


def _schema(n: torch.fx.Node):
    return n.target._schema  # type: ignore[union-attr]  # an OpOverload (checked by _compute)


def _meta(x):
    return x.meta.get("val") if isinstance(x, torch.fx.Node) else None


def _static(t) -> bool:
    return isinstance(t, torch.Tensor) and all(isinstance(s, int) for s in (*t.shape, *t.stride()))


def _args(n: torch.fx.Node) -> list:
    """The node's arguments in schema order, defaults filled in."""
    out = []
    for i, a in enumerate(_schema(n).arguments):
        if i < len(n.args) and not a.kwarg_only:
            out.append(n.args[i])
        elif a.name in n.kwargs:
            out.append(n.kwargs[a.name])
        elif a.has_default_value():
            out.append(a.default_value)
        else:
            out.append(None)
    return out


def _compute(n: torch.fx.Node):
    """The dtype node ``n`` computes in inside a group (float32 / float64), ``"any"`` for a
    node on bools only, or None when the node cannot be fused."""
    if n.op != "call_function" or n.target not in _TARGETS:
        return None
    val = _meta(n)
    if not _static(val) or not val.is_contiguous() or val.dtype not in _DTYPE_NAMES:
        return None
    if n.target in _REDUCE:
        return _reduce_compute(n, val)
    args = _args(n)
    tensors = [_meta(a) for a in args if isinstance(a, torch.fx.Node)]
    if any(not _static(t) for t in tensors):
        return None
    if any(t.dtype.is_complex for t in tensors):
        return None
    for a in args:
        if isinstance(a, (list, tuple, str)) and n.target not in (
            _aten.gelu.default,
            _aten.gelu_backward.default,
        ):
            return None
        if isinstance(a, complex):
            return None
    if n.target is _aten._to_copy.default:
        kw = n.kwargs
        if any(kw.get(k) not in (None, False) for k in ("layout", "pin_memory", "non_blocking")):
            return None
        if kw.get("device") not in (None, torch.device("cpu")):
            return None
        if kw.get("memory_format") not in (None, torch.contiguous_format, torch.preserve_format):
            return None
    if n.target is _aten.clone.default:
        if n.kwargs.get("memory_format") not in (
            None,
            torch.contiguous_format,
            torch.preserve_format,
        ):
            return None
    if n.target in (_aten.gelu.default, _aten.gelu_backward.default):
        if args[-1] not in ("none", "tanh"):
            return None
    if val.dtype in _FLOATS or val.dtype in _HALF:
        if n.target in _LOGICAL or n.target in _COMPARE:
            return None
        if n.target is _aten.where.self and tensors[0].dtype != torch.bool:
            return None
        if n.target is _aten.masked_fill.Scalar and tensors[1].dtype != torch.bool:
            return None
        return torch.float32 if val.dtype in _HALF else val.dtype
    # A bool result: comparisons of floats of one type, or logic on bools.
    if n.target in _LOGICAL:
        return "any" if all(t.dtype == torch.bool for t in tensors) else None
    if n.target in _COMPARE:
        dts = {t.dtype for t in tensors}
        if len(dts) == 1 and next(iter(dts)) in _FLOATS:
            return next(iter(dts))
        if len(dts) == 1 and next(iter(dts)) in _HALF:
            return torch.float32
    return None


def _col_sum(n: torch.fx.Node) -> bool:
    """Whether ``n`` sums a float tensor over every dimension but the last, with keepdim and
    no dtype (a norm's weight or a bias gradient): a group's column-sum output."""
    if n.op != "call_function" or n.target is not _aten.sum.dim_IntList:
        return False
    args = _args(n)
    x, val = _meta(args[0]), _meta(n)
    if not _static(x) or not _static(val) or x.dtype != val.dtype or x.dtype not in _FLOATS:
        return False
    dims = args[1]
    if not isinstance(dims, (list, tuple)) or x.dim() < 2:
        return False
    wanted = set(range(x.dim() - 1))
    got = {d % x.dim() for d in dims if isinstance(d, int)}
    return len(dims) == len(wanted) and got == wanted and args[2] is True and args[3] is None


def _reduce_compute(n: torch.fx.Node, val: torch.Tensor):
    """The compute dtype of a reduction a group can hold: over the last dimension of a
    float tensor of the result's dtype, with keepdim, of a row of _MIN_ROW to _MAX_ROW (a row
    group's), or over every other dimension (``_col_sum``)."""
    if _col_sum(n):
        return val.dtype
    args = _args(n)
    x = _meta(args[0])
    if not _static(x) or x.dtype != val.dtype or val.dtype not in _FLOATS or x.dim() == 0:
        return None
    dims = args[1]
    dims = [dims] if isinstance(dims, int) else dims
    if not isinstance(dims, (list, tuple)) or len(dims) != 1 or dims[0] % x.dim() != x.dim() - 1:
        return None
    if args[2] is not True or (len(args) > 3 and args[3] is not None):  # keepdim; no dtype
        return None
    if not _MIN_ROW <= x.shape[-1] <= _MAX_ROW:
        return None
    return val.dtype


def _row(shape: tuple) -> tuple:
    """The shape of a row reduction's result over ``shape``."""
    return (*shape[:-1], 1)


def _row_expand(n: torch.fx.Node, group_of: dict):
    """The row group an ``expand`` of one of its per-row values to the group's shape joins
    (a copy inside the group, whose registers hold a per-row value in every element of its
    row), or None."""
    if n.op != "call_function" or n.target is not _aten.expand.default:
        return None
    src = n.args[0]
    g = group_of.get(src)
    if g is None or g.closed or not g.row or g.compute == "any":
        return None
    val, x = _meta(n), _meta(src)
    if not _static(val) or not _static(x) or val.dtype != x.dtype:
        return None
    if tuple(val.shape) != g.shape or tuple(x.shape) != _row(g.shape):
        return None
    return g


class Group:
    """Element-wise nodes of one output shape fused into one plan node; a row group (``row``)
    also holds reductions over the last dimension and nodes of the reduced shape."""

    def __init__(self, shape, compute, row=False):
        self.members: list[torch.fx.Node] = []
        self.shape = shape
        self.row = row
        self.compute = compute
        self.closed = False  # a node outside the group has read one of its members
        self.outputs: list[torch.fx.Node] = []
        self.inputs: list = []  # fx nodes read from outside, in register order
        self.aliases: list[torch.fx.Node] = []  # aliases of members, run after the group
        # expands of members that nodes outside the group read too: run after the group
        self.after: list[torch.fx.Node] = []
        # the member where the fused node runs: the last, or for merged siblings the first
        # after every input (see _merge_siblings)
        self.trigger: torch.fx.Node | None = None

    def describe(self) -> str:
        return ", ".join(_op_name(m) for m in self.members)


def _op_name(n: torch.fx.Node) -> str:
    s = _schema(n)
    return s.name + (f".{s.overload_name}" if s.overload_name else "")


def groups(gm: torch.fx.GraphModule, skip: frozenset | set = frozenset()) -> list[Group]:
    """The pointwise groups of ``gm`` with two or more members (or one of the ``_ALONE`` ops
    computing in float32), outputs and inputs found;
    the nodes in ``skip`` (run inside another pass's fused node) join no group."""
    group_of: dict = {}
    alias_of: dict = {}  # an alias node of a member -> the member
    col_sums: set = set()  # members that are column sums (see _col_sum)
    all_groups: list[Group] = []
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    for n in gm.graph.nodes:
        compute = _compute(n) if config.pointwise_fusion and n not in skip else None
        joined = None
        if compute is not None:
            shape = tuple(_meta(n).shape)
            col_sum = _col_sum(n)
            reduce = n.target in _REDUCE and not col_sum
            full = tuple(_meta(n.args[0]).shape) if n.target in _REDUCE else shape
            # A column sum is only written: nothing in its group reads it.
            barred = {group_of.get(a) for a in n.all_input_nodes if a in col_sums}
            cands = []
            for a in n.all_input_nodes:
                g = group_of.get(a)
                if g is None or g.closed or g in cands or g in barred:
                    continue
                if col_sum and (g.shape != full or a not in g.members):
                    continue
                # A reduction joins the group of its input; a node of a row group's reduced
                # shape joins that row group.
                fits = g.shape == full and (g.row or reduce or col_sum or g.shape == shape)
                fits = fits or (not reduce and g.row and _row(g.shape) == shape)
                if fits and (compute == "any" or g.compute == "any" or g.compute == compute):
                    cands.append(g)
            # The groups joined must agree on their compute type and full shape too; a plain
            # group of the reduced shape goes into a row group.
            kinds = {g.compute for g in cands} - {"any"}
            if len(kinds) > 1:
                cands = [cands[0]]
            if cands:
                top = max(cands, key=lambda g: (g.row, g.shape != shape))
                cands = [top] + [
                    g
                    for g in cands
                    if g is not top
                    and (
                        g.shape == top.shape
                        or (top.row and not g.row and g.shape == _row(top.shape))
                    )
                ]
            if cands:
                joined = cands[0]
                joined.row = joined.row or reduce
                for g in cands[1:]:
                    for m in g.members:
                        group_of[m] = joined
                    joined.members.extend(g.members)
                    if joined.compute == "any":
                        joined.compute = g.compute
                    g.members = []
                joined.members.sort(key=order.__getitem__)
            else:
                joined = Group(full, compute, row=reduce)
                all_groups.append(joined)
            if joined.compute == "any":
                joined.compute = compute
            joined.members.append(n)
            group_of[n] = joined
            if col_sum:
                col_sums.add(n)
        if joined is None and n.target is _aten.alias.default and n.args[0] in group_of:
            alias_of[n] = n.args[0]
            continue
        if joined is None and n not in skip and config.pointwise_fusion:
            joined = _row_expand(n, group_of)
            if joined is not None:
                joined.members.append(n)
                group_of[n] = joined
        for a in n.all_input_nodes:
            g = group_of.get(alias_of.get(a, a))
            if g is not None and g is not joined:
                g.closed = True
    for n, m in alias_of.items():
        group_of[m].aliases.append(n)
    _merge_siblings([g for g in all_groups if g.members], order, alias_of)
    out = []
    for g in all_groups:
        alone = len(g.members) == 1 and g.members[0].target in _ALONE
        if len(g.members) < 2 and not (alone and g.compute == torch.float32):
            continue
        if g.compute == "any":  # bool logic only: nothing to gain, and no float type to pick
            continue
        inside = set(g.members)
        outputs: dict = {}
        for m in g.members:
            if any(u not in inside for u in m.users):
                if m.target is _aten.expand.default:
                    # read outside too: the group writes the row value, the expand runs after
                    outputs[m.args[0]] = None
                    g.after.append(m)
                else:
                    outputs[m] = None
        g.outputs = list(outputs)
        seen = set()
        for m in g.members:
            for a in m.all_input_nodes:
                a = _source(a)
                if a not in inside and a not in seen:
                    seen.add(a)
                    g.inputs.append(a)
        out.append(g)
    return out


def _source(x):
    """What a group reads for operand ``x``: the graph input itself for an ``alias`` of one (how
    AOT autograd hands a backward its saved values, right before their first reader), so that
    a group need not wait for the alias."""
    src = x
    while (
        isinstance(src, torch.fx.Node)
        and src.op == "call_function"
        and src.target is _aten.alias.default
        and isinstance(src.args[0], torch.fx.Node)
    ):
        src = src.args[0]
    return src if isinstance(src, torch.fx.Node) and src.op == "placeholder" else x


def _merge_siblings(groups: list, order: dict, alias_of: dict) -> None:
    """Merges groups of one shape and compute type that read a common input and not each other
    (a norm's backward and its weight gradient's column sum) into one, run at its first member
    after every input of both (``Group.trigger``), where nothing outside either group has read
    them yet."""

    def readers(g) -> set:  # outside nodes reading members (through aliases: their readers)
        inside, out = set(g.members), set[torch.fx.Node]()
        for m in g.members:
            for u in m.users:
                if u not in inside:
                    out.update(u.users if u in alias_of else (u,))
        return out

    def inputs(g) -> set:
        inside = set(g.members)
        return {_source(a) for m in g.members for a in m.all_input_nodes if a not in inside}

    def kept(g) -> bool:  # a group fused on its own (a lone cast is left to the builder)
        return len(g.members) > 1 or (len(g.members) == 1 and g.members[0].target in _ALONE)

    def joins(g) -> bool:  # a lone op joins a kept sibling (one pass over the shared input)
        return len(g.members) == 1 and g.members[0].target not in _CASTS

    for i, a in enumerate(groups):
        for b in groups[i + 1 :]:
            if not (kept(a) or joins(a)) or not (kept(b) or joins(b)) or a.shape != b.shape:
                continue
            if not kept(a) and not kept(b):
                continue
            if a.compute != b.compute or a.compute == "any":
                continue
            ins_a, ins_b = inputs(a), inputs(b)
            read_a, read_b = readers(a), readers(b)
            if not ins_a & ins_b or read_a & set(b.members) or read_b & set(a.members):
                continue
            members = sorted(a.members + b.members, key=order.__getitem__)
            ready = max(order[x] for x in ins_a | ins_b)
            trigger = next((m for m in members if order[m] >= ready), None)
            first = min((order[r] for r in read_a | read_b), default=len(order))
            if trigger is None or first <= order[trigger]:
                continue
            b.members, b.trigger = members, trigger
            b.aliases += a.aliases
            b.row = a.row or b.row
            a.members, a.aliases = [], []
            break


def _const(v) -> str:
    if isinstance(v, bool):
        v = float(v)
    v = float(v)
    if math.isnan(v):
        return "knan"
    if math.isinf(v):
        return "kinf" if v > 0 else "k-inf"
    return "k" + repr(v)


def program(g: Group) -> str:
    """The group's program for ``tensorbridge::pointwise`` (see kernels/fused_pointwise.cc)."""
    reg: dict = {a: f"r{i}" for i, a in enumerate(g.inputs)}
    n_in = len(g.inputs)
    last_use: dict = {}
    for i, m in enumerate(g.members):
        for a in m.all_input_nodes:
            last_use[a] = i
    keep = set(g.outputs)
    free: list[int] = []
    next_reg = [n_in]

    def new() -> str:
        if free:
            return f"r{free.pop()}"
        next_reg[0] += 1
        return f"r{next_reg[0] - 1}"

    def opnd(x) -> str:
        if isinstance(x, torch.fx.Node):
            return reg[x] if x in reg else reg[_source(x)]
        return _const(x)

    lines = ["T f32" if g.compute == torch.float32 else "T f64"]
    for i, m in enumerate(g.members):
        code: list = []
        d = new()
        _lower(m, _args(m), opnd, d, new, code)
        lines.extend(code)
        reg[m] = d
        # Registers of members read for the last time here go back (never an output's).
        for a in set(m.all_input_nodes):
            if last_use.get(a) == i and a in g.members and a not in keep:
                free.append(int(reg[a][1:]))
    for o in g.outputs:
        # A value of a row group's reduced shape is written once per row; a column sum once.
        kind = "P" if g.row and tuple(_meta(o).shape) != g.shape else "O"
        kind = "S" if _col_sum(o) and o in g.members else kind
        lines.append(f"{kind} {reg[o]} {_DTYPE_NAMES[_meta(o).dtype]}")
    return ";".join(lines)


def _scaled(x: str, alpha, new, code: list) -> str:
    """Operand ``x`` times ``alpha`` (add / sub / rsub's alpha): ``x`` itself when alpha is 1,
    else a new register holding the product."""
    if alpha == 1:
        return x
    tmp = new()
    code.append(f"mul {tmp} {x} {_const(alpha)}")
    return tmp


def _lower(m: torch.fx.Node, args: list, opnd, d: str, new, code: list) -> None:
    t = m.target
    if t is _aten.expand.default or _col_sum(m):  # a row value's expand; a column sum's value
        code.append(f"copy {d} {opnd(args[0])}")
    elif t in _REDUCE:
        if _REDUCE[t] == "mean":
            tmp = new()
            code.append(f"rsum {tmp} {opnd(args[0])}")
            code.append(f"div {d} {tmp} {_const(_meta(args[0]).shape[-1])}")
        else:
            op = "rmax" if _REDUCE[t] == "amax" else "rsum"
            code.append(f"{op} {d} {opnd(args[0])}")
    elif t in _UNARY:
        code.append(f"{_UNARY[t]} {d} {opnd(args[0])}")
    elif t in _BINARY:
        code.append(f"{_BINARY[t]} {d} {opnd(args[0])} {opnd(args[1])}")
    elif t in _COMPARE:
        code.append(f"{_COMPARE[t]} {d} {opnd(args[0])} {opnd(args[1])}")
    elif t in _LOGICAL:
        operands = " ".join(opnd(a) for a in args[: 1 if _LOGICAL[t] == "not" else 2])
        code.append(f"{_LOGICAL[t]} {d} {operands}")
    elif t in _ADD_SUB:
        b = _scaled(opnd(args[1]), args[2], new, code)
        code.append(f"{_ADD_SUB[t]} {d} {opnd(args[0])} {b}")
    elif t in (_aten.rsub.Scalar, _aten.rsub.Tensor):
        x = _scaled(opnd(args[0]), args[2], new, code)
        code.append(f"sub {d} {opnd(args[1])} {x}")
    elif t is _aten.pow.Tensor_Scalar:
        x, e = opnd(args[0]), args[1]
        if e == 2:
            code.append(f"mul {d} {x} {x}")
        elif e == 3:
            tmp = new()
            code.append(f"mul {tmp} {x} {x}")
            code.append(f"mul {d} {tmp} {x}")
        elif e == 1:
            code.append(f"copy {d} {x}")
        elif e == 0.5:
            code.append(f"sqrt {d} {x}")
        elif e == -1:
            code.append(f"reciprocal {d} {x}")
        elif e == -0.5:
            code.append(f"rsqrt {d} {x}")
        else:
            code.append(f"pow {d} {x} {_const(e)}")
    elif t is _aten.gelu.default:
        op = "gelu_tanh" if args[1] == "tanh" else "gelu"
        code.append(f"{op} {d} {opnd(args[0])}")
    elif t is _aten.gelu_backward.default:
        op = "gelu_tanh_bw" if args[2] == "tanh" else "gelu_bw"
        code.append(f"{op} {d} {opnd(args[0])} {opnd(args[1])}")
    elif t is _aten.threshold_backward.default:
        code.append(f"threshold_bw {d} {opnd(args[0])} {opnd(args[1])} {_const(args[2])}")
    elif t is _aten.where.self:
        code.append(f"where {d} {opnd(args[0])} {opnd(args[1])} {opnd(args[2])}")
    elif t is _aten.masked_fill.Scalar:
        code.append(f"where {d} {opnd(args[1])} {_const(args[2])} {opnd(args[0])}")
    elif t is _aten.clamp.default or t is _aten.hardtanh.default:
        lo = -math.inf if args[1] is None else args[1]
        hi = math.inf if args[2] is None else args[2]
        code.append(f"clamp {d} {opnd(args[0])} {_const(lo)} {_const(hi)}")
    elif t is _aten.clamp_min.default:
        code.append(f"clamp {d} {opnd(args[0])} {_const(args[1])} kinf")
    elif t is _aten.clamp_max.default:
        code.append(f"clamp {d} {opnd(args[0])} k-inf {_const(args[1])}")
    else:  # pragma: no cover - _TARGETS and this function list the same ops
        raise NotImplementedError(f"tensorbridge pointwise fusion: no lowering for {t}")


class Emitter:
    """Puts the groups of a graph into a plan being built by ``_compile._Builder``: nodes of a
    group are skipped until its last member, where the fused node is added."""

    def __init__(self, gm: torch.fx.GraphModule, skip: set):
        self.groups = groups(gm, skip)
        self.last = {g.trigger or g.members[-1]: g for g in self.groups}
        self.member = {m: g for g in self.groups for m in g.members}
        self.waiting = {a for g in self.groups for a in g.aliases}  # aliases not yet emitted
        self.described: list[tuple[str, str, int]] = []  # (plan node, ops, outputs)

    def handles(self, n: torch.fx.Node) -> bool:
        """Whether ``n`` runs in (or, an alias of a member, right after) a fused node."""
        return n in self.member or n in self.waiting

    def emit(self, builder, n: torch.fx.Node) -> None:
        g = self.last.get(n)
        if g is None:
            return  # an earlier member: the fused node runs at the group's last member
        ins = [builder.arg(a) for a in g.inputs]
        name = "fused_" + "_".join(_short(m) for m in g.members[:4])
        if len(g.members) > 4:
            name += f"_and{len(g.members) - 4}"
        name += f"_{g.members[-1].name}"
        (v,) = builder.plan.add_node(
            "tensorbridge::pointwise",
            [("list", ins), ("const", list(g.shape)), ("const", program(g))],
            1,
            name,
        )
        _memory.set_bytes(builder.plan, v, _memory.nbytes([_meta(o) for o in g.outputs]))
        for k, o in enumerate(g.outputs):
            builder.env[o] = (v, k)
        self.described.append((name, g.describe(), len(g.outputs)))
        for a in g.aliases:
            self.waiting.discard(a)
            builder.node(a)
        for e in g.after:  # an expand read outside the group, of the row value it wrote
            del self.member[e]
            builder.node(e)


def _short(n: torch.fx.Node) -> str:
    return _schema(n).name.split("::")[-1].lstrip("_")


install_setting_alias(sys.modules[__name__], "pointwise", "pointwise_fusion")
