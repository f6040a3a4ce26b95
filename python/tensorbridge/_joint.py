"""Zero padding before convolutions in training graphs: a pass over AOT autograd's joint graph
(forward and backward in one, before it is partitioned into the forward and backward plans),
and the backward plan's padded convolution gradient.

TensorFlow-style "same" padding (``F.pad(x, pads)`` before a convolution with ``padding=0``,
as in MobileNet and EfficientNet ports) costs a training step three copies per convolution:
the padded input in the forward, saved for the backward, whose convolution gradient comes out
padded and is cropped by the pad's own backward (``constant_pad_nd`` with the pads negated).
Here:

- ``rewrite`` (the joint graph): a zero pad that a convolution reads is made again for the
  convolution's backward, marked to be recomputed there. The forward's pad then has the
  convolution as its only reader, and the plan folds it into the convolution (oneDNN's
  asymmetric padding, ``tensorbridge._epilogue``); the partition saves the unpadded input.
- ``PaddedBackwards`` (the backward plan): ``convolution_backward`` of such a recomputed pad,
  with its input gradient cropped, runs as one ``tensorbridge::convolution_backward_padded``
  node on the unpadded input, whose input gradient has the unpadded shape.

(A pad of nothing, every pad 0, is read as its input by the plan: ``_epilogue.noop_pad``.)
"""

from __future__ import annotations

import torch

from tensorbridge._config import config

_aten = torch.ops.aten
_PAD = _aten.constant_pad_nd.default


def _val(n):
    return n.meta.get("val") if isinstance(n, torch.fx.Node) else None


def _pads(n: torch.fx.Node) -> list | None:
    """The pads of a ``constant_pad_nd`` node when they are plain ints, else None."""
    if n.op != "call_function" or n.target != _PAD or not isinstance(n.args[0], torch.fx.Node):
        return None
    pads = list(n.args[1])  # type: ignore[arg-type]
    return pads if _ints(pads) else None


def _ints(xs) -> bool:
    return all(isinstance(x, int) for x in xs)


def _is_output(n: torch.fx.Node) -> bool:
    return any(u.op == "output" for u in n.users)


def zero_pad_extra(pad: torch.fx.Node, nsp: int) -> list | None:
    """The (left, right) zeros per spatial dim (in dim order) that ``pad``, a
    ``constant_pad_nd`` of zeros and non-negative pads on the last ``nsp`` dims, adds; None
    when it is not one."""
    pads = _pads(pad)
    value = pad.args[2] if len(pad.args) > 2 else pad.kwargs.get("value", 0)
    if pads is None or value != 0 or len(pads) != 2 * nsp or any(p < 0 for p in pads):
        return None
    # constant_pad_nd lists the last dim first: (left, right) of dim -1, then of dim -2, ...
    extra = []
    for i in range(nsp):
        j = nsp - 1 - i
        extra += [pads[2 * j], pads[2 * j + 1]]
    return extra


def _convolution_backward(u: torch.fx.Node, pad: torch.fx.Node) -> bool:
    """Whether ``u`` is the backward of a (not transposed) convolution whose input is ``pad``."""
    return (
        u.op == "call_function"
        and u.target == _aten.convolution_backward.default
        and len(u.args) >= 11
        and u.args[1] is pad
        and u.args[0] is not pad
        and u.args[2] is not pad
        and u.args[7] is False
    )


def rewrite(joint: torch.fx.GraphModule, mark: bool = True) -> torch.fx.GraphModule:
    """The joint-graph passes (see the module's docstring); ``joint`` is changed in place.
    ``mark``: tag the padding made again for the backward as to be recomputed, which the
    min-cut partitioner needs (it would save it otherwise); the default partitioner puts what
    only the backward reads in the backward by itself (and rejects the tag)."""
    from torch.utils.checkpoint import CheckpointPolicy

    g = joint.graph
    changed = False
    for n in list(g.nodes):
        pads = _pads(n)
        if pads is None or not any(pads):
            continue
        x = n.args[0]
        if not config.fusion or not isinstance(_val(n), torch.Tensor):
            continue
        nsp = _val(n).dim() - 2
        if zero_pad_extra(n, nsp) is None:
            continue
        backwards = [u for u in n.users if _convolution_backward(u, n)]
        forwards = [u for u in n.users if u.target == _aten.convolution.default]
        if not backwards or not forwards or len(n.users) != len(backwards) + len(forwards):
            continue
        # Spelled unlike `n` (the value positional or by keyword) so that the partitioner's
        # common-subexpression pass keeps the two apart.
        value = n.args[2] if len(n.args) > 2 else n.kwargs.get("value", 0)
        spelled: tuple[tuple, dict] = ((x, n.args[1]), {"value": value})
        if "value" in n.kwargs:
            spelled = ((x, n.args[1], value), {})
        for u in backwards:
            with g.inserting_before(u):
                again = g.call_function(_PAD, *spelled)
            # The backward node's tags (the partitioners place nodes by them), the pad's value.
            again.meta.update(u.meta)
            for key in ("val", "tensor_meta"):
                if key in n.meta:
                    again.meta[key] = n.meta[key]
            if mark:
                again.meta["recompute"] = CheckpointPolicy.MUST_RECOMPUTE
            u.replace_input_with(n, again)
            changed = True
    if changed:
        g.lint()
        joint.recompile()
    return joint


def partition_fn(base, min_cut: bool):
    """AOT autograd's ``partition_fn``: ``base`` (its partitioner; ``min_cut``: the min-cut
    one) after ``rewrite``."""

    def partition(joint_module, joint_inputs, **kwargs):
        return base(rewrite(joint_module, mark=min_cut), joint_inputs, **kwargs)

    return partition


class PaddedBackwards:
    """The backward plan's convolution gradients of zero-padded inputs: ``convolution_backward``
    nodes whose input is a ``constant_pad_nd`` of zeros that only they read, and whose input
    gradient (if computed) only a crop of that padding reads."""

    def __init__(self, gm: torch.fx.GraphModule):
        # convolution_backward -> (unpadded input, extra padding, crop, output mask)
        self.nodes: dict = {}
        self.skip: set = set()  # the pads they read
        self.crops: dict = {}  # crop -> the getitem of the input gradient (now unpadded)
        if not config.fusion:
            return
        for n in gm.graph.nodes:
            pads = _pads(n)
            if pads is None or len(n.users) != 1 or _is_output(n):
                continue
            (u,) = n.users
            if not _convolution_backward(u, n) or not isinstance(_val(n), torch.Tensor):
                continue
            extra = zero_pad_extra(n, _val(n).dim() - 2)
            stride, padding, dilation, groups = u.args[4], u.args[5], u.args[6], u.args[9]
            sizes = (stride, padding, dilation)
            if extra is None or not isinstance(groups, int):
                continue
            if not all(isinstance(s, (list, tuple)) and _ints(s) for s in sizes):
                continue
            mask = list(u.args[10])
            getitems = {g.args[1]: g for g in u.users}
            crop = None
            if mask[0]:
                first = getitems.get(0)
                if first is None:
                    continue
                crops = list(first.users)
                if len(crops) != 1 or _pads(crops[0]) != [-p for p in pads]:
                    continue
                crop = crops[0]
            self.nodes[u] = (n.args[0], extra, crop, mask)
            self.skip.add(n)
            if crop is not None:
                self.crops[crop] = getitems[0]

    def all(self) -> set:
        """Every node this pass takes over."""
        return {*self.nodes, *self.skip, *self.crops}

    def emit(self, builder, n: torch.fx.Node) -> bool:
        """Adds ``n`` to the plan if it is one of the pass's nodes; whether it was."""
        from tensorbridge import _memory

        if n in self.skip:
            return True
        if n in self.crops:
            builder.env[n] = builder.env[self.crops[n]]
            return True
        if n not in self.nodes:
            return False
        x, extra, crop, mask = self.nodes[n]
        grad, _, weight, _, stride, padding, dilation, _, _, groups = n.args[:10]
        args = [grad, x, weight, stride, padding, dilation, groups, mask, extra]
        outs = builder.plan.add_node(
            "tensorbridge::convolution_backward_padded", [builder.arg(a) for a in args], 3, n.name
        )
        metas = list(_val(n))
        if crop is not None:
            metas[0] = _val(crop)
        for v, m in zip(outs, metas, strict=True):
            _memory.set_bytes(builder.plan, v, _memory.nbytes(m))
        builder.env[n] = outs
        return True
