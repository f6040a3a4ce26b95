"""The gradient of a torch function under ``jax.grad``, as two captured plans.

The function and its vector-Jacobian product are traced together once (``torch.autograd.grad``
inside ``make_fx``: the joint graph of forward and backward ATen ops). The joint graph is then
split where torch's autograd would split it: the forward plan computes the outputs and the
activations the backward ops read (saved once, as the residuals JAX keeps between the two
passes); the backward plan takes the function's inputs, those saved activations and the output
cotangents, and returns the input gradients. Nothing is computed twice; views of inputs and
tensors built from constants alone are cheaper to rebuild than to save, so the backward plan
rebuilds them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import torch
import torch.utils._pytree as torch_pytree

from tensorbridge import _jax_ffi

_aten = torch.ops.aten
# Ops that only reinterpret their input's memory: rebuilt in the backward plan, not saved.
_VIEW_OPS = {
    _aten.view.default,
    _aten._unsafe_view.default,
    _aten.reshape.default,
    _aten.permute.default,
    _aten.t.default,
    _aten.transpose.int,
    _aten.expand.default,
    _aten.unsqueeze.default,
    _aten.squeeze.dim,
    _aten.squeeze.dims,
    _aten.squeeze.default,
    _aten.slice.Tensor,
    _aten.select.int,
    _aten.alias.default,
    _aten.detach.default,
}


@dataclasses.dataclass(frozen=True)
class GradPlans:
    """The two plans of a function's gradient, registered with the FFI handler."""

    forward: int  # inputs -> outputs, then the saved activations
    saved: tuple  # ((shape), torch dtype) of each saved activation
    backward: int  # inputs, saved activations, float output cotangents -> input gradients


def capture(fn, spec, shapes_dtypes, out_info, diff_mask, torch_dtype, allow_fallback):
    """Captures fn's forward and backward plans for one input signature and one set of
    differentiated inputs (`diff_mask`). Cotangents come for the floating-point outputs only."""
    n_in = len(shapes_dtypes)
    diff_idx = [i for i, m in enumerate(diff_mask) if m]
    ct_idx = [i for i, (_, d) in enumerate(out_info) if d.is_floating_point or d.is_complex]

    def joint(*ts):
        inputs, cts = list(ts[:n_in]), ts[n_in:]
        args, kwargs = torch_pytree.tree_unflatten(inputs, spec)
        outs = tuple(torch_pytree.tree_leaves(fn(*args, **kwargs)))
        diff = [inputs[i] for i in diff_idx]
        pairs = [(outs[i], c) for i, c in zip(ct_idx, cts, strict=True) if outs[i].requires_grad]
        grads: Sequence[torch.Tensor | None] = [None] * len(diff)
        if pairs:
            grads = torch.autograd.grad(
                [o for o, _ in pairs], diff, [c for _, c in pairs], allow_unused=True
            )
        full = [torch.zeros_like(d) if g is None else g for g, d in zip(grads, diff, strict=True)]
        return (*outs, *full)

    examples = [
        torch.empty(s, dtype=torch_dtype(d)).requires_grad_(m)
        for (s, d), m in zip(shapes_dtypes, diff_mask, strict=True)
    ]
    examples += [torch.empty(out_info[i][0], dtype=out_info[i][1]) for i in ct_idx]
    gm = _jax_ffi._trace(joint, examples, grad=True)
    _jax_ffi._check_no_input_mutation(gm, fn)
    fw, bw, saved = _partition(gm, n_in, len(out_info))
    _jax_ffi._check_outputs(fw, list(out_info) + saved)
    want = [(shapes_dtypes[i][0], torch_dtype(shapes_dtypes[i][1])) for i in diff_idx]
    _jax_ffi._check_outputs(bw, want)
    fw_id = _jax_ffi.register(_jax_ffi._build(fw, allow_fallback))
    bw_id = _jax_ffi.register(_jax_ffi._build(bw, allow_fallback))
    return GradPlans(fw_id, tuple(saved), bw_id)


def _partition(gm, n_in: int, n_out: int):
    """(forward graph, backward graph, [(shape, dtype) of each saved value]) of a joint graph
    whose placeholders are the inputs then the cotangents, and whose outputs are the function's
    outputs then the input gradients."""
    nodes = list(gm.graph.nodes)
    placeholders = [n for n in nodes if n.op == "placeholder"]
    inputs, cotangents = placeholders[:n_in], placeholders[n_in:]
    out_node = nodes[-1]
    outs = list(out_node.args[0])
    fwd_outs, grads = outs[:n_out], outs[n_out:]

    # Backward nodes: those that read a cotangent, directly or not.
    backward = set(cotangents)
    for n in nodes:
        if n.op == "call_function" and any(a in backward for a in n.all_input_nodes):
            backward.add(n)
    # Cheap forward nodes: constants, tensors made from nothing, views of inputs and of those.
    cheap = set()
    for n in nodes:
        if n in backward or n.op in ("placeholder", "output"):
            continue
        sources = n.all_input_nodes
        if n.op == "get_attr" or (
            n.op == "call_function"
            and (
                not sources
                or (n.target in _VIEW_OPS and all(a in cheap or a in inputs for a in sources))
            )
        ):
            cheap.add(n)
    # Saved: forward values the backward reads (or returns) that it cannot rebuild. A view of
    # a forward value is rebuilt from that value (saved once, however many views read it).
    saved: list = []
    rebuilt = set(cheap)
    reads = [a for n in nodes if n in backward for a in n.all_input_nodes]
    reads += [g for g in grads if isinstance(g, torch.fx.Node)]
    for a in reads:
        if a in backward or a in rebuilt or a in inputs or a in saved:
            continue
        base = a
        while base.op == "call_function" and base.target in _VIEW_OPS:
            rebuilt.add(base)
            base = base.args[0]
        if base in rebuilt or base in inputs or base in saved:
            continue
        val = base.meta.get("val")
        if not isinstance(val, torch.Tensor):
            raise _jax_ffi.CaptureError(
                f"the backward reads {base.name} ({type(val).__name__}), which is not a tensor"
            )
        saved.append(base)

    # The forward graph: every forward node; outputs, then the saved values.
    fw_graph = torch.fx.Graph()
    env: dict = {}
    for n in nodes:
        if n in backward or n.op == "output":
            continue
        env[n] = fw_graph.node_copy(n, env.__getitem__)
    fw_graph.output(
        tuple(env[o] if isinstance(o, torch.fx.Node) else o for o in (*fwd_outs, *saved))
    )
    fw = torch.fx.GraphModule(gm, fw_graph)

    # The backward graph: the inputs, the saved values and the cotangents in; the rebuilt
    # cheap nodes and the backward nodes; the gradients out.
    bw_graph = torch.fx.Graph()
    env = {}
    for n in inputs:
        env[n] = bw_graph.node_copy(n, env.__getitem__)
    for i, n in enumerate(saved):
        env[n] = bw_graph.placeholder(f"saved_{i}")
        env[n].meta = dict(n.meta)
    for n in cotangents:
        env[n] = bw_graph.node_copy(n, env.__getitem__)
    for n in nodes:
        if n in cotangents or n in saved or (n not in backward and n not in rebuilt):
            continue
        env[n] = bw_graph.node_copy(n, env.__getitem__)
    bw_graph.output(tuple(env[g] if isinstance(g, torch.fx.Node) else g for g in grads))
    bw = torch.fx.GraphModule(gm, bw_graph)
    for g in (fw, bw):
        g.graph.eliminate_dead_code()
        g.recompile()
    return fw, bw, [(tuple(a.meta["val"].shape), a.meta["val"].dtype) for a in saved]
