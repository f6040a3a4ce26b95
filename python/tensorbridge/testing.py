"""Running torch code through tensorbridge's op table, op by op, for tests and conformance.

``TableMode`` is a ``TorchDispatchMode``: inside it, every ATen op that torch code calls on
ordinary CPU tensors is sent to tensorbridge's C++ table instead (the tensors are lent
zero-copy through DLPack, the results come back zero-copy). An op the table cannot serve runs
on torch's own kernel and is counted in ``fallbacks``; with ``strict=True`` it raises.

    with TableMode() as mode:
        y = torch.nn.functional.gelu(x) + 1
    mode.served   # {"aten::gelu": 1, "aten::add.Tensor": 1}
"""

from __future__ import annotations

import collections

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import tensorbridge as tb

__all__ = ["TableMode", "qualified_name"]


def qualified_name(func) -> str:
    """'aten::add.Tensor' for torch.ops.aten.add.Tensor ('aten::gelu' for .default)."""
    schema = func._schema
    return schema.name + (f".{schema.overload_name}" if schema.overload_name else "")


_SERVED = {"kernel", "composite", "decomposition"}

# In-place ops that change the tensor object (its sizes, strides, offset) rather than its data:
# the table returns the view with the new geometry, and TableMode moves `self` onto it.
_METADATA_OPS = frozenset(
    f"aten::{n}"
    for n in (
        *("squeeze_", "unsqueeze_", "t_", "transpose_", "swapdims_", "swapaxes_"),
        *("resize_", "resize_as_"),
    )
)


def _table_serves(name: str) -> bool:
    return any(o["op"] == name for o in tb.ops())


def _to_table(x):
    if isinstance(x, torch.Tensor):
        if x.is_conj() or x.is_neg():
            x = x.resolve_conj().resolve_neg()
        return tb.from_dlpack(x.detach())
    if isinstance(x, (list, tuple)):
        return [_to_table(v) for v in x]
    if isinstance(x, torch.device):
        return str(x)
    if isinstance(x, (torch.layout, torch.memory_format)):
        return str(x).replace("torch.", "")
    return x


def _to_torch(x):
    if isinstance(x, tb.Array):
        return torch.from_dlpack(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_to_torch(v) for v in x)
    return x


def _restride(self, view):
    """`self` moved onto `view`'s sizes, strides and offset (a view of the same memory)."""
    size = self.element_size()
    start = self.data_ptr() - int(self.storage_offset()) * size
    offset = (view.data_ptr() - start) // size if view.numel() else self.storage_offset()
    self.as_strided_(view.shape, view.stride(), offset)
    return self


def _as_views_of(result, args):
    """View ops: the table's results as torch views of the argument they alias.

    A tensor back from DLPack starts its own storage at its first element; torch's autograd
    replays views by storage offset (e.g. the backward of a copy into a slice), so a view must
    keep its place in the base's storage. The table computed the view; torch only records it."""
    if isinstance(result, (list, tuple)):
        return type(result)(_as_views_of(r, args) for r in result)
    if not isinstance(result, torch.Tensor):
        return result
    base = next((a for a in args if isinstance(a, torch.Tensor)), None)
    if base is None or base.dtype != result.dtype or base.is_conj() or base.is_neg():
        return result
    size = base.element_size()
    start = base.data_ptr() - int(base.storage_offset()) * size
    offset, rem = divmod(result.data_ptr() - start, size)
    if rem or result.numel() == 0 or not 0 <= offset * size < base.untyped_storage().nbytes():
        return result
    return base.as_strided(result.shape, result.stride(), offset)


class TableMode(TorchDispatchMode):
    """Routes every ATen op on CPU tensors to tensorbridge's table (see the module doc)."""

    def __init__(self, strict: bool = False):
        super().__init__()
        self.strict = strict
        self.served: collections.Counter[str] = collections.Counter()
        self.fallbacks: collections.Counter[str] = collections.Counter()
        self._serves: dict[str, bool] = {}

    def _serves_op(self, name: str) -> bool:
        if name not in self._serves:
            self._serves[name] = _table_serves(name)
        return self._serves[name]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = qualified_name(func)
        cpu = all(
            a.device.type == "cpu"
            for a in torch.utils._pytree.tree_leaves((args, kwargs))
            if isinstance(a, torch.Tensor)
        )
        if not (cpu and self._serves_op(name)):
            if self.strict:
                raise NotImplementedError(f"{name}: not served by tensorbridge's table")
            self.fallbacks[name] += 1
            return func(*args, **kwargs)
        out = tb.call(name, *_to_table(list(args)), **{k: _to_table(v) for k, v in kwargs.items()})
        self.served[name] += 1
        schema = func._schema
        if schema.name in _METADATA_OPS:
            return _restride(args[0], _to_torch(out))
        if not schema.returns:  # an op returning nothing (aten::_linalg_check_errors)
            return None
        result = _to_torch(out)
        # Ops that write to an argument return that argument itself (aliasing kept).
        if schema.returns and all(
            r.alias_info is not None and not r.alias_info.is_write for r in schema.returns
        ):
            result = _as_views_of(result, args)
        mutated = [
            i
            for i, a in enumerate(schema.arguments)
            if a.alias_info is not None and a.alias_info.is_write
        ]
        if mutated and len(schema.returns) == 1 and schema.returns[0].alias_info is not None:
            a = schema.arguments[mutated[0]]
            return kwargs[a.name] if a.kwarg_only or a.name in kwargs else args[mutated[0]]
        return result
