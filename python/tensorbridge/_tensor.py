"""``tensorbridge.Tensor``: a ``torch.Tensor`` whose data is a ``tensorbridge.Array`` over memory
that numpy, JAX or torch owns, and whose every ATen op runs in tensorbridge's C++ table.

It is a wrapper subclass on device ``cpu``: torch sees shape, strides and dtype; the data stays
where it was. ``__torch_dispatch__`` hands each op to the table in one call (the kernel runs
with the GIL released); ops the table lacks run on torch's own CPU kernel through zero-copy
views (the fallback, counted in ``metrics()``). Autograd works above it: backward ops come
through ``__torch_dispatch__`` like any other op.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import torch

from tensorbridge import _C, _distributed
from tensorbridge._dtypes import TORCH_DTYPES

if TYPE_CHECKING:
    import numpy as np

__all__ = ["UNSUPPORTED", "Tensor", "to_jax", "to_numpy", "to_torch", "wrap", "wrap_module"]


_LAYOUT = (
    "tensorbridge computes on strided memory: with autograd, convert a plain view, "
    "tensorbridge.to_torch(t), or detach first (without autograd the result is a plain torch "
    "tensor in the new layout)"
)

# The torch.Tensor methods a tensorbridge.Tensor refuses where a plain tensor would not, each
# with the reason its error gives. tests/python/test_tensor_surface.py checks that each raises
# with this reason and that every other public method behaves as on a plain tensor.
UNSUPPORTED: dict[str, str] = {
    "share_memory_": (
        "the memory belongs to the framework that lent it and cannot be moved into shared "
        "memory; tensorbridge tensors pass between processes by value (pickle)"
    ),
    "set_": "a tensorbridge.Tensor stays on the memory it wraps",
    "resize_": "a tensorbridge.Tensor cannot resize the memory it wraps",
    "resize_as_": "a tensorbridge.Tensor cannot resize the memory it wraps",
    "chalf": "dtype complex32 has no tensorbridge equivalent",
    **{
        m: _LAYOUT
        for m in (
            "to_sparse",
            "to_sparse_coo",
            "to_sparse_csr",
            "to_sparse_csc",
            "to_sparse_bsr",
            "to_sparse_bsc",
            "to_mkldnn",
        )
    },
}


class Tensor(torch.Tensor):
    """A torch tensor over foreign memory; see the module documentation. Make one with
    ``tensorbridge.wrap(x)``."""

    # The data: an Array over the foreign memory. While torch.compile traces (AOT autograd
    # with fake tensors) a Tensor holds only `_inner`, the traced stand-in of that memory.
    # A slot, not an instance-dict entry: the eager path (python/src/eager.cc) reads and writes
    # it at its offset, and a result of an op needs no instance dict.
    __slots__ = ("_array",)
    _array: _C.Array | None
    _inner_cache: torch.Tensor | None = None  # set only on tensors that tracing has met
    # The framework whose memory tb.wrap / wrap_module wrapped ("numpy", "torch", "jax"), kept
    # for deep copies (_serialization.py); unset on results of ops.
    _source: str

    @staticmethod
    def __new__(cls, array: _C.Array, requires_grad: bool = False) -> Tensor:
        # The libtorch-linked maker gives the wrapper the array's memory as its storage, so
        # torch's C++ code that reads a tensor's memory (CompositeImplicit decompositions,
        # torch.utils.dlpack.to_dlpack) reads the wrapped values; it checks the device and
        # dtype itself. Without it, the wrapper's storage holds no memory.
        t = _C._eager_wrap_array(cls, array)
        if t is None:
            if array.device != "cpu":
                raise ValueError(
                    f"tensorbridge.Tensor computes on the CPU; this array is on {array.device}"
                )
            dtype = TORCH_DTYPES.get(array.dtype)
            if dtype is None:
                raise TypeError(f"dtype {array.dtype} has no torch equivalent")
            t = torch.Tensor._make_wrapper_subclass(
                cls,
                array.shape,
                strides=array.strides,
                dtype=dtype,
                device=torch.device("cpu"),
            )
            t._array = array
        if requires_grad:
            t.requires_grad_(True)
        return t

    def __init__(self, array: _C.Array, requires_grad: bool = False) -> None:
        pass

    # ---- torch.compile: a traceable wrapper subclass whose inner tensor is a zero-copy plain
    # view of the same memory. Dynamo and AOT autograd trace through it, the compiled plan
    # runs on the plain views, and results are wrapped back without copies.
    @property
    def _inner(self) -> torch.Tensor:
        if self._inner_cache is None:
            self._inner_cache = torch.from_dlpack(self._array)
        return self._inner_cache

    def __tensor_flatten__(self):
        return ["_inner"], None

    def _stable_hash_for_caching(self) -> str:
        # AOT autograd's cache key for this input: its metadata (the wrapper holds no state
        # beyond its one zero-copy inner view)
        meta = (self.dtype, tuple(self.shape), tuple(self.stride()), self.requires_grad)
        return f"tensorbridge.Tensor{meta}"

    @staticmethod
    def __tensor_unflatten__(inner_tensors, ctx, outer_size, outer_stride):
        return Tensor._from_inner(inner_tensors["_inner"])

    @staticmethod
    def _from_inner(inner: torch.Tensor) -> Tensor:
        if _is_real(inner):
            t = Tensor(_C.from_dlpack(inner.detach()))
        else:
            t = torch.Tensor._make_wrapper_subclass(
                Tensor,
                inner.shape,
                strides=inner.stride(),
                dtype=inner.dtype,
                device=torch.device("cpu"),
                requires_grad=inner.requires_grad,
            )
            t._array = None
        t._inner_cache = inner
        return t

    __torch_function__ = torch._C._disabled_torch_function_impl  # type: ignore[assignment]

    # One C++ call per op (python/src/eager.cc): unwraps the arguments, runs the table with the
    # GIL released and wraps the results; traced stand-ins go to _traced_dispatch. A builtin,
    # not a classmethod: torch looks it up on the instance for every op, and a builtin is not
    # bound (no method object made and freed per op); it takes the class as an optional first
    # argument, so calls written for a classmethod work too.
    __torch_dispatch__ = _C._torch_dispatch

    def __repr__(self, *, tensor_contents: object = None) -> str:  # type: ignore[override]
        if self._array is None:  # a tracer's stand-in: no data to show
            return f"tensorbridge.Tensor(traced, shape={tuple(self.shape)}, dtype={self.dtype})"
        grad = f", grad_fn={type(self.grad_fn).__name__}" if self.grad_fn is not None else ""
        grad = grad or (", requires_grad=True" if self.requires_grad else "")
        return f"tensorbridge.Tensor({to_torch(self)!r}{grad})"

    # FSDP2 (torch.distributed.fsdp.fully_shard): all-gathers on zero-copy views, unsharded
    # parameters over FSDP's memory; see _distributed.py.
    fsdp_pre_all_gather = _distributed.fsdp_pre_all_gather
    fsdp_post_all_gather = _distributed.fsdp_post_all_gather

    def numpy(self, *, force: bool = False) -> np.ndarray:
        """A numpy array over the same memory (read-only if the source was)."""
        if self.requires_grad and not force:
            raise RuntimeError(
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
                "instead."
            )
        return to_numpy(self)

    # ---- DLPack export: the wrapped memory itself, with its read-only flag (torch's own
    # export reads the wrapper's storage, which holds no memory when torch made the wrapper,
    # and nothing while tracing). np.from_dlpack, torch.from_dlpack, jax.dlpack and
    # tensorbridge.from_dlpack / call take a Tensor through these, zero-copy.
    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        """A DLPack capsule over the wrapped memory (versioned when ``max_version`` asks for
        it), as ``torch.Tensor.__dlpack__`` gives for a plain tensor."""
        if self.requires_grad:  # torch's rule and message
            raise RuntimeError("Can't export tensors that require gradient, use tensor.detach()")
        if self._array is None:  # a tracer's stand-in: its inner tensor is the memory
            # torch annotates dl_device's device type as an IntEnum; DLPack's is an int.
            return self._inner.__dlpack__(
                stream=stream,
                max_version=max_version,
                dl_device=dl_device,  # type: ignore[arg-type]
                copy=copy,
            )
        return self._array.__dlpack__(
            stream=stream, max_version=max_version, dl_device=dl_device, copy=copy
        )

    def __dlpack_device__(self) -> tuple[int, int]:  # type: ignore[override]
        """(device type, device id) of the wrapped memory, as DLPack numbers them."""
        if self._array is None:
            return self._inner.__dlpack_device__()
        return self._array.__dlpack_device__()

    # ---- the parts of the torch.Tensor surface that read memory outside __torch_dispatch__:
    # answered from a plain torch view of the same memory (no copy) ----
    def data_ptr(self) -> int:
        """The address of the first element of the wrapped memory (0 for a tracer's stand-in)."""
        return 0 if self._array is None else self._array.data_ptr

    def __format__(self, format_spec: str) -> str:
        if self.dim() == 0 and self._array is not None:
            return self.item().__format__(format_spec)
        return object.__format__(self, format_spec)

    def const_data_ptr(self) -> int:
        return self.data_ptr()

    def share_memory_(self) -> Tensor:
        raise NotImplementedError(f"share_memory_: {UNSUPPORTED['share_memory_']}")

    def _plain_layout(method: str):  # type: ignore[misc]  # a helper of the class body
        def convert(self: Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
            if self.requires_grad and torch.is_grad_enabled():
                raise NotImplementedError(f"{method}: {UNSUPPORTED[method]}")
            return getattr(_plain(self, method), method)(*args, **kwargs)

        convert.__name__ = method
        convert.__doc__ = (
            f"torch.Tensor.{method} of the wrapped values: a plain torch tensor in the new "
            "layout (a copy, as for any tensor)."
        )
        return convert

    to_sparse = _plain_layout("to_sparse")
    to_sparse_coo = _plain_layout("to_sparse_coo")
    to_sparse_csr = _plain_layout("to_sparse_csr")
    to_sparse_csc = _plain_layout("to_sparse_csc")
    to_sparse_bsr = _plain_layout("to_sparse_bsr")
    to_sparse_bsc = _plain_layout("to_sparse_bsc")
    to_mkldnn = _plain_layout("to_mkldnn")
    del _plain_layout

    def untyped_storage(self) -> torch.UntypedStorage:
        """A torch storage over the wrapped memory (no copy). It begins at this tensor's first
        element, which is why ``storage_offset()`` is 0 for every tensorbridge.Tensor."""
        if self._array is None:
            return super().untyped_storage()
        return to_torch(self).untyped_storage()

    def tolist(self) -> Any:
        return _plain(self, "tolist").tolist()

    def apply_(self, fn: Callable[[Any], Any]) -> Tensor:
        _plain(self, "apply_").apply_(fn)
        return self

    def map_(self, other: torch.Tensor, fn: Callable[[Any, Any], Any]) -> Tensor:
        _plain(self, "map_").map_(other, fn)
        return self

    def map2_(self, x: torch.Tensor, y: torch.Tensor, fn: Callable[[Any, Any, Any], Any]) -> Tensor:
        _plain(self, "map2_").map2_(x, y, fn)
        return self

    # ---- pickling, copies (python/tensorbridge/_serialization.py says how and why) ----
    def __reduce_ex__(self, proto):
        from tensorbridge import _serialization

        return _serialization.reduce_tensor(self)

    def __deepcopy__(self, memo):
        from tensorbridge import _serialization

        return _serialization.deepcopy_tensor(self, memo)

    @property
    def array(self) -> _C.Array:
        """The ``tensorbridge.Array`` holding this tensor's data."""
        return _data(self)


def _data(t: Tensor) -> _C.Array:
    """The Array of `t`; a ValueError for the stand-in of a tensor that torch.compile traces,
    which holds no data."""
    if t._array is None:
        raise ValueError("this tensorbridge.Tensor is a stand-in traced by torch.compile: no data")
    return t._array


def _plain(t: Tensor, method: str) -> torch.Tensor:
    if t._array is None:
        raise RuntimeError(f"{method}: a traced tensorbridge.Tensor has no data to read")
    return to_torch(t)


# ---- dispatch ---------------------------------------------------------------------------------

_NAMES: dict = {}
_MUTATED: dict = {}


def _op_name(func) -> str:
    name = _NAMES.get(func)
    if name is None:
        s = func._schema
        name = s.name + (f".{s.overload_name}" if s.overload_name else "")
        _NAMES[func] = name
        writes = [
            (i, a.name, a.kwarg_only)
            for i, a in enumerate(s.arguments)
            if a.alias_info is not None and a.alias_info.is_write
        ]
        returns_alias = len(s.returns) == 1 and s.returns[0].alias_info is not None
        _MUTATED[func] = writes[0] if writes and returns_alias else None
    return name


def _unwrap(x):
    if isinstance(x, Tensor):
        return x._array
    if isinstance(x, torch.Tensor):
        if x.device.type != "cpu":
            raise ValueError(f"tensorbridge: cannot mix a {x.device} tensor into a CPU op")
        if x.is_conj() or x.is_neg():
            x = x.resolve_conj().resolve_neg()
        return _C.from_dlpack(x.detach())
    if isinstance(x, (list, tuple)):
        return [_unwrap(v) for v in x]
    if isinstance(x, torch.device):
        if x.type != "cpu":
            raise NotImplementedError(f"tensorbridge.Tensor lives on the CPU; got device {x}")
        return "cpu"
    if isinstance(x, (torch.layout, torch.memory_format)):
        return str(x)[6:]  # "torch.strided" -> "strided"
    return x


def _wrap(x):
    if isinstance(x, _C.Array):
        return Tensor(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_wrap(v) for v in x)
    return x


def _is_real(t: torch.Tensor) -> bool:
    """A tensor with memory (not a fake, functional or meta tensor of a tracer)."""
    return type(t) is torch.Tensor and t.device.type == "cpu" and not torch._is_functional_tensor(t)


def _stand_in(t: torch.Tensor) -> bool:
    """A tracer's tensor subclass without memory of its own (fake or functional tensors)."""
    from torch._subclasses.fake_tensor import FakeTensor
    from torch._subclasses.functional_tensor import FunctionalTensor

    return isinstance(t, (FakeTensor, FunctionalTensor)) or t.device.type == "meta"


def _traced_dispatch(func, args, kwargs):
    # Tracing for torch.compile: run the op on the inner stand-ins so that the tracer records
    # plain ATen ops, and wrap the results again.
    _op_name(func)

    def inner(x):
        return x._inner if isinstance(x, Tensor) else x

    out = func(
        *torch.utils._pytree.tree_map(inner, args), **torch.utils._pytree.tree_map(inner, kwargs)
    )
    mutated = _MUTATED[func]
    if mutated is not None:
        i, arg_name, kwarg_only = mutated
        return kwargs[arg_name] if kwarg_only or arg_name in kwargs else args[i]
    return torch.utils._pytree.tree_map(
        lambda x: Tensor._from_inner(x) if isinstance(x, torch.Tensor) else x, out
    )


def _metadata_dispatch(func, args, kwargs):
    # In-place ops that change the tensor object rather than its data (squeeze_, t_,
    # as_strided_, resize_, ...): the Array becomes the view the out-of-place op gives, and the
    # wrapper's own sizes and strides change with it.
    self = args[0]
    name = _op_name(func)
    base = func._schema.name.split("::")[1]
    if base == "set_":
        raise NotImplementedError(
            f"{name}: a tensorbridge.Tensor stays on the memory it wraps; make a new tensor with "
            "tensorbridge.wrap(...) instead"
        )
    if base in ("resize_", "resize_as_"):
        size = tuple(args[1]) if base == "resize_" else tuple(args[1].shape)
        if tuple(self.shape) == size:
            return self
        numel = 1
        for n in size:
            numel *= n
        if numel != self.numel() or not self.is_contiguous():
            raise BufferError(
                f"{name}: a tensorbridge.Tensor cannot resize the memory it wraps (another "
                f"framework owns it): shape {tuple(self.shape)} to {size}; make a new tensor"
            )
        view = torch.ops.aten.view.default(self, size)
        update = torch.ops.aten.as_strided_.default
        update_args = (self, size, view.stride(), self.storage_offset())
    else:
        view = getattr(torch.ops.aten, base[:-1])(*args, **kwargs)  # squeeze_ -> squeeze
        update, update_args = func, args
    with torch.utils._mode_utils.no_dispatch():
        update(*update_args, **({} if update is not func else kwargs))  # the wrapper's metadata
    if isinstance(view, Tensor):
        self._array = view._array
        self._inner_cache = view._inner_cache
    return self


def _dispatch_python(func, args, kwargs):
    """The same as _C._eager_dispatch, in Python (kept as the readable reference)."""
    name = _op_name(func)
    out = _C.call(name, *[_unwrap(a) for a in args], **{k: _unwrap(v) for k, v in kwargs.items()})
    mutated = _MUTATED[func]
    if mutated is not None:
        # In-place and out= ops return the very object they wrote to.
        i, arg_name, kwarg_only = mutated
        return kwargs[arg_name] if kwarg_only or arg_name in kwargs else args[i]
    return _wrap(out)


# ---- conversions ------------------------------------------------------------------------------


def wrap(x: Any, *, copy: bool = False, requires_grad: bool | None = None) -> Tensor:
    """A ``tensorbridge.Tensor`` over `x`'s memory: a numpy array, JAX array, torch tensor,
    ``tensorbridge.Array`` or any DLPack producer. No copy unless ``copy=True`` (which also
    makes read-only sources such as JAX arrays writable)."""
    if isinstance(x, Tensor):
        t = Tensor(_data(x).clone() if copy else _data(x), requires_grad=x.requires_grad)
        if not copy and "_source" in x.__dict__:
            t._source = x._source
        return t
    grad = False
    source = None if copy else _source_of(x)
    if isinstance(x, torch.Tensor):
        grad = x.requires_grad
        x = x.detach()
    array = _C.from_dlpack(x, copy=True if copy else None)
    t = Tensor(array, requires_grad=grad if requires_grad is None else requires_grad)
    if source is not None:
        t._source = source
    return t


def _source_of(x) -> str | None:
    """The framework whose memory `x` is ("numpy", "torch", "jax"), or None for others."""
    module = type(x).__module__.partition(".")[0]
    return {"numpy": "numpy", "torch": "torch", "jax": "jax", "jaxlib": "jax"}.get(module)


def to_torch(t: torch.Tensor | _C.Array) -> torch.Tensor:
    """A plain torch tensor over the same memory (no copy; no autograd history)."""
    return torch.from_dlpack(_data(t) if isinstance(t, Tensor) else t)


def to_numpy(t: torch.Tensor | _C.Array) -> np.ndarray:
    """A numpy array over the same memory (read-only if the source was)."""
    if isinstance(t, Tensor):
        return _data(t).numpy()
    return t.numpy()


def to_jax(t: torch.Tensor | _C.Array) -> Any:
    """A JAX array from the same memory. JAX shares CPU memory that is suitably aligned and
    copies otherwise (``jax.dlpack.from_dlpack`` decides); arrays JAX shares must not be
    written afterwards, as JAX arrays are immutable."""
    import jax.numpy as jnp

    array = _data(t) if isinstance(t, Tensor) else t
    if isinstance(array, _C.Array) and array.read_only:
        # JAX asks for a legacy capsule, which cannot mark memory read-only; JAX never writes
        # into what it imports, so read-only memory (e.g. a JAX array's) goes out as it is.
        return jnp.from_dlpack(_ForJax(array))
    return jnp.from_dlpack(array)


class _ForJax:
    """A read-only Array as JAX's DLPack importer sees it."""

    def __init__(self, array: _C.Array) -> None:
        self._array = array

    def __dlpack__(self, *, stream: Any = None) -> Any:
        return self._array._dlpack_for_jax()

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._array.__dlpack_device__()


def wrap_module(module: torch.nn.Module, *, copy: bool = False) -> torch.nn.Module:
    """Turns `module`'s parameters and buffers into ``tensorbridge.Tensor``s in place (sharing
    their memory unless ``copy=True``), so that the module runs on tensorbridge's kernels."""
    done: dict[int, Any] = {}  # a parameter shared by several modules (tied) stays one
    for m in module.modules():
        for name, p in list(m._parameters.items()):
            if p is not None and not isinstance(p, Tensor):
                if id(p) not in done:
                    param = torch.nn.Parameter(
                        wrap(p.data, copy=copy), requires_grad=p.requires_grad
                    )
                    if not copy:
                        param._source = "torch"  # type: ignore[attr-defined]
                    done[id(p)] = param
                m._parameters[name] = done[id(p)]
        for name, b in list(m._buffers.items()):
            if b is not None and not isinstance(b, Tensor):
                if id(b) not in done:
                    done[id(b)] = wrap(b, copy=copy)
                m._buffers[name] = done[id(b)]
    return module


def _register_pickling() -> None:
    """``torch.load(..., weights_only=True)`` may call the two functions that rebuild pickled
    tensorbridge.Tensors and Arrays (torch's allow-list, as torch.distributed.tensor does for
    DTensor); multiprocessing's pickler takes tensorbridge.Tensors by their bytes."""
    from multiprocessing.reduction import ForkingPickler

    from tensorbridge import _serialization

    torch.serialization.add_safe_globals(
        [_serialization.rebuild_tensor, _serialization.rebuild_array]
    )
    ForkingPickler.register(Tensor, _serialization.reduce_tensor_for_processes)


_register_pickling()

_C._eager_init(Tensor, torch.Tensor, TORCH_DTYPES, _traced_dispatch, _metadata_dispatch, _stand_in)

_WRAPPER_LIB = "libtb_torch_wrapper.so"
_wrapper_lib: Any = None  # the loaded ctypes library, kept alive while its function is in use


def _wrapper_library() -> tuple[Any, str]:
    """(the address of tb_torch_make_wrapper, "") where this build has the libtorch-linked
    maker of result wrappers (python/torch_device/wrapper.cc) for the running torch release,
    else (None, why not)."""
    global _wrapper_lib
    import ctypes
    from pathlib import Path

    here = Path(os.path.realpath(_C.__file__)).parent
    path = here / _WRAPPER_LIB
    if not path.is_file():
        return None, "not built (no torch CMake config at build time)"
    version = here / "libtb_torch_device.torch_version"
    built = version.read_text().strip() if version.is_file() else "unknown"
    if built != torch.__version__.split("+")[0]:
        return None, f"built against torch {built}, running {torch.__version__}"
    if _wrapper_lib is None:
        _wrapper_lib = ctypes.CDLL(str(path))
    return ctypes.cast(_wrapper_lib.tb_torch_make_wrapper, ctypes.c_void_p).value, ""


_fast_wrappers_on = False  # whether the eager path makes wrappers with a libtorch-linked maker
_python_key_count = 0  # the ops the Python-key kernels serve (0: off)


def _fast_wrappers(on: bool = True) -> str:
    """Makes the results of eager ops with the libtorch-linked maker (``on``, where this build
    has one for the running torch: see ``_wrapper_library``) or with
    ``torch.Tensor._make_wrapper_subclass``. While the Python-key kernels are registered, the
    maker is theirs (``tb_python_key_make_wrapper``: the same wrappers, whose detached copies
    are made in C++). Returns "" when a maker is in use, else why not."""
    global _fast_wrappers_on
    address, why = _wrapper_library() if on else (None, "switched off")
    if address is not None and _python_key_count > 0:
        import ctypes

        address = ctypes.cast(_python_key_lib.tb_python_key_make_wrapper, ctypes.c_void_p).value
    _C._eager_fast_wrapper(address or 0)
    _fast_wrappers_on = address is not None
    return why


if not os.environ.get("TB_NO_FAST_WRAPPERS"):
    _fast_wrappers(True)


def _install_rule_lookup() -> bool:
    """Before every ``__torch_dispatch__`` of a tensor subclass, torch calls
    ``torch._library.simple_registry.find_torch_dispatch_rule(op, cls)`` (the rules of
    ``torch.library.register_torch_dispatch``): three Python calls per op. This puts the same
    lookup in C++ (``_C._find_torch_dispatch_rule``) in its place, where the function and the
    rule holder's ``find`` are the ones it replaces (their names as below); torch keeps the
    function it finds at the first subclass dispatch of the process. ``TB_NO_FAST_RULE_LOOKUP=1``
    at import leaves torch's function alone. Returns whether it was installed."""
    from torch._library import simple_registry

    original = simple_registry.find_torch_dispatch_rule
    code = getattr(original, "__code__", None)
    holder = getattr(simple_registry, "GenericTorchDispatchRuleHolder", None)
    holder_find = getattr(getattr(holder, "find", None), "__code__", None)
    if (
        code is None
        or code.co_names != ("singleton", "find", "__qualname__", "torch_dispatch_rules")
        or holder_find is None
        or holder_find.co_names != ("_data", "get")
    ):
        return original is _C._find_torch_dispatch_rule
    _C._set_dispatch_rule_registry(simple_registry.singleton)
    simple_registry.find_torch_dispatch_rule = _C._find_torch_dispatch_rule
    return True


if not os.environ.get("TB_NO_FAST_RULE_LOOKUP"):
    _install_rule_lookup()


_PYTHON_KEY_LIB = "libtb_torch_python_key.so"
_python_key_lib: Any = None  # the loaded ctypes library, kept while its kernels are registered


def _python_key_kernels(on: bool = True) -> str:
    """Registers (``on``) or removes the libtorch-linked kernels on torch's ``Python`` dispatch
    key (python/torch_device/python_key.cc): ops on tensorbridge.Tensors that the table serves
    with a kernel go from torch's dispatcher to the table in C++, without the trip through
    ``__torch_dispatch__``; calls under a TorchDispatchMode, on other subclasses, or that the
    kernels cannot take, go to ``__torch_dispatch__`` as before. They need the libtorch-linked
    result wrappers (``_fast_wrappers``) and a build for the running torch release.
    ``TB_NO_PYTHON_KEY_KERNELS=1`` at import leaves them off. Not while other threads run ops
    (torch's registrations change under them; ``_python_route()`` is the thread-safe switch).
    Returns "" when they are registered, else why not."""
    global _python_key_lib
    import ctypes
    from pathlib import Path

    if _python_key_lib is None and not on:
        return "switched off"
    address, why = _wrapper_library()
    path = Path(os.path.realpath(_C.__file__)).parent / _PYTHON_KEY_LIB
    if address is None:
        return why
    if not path.is_file():
        return "not built (no torch CMake config at build time)"
    if _python_key_lib is None:
        lib = ctypes.PyDLL(str(path))
        lib.tb_python_key_kernels.restype = ctypes.c_int64
        lib.tb_python_key_kernels.argtypes = [
            ctypes.py_object,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_int,
        ]
        lib.tb_python_key_rules.restype = None
        lib.tb_python_key_rules.argtypes = [ctypes.c_int]
        lib.tb_python_key_pause.restype = None
        lib.tb_python_key_pause.argtypes = [ctypes.c_int]
        lib.tb_python_key_fast_detach.restype = None
        lib.tb_python_key_fast_detach.argtypes = [ctypes.c_int]
        lib.tb_python_key_linear_calls.restype = ctypes.c_int64
        lib.tb_python_key_linear_calls.argtypes = []
        lib.tb_python_key_linear_recorded.restype = ctypes.c_int64
        lib.tb_python_key_linear_recorded.argtypes = []
        lib.tb_python_key_linear_record.restype = None
        lib.tb_python_key_linear_record.argtypes = [ctypes.c_int]
        lib.tb_python_key_above_calls.restype = ctypes.c_int64
        lib.tb_python_key_above_calls.argtypes = []
        _python_key_lib = lib
        _count_dispatch_rules()
    global _python_key_count
    array_tensor, attach, share = _C._eager_c_api()
    _python_key_count = int(
        _python_key_lib.tb_python_key_kernels(Tensor, array_tensor, attach, share, 1 if on else 0)
    )
    if _fast_wrappers_on:
        _fast_wrappers(True)  # the kernels' maker while they are registered, else wrapper.cc's
    return "" if on else "switched off"


def _python_key_ops() -> int:
    """How many ops the Python-key kernels serve (0 when they are off)."""
    return _python_key_count


def _linear_calls() -> int:
    """How many ``aten::linear`` calls the Python-key library's kernel above autograd served
    in C++ (one table call and one result, instead of torch's decomposition); 0 without it."""
    if _python_key_lib is None:
        return 0
    return int(_python_key_lib.tb_python_key_linear_calls())


def _linear_recorded() -> int:
    """How many of the ``aten::linear`` calls served recorded their own backward node
    (``tensorbridge::LinearBackward``: one table call per gradient) where gradients were
    wanted; 0 without the Python-key library."""
    if _python_key_lib is None:
        return 0
    return int(_python_key_lib.tb_python_key_linear_recorded())


def _linear_backward_node(on: bool) -> None:
    """Whether ``aten::linear`` calls with gradients to record run as one table call with their
    own backward node (True, the default) or as torch's decomposition (False)."""
    if _python_key_lib is not None:
        _python_key_lib.tb_python_key_linear_record(1 if on else 0)


def _above_autograd_calls() -> int:
    """How many calls of functional ops (new results, no argument written) the Python-key
    library's kernels above autograd served, where autograd had nothing to record; 0 without
    them."""
    if _python_key_lib is None:
        return 0
    return int(_python_key_lib.tb_python_key_above_calls())


@contextlib.contextmanager
def _python_route() -> Iterator[None]:
    """Within it, every op on tensorbridge.Tensors takes ``__torch_dispatch__`` although the
    Python-key kernels are registered (for benchmarks that time both routes in one process;
    it applies to all threads)."""
    if _python_key_lib is None:
        yield
        return
    _python_key_lib.tb_python_key_pause(1)
    try:
        yield
    finally:
        _python_key_lib.tb_python_key_pause(0)


@contextlib.contextmanager
def _python_detach() -> Iterator[None]:
    """Within it, torch's shallow copies of tensorbridge.Tensors (autograd's detach of saved
    outputs, ``.data``) take ``__torch_dispatch__`` with ``aten::detach`` as torch does for
    wrapper subclasses, instead of being made in C++ (for benchmarks and tests that compare
    both; it applies to all threads)."""
    if _python_key_lib is None:
        yield
        return
    _python_key_lib.tb_python_key_fast_detach(0)
    try:
        yield
    finally:
        _python_key_lib.tb_python_key_fast_detach(1)


def _count_dispatch_rules() -> None:
    """Tells the Python-key kernels while torch_dispatch rules
    (``torch.library.register_torch_dispatch``) exist for tensorbridge.Tensor: calls then take
    ``__torch_dispatch__``, where torch looks the rules up."""
    from torch._library import simple_registry
    from torch._library.utils import RegistrationHandle

    holder = simple_registry.GenericTorchDispatchRuleHolder
    original = holder.register
    if getattr(original, "_tb_counts_rules", False):
        return

    def register(self: Any, torch_dispatch_class: type, func: Callable[..., Any]) -> Any:
        handle = original(self, torch_dispatch_class, func)
        if torch_dispatch_class is not Tensor or _python_key_lib is None:
            return handle
        _python_key_lib.tb_python_key_rules(1)

        def deregister() -> None:
            handle.destroy()
            _python_key_lib.tb_python_key_rules(-1)

        return RegistrationHandle(deregister)

    register._tb_counts_rules = True  # type: ignore[attr-defined]
    holder.register = register  # type: ignore[method-assign]


if not os.environ.get("TB_NO_PYTHON_KEY_KERNELS") and not os.environ.get("TB_NO_FAST_WRAPPERS"):
    _python_key_kernels(True)
