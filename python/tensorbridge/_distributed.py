"""torch.distributed on ``tensorbridge.Tensor``: collectives run torch's own implementation on
zero-copy views of the wrapped memory.

The collectives reach ``Tensor.__torch_dispatch__`` as ops of the ``c10d``,
``_c10d_functional`` and ``_c10d_functional_autograd`` namespaces. Their process groups,
reduce ops and ``Work`` handles are ``torch.ScriptObject``s the C++ table cannot bind, and
their work is torch's (gloo, NCCL, ...), so the eager path routes these namespaces here
(``_C._eager_route``): each ``tensorbridge.Tensor`` argument is replaced by a plain torch tensor
over the same memory (``Tensor._inner``, no copy), torch's op runs, and every opaque argument
passes through untouched. In-place collectives (``allreduce_``, ``broadcast_``, the outputs of
``allgather_``, ...) therefore write into the memory the user's numpy array or torch tensor
owns, and return the very ``tensorbridge.Tensor`` objects they were given. Results the op
allocates (the functional collectives) come back as ``tensorbridge.Tensor``s over torch's
memory, holding the torch tensor itself, so that ``wait_tensor`` finds the pending work torch
registered for that memory.

Where the build has the Python-key kernels (``python/torch_device/python_key_c10d.cc``),
``c10d::allreduce_`` and ``c10d::broadcast_`` (DDP's buffer broadcast before every forward) do
the same from torch's dispatcher in C++, without the trip into ``__torch_dispatch__``; calls
they do not take (read-only memory, a mode, other kinds of tensors) come here.

Memory another framework marks read-only (JAX arrays) is refused for the arguments a
collective writes, with a ``BufferError`` naming the op and argument.
"""

from __future__ import annotations

from typing import Any

import torch

from tensorbridge import _C

# The namespaces of torch.distributed's ops (the ones Tensor's __torch_dispatch__ routes here):
# collectives, and the copy-in / copy-out ops of FSDP2.
NAMESPACES = ["c10d", "_c10d_functional", "_c10d_functional_autograd", "c10d_functional", "fsdp"]

_WRITTEN: dict = {}  # func -> names of the arguments it writes


def _map(fn, x):
    """``fn`` applied to each leaf of the lists, tuples and dicts that make up an op's
    arguments or results (what their schemas allow), rebuilt alike: the few containers of a
    collective's arguments walked without pytree's node registry (called every step by DDP's
    buffer broadcast)."""
    t = type(x)
    if t is list:
        return [_map(fn, v) for v in x]
    if t is tuple:
        return tuple(_map(fn, v) for v in x)
    if t is dict:
        return {k: _map(fn, v) for k, v in x.items()}
    return fn(x)


def _written(func) -> tuple[str, ...]:
    names = _WRITTEN.get(func)
    if names is None:
        schema = func._schema
        if schema.name.startswith("c10d::"):
            # c10d's schemas carry no alias annotations: the arguments named `tensors` (but
            # for send's) and the outputs are the ones written.
            names = tuple(
                a.name
                for a in schema.arguments
                if a.name.startswith("output")
                or (a.name == "tensors" and schema.name != "c10d::send")
            )
        else:
            names = tuple(
                a.name
                for a in schema.arguments
                if a.alias_info is not None and a.alias_info.is_write
            )
        _WRITTEN[func] = names
    return names


def _check_writable(func, args, kwargs) -> None:
    names = _written(func)
    if not names:
        return
    from tensorbridge._tensor import Tensor

    schema_args = func._schema.arguments
    for i, a in enumerate(schema_args):
        if a.name not in names:
            continue
        x = kwargs.get(a.name) if a.kwarg_only or a.name in kwargs else None
        if x is None and i < len(args):
            x = args[i]
        leaves: list = []
        _map(leaves.append, x)
        for leaf in leaves:
            if isinstance(leaf, Tensor) and leaf._array is not None and leaf._array.read_only:
                name = schema_name(func)
                raise BufferError(
                    f"{name} writes into its argument '{a.name}', whose memory is read-only "
                    "(JAX arrays are): wrap the source with tensorbridge.wrap(x, copy=True) for "
                    "a writable copy, or use the functional collective "
                    "(torch.distributed._functional_collectives), which allocates its result"
                )


def schema_name(func) -> str:
    s = func._schema
    return s.name + (f".{s.overload_name}" if s.overload_name else "")


def dispatch(func, args, kwargs):
    """Runs one collective op (``func``) with ``tensorbridge.Tensor`` arguments replaced by
    zero-copy torch views; see the module documentation."""
    from tensorbridge._tensor import Tensor

    _check_writable(func, args, kwargs)
    originals: dict[int, Tensor] = {}

    def to_torch(x):
        if isinstance(x, Tensor):
            inner = x._inner
            originals[id(inner)] = x
            return inner
        return x

    out = func(*_map(to_torch, args), **_map(to_torch, kwargs))

    def back(x):
        if not isinstance(x, torch.Tensor) or isinstance(x, Tensor):
            return x
        same = originals.get(id(x))
        if same is not None and same._inner is x:
            return same  # an in-place collective hands back the tensor it was given
        if type(x) is not torch.Tensor and hasattr(x, "__tensor_flatten__"):
            # A wrapper of torch's own around a view, e.g. the AsyncCollectiveTensor that
            # torch.distributed._functional_collectives returns: the same wrapper, around the
            # tensorbridge.Tensor.
            names, ctx = x.__tensor_flatten__()
            inner = {n: back(getattr(x, n)) for n in names}
            return type(x).__tensor_unflatten__(inner, ctx, x.size(), x.stride())  # type: ignore[attr-defined]
        return Tensor._from_inner(x)

    return _map(back, out)


# ---- FSDP2's extension points for tensor subclasses --------------------------------------------
# fully_shard keeps each parameter's shard as a tensorbridge.Tensor (in memory FSDP allocates
# through our table). Before a forward it all-gathers the shards: fsdp_pre_all_gather lends the
# shard to the all-gather as a zero-copy torch view. fsdp_post_all_gather makes the unsharded
# parameter a tensorbridge.Tensor over memory of its own, filled from FSDP's all-gather output.
# Between steps (and between forward and backward, with reshard_after_forward) FSDP frees that
# output with `untyped_storage().resize_(0)` and re-allocates it, at a new address; torch's own
# views follow their storage, but the views our kernels made of the unsharded parameter (the
# transposed weight autograd saves for backward) hold its address. So the unsharded parameter
# keeps one buffer for its life, and each later all-gather (the call with `out=`) refills it.


def fsdp_pre_all_gather(
    self: Any,
    mesh: Any,
    outer_size: torch.Size,
    outer_stride: tuple[int, ...],
    module: torch.nn.Module,
    mp_policy: Any,
) -> tuple[tuple[torch.Tensor, ...], None]:
    inner = self._inner
    dtype = getattr(mp_policy, "param_dtype", None)
    if dtype is not None and dtype != inner.dtype:
        inner = inner.to(dtype)
    return (inner,), None


def fsdp_post_all_gather(
    self: Any,
    all_gather_outputs: tuple[torch.Tensor, ...],
    metadata: Any,
    param_dtype: torch.dtype,
    *,
    out: Any = None,
) -> tuple[Any, tuple[torch.Tensor, ...]] | None:
    from tensorbridge._tensor import Tensor

    (output,) = all_gather_outputs
    if out is not None:
        with torch.no_grad():
            out._inner.view(-1).copy_(output.reshape(-1))
        return None
    unsharded = Tensor(_C.from_dlpack(output.detach().clone()))
    return unsharded, (output,)


def install() -> None:
    """Routes torch.distributed's namespaces from ``Tensor.__torch_dispatch__`` to
    :func:`dispatch`."""
    _C._eager_route(NAMESPACES, dispatch)
