"""The table's fallback (lookup step 4): PyTorch's own CPU kernel on zero-copy views.

The C++ table calls ``run(op_name, args, kwargs)`` with the op's arguments as
``tensorbridge.Array``s; they are lent to torch through DLPack (no copy), torch's kernel runs,
and its tensors come back the same way. In-place and out= ops write straight into our memory.
"""

from __future__ import annotations

import functools
import warnings

from tensorbridge import _C
from tensorbridge._config import config

_warned: set[str] = set()


@functools.cache
def _torch_op(op_name: str):
    import torch

    ns, _, rest = op_name.partition("::")
    name, _, overload = rest.partition(".")
    packet = getattr(getattr(torch.ops, ns), name)
    return getattr(packet, overload or "default")


def _to_torch(x, arg_type: str):
    import torch

    if isinstance(x, _C.Array):
        return torch.from_dlpack(x)
    if isinstance(x, list):
        return [_to_torch(v, arg_type) for v in x]
    if isinstance(x, str):
        # arg_type is the schema's real type: "ScalarType", "Optional[Layout]", ...
        if "ScalarType" in arg_type or "Layout" in arg_type or "MemoryFormat" in arg_type:
            return getattr(torch, x)
        if "Device" in arg_type:
            return torch.device(x)
    return x


def _from_torch(x):
    import torch

    if isinstance(x, torch.Tensor):
        return _C.from_dlpack(x.detach())
    if isinstance(x, (list, tuple)):
        return type(x)(_from_torch(v) for v in x)
    return x


def run(op_name: str, args: tuple, kwargs: dict):
    mode = config.fallback
    if mode == "error":
        raise NotImplementedError(
            f"{op_name} has no tensorbridge kernel, and config.fallback is 'error' "
            "(set it to 'allow' to run PyTorch's own CPU kernel on zero-copy views)"
        )
    if mode == "warn" and op_name not in _warned:
        _warned.add(op_name)
        warnings.warn(
            f"{op_name} has no tensorbridge kernel; running PyTorch's CPU kernel on zero-copy views",
            stacklevel=2,
        )
    func = _torch_op(op_name)
    schema_args = func._schema.arguments
    # torch cannot see DLPack's read-only flag: refuse here to write into read-only memory.
    for i, a in enumerate(schema_args):
        if a.alias_info is not None and a.alias_info.is_write:
            x = args[i] if i < len(args) and not a.kwarg_only else kwargs.get(a.name)
            if isinstance(x, _C.Array) and x.read_only:
                raise BufferError(
                    f"{op_name} would write into read-only memory (argument '{a.name}'); "
                    "wrap the source with copy=True to get a writable copy"
                )
    types = {a.name: str(a.real_type) for a in schema_args}
    targs = [_to_torch(a, str(schema_args[i].real_type)) for i, a in enumerate(args)]
    tkwargs = {k: _to_torch(v, types.get(k, "")) for k, v in kwargs.items()}
    try:
        out = func(*targs, **tkwargs)
    except RuntimeError as e:
        if "not resizable" not in str(e):
            raise
        # torch resizes an out= or in-place result of the wrong shape; our memory cannot grow.
        raise BufferError(
            f"{op_name}: its result must be resized, and a tensorbridge.Tensor cannot resize the "
            "memory it wraps (another framework owns it); pass a result of the right shape"
        ) from e
    if op_name.startswith("_c10d_functional::"):
        # A functional collective in a plan: torch registers its pending work under the
        # storage of the tensor it returns, which the plan only sees again as a new DLPack
        # view (another storage), so the plan's wait_tensor would not find it. Wait here.
        out = _wait(out)
    return _from_torch(out)


def _wait(x):
    import torch

    if isinstance(x, torch.Tensor):
        return torch.ops._c10d_functional.wait_tensor(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_wait(v) for v in x)
    return x
