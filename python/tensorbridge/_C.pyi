"""
tensorbridge C++ core: tensors over foreign memory, DLPack, the ATen op table.
"""
from __future__ import annotations
import collections.abc
import typing
import typing_extensions
__all__: list[str] = ['Array', 'KernelDeclinedError', 'KernelRegistration', 'Plan', 'call', 'dump', 'empty_cache', 'explain', 'from_dlpack', 'has_kernel', 'memory_stats', 'metrics', 'onednn_info', 'ops', 'reset_metrics', 'reset_peak_memory', 'schema', 'set_host_cache_limit', 'set_profiling', 'storage_allocations']
class KernelDeclinedError(NotImplementedError):
    """
    A tensorbridge kernel has no loop for the input's dtype or device (a NotImplementedError naming the op and the dtype). With config.fallback 'allow' or 'warn' such a call runs PyTorch's CPU kernel instead; with 'error' it raises this.
    """
class Array:
    """
    A tensor over memory that tensorbridge or another framework owns, described by shape,
    strides (in elements), dtype, device and a read-only flag. Made by ``tensorbridge.from_dlpack``;
    a DLPack producer itself (``numpy.from_dlpack(a)``, ``torch.from_dlpack(a)`` share its memory).
    """
    __dlpack_c_exchange_api__: typing.ClassVar[typing.Any]
    def __copy__(self) -> Array:
        ...
    def __deepcopy__(self, memo: typing.Any) -> Array:
        ...
    def __dlpack__(self, *, stream: int | None = None, max_version: tuple[int, int] | None = None, dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> typing_extensions.CapsuleType:
        """
        Exports this array as a DLPack capsule: legacy ('dltensor') when max_version is None or of
        major version 0, versioned ('dltensor_versioned', version 1.3) otherwise.
        """
    def __dlpack_device__(self) -> tuple[int, int]:
        """
        The (DLPack device type, device id) of this array.
        """
    def __len__(self) -> int:
        ...
    def __reduce__(self) -> tuple:
        ...
    def __repr__(self) -> str:
        ...
    def _dlpack_for_jax(self) -> typing.Any:
        """
        A legacy DLPack capsule for JAX, read-only memory included: JAX never writes into the arrays it imports, and its importer takes only legacy capsules.
        """
    def as_strided(self, shape: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], strides: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], storage_offset: typing.SupportsInt | typing.SupportsIndex = 0) -> Array:
        ...
    def clone(self) -> Array:
        ...
    def contiguous(self) -> Array:
        ...
    def diagonal(self, offset: typing.SupportsInt | typing.SupportsIndex = 0, dim1: typing.SupportsInt | typing.SupportsIndex = 0, dim2: typing.SupportsInt | typing.SupportsIndex = 1) -> Array:
        ...
    def expand(self, *args: typing.Any) -> Array:
        ...
    def is_contiguous(self) -> bool:
        ...
    def numpy(self) -> typing.Any:
        """
        A numpy array over the same memory (read-only if this Array is).
        """
    def permute(self, *args: typing.Any) -> Array:
        ...
    def reshape(self, *args: typing.Any) -> Array:
        ...
    def select(self, arg0: typing.SupportsInt | typing.SupportsIndex, arg1: typing.SupportsInt | typing.SupportsIndex) -> Array:
        ...
    def slice(self, dim: typing.SupportsInt | typing.SupportsIndex, start: typing.SupportsInt | typing.SupportsIndex | None = None, stop: typing.SupportsInt | typing.SupportsIndex | None = None, step: typing.SupportsInt | typing.SupportsIndex = 1) -> Array:
        ...
    def squeeze(self, dim: typing.SupportsInt | typing.SupportsIndex | None = None) -> Array:
        ...
    def transpose(self, arg0: typing.SupportsInt | typing.SupportsIndex, arg1: typing.SupportsInt | typing.SupportsIndex) -> Array:
        ...
    def unsqueeze(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> Array:
        ...
    def view(self, *args: typing.Any) -> Array:
        ...
    @property
    def T(self) -> Array:
        ...
    @property
    def data_ptr(self) -> int:
        ...
    @property
    def device(self) -> str:
        ...
    @property
    def dtype(self) -> str:
        ...
    @property
    def itemsize(self) -> int:
        ...
    @property
    def nbytes(self) -> int:
        ...
    @property
    def ndim(self) -> int:
        ...
    @property
    def read_only(self) -> bool:
        ...
    @property
    def shape(self) -> tuple:
        ...
    @property
    def size(self) -> int:
        ...
    @property
    def strides(self) -> tuple:
        """
        Strides in elements (not bytes), as torch reports them.
        """
class KernelRegistration:
    """
    A kernel registered from Python; remove() unregisters it.
    """
    def __repr__(self) -> str:
        ...
    def remove(self) -> None:
        ...
    @property
    def op(self) -> str:
        ...
class Plan:
    """
    A captured graph of table ops, built once, run in C++.
    """
    def __init__(self) -> None:
        ...
    def add_input(self, name: str) -> int:
        ...
    def add_node(self, op: str, args: collections.abc.Iterable, num_outputs: typing.SupportsInt | typing.SupportsIndex, name: str) -> list[int]:
        ...
    def count(self, served_by: str) -> int:
        ...
    def dump(self) -> str:
        ...
    def expect_strides(self, value: typing.SupportsInt | typing.SupportsIndex, strides: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex]) -> None:
        """
        The strides the graph expects of a value: a result laid out otherwise is copied into them where the graph depends on the layout.
        """
    def finalize(self) -> None:
        ...
    def node_times(self) -> list:
        """
        Per node, in plan order: (node, op, served_by, calls, total_ns, min_ns) since profiling was turned on.
        """
    def run(self, inputs: collections.abc.Iterable) -> list:
        """
        Runs the plan on the inputs (the GIL is released while it runs).
        """
    def run_torch(self, args: list, convert: typing.Any) -> list:
        """
        Runs the plan on torch tensors and returns torch tensors sharing the results' memory (both ways zero-copy, in C++; an output that is an input unchanged is that input's own object); ``convert`` turns any other input into a plan input.
        """
    def set_outputs(self, arg0: collections.abc.Iterable) -> None:
        ...
    def set_value_base(self, value: typing.SupportsInt | typing.SupportsIndex, base: typing.SupportsInt | typing.SupportsIndex) -> None:
        """
        ``value`` is a view of ``base``'s memory: for peak_bytes, base's buffer stays alive until the last use of its views.
        """
    def set_value_bytes(self, value: typing.SupportsInt | typing.SupportsIndex, bytes: typing.SupportsInt | typing.SupportsIndex) -> None:
        """
        The bytes a value's buffers take (0 for a view of another value): the plan sums them by liveness into peak_bytes.
        """
    @property
    def num_nodes(self) -> int:
        ...
    @property
    def num_slots(self) -> int:
        ...
    @property
    def num_values(self) -> int:
        ...
    @property
    def peak_bytes(self) -> int:
        """
        The most bytes alive at once during a run: the plan's own results and the inputs given bytes (handed over by the caller, freed at their last use), a buffer alive while any view of it is (by the sizes given to set_value_bytes and set_value_base).
        """
    @property
    def profiling(self) -> bool:
        """
        While True, each run times every node (turning it on clears the times).
        """
    @profiling.setter
    def profiling(self, arg1: bool) -> None:
        ...
    @property
    def restrides(self) -> int:
        """
        Results copied into the strides the graph expects, over all runs.
        """
def _array_from_bytes(data: bytes, shape: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], strides: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], dtype: str) -> Array:
    """
    An Array over new memory holding `data`, the bytes of a pickled Array (its inverse: Array.__reduce__).
    """
def _aten_schema_names() -> list[tuple[str, bool]]:
    ...
def _composites() -> list:
    ...
def _define(schema: str) -> str:
    """
    Declares the schema of an op outside aten.
    """
def _eager_c_api() -> tuple[int, int, int]:
    ...
def _eager_dispatch(arg0: typing.Any, arg1: typing.Any, arg2: typing.Any) -> typing.Any:
    ...
def _eager_fast_wrapper(arg0: typing.SupportsInt | typing.SupportsIndex) -> bool:
    ...
def _eager_init(arg0: typing.Any, arg1: typing.Any, arg2: dict, arg3: typing.Any, arg4: typing.Any, arg5: typing.Any) -> None:
    ...
def _eager_route(arg0: collections.abc.Sequence[str], arg1: typing.Any) -> None:
    ...
def _eager_timing(arg0: bool) -> dict:
    ...
def _eager_wrap_array(arg0: typing.Any, arg1: typing.Any) -> typing.Any:
    ...
def _ffi_handler() -> typing_extensions.CapsuleType:
    """
    The XLA FFI handler that runs registered plans, as a PyCapsule.
    """
def _ffi_metrics() -> dict:
    """
    Plans registered for the FFI handler, and its successful and failed runs.
    """
def _ffi_register_plan(plan: Plan) -> int:
    """
    Keeps a finalized plan for the FFI handler; returns its id.
    """
def _ffi_set_threads(n: typing.SupportsInt | typing.SupportsIndex) -> None:
    """
    OpenMP threads of one FFI handler call (0: OpenMP's default).
    """
def _find_torch_dispatch_rule(*args: typing.Any, **kwargs: typing.Any):
    """
    _find_torch_dispatch_rule(op, torch_dispatch_class): torch._library.simple_registry.find_torch_dispatch_rule without Python frames.
    """
def _import_path(x: typing.Any, *, device: typing.Any = None, copy: typing.Any = None) -> str:
    """
    Debugging: imports `x` as from_dlpack would and says how: 'array', 'capsule', 'exchange_api', 'dlpack' or 'dlpack_legacy'.
    """
def _parse_schema(arg0: str) -> str:
    ...
def _register_python_kernel(op: str, fn: typing.Any, where: str) -> KernelRegistration:
    ...
def _set_dispatch_rule_registry(arg0: typing.Any) -> None:
    ...
def _set_fallback(fn: typing.Any) -> None:
    """
    Installs fn(op_name, args, kwargs) as the table's fallback (step 4).
    """
def _set_fallback_on_decline(on: bool) -> None:
    """
    Whether a kernel that declines its input's dtype or device hands the call to the fallback (config.fallback 'allow' / 'warn') or raises KernelDeclinedError ('error').
    """
def _set_legal(arg0: str, arg1: bool) -> None:
    ...
def _torch_dispatch(*args: typing.Any, **kwargs: typing.Any) -> typing.Any:
    """
    _torch_dispatch(cls, func, types, args=(), kwargs=None): tensorbridge.Tensor's __torch_dispatch__.
    """
def call(op: str, *args: typing.Any, **kwargs: typing.Any) -> typing.Any:
    """
    Runs one op of the table by its ATen name on Arrays (or anything from_dlpack accepts), with arguments bound against PyTorch's schema (defaults filled, types checked); returns Arrays.
    """
def dump() -> str:
    """
    The whole op table, as text.
    """
def empty_cache() -> None:
    """
    Returns the freed large blocks tensorbridge keeps for reuse to the C library.
    """
def explain(op: str) -> str:
    """
    Says which path the next call of `op` on the CPU takes, and why.
    """
def from_dlpack(x: typing.Any, *, device: typing.Any = None, copy: bool | None = None) -> Array:
    """
    Wraps `x` as a tensorbridge.Array without copying.
    
    `x` is any object with ``__dlpack__`` (numpy, torch, JAX, CuPy, ...), a DLPack capsule, or an
    Array. The producer's C exchange API is used when its type has one; otherwise
    ``__dlpack__(max_version=(1, 3))``, falling back to the legacy protocol. ``copy=True`` asks for
    a copy, ``copy=False`` forbids one (BufferError when the producer would need to copy);
    ``device`` asks the producer for memory on that device. JAX arrays arrive read-only.
    """
def has_kernel(op: str) -> bool:
    """
    True when the next call of `op` on the CPU runs a kernel of the table's own (not a composite, a decomposition or the fallback).
    """
def memory_stats() -> dict:
    """
    tensorbridge's buffers: allocations and their bytes (monotonic), and the cache of freed large blocks: requests it served (hits), large requests it could not (misses), bytes it holds now and its limit; live_bytes: buffers handed out and not freed (by their size class), peak_live_bytes and peak_footprint_bytes (live plus cached) the most held at once since reset_peak_memory().
    """
def metrics() -> dict:
    """
    Per-op counters: calls, and how many were served by kernel, composite, decomposition or fallback; declined: of the fallbacks, the calls whose kernel declined the input's dtype or device; time_ns while profiling is on.
    """
def onednn_info() -> dict:
    """
    oneDNN's version, the CPU ISA it dispatches to, whether tensorbridge capped it, and how many primitives the kernels created, by implementation name.
    """
def ops() -> list:
    """
    Every op the table serves on the CPU, with how it is served.
    """
def reset_metrics() -> None:
    """
    Sets every per-op counter of metrics() back to zero.
    """
def reset_peak_memory() -> None:
    """
    Starts memory_stats()'s peak_live_bytes and peak_footprint_bytes over from the bytes held now.
    """
def schema(op: str) -> typing.Any:
    """
    The schema tensorbridge holds for `op`, in PyTorch's text form.
    """
def set_host_cache_limit(nbytes: typing.SupportsInt | typing.SupportsIndex) -> None:
    """
    The most bytes of freed large blocks kept for reuse (0: none); trims the cache to it.
    """
def set_profiling(on: bool) -> None:
    """
    Turns timing of every table call on or off: while on, metrics() reports time_ns per op (the time spent in its calls).
    """
def storage_allocations() -> dict:
    """
    Buffers tensorbridge has allocated in this process (count, bytes): a plan run's share is the difference around it.
    """
__version__: str
_ffi_api_version: tuple = (0, 3)
