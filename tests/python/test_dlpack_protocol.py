"""The DLPack protocol itself: Array.__dlpack__ (max_version, copy, dl_device, stream), capsules
(names, reuse, flags, read through ctypes), from_dlpack's negotiation and paths, Array's C
exchange API called through ctypes function pointers, and safety at interpreter shutdown."""

import ctypes
import gc
import subprocess
import sys
import textwrap
import weakref

import numpy as np
import pytest
from conftest import HAS_JAX, requires_jax

import tensorbridge as tb
from tensorbridge import _C

torch = pytest.importorskip("torch")

# ---- the DLPack structs, as ctypes sees them -------------------------------------------------

READ_ONLY, IS_COPIED = 1, 2
kDLCPU, kDLCUDA, kDLCUDAHost = 1, 2, 3


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]

    def dims(self):
        return (
            [self.shape[i] for i in range(self.ndim)],
            [self.strides[i] for i in range(self.ndim)] if self.strides else None,
        )


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [
        ("dl_tensor", DLTensor),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
    ]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


class DLPackExchangeAPI(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("prev_api", ctypes.c_void_p),
        ("managed_tensor_allocator", ctypes.c_void_p),
        ("managed_tensor_from_py_object_no_sync", ctypes.c_void_p),
        ("managed_tensor_to_py_object_no_sync", ctypes.c_void_p),
        ("dltensor_from_py_object_no_sync", ctypes.c_void_p),
        ("current_work_stream", ctypes.c_void_p),
    ]


assert ctypes.sizeof(DLTensor) == 48 and ctypes.sizeof(DLManagedTensorVersioned) == 80

_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]

# The exchange API's functions use the Python C API: PYFUNCTYPE keeps the GIL and raises the
# Python error they set. Deleters are called through CFUNCTYPE, which releases the GIL.
FROM_PY = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(ctypes.c_void_p))
DLTENSOR_FROM_PY = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(DLTensor))
TO_PY = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p))
SET_ERROR = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p)
ALLOCATOR = ctypes.PYFUNCTYPE(
    ctypes.c_int,
    ctypes.POINTER(DLTensor),
    ctypes.POINTER(ctypes.c_void_p),
    ctypes.c_void_p,
    SET_ERROR,
)
STREAM = ctypes.PYFUNCTYPE(
    ctypes.c_int, ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p)
)
DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def capsule_struct(cap):
    """The managed tensor in an unconsumed capsule, which it keeps alive while in use."""
    name = b"dltensor_versioned" if "versioned" in repr(cap) else b"dltensor"
    ptr = _get_pointer(cap, name)
    kind = DLManagedTensorVersioned if b"versioned" in name else DLManagedTensor
    struct = kind.from_address(ptr)
    struct.capsule = cap  # else a temporary capsule would free the tensor under us
    return struct


def exchange_api(cls):
    ptr = _get_pointer(cls.__dlpack_c_exchange_api__, b"dlpack_exchange_api")
    return DLPackExchangeAPI.from_address(ptr)


def delete_managed(address):
    DELETER(DLManagedTensorVersioned.from_address(address).deleter)(address)


# ---- Array.__dlpack__ ------------------------------------------------------------------------


@pytest.mark.parametrize("copy", [None, True, False])
@pytest.mark.parametrize("max_version", [None, (0, 8), (1, 0), (1, 3), (2, 0)])
def test_dunder_dlpack_max_version_and_copy(max_version, copy):
    a = np.arange(6, dtype=np.float64).reshape(2, 3)
    x = tb.from_dlpack(a)
    cap = x.__dlpack__(max_version=max_version, copy=copy)
    legacy = max_version is None or max_version[0] < 1
    assert repr(cap).startswith(
        '<capsule object "dltensor_versioned"' if not legacy else '<capsule object "dltensor"'
    )
    m = capsule_struct(cap)
    if not legacy:
        assert (m.version.major, m.version.minor) == (1, 3)
        assert m.flags == (IS_COPIED if copy else 0)
    dl = m.dl_tensor
    assert (dl.device.device_type, dl.device.device_id, dl.ndim) == (kDLCPU, 0, 2)
    assert (dl.dtype.code, dl.dtype.bits, dl.dtype.lanes) == (2, 64, 1)
    assert dl.dims() == ([2, 3], [3, 1]) and dl.byte_offset == 0
    assert (dl.data == a.ctypes.data) == (copy is not True)
    data = dl.data
    y = tb.from_dlpack(cap)
    assert "used_dltensor" in repr(cap)
    assert y.data_ptr == data and np.array_equal(y.numpy(), a)
    if copy:
        a[0, 0] = 99
        assert y.numpy()[0, 0] == 0  # a real copy


def test_read_only_export_carries_the_flag():
    a = np.arange(4.0)
    a.flags.writeable = False
    x = tb.from_dlpack(a)
    m = capsule_struct(x.__dlpack__(max_version=(1, 3)))
    assert m.flags == READ_ONLY and m.dl_tensor.data == a.ctypes.data
    m = capsule_struct(x.__dlpack__(max_version=(1, 3), copy=True))
    assert m.flags == IS_COPIED and m.dl_tensor.data != a.ctypes.data
    with pytest.raises(BufferError, match=r"read-only.*copy=True"):
        x.__dlpack__(max_version=(0, 8))
    legacy_copy = capsule_struct(x.__dlpack__(copy=True))  # a writable copy may travel legacy
    assert legacy_copy.dl_tensor.data != a.ctypes.data


def test_size_one_dims_get_compact_strides_on_export():
    t = torch.zeros(4, 6)[:, :1]  # strides (6, 1); the size-1 dim's stride is arbitrary
    x = tb.from_dlpack(torch.zeros(4, 6)[1:2, :])  # shape (1, 6), strides (6, 1)
    assert capsule_struct(x.__dlpack__(max_version=(1, 3))).dl_tensor.dims() == ([1, 6], [6, 1])
    x = tb.from_dlpack(t).T  # shape (1, 4), strides (1, 6)
    assert capsule_struct(x.__dlpack__(max_version=(1, 3))).dl_tensor.dims() == ([1, 4], [4, 6])


@pytest.mark.parametrize("copy", [None, True, False])
def test_dunder_dlpack_dl_device(copy):
    a = np.arange(3.0)
    x = tb.from_dlpack(a)
    m = capsule_struct(x.__dlpack__(max_version=(1, 3), dl_device=(kDLCPU, 0), copy=copy))
    assert (m.dl_tensor.data == a.ctypes.data) == (copy is not True)
    for device in [(kDLCUDA, 0), (kDLCUDAHost, 0)]:
        with pytest.raises(BufferError, match="cannot export"):
            x.__dlpack__(max_version=(1, 3), dl_device=device, copy=copy)
    with pytest.raises(TypeError, match="dl_device"):
        x.__dlpack__(dl_device="cpu")


def test_dunder_dlpack_arguments():
    x = tb.from_dlpack(np.zeros(2))
    assert x.__dlpack_device__() == (kDLCPU, 0)
    x.__dlpack__(stream=None)
    x.__dlpack__(stream=-1)  # "no synchronization" is harmless on CPU
    with pytest.raises(ValueError, match="stream"):
        x.__dlpack__(stream=1)
    with pytest.raises(TypeError, match="positional"):
        x.__dlpack__(None)
    with pytest.raises(TypeError, match="unexpected keyword argument 'version'"):
        x.__dlpack__(version=(1, 0))
    with pytest.raises(TypeError, match="max_version must be"):
        x.__dlpack__(max_version="1.0")
    with pytest.raises(TypeError, match="copy must be"):
        x.__dlpack__(copy="yes")
    assert "versioned" in repr(x.__dlpack__(max_version=[1, 0]))
    assert "versioned" in repr(x.__dlpack__(max_version=(2**70, 0)))
    assert "versioned" not in repr(x.__dlpack__(max_version=(-(2**70), 0)))
    assert "max_version" in tb.Array.__dlpack__.__doc__
    assert str(__import__("inspect").signature(tb.Array.__dlpack__)).startswith("(self, /, *")


# ---- capsules --------------------------------------------------------------------------------


@pytest.mark.parametrize("max_version", [None, (1, 3)])
def test_capsule_can_be_consumed_once(max_version):
    a = np.arange(5.0)
    cap = tb.from_dlpack(a).__dlpack__(max_version=max_version)
    assert _C._import_path(cap) == "capsule"
    assert "used_" in repr(cap)
    with pytest.raises(BufferError, match="already consumed"):
        tb.from_dlpack(cap)
    with pytest.raises(RuntimeError, match="consumed only once"):
        torch.from_dlpack(cap)
    cap = tb.from_dlpack(a).__dlpack__(max_version=max_version)
    t = torch.from_dlpack(cap)  # consumed by torch ...
    assert t.data_ptr() == a.ctypes.data
    with pytest.raises(BufferError, match="already consumed"):
        tb.from_dlpack(cap)  # ... so not by us


def test_foreign_capsules():
    a = np.arange(5.0)
    for cap in [a.__dlpack__(), a.__dlpack__(max_version=(1, 0)), torch.from_numpy(a).__dlpack__()]:
        x = tb.from_dlpack(cap)
        assert x.data_ptr == a.ctypes.data
        with pytest.raises(BufferError, match="already consumed"):
            tb.from_dlpack(cap)
    with pytest.raises(TypeError, match="not a DLPack capsule"):
        tb.from_dlpack(tb.Array.__dlpack_c_exchange_api__)
    assert tb.from_dlpack(a.__dlpack__(), copy=False).data_ptr == a.ctypes.data
    y = tb.from_dlpack(a.__dlpack__(), copy=True)  # a capsule cannot copy: we do
    assert y.data_ptr != a.ctypes.data and np.array_equal(y.numpy(), a)


def test_capsule_lifetimes():
    a = np.arange(5.0)
    ref = weakref.ref(a)
    cap = tb.from_dlpack(a).__dlpack__(max_version=(1, 3))
    del a
    gc.collect()
    assert ref() is not None  # the unconsumed capsule holds the memory
    del cap  # never consumed: its destructor frees the tensor
    gc.collect()
    assert ref() is None
    a = np.arange(5.0)
    ref = weakref.ref(a)
    cap = tb.from_dlpack(a).__dlpack__()
    x = tb.from_dlpack(cap)
    del a, cap  # consumed: the Array owns the tensor now
    gc.collect()
    assert ref() is not None and np.array_equal(x.numpy(), np.arange(5.0))
    del x
    gc.collect()
    assert ref() is None


# ---- from_dlpack: negotiation, paths, copy, device -------------------------------------------


class LegacyProducer:
    """A pre-1.0 producer: __dlpack__ takes no max_version."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, stream=None):
        return self.a.__dlpack__()

    def __dlpack_device__(self):
        return (kDLCPU, 0)


class FullProducer(LegacyProducer):
    seen = None

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        FullProducer.seen = dict(max_version=max_version, dl_device=dl_device, copy=copy)
        return self.a.__dlpack__(max_version=max_version, dl_device=dl_device, copy=copy)


class TorchOverridingDLPack(torch.Tensor):
    def __dlpack__(self, *args, **kwargs):
        return super().__dlpack__(*args, **kwargs)


class TorchWrapper(torch.Tensor):
    """A storage-less wrapper subclass whose __dlpack__ (through __torch_function__) exports
    its inner tensor: torch's exchange table cannot export it, so __dlpack__ decides."""

    @staticmethod
    def __new__(cls, inner):
        t = torch.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype)
        t.inner = inner
        return t

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.Tensor.__dlpack__, torch.Tensor.__dlpack_device__):
            return func(args[0].inner, **(kwargs or {}))
        raise NotImplementedError(func)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        raise NotImplementedError(func)


def test_import_paths():
    a = np.arange(4.0)
    t = torch.arange(4.0)
    assert _C._import_path(t) == "exchange_api"  # torch >= 2.10's C exchange API
    assert _C._import_path(torch.nn.Parameter(t)) == "exchange_api"  # inherited by subclasses
    assert _C._import_path(t.as_subclass(TorchOverridingDLPack)) == "dlpack"  # unless overridden
    assert _C._import_path(t, copy=True) == "exchange_api"
    w = TorchWrapper(t)
    assert _C._import_path(w) == "dlpack"  # the table refused it: __dlpack__ decided
    assert tb.from_dlpack(w).data_ptr == t.data_ptr()
    assert _C._import_path(a) == "dlpack"  # numpy has no exchange API
    assert _C._import_path(tb.from_dlpack(a)) == "array"
    assert _C._import_path(LegacyProducer(a)) == "dlpack_legacy"
    assert _C._import_path(FullProducer(a)) == "dlpack"
    assert FullProducer.seen == dict(max_version=(1, 3), dl_device=None, copy=None)
    if HAS_JAX:
        import jax.numpy as jnp

        assert _C._import_path(jnp.zeros(2)) == "dlpack"


@pytest.mark.parametrize("copy", [None, True, False])
def test_from_dlpack_copy(copy):
    a = np.arange(6.0)
    sources = [
        (a, a.ctypes.data),
        (torch.from_numpy(a), a.ctypes.data),
        (tb.from_dlpack(a), a.ctypes.data),
        (LegacyProducer(a), a.ctypes.data),
        (FullProducer(a), a.ctypes.data),
    ]
    if HAS_JAX:
        import jax.numpy as jnp

        j = jnp.arange(6.0)
        sources.append((j, j.unsafe_buffer_pointer()))
    for src, ptr in sources:
        x = tb.from_dlpack(src, copy=copy)
        assert (x.data_ptr == ptr) == (copy is not True), type(src)
        if copy:
            assert not x.read_only
        np.testing.assert_array_equal(x.numpy(), np.asarray(a, dtype=x.numpy().dtype))
    assert FullProducer.seen == dict(max_version=(1, 3), dl_device=None, copy=copy)


def test_from_dlpack_device():
    a = np.arange(3.0)
    for device in [None, "cpu", (kDLCPU, 0)]:
        for src in [a, torch.from_numpy(a), tb.from_dlpack(a), FullProducer(a)]:
            assert tb.from_dlpack(src, device=device).data_ptr == a.ctypes.data
    tb.from_dlpack(FullProducer(a), device=(kDLCPU, 0))
    assert FullProducer.seen["dl_device"] == (kDLCPU, 0)
    with pytest.raises(ValueError, match="'cuda' is not supported"):
        tb.from_dlpack(a, device="cuda")
    with pytest.raises(BufferError, match="unsupported device"):  # numpy's refusal
        tb.from_dlpack(a, device=(kDLCUDA, 0))
    with pytest.raises(BufferError, match=r"not on cpu \(1, 1\)"):  # Array: no producer to ask
        tb.from_dlpack(tb.from_dlpack(a), device=(kDLCPU, 1))
    with pytest.raises(ValueError, match="unknown DLPack device type"):
        tb.from_dlpack(a, device=(99, 0))
    with pytest.raises(TypeError, match="device"):
        tb.from_dlpack(a, device=1.5)


def test_from_dlpack_arguments():
    a = np.arange(3.0)
    assert tb.from_dlpack(x=a).data_ptr == a.ctypes.data
    with pytest.raises(TypeError, match="missing required argument 'x'"):
        tb.from_dlpack()
    with pytest.raises(TypeError, match="positional"):
        tb.from_dlpack(a, None)
    with pytest.raises(TypeError, match="unexpected keyword argument 'stream'"):
        tb.from_dlpack(a, stream=None)
    with pytest.raises(TypeError, match="multiple values"):
        tb.from_dlpack(a, x=a)
    with pytest.raises(TypeError, match=r"expected an object with __dlpack__.*got int"):
        tb.from_dlpack(42)
    assert "copy" in tb.from_dlpack.__doc__ and tb.from_dlpack.__module__ == "tensorbridge._C"


def test_producer_errors_propagate():
    class Broken(LegacyProducer):
        def __dlpack__(self, **kwargs):
            raise AttributeError("inner attribute error")

    class Junk(LegacyProducer):
        def __dlpack__(self, **kwargs):
            return 42

    with pytest.raises(AttributeError, match="inner attribute error"):
        tb.from_dlpack(Broken(None))
    with pytest.raises(TypeError, match="returned a int, not a DLPack capsule"):
        tb.from_dlpack(Junk(None))


def test_torch_fast_path_refuses_lazy_conj_and_neg_like_torch():
    c = torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64)
    # torch's exchange table exports both as if the bits were not there; its __dlpack__
    # refuses the conjugate bit (and loses the negative one: numpy gets [2, -4] below).
    for lazy, what in [(c.conj(), "conjugate"), (c.conj().imag, "negative")]:
        with pytest.raises(BufferError, match=what):
            tb.from_dlpack(lazy)
    with pytest.raises(BufferError, match="conjugate bit"):
        c.conj().__dlpack__()
    x = tb.from_dlpack(c.conj().resolve_conj())
    np.testing.assert_array_equal(x.numpy(), np.array([1 - 2j, 3 + 4j], np.complex64))
    y = tb.from_dlpack(c.conj().imag.resolve_neg())
    np.testing.assert_array_equal(y.numpy(), np.array([-2, 4], np.float32))


def torch_table_export(t):
    """(data pointer, flags) of what torch's own C exchange table hands out for `t`."""
    api = exchange_api(torch.Tensor)
    out = ctypes.c_void_p()
    assert FROM_PY(api.managed_tensor_from_py_object_no_sync)(t, ctypes.byref(out)) == 0
    m = DLManagedTensorVersioned.from_address(out.value)
    data, flags = m.dl_tensor.data, m.flags
    delete_managed(out.value)
    return data, flags


def test_torch_table_hands_out_lazy_bits_so_we_check_them():
    # Why from_dlpack asks torch for the bits: its table exports a lazily conjugated or negated
    # view as its plain memory, with no flag saying so, whatever the dtype (_neg_view takes
    # them all), and also when the view is detached (no _base to give it away).
    c = torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64)
    lazy = [c.conj(), c.conj().detach(), c.conj().imag, c.conj().imag.detach()]
    lazy += [
        torch._neg_view(torch.ones(2, dtype=d)) for d in (torch.int32, torch.uint8, torch.bool)
    ]
    for t in lazy:
        assert t.is_conj() or t.is_neg()
        assert torch_table_export(t) == (t.data_ptr(), 0)
        with pytest.raises(BufferError, match=r"(conjugate|negative) bit"):
            tb.from_dlpack(t)
    assert c.conj().detach()._base is None


def test_torch_from_dlpack_consumes_arrays():
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    x = tb.from_dlpack(a)
    for t in [torch.from_dlpack(x), torch.utils.dlpack.from_dlpack(x)]:
        assert t.data_ptr() == a.ctypes.data and t.tolist() == a.tolist()
    t = torch.from_dlpack(x, copy=True)
    assert t.data_ptr() != a.ctypes.data and t.tolist() == a.tolist()


# ---- Array's C exchange API, called through ctypes -------------------------------------------


def test_exchange_api_table():
    cap = tb.Array.__dlpack_c_exchange_api__
    assert repr(cap).startswith('<capsule object "dlpack_exchange_api"')
    api = exchange_api(tb.Array)
    assert (api.version.major, api.version.minor) == (1, 3) and not api.prev_api
    assert all(getattr(api, f) for f, _ in DLPackExchangeAPI._fields_[2:])
    out = ctypes.c_void_p(123)
    assert STREAM(api.current_work_stream)(kDLCPU, 0, ctypes.byref(out)) == 0 and not out.value


def test_exchange_api_managed_tensor_from_py_object():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    ref = weakref.ref(a)
    api = exchange_api(tb.Array)
    x = tb.from_dlpack(a).T
    out = ctypes.c_void_p()
    assert FROM_PY(api.managed_tensor_from_py_object_no_sync)(x, ctypes.byref(out)) == 0
    m = DLManagedTensorVersioned.from_address(out.value)
    assert (m.version.major, m.version.minor, m.flags) == (1, 3, 0)
    assert m.dl_tensor.data == a.ctypes.data and m.dl_tensor.dims() == ([4, 3], [1, 4])
    del a, x
    gc.collect()
    assert ref() is not None  # the managed tensor holds the memory
    delete_managed(out.value)  # through CFUNCTYPE: called without the GIL, as C consumers may
    gc.collect()
    assert ref() is None
    r = np.zeros(2)
    r.flags.writeable = False
    assert (
        FROM_PY(api.managed_tensor_from_py_object_no_sync)(tb.from_dlpack(r), ctypes.byref(out))
        == 0
    )
    assert DLManagedTensorVersioned.from_address(out.value).flags == READ_ONLY
    delete_managed(out.value)
    with pytest.raises(TypeError, match=r"expected a tensorbridge.Array, got numpy.ndarray"):
        FROM_PY(api.managed_tensor_from_py_object_no_sync)(np.zeros(2), ctypes.byref(out))


def test_exchange_api_dltensor_from_py_object():
    a = np.arange(6, dtype=np.int16).reshape(2, 3)
    x = tb.from_dlpack(a)
    api = exchange_api(tb.Array)
    dl = DLTensor()
    assert DLTENSOR_FROM_PY(api.dltensor_from_py_object_no_sync)(x, ctypes.byref(dl)) == 0
    assert dl.data == a.ctypes.data and dl.dims() == ([2, 3], [3, 1])
    assert (dl.dtype.code, dl.dtype.bits, dl.device.device_type) == (0, 16, kDLCPU)
    a.flags.writeable = False
    with pytest.raises(BufferError, match=r"read-only.*copy=True"):
        DLTENSOR_FROM_PY(api.dltensor_from_py_object_no_sync)(tb.from_dlpack(a), ctypes.byref(dl))


def test_exchange_api_managed_tensor_to_py_object():
    api = exchange_api(tb.Array)
    # Our own managed tensor, and torch's (through torch's table), become Arrays.
    for src, table in [
        (tb.from_dlpack(np.arange(4.0)), api),
        (torch.arange(4.0), exchange_api(torch.Tensor)),
    ]:
        out, obj = ctypes.c_void_p(), ctypes.c_void_p()
        assert FROM_PY(table.managed_tensor_from_py_object_no_sync)(src, ctypes.byref(out)) == 0
        assert TO_PY(api.managed_tensor_to_py_object_no_sync)(out.value, ctypes.byref(obj)) == 0
        x = ctypes.cast(obj.value, ctypes.py_object).value
        ctypes.pythonapi.Py_DecRef(ctypes.py_object(x))  # the function's new reference
        ptr = src.data_ptr if isinstance(src, tb.Array) else src.data_ptr()
        assert isinstance(x, tb.Array) and x.data_ptr == ptr and x.numpy().tolist() == [0, 1, 2, 3]


def test_exchange_api_allocator():
    api = exchange_api(tb.Array)
    errors = []
    set_error = SET_ERROR(lambda ctx, kind, msg: errors.append((kind, msg)))
    shape = (ctypes.c_int64 * 2)(2, 5)
    proto = DLTensor(None, DLDevice(kDLCPU, 0), 2, DLDataType(2, 32, 1), shape, None, 0)
    out = ctypes.c_void_p()
    assert (
        ALLOCATOR(api.managed_tensor_allocator)(
            ctypes.byref(proto), ctypes.byref(out), None, set_error
        )
        == 0
    )
    m = DLManagedTensorVersioned.from_address(out.value)
    assert m.dl_tensor.dims() == ([2, 5], [5, 1]) and m.dl_tensor.data % 64 == 0 and not errors
    delete_managed(out.value)
    proto.device = DLDevice(kDLCUDA, 0)
    assert (
        ALLOCATOR(api.managed_tensor_allocator)(
            ctypes.byref(proto), ctypes.byref(out), None, set_error
        )
        == -1
    )
    assert errors and errors[0][0] == b"BufferError" and b"CPU" in errors[0][1] and not out.value


# ---- interpreter shutdown --------------------------------------------------------------------

SHUTDOWN_SCRIPT = textwrap.dedent(
    """
    import numpy as np, torch, tensorbridge as tb
    A = tb.from_dlpack(np.arange(10.0))                          # an Array over numpy memory
    CAP = tb.from_dlpack(np.arange(10.0)).__dlpack__(max_version=(1, 3))  # unconsumed
    LEGACY = tb.from_dlpack(np.arange(3.0)).__dlpack__()         # unconsumed, legacy
    T = torch.from_dlpack(tb.from_dlpack(np.arange(4.0)))        # torch holds our tensor
    N = np.from_dlpack(tb.from_dlpack(torch.arange(4.0)))        # numpy holds torch memory
    NPCAP = np.arange(5.0).__dlpack__(max_version=(1, 0))        # someone else's capsule
    class Cycle: pass
    C = Cycle(); C.self = C; C.a = tb.from_dlpack(np.ones(3)); C.cap = C.a.__dlpack__()
    if "{jax}" == "jax":
        import jax.numpy as jnp
        J = tb.from_dlpack(jnp.arange(5.0))
        JC = tb.from_dlpack(J, copy=True).__dlpack__(max_version=(1, 3))
    print("ok")
    """
)


@pytest.mark.parametrize("jax", ["nojax", pytest.param("jax", marks=requires_jax)])
def test_shutdown_with_live_arrays_and_capsules(jax):
    out = subprocess.run(
        [sys.executable, "-X", "dev", "-c", SHUTDOWN_SCRIPT.format(jax=jax)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == "ok\n"
    assert out.stderr == ""


# ---- tensorbridge.Tensor (the torch subclass) as a DLPack producer ----------------------------


@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_tensor_exports_the_wrapped_memory(max_version):
    # The capsule points at the wrapped array's memory, with its strides and offset (a
    # wrapper torch made holds no memory of its own).
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    t = tb.wrap(a)
    v = t[1:, ::2]
    cap = v.__dlpack__(max_version=max_version)
    assert ("versioned" in repr(cap)) == (max_version is not None)
    dl = capsule_struct(cap).dl_tensor
    assert dl.data + dl.byte_offset == a[1:, ::2].ctypes.data
    assert dl.dims() == ([3, 3], [6, 2])
    assert (dl.device.device_type, v.__dlpack_device__()) == (kDLCPU, (kDLCPU, 0))


def test_tensor_is_read_zero_copy_by_every_importer():
    a = np.arange(12, dtype=np.float64).reshape(3, 4)
    t = tb.wrap(a)
    n = np.from_dlpack(t)
    assert n.ctypes.data == a.ctypes.data and np.array_equal(n, a)
    p = torch.from_dlpack(t)
    assert type(p) is torch.Tensor and p.data_ptr() == a.ctypes.data
    arr = tb.from_dlpack(t)
    assert arr.data_ptr == a.ctypes.data
    out = tb.call("aten::add.Tensor", t, t)  # the op table takes a Tensor's memory too
    np.testing.assert_array_equal(tb.to_numpy(out), a + a)
    if HAS_JAX:
        import jax.numpy as jnp

        np.testing.assert_array_equal(np.asarray(jnp.from_dlpack(t)), a)


def test_tensor_that_requires_grad_is_not_exported():
    t = tb.wrap(np.ones(3, np.float32)).requires_grad_()
    with pytest.raises(RuntimeError, match="require gradient"):
        t.__dlpack__()
    assert np.from_dlpack(t.detach()).shape == (3,)
