"""Pickling and copying ``tensorbridge.Tensor``.

Pickling is by value. A ``tensorbridge.Array`` pickles as its elements' bytes with shape,
strides and dtype (``Array.__reduce__`` in python/src/array.cc; the layout is kept when it is
dense, C order otherwise) and unpickles as an Array over new memory of tensorbridge's own. A
``tensorbridge.Tensor`` pickles as a plain torch tensor over its memory (torch writes the
values: a storage record in ``torch.save``), its
``requires_grad`` flag and its Python state (``_is_param``, which makes a parameter a
parameter), and unpickles as a Tensor over the new memory that unpickling made. Between
processes (``multiprocessing``'s pickler: queues, spawned DataLoader workers) it pickles as its
Array, bytes and all. The memory a tensor wraps belongs to another framework (a numpy array, a JAX buffer)
that a pickle cannot carry; the values are what travels, through ``pickle``, ``torch.save``,
``copy.deepcopy`` and ``multiprocessing`` alike.

``torch.load(..., weights_only=True)`` calls only what torch's allow-list names:
``rebuild_tensor`` and ``rebuild_array`` are added to it
(``torch.serialization.add_safe_globals``) when tensorbridge is imported.

``copy.deepcopy`` gives a tensor over new memory of the same kind: a tensor made by
``tensorbridge.wrap`` over a numpy array (torch tensor, JAX array) wraps a new numpy array
(torch tensor, JAX array), parameters of ``wrap_module`` new torch tensors, and the rest (results
of ops, unpickled tensors) new memory of tensorbridge's own. ``copy.copy`` shares the memory, as
it does for torch tensors.
"""

from __future__ import annotations

import copy

import torch

from tensorbridge import _C
from tensorbridge._tensor import Tensor, to_numpy, to_torch

# Entries of a Tensor's __dict__ that describe its memory, not its Python state.
_NOT_STATE = frozenset({"_array", "_inner_cache", "_source"})


def _check_real(t: Tensor, what: str) -> None:
    if t._array is None:
        raise RuntimeError(
            f"{what}: this tensorbridge.Tensor is a tracer's stand-in (inside torch.compile "
            "tracing) and has no data"
        )


def rebuild_array(data: bytes, shape: tuple, strides: tuple, dtype: str) -> _C.Array:
    """The inverse of ``Array.__reduce__``: an Array over new memory holding `data`."""
    return _C._array_from_bytes(data, shape, strides, dtype)


def reduce_tensor(t: Tensor):
    # The values travel as a plain torch tensor over the same memory (no copy here): pickling
    # it is torch's own business, so torch.save writes its bytes as a storage record (as fast
    # as for plain tensors; pickled bytes would cost 10 times as much at torch.save's pickle
    # protocol 2).
    _check_real(t, "pickle")
    state = {k: v for k, v in t.__dict__.items() if k not in _NOT_STATE}
    return (rebuild_tensor, (to_torch(t), t.requires_grad, state))


def reduce_tensor_for_processes(t: Tensor):
    # multiprocessing's pickler (queues, spawned DataLoader workers): the bytes themselves,
    # as torch's shared-memory hand-over needs the sender to keep the memory alive until the
    # receiver has it, which a temporary view cannot do.
    _check_real(t, "pickle")
    state = {k: v for k, v in t.__dict__.items() if k not in _NOT_STATE}
    return (rebuild_tensor, (t._array, t.requires_grad, state))


def rebuild_tensor(values: torch.Tensor | _C.Array, requires_grad: bool, state: dict) -> Tensor:
    """The inverse of ``reduce_tensor``: a Tensor over the memory of `values` (the plain
    tensor that unpickling made, which nothing else holds) with its Python state."""
    array = values if isinstance(values, _C.Array) else _C.from_dlpack(values)
    t = Tensor(array, requires_grad=requires_grad)
    t.__dict__.update(state)
    return t


def _fresh_memory(t: Tensor) -> Tensor:
    """A tensor with `t`'s values in new memory from the framework that owns `t`'s."""
    source = t.__dict__.get("_source")
    if source == "numpy":
        import numpy as np

        try:
            copy_ = np.array(to_numpy(t), copy=True, order="K")
        except (BufferError, TypeError):
            copy_ = None  # a dtype numpy lacks (bfloat16): tensorbridge's memory below
        if copy_ is not None:
            new = Tensor(_C.from_dlpack(copy_))
            new._source = "numpy"
            return new
    elif source == "torch":
        new = Tensor(_C.from_dlpack(to_torch(t).clone()))
        new._source = "torch"
        return new
    elif source == "jax":
        import jax.numpy as jnp

        new = Tensor(_C.from_dlpack(jnp.array(to_numpy(t), copy=True)))
        new._source = "jax"
        return new
    with torch.no_grad():
        return torch.ops.aten.clone.default(t.detach())  # keeps t's stride order


def deepcopy_tensor(t: Tensor, memo: dict) -> Tensor:
    if not t.is_leaf:
        raise RuntimeError(
            "Only Tensors created explicitly by the user (graph leaves) support the deepcopy "
            "protocol at the moment."
        )
    if id(t) in memo:
        return memo[id(t)]
    _check_real(t, "copy.deepcopy")
    new = _fresh_memory(t)
    new.requires_grad_(t.requires_grad)
    memo[id(t)] = new
    for k, v in t.__dict__.items():
        if k not in _NOT_STATE:
            new.__dict__[k] = copy.deepcopy(v, memo)
    if t.grad is not None:
        new.grad = copy.deepcopy(t.grad, memo)
    return new
