"""The epilogue pass of the compile backend: a matrix product or a convolution and the chain of
elementwise nodes that only it reads become one fused node.

From a producer (``mm``, ``addmm``, ``bmm``, ``convolution``) the pass follows the single reader
of each result while it is

- a reshape (``view``, ``_unsafe_view``, ``reshape``) or a ``clone`` (the fused result is fresh
  and contiguous; the chain's last node gives the shape);
- an activation: ``relu`` (which ends the chain), ``gelu`` (erf or tanh), ``silu``, ``sigmoid``,
  ``tanh``;
- an ``add`` (alpha 1) of a tensor of the same shape (the residual, once), or of a vector over the
  last dimension right after an ``mm`` (its bias);
- a ``_to_copy`` that only changes the dtype (matrix products; float32 and bfloat16).

The matrix products become ``tensorbridge::matmul_epilogue`` (one oneDNN matmul with the bias,
eltwise and binary-add post-ops; see ``kernels/epilogue.cc``), the convolutions
``tensorbridge::convolution_epilogue``. The weight of a linear layer is taken before its
transpose and its autocast ``_to_copy``, and a bias before its ``_to_copy``, so the cast runs in
the kernel. In inference plans such a weight that is a plan input is packed once into the
layout oneDNN prefers (cast included) and kept while its memory and version counter stay the
same: ``Prepacked`` checks ``_version`` of those inputs on every call and drops the packs of
the plan when one moved (an in-place update of the weight).
"""

from __future__ import annotations

import itertools
import operator
import sys
import threading
from typing import Any

import torch

from tensorbridge import _joint
from tensorbridge._config import config, install_setting_alias

_aten = torch.ops.aten

_RESHAPES = {_aten.view.default, _aten._unsafe_view.default, _aten.reshape.default}
_ACTIVATIONS = {
    _aten.relu.default: "relu",
    _aten.silu.default: "silu",
    _aten.sigmoid.default: "sigmoid",
    _aten.tanh.default: "tanh",
}
_DTYPES = (torch.float32, torch.bfloat16)  # oneDNN's; what a folded _to_copy may cast to
_FLOATS = (torch.float32, torch.bfloat16, torch.float16, torch.float64)
_MATMULS = {_aten.mm.default, _aten.addmm.default, _aten.bmm.default}

_pack_ids = itertools.count()


def _val(n):
    v = n.meta.get("val") if isinstance(n, torch.fx.Node) else None
    return v if isinstance(v, torch.Tensor) else None


def _only_user(n: torch.fx.Node):
    users = list(n.users)
    return users[0] if len(users) == 1 else None


def _kw(n: torch.fx.Node, i: int, name: str, default) -> Any:
    if len(n.args) > i:
        return n.args[i]
    return n.kwargs.get(name, default)


def _activation(n: torch.fx.Node):
    if n.target == _aten.gelu.default:
        return "gelu_tanh" if _kw(n, 1, "approximate", "none") == "tanh" else "gelu"
    return _ACTIVATIONS.get(n.target)  # type: ignore[call-overload]


def _dtype_cast(n: torch.fx.Node):
    """The dtype a ``_to_copy`` node casts to, when that is all it does."""
    if n.target != _aten._to_copy.default or len(n.args) != 1:
        return None
    kw = dict(n.kwargs)
    dtype = kw.pop("dtype", None)
    if kw.pop("layout", None) not in (None, torch.strided):
        return None
    if kw.pop("device", None) not in (None, torch.device("cpu")):
        return None
    if kw.pop("memory_format", None) not in (None, torch.preserve_format, torch.contiguous_format):
        return None
    if kw.pop("non_blocking", False) or kw.pop("pin_memory", None) or kw:
        return None
    return dtype if dtype in _DTYPES else None


def _plain_clone(n: torch.fx.Node) -> bool:
    return n.target == _aten.clone.default and n.kwargs.get("memory_format") in (
        None,
        torch.contiguous_format,
        torch.preserve_format,
    )


def _same_layout(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.stride() == b.stride()


class Epilogue:
    """One fused node: emitted in place of ``last``; the chain's other nodes are skipped."""

    def __init__(self, op: str, args: list, nodes: list, last: torch.fx.Node, pack_input=None):
        self.op = op
        self.args = args  # fx Nodes, None or constants, in the fused op's schema order
        self.nodes = nodes  # the producer and the chain up to ``last``
        self.last = last
        self.pack_input = pack_input  # the placeholder whose packed copy the node keeps
        self.pack = -1


def _hardtanh(n: torch.fx.Node):
    """A ``hardtanh`` node's step, "hardtanh:<min>:<max>"; None for other nodes."""
    if n.target != _aten.hardtanh.default:
        return None
    lo, hi = _kw(n, 1, "min_val", -1.0), _kw(n, 2, "max_val", 1.0)
    if not all(isinstance(v, (int, float)) for v in (lo, hi)) or lo > hi:
        return None
    return f"hardtanh:{float(lo)!r}:{float(hi)!r}"


def _chain(producer: torch.fx.Node, matmul: bool, bias_ok: bool):
    """Follows the producer's single readers. Returns (nodes, steps, residual, bias). A
    convolution's chain may end with a ``hardtanh`` (ReLU6)."""
    nodes = [producer]
    steps: list[str] = []
    residual = bias = None
    cur = producer
    n_cols = _val(producer).shape[-1]
    kept = 1  # nodes[:kept] end with a step (trailing reshapes and clones are left out)
    while True:
        u = _only_user(cur)
        if u is None or u.op != "call_function" or _val(u) is None:
            break
        if _val(u).dtype not in _FLOATS:
            break
        act = _activation(u) if u.args[0] is cur else None
        if act is None and not matmul and u.args[0] is cur:
            act = _hardtanh(u)
        if u.target in _RESHAPES or _plain_clone(u):
            if u.args[0] is not cur:
                break
            if not matmul and not _same_layout(_val(u), _val(cur)):
                break  # a convolution's steps run on its own result, in its shape and layout
            nodes.append(u)
        elif act is not None:
            nodes.append(u)
            steps.append(act)
            kept = len(nodes)
            if act == "relu" or act.startswith("hardtanh:"):
                break
        elif matmul and _dtype_cast(u) is not None:
            nodes.append(u)
            kept = len(nodes)
        elif u.target == _aten.add.Tensor and len(u.args) == 2 and _kw(u, 2, "alpha", 1) == 1:
            other = u.args[1] if u.args[0] is cur else u.args[0]
            ov = _val(other)
            if other is cur or ov is None or ov.dtype not in _FLOATS:
                break
            if ov.shape == _val(u).shape and residual is None and _val(u).shape == _val(cur).shape:
                residual = other
                steps.append("add")
            elif (
                bias_ok
                and bias is None
                and not steps
                and len(nodes) == 1 + sum(1 for x in nodes[1:] if x.target in _RESHAPES)
                and ov.dim() == 1
                and ov.shape[0] == n_cols
                and _val(cur).shape[-1] == n_cols
            ):
                bias = other
            else:
                break
            nodes.append(u)
            kept = len(nodes)
        else:
            break
        cur = u
    return nodes[:kept], steps, residual, bias


def _weight_source(mat2: torch.fx.Node, input_dtype):
    """The value behind a linear layer's weight operand: through a ``t`` or ``permute([1, 0])``
    of it (``nn.Linear``; a weight used as it is, GPT-2's ``Conv1D``, has none) and an autocast
    ``_to_copy`` to the input's dtype, each read by nothing else: (source, transposed, cast
    node or None); (mat2, False, None) where there is neither."""
    n = mat2
    transposed = False
    if (
        n.target in (_aten.t.default, _aten.permute.default)
        and (n.target == _aten.t.default or list(n.args[1]) == [1, 0])  # type: ignore[arg-type]
        and len(n.users) == 1
        and isinstance(n.args[0], torch.fx.Node)
    ):
        n = n.args[0]
        transposed = True
    cast = None
    if _dtype_cast(n) == input_dtype and len(n.users) == 1 and isinstance(n.args[0], torch.fx.Node):
        cast = n
        n = n.args[0]
    return n, transposed, cast


def find(gm: torch.fx.GraphModule, inference: bool) -> dict:
    """The plan pass: {last node of a chain: Epilogue} and {skipped node: its Epilogue}."""
    fused: dict = {}
    skipped: dict = {}
    claimed: set = set()  # the nodes of accepted chains
    read: set = set()  # the nodes accepted fused nodes read
    for p in gm.graph.nodes:
        if p.op != "call_function" or _val(p) is None or p in claimed:
            continue
        if p.target in _MATMULS:
            e = _matmul(p, inference)
        elif p.target == _aten.convolution.default:
            e = _convolution(p)
        else:
            e = None
        if e is None:
            continue
        # Chains must not overlap (two products summed: both chains reach the add), and a node
        # one fused node reads must not run inside another.
        inner = {n for n in e.nodes if n is not e.last}
        args = {a for a in e.args if isinstance(a, torch.fx.Node)}
        if claimed.intersection(e.nodes) or inner & read or args & skipped.keys():
            continue
        claimed.update(e.nodes)
        read |= args
        fused[e.last] = e
        for n in inner:
            skipped[n] = e
    return {"fused": fused, "skipped": skipped}


def _matmul(p: torch.fx.Node, inference: bool):
    if _val(p).dtype not in _FLOATS:
        return None
    bias: Any = None
    mat1: Any
    mat2: Any
    if p.target == _aten.addmm.default:
        self_, mat1, mat2 = p.args[:3]
        beta, alpha = _kw(p, 3, "beta", 1), _kw(p, 4, "alpha", 1)
        sv = _val(self_)
        if beta != 1 or alpha != 1 or sv is None or sv.dim() != 1 or sv.dtype not in _FLOATS:
            return None
        bias = self_
    else:
        mat1, mat2 = p.args[:2]
    if not isinstance(mat1, torch.fx.Node) or not isinstance(mat2, torch.fx.Node):
        return None
    nodes, steps, residual, add_bias = _chain(p, True, p.target == _aten.mm.default)
    packs = inference and config.prepack and p.target != _aten.bmm.default
    # Alone, an addmm's bias or a bare mm's autocast weight cast still folds (and its weight
    # packs).
    casts_weight = (
        p.target == _aten.mm.default and _weight_source(mat2, _val(mat1).dtype)[2] is not None
    )
    if len(nodes) == 1 and not (packs and (bias is not None or casts_weight)):
        return None  # nothing to fold, and no weight to pack
    bias = bias if bias is not None else add_bias
    extra = []
    # A bias cast by autocast: the kernel adds it as it is (the cast is one more node).
    if bias is not None and _dtype_cast(bias) is not None and len(bias.users) == 1:
        extra.append(bias)
        bias = bias.args[0]
    weight, transposed, cast = mat2, False, None
    if p.target != _aten.bmm.default:
        weight, transposed, cast = _weight_source(mat2, _val(mat1).dtype)
        if transposed:
            extra.append(mat2)
        if cast is not None:
            extra.append(cast)
    last = nodes[-1]
    out = _val(last)
    args = [
        mat1,
        weight,
        bias,
        residual,
        transposed,
        ",".join(steps),
        list(out.shape),
        out.dtype,
        -1,
    ]
    e = Epilogue("tensorbridge::matmul_epilogue", args, nodes + extra, last)
    if packs and weight.op == "placeholder":
        e.pack_input = weight
    elif len(nodes) == 1:
        return None  # a plain addmm whose weight is not a plan input
    return e


def _zero_pad(conv: torch.fx.Node):
    """The ``constant_pad_nd`` of zeros that only ``conv`` (not transposed) reads, as
    (node, extra padding: (left, right) per spatial dim); None when there is none."""
    x = conv.args[0]
    if (
        not isinstance(x, torch.fx.Node)
        or x.target != _aten.constant_pad_nd.default
        or len(x.users) != 1
        or _kw(conv, 6, "transposed", False)
        or not isinstance(x.args[0], torch.fx.Node)
        or _val(x.args[0]) is None
    ):
        return None
    extra = _joint.zero_pad_extra(x, _val(conv).dim() - 2)
    return None if extra is None else (x, extra)


def _batch_norm(conv: torch.fx.Node):
    """The inference batch norm that alone reads ``conv``'s result and whose mean and
    invstd results nothing reads: (its nodes: the norm and its getitems, the getitem of its
    result, [weight, bias, mean, var], eps); None when there is none."""
    bn = _only_user(conv)
    if (
        bn is None
        or bn.target != _aten._native_batch_norm_legit_no_training.default
        or bn.args[0] is not conv
        or any(u.target is not operator.getitem for u in bn.users)
    ):
        return None
    outs = [u for u in bn.users if u.args[1] == 0]
    if len(outs) != 1 or any(u.users for u in bn.users if u.args[1] != 0):
        return None
    w, b, mean, var = bn.args[1:5]
    eps = _kw(bn, 6, "eps", 1e-5)
    if not isinstance(mean, torch.fx.Node) or not isinstance(var, torch.fx.Node):
        return None
    return [bn, *bn.users], outs[0], [w, b, mean, var], float(eps)


def _convolution(p: torch.fx.Node):
    if _val(p).dtype not in _FLOATS:
        return None
    pad = _zero_pad(p)
    bn = _batch_norm(p)
    if bn is not None:
        bn_nodes, head, bn_args, eps = bn
        nodes, steps, residual, _ = _chain(head, False, False)
        nodes = [p, *bn_nodes, *nodes[1:]]
        last = nodes[-1] if len(nodes) > len(bn_nodes) + 1 else head
    else:
        nodes, steps, residual, _ = _chain(p, False, False)
        bn_args, eps, last = [None] * 4, 0.0, nodes[-1]
    if not steps and pad is None and bn is None:
        return None
    if residual is not None and _val(residual).dtype != _val(p).dtype:
        return None
    args = [
        pad[1] if pad is not None else p.args[0],
        *p.args[1:9],
        residual,
        ",".join(steps),
        pad[1] if pad is not None else [],
        *bn_args,
        eps,
    ]
    if pad is not None:
        args[0] = pad[0].args[0]
        nodes = [pad[0], *nodes]
    return Epilogue("tensorbridge::convolution_epilogue", args, nodes, last)


def assign_packs(epilogues) -> list:
    """Gives each packing epilogue a fresh id; returns the (placeholder, id) pairs."""
    pairs = []
    for e in epilogues:
        if e.pack_input is not None:
            e.pack = next(_pack_ids)
            e.args[8] = e.pack
            pairs.append((e.pack_input, e.pack))
    return pairs


class Prepacked:
    """The version check of a plan's packed weights: ``check(args)`` before each call compares
    each packed input (identity and ``_version``) with the last call's and drops every pack of
    the plan when one differs (``tensorbridge::drop_packed``); the kernel packs again."""

    def __init__(self, positions: list[int], packs: list[int]):
        self.positions = positions
        self.packs = packs
        self.seen: list = []
        self.versions: list = []
        self.drops = 0
        self.lock = threading.Lock()

    def check(self, args) -> None:
        ws = [args[i] for i in self.positions]
        vs = [w._version for w in ws]
        if vs == self.versions and all(a is b for a, b in zip(ws, self.seen, strict=True)):
            return
        with self.lock:
            from tensorbridge import _C

            _C.call("tensorbridge::drop_packed", self.packs)
            self.seen, self.versions = ws, vs
            self.drops += 1

    def __del__(self):
        try:
            from tensorbridge import _C

            _C.call("tensorbridge::drop_packed", self.packs)
        except Exception:  # interpreter shutdown
            pass


install_setting_alias(sys.modules[__name__], "prepack", "prepack")
