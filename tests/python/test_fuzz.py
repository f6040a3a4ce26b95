"""Fuzzing with a fixed budget: every input ends in a typed Python error or a correct result.

* The DLPack importer: versioned and legacy managed tensors built with ctypes, with random
  shapes, strides, byte offsets, dtypes, devices, flags, versions and null pointers, handed to
  ``tb.from_dlpack`` as capsules. An accepted tensor must describe exactly what was given
  (data pointer, shape, strides, dtype, read-only flag) and read the producer's values; the
  producer's deleter runs exactly once either way.
* ``tb.call``'s argument binding: random arguments, of the right type or not, against the
  schema of every op in the table.

Hypothesis runs derandomized (the same examples each run); the budget is ``max_examples`` per
test. ``.ci/dev fuzz`` runs this file against a build with AddressSanitizer and UBSan.
"""

import ctypes
import math
import re

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from test_dlpack_protocol import (
    DELETER,
    IS_COPIED,
    READ_ONLY,
    DLDataType,
    DLDevice,
    DLManagedTensor,
    DLManagedTensorVersioned,
    DLPackVersion,
    capsule_struct,
)

import tensorbridge as tb

FUZZ = settings(
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)

# Python exceptions tensorbridge's typed errors become, and those the bindings raise.
TYPED = (
    BufferError,
    TypeError,
    ValueError,
    IndexError,
    NotImplementedError,
    RuntimeError,
    OverflowError,
    MemoryError,
)


def _check_typed(e):
    assert isinstance(e, TYPED), f"untyped error {type(e).__name__}: {e}"
    assert "internal error" not in str(e), str(e)


# ---- the DLPack importer ---------------------------------------------------------------------

# A prototype of our own: ctypes.pythonapi.PyCapsule_New is shared with other users (jax.ffi
# sets its argtypes to take a destructor function).
_PyCapsule_New = ctypes.PYFUNCTYPE(
    ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p
)(("PyCapsule_New", ctypes.pythonapi))

# What a DLPack (code, bits) reads as in numpy, where numpy has the type.
NUMPY = {
    (0, 8): np.int8, (0, 16): np.int16, (0, 32): np.int32, (0, 64): np.int64,
    (1, 8): np.uint8, (1, 16): np.uint16, (1, 32): np.uint32, (1, 64): np.uint64,
    (2, 16): np.float16, (2, 32): np.float32, (2, 64): np.float64,
    (5, 64): np.complex64, (5, 128): np.complex128, (6, 8): np.bool_,
}  # fmt: skip
BUFFER_BYTES = 4096
HUGE = [2**31 - 1, 2**40, 2**62, 2**63 - 1, -(2**63)]


VALID_TYPES = [*sorted(NUMPY), (4, 16), (7, 8), (10, 8), (17, 4)]  # + bfloat16, float8, float4


@st.composite
def dl_tensors(draw):
    """A managed tensor's fields: a valid tensor (a layout inside the buffer, a known dtype, the
    CPU), then none, one or several fields made odd (sizes, strides, extreme offsets, unknown
    dtypes, lanes, devices, versions, flags, null pointers)."""
    n = draw(st.integers(0, 4))
    shape = draw(st.lists(st.integers(0, 4), min_size=n, max_size=n))
    strides = draw(st.none() | st.lists(st.integers(-4, 6), min_size=n, max_size=n))
    code, bits = draw(st.sampled_from(VALID_TYPES))
    f = {
        "versioned": draw(st.booleans()),
        "version": (1, draw(st.sampled_from([0, 1, 3]))),
        "flags": draw(st.sampled_from([0, READ_ONLY, IS_COPIED, READ_ONLY | IS_COPIED])),
        "ndim": n,
        "shape": shape,
        "null_shape": False,
        "strides": strides,
        "code": code,
        "bits": bits,
        "lanes": 1,
        "device": 1,
        "device_id": 0,
        "offset": draw(st.integers(0, 64)),
        "base": draw(st.integers(64, 1024)),  # room for negative strides
        "null_data": False,
        "null_deleter": draw(st.integers(0, 9)) == 0,
    }
    odd = {
        "version": st.sampled_from([(1, 99), (0, 8), (2, 0), (2**32 - 1, 0)]),
        "flags": st.sampled_from([4, 8, 1 << 40, 2**64 - 1]),
        "ndim": st.sampled_from([-1, -(2**31), 7]),
        "shape": st.lists(st.integers(0, 3) | st.sampled_from([-1, *HUGE]), min_size=n, max_size=n),
        "null_shape": st.just(True),
        "strides": st.lists(st.integers(-6, 12) | st.sampled_from(HUGE), min_size=n, max_size=n),
        "code": st.integers(0, 255),
        "bits": st.sampled_from([0, 1, 4, 6, 7, 24, 255]),
        "lanes": st.sampled_from([0, 2, 4, 65535]),
        "device": st.sampled_from([2, 3, 7, 13, 99, -1, 2**31 - 1]),
        "device_id": st.sampled_from([-1, 1, 2**31 - 1]),
        "offset": st.sampled_from([2**40, 2**63, 2**64 - 1]),
        "null_data": st.just(True),
    }
    for key in draw(st.lists(st.sampled_from(sorted(odd)), max_size=3, unique=True)):
        f[key] = draw(odd[key])
    # a shape pointer always holds ndim entries (a producer's own bug is out of reach)
    m = min(max(f["ndim"], 0), 7)
    f["shape"] = (f["shape"] + [1] * m)[:m]
    if f["strides"] is not None:
        f["strides"] = (f["strides"] + [1] * m)[:m]
    return f


class Producer:
    """Owns a managed tensor built from `f` and counts its deleter's calls."""

    def __init__(self, f):
        self.f = f
        self.buffer = np.zeros(BUFFER_BYTES, np.uint8)
        self.buffer[:] = np.random.default_rng(len(f["shape"])).integers(0, 256, BUFFER_BYTES)
        self.deleted = 0
        n = len(f["shape"])
        self.shape = (ctypes.c_int64 * max(n, 1))(*f["shape"])
        self.strides = None if f["strides"] is None else (ctypes.c_int64 * max(n, 1))(*f["strides"])
        self.deleter = DELETER(self._delete)
        kind = DLManagedTensorVersioned if f["versioned"] else DLManagedTensor
        self.managed = kind()
        m = self.managed
        if f["versioned"]:
            m.version = DLPackVersion(*f["version"])
            m.flags = f["flags"]
        m.deleter = None if f["null_deleter"] else ctypes.cast(self.deleter, ctypes.c_void_p)
        t = m.dl_tensor
        self.data = 0 if f["null_data"] else self.buffer.ctypes.data + f["base"]
        t.data = self.data or None
        t.device = DLDevice(f["device"], f["device_id"])
        t.ndim = f["ndim"]
        t.dtype = DLDataType(f["code"], f["bits"], f["lanes"])
        t.shape = (
            None if f["null_shape"] else ctypes.cast(self.shape, ctypes.POINTER(ctypes.c_int64))
        )
        t.strides = (
            None
            if self.strides is None
            else ctypes.cast(self.strides, ctypes.POINTER(ctypes.c_int64))
        )
        t.byte_offset = f["offset"] % 2**64

    def _delete(self, address):
        assert address == ctypes.addressof(self.managed)
        self.deleted += 1

    def capsule(self):
        name = b"dltensor_versioned" if self.f["versioned"] else b"dltensor"
        return _PyCapsule_New(ctypes.addressof(self.managed), name, None)

    def in_buffer(self, itemsize):
        """True when every element the layout reaches lies in the buffer (and there is one)."""
        f = self.f
        shape = f["shape"]
        if not self.data or any(s <= 0 for s in shape):
            return False
        strides = f["strides"]
        if strides is None:
            strides, acc = [], 1
            for s in reversed(shape):
                strides.insert(0, acc)
                acc *= s
        lo = sum((s - 1) * st for s, st in zip(shape, strides, strict=True) if st < 0)
        hi = sum((s - 1) * st for s, st in zip(shape, strides, strict=True) if st > 0)
        start = f["base"] + f["offset"]
        return start + lo * itemsize >= 0 and start + (hi + 1) * itemsize <= BUFFER_BYTES


def _exported(arr):
    """(data pointer, shape, strides, read-only, (code, bits)) of `arr` as its own DLPack export
    says (the export is released before returning)."""
    struct = capsule_struct(arr.__dlpack__(max_version=(1, 3)))
    t = struct.dl_tensor
    shape, strides = t.dims()
    ro = bool(struct.flags & READ_ONLY)
    return t.data or 0, shape, strides, ro, (t.dtype.code, t.dtype.bits)


@settings(FUZZ, max_examples=3000)
@given(f=dl_tensors())
def test_dlpack_importer(f):
    p = Producer(f)
    cap = p.capsule()
    try:
        arr = tb.from_dlpack(cap)
    except Exception as e:  # every refusal must be a typed error
        _check_typed(e)
        event(f"refused: {type(e).__name__}")
        del cap
        # Refused: the importer took the tensor (renamed the capsule) and released it, once.
        assert p.deleted == (0 if f["null_deleter"] else 1)
        return
    # Accepted: it is what the producer described, no copy.
    event("accepted")
    data, shape, strides, read_only, code_bits = _exported(arr)
    n = f["ndim"]
    assert shape == f["shape"][:n] and len(shape) == n
    numel = math.prod(shape)
    if numel:  # an empty tensor's data pointer is not read, and may be exported as null
        assert data == p.data + f["offset"]
    if f["strides"] is not None:
        # size-1 dimensions may be exported with normalised strides
        want = f["strides"]
        assert all(s == 1 or a == b for s, a, b in zip(shape, strides, want, strict=True))
    assert code_bits == (f["code"], f["bits"])
    assert read_only == bool(f["versioned"] and f["flags"] & READ_ONLY)
    itemsize = f["bits"] // 8
    dt = NUMPY.get((f["code"], f["bits"]))
    if f["device"] == 1 and dt is not None and p.in_buffer(itemsize):
        got = np.from_dlpack(arr)
        assert got.dtype == np.dtype(dt)
        st_bytes = [s * itemsize for s in (strides or [])]
        expect = np.ndarray(
            shape=tuple(shape),
            dtype=dt,
            buffer=p.buffer,
            offset=f["base"] + f["offset"],
            strides=tuple(st_bytes) if strides is not None else None,
        )
        assert got.shape == expect.shape and got.tobytes() == expect.tobytes()
        event("accepted, values compared")
        del got
    del arr, cap  # no cycles: the last references go here
    assert p.deleted == (0 if f["null_deleter"] else 1)


# ---- tb.call's argument binding --------------------------------------------------------------


def _split_args(text):
    """Top-level comma-separated pieces of a schema's argument list."""
    out, depth, cur = [], 0, ""
    for c in text:
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        if c == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += c
    if cur.strip():
        out.append(cur.strip())
    return out


def parse_schema(op):
    """[(type, name, has_default, kwarg_only)] of `op`'s schema."""
    text = tb.schema(op)
    args = text[text.index("(") + 1 : text.rindex(") ->")]
    out, kwarg_only = [], False
    for a in _split_args(args):
        if a == "*":
            kwarg_only = True
            continue
        decl, _, default = a.partition("=")
        typ, name = decl.rsplit(" ", 1)
        out.append((re.sub(r"\(\w!?\)", "", typ), name, bool(default), kwarg_only))
    return out


_DTYPES = [torch.float32, torch.float64, torch.int64, torch.int32, torch.bool, torch.uint8,
           torch.bfloat16, torch.float16, torch.complex64]  # fmt: skip


@st.composite
def tensors(draw):
    dtype = draw(st.sampled_from(_DTYPES))
    shape = draw(st.lists(st.integers(0, 4), min_size=0, max_size=3))
    t = torch.randn(shape).to(dtype) if dtype.is_floating_point else torch.randint(-3, 4, shape)
    t = t.to(dtype)
    if t.ndim >= 2 and draw(st.booleans()):
        t = t.transpose(0, 1)  # non-contiguous
    return tb.from_dlpack(t)


INTS = st.integers(-3, 8) | st.sampled_from([-(2**62), 2**62, 2**63 - 1, -(2**63)])
FLOATS = st.sampled_from([0.0, -1.5, 2.5, 1e-300, 1e300, math.inf, -math.inf, math.nan])
COMPLEXES = st.sampled_from(
    [1j, 2.5 - 0.5j, complex(3, 0), complex(math.inf, 1), complex(0, math.nan)]
)
ANY = st.one_of(
    st.none(),
    st.booleans(),
    INTS,
    FLOATS,
    COMPLEXES,
    st.sampled_from(["none", "tanh", "mean", "", "cpu", "cuda", "left"]),
    st.lists(INTS, max_size=4),
    st.lists(FLOATS, max_size=3),
    st.sampled_from(_DTYPES),
    tensors(),
    st.lists(tensors(), max_size=3),
)


def value_for(typ):
    """A strategy of values of schema type `typ` (mostly right, sometimes anything)."""
    base = typ.rstrip("?")
    optional = typ.endswith("?")
    if base in ("Tensor",):
        s = tensors()
    elif base in ("Tensor[]", "Tensor?[]"):
        s = st.lists(tensors() | st.none() if "?" in base else tensors(), max_size=3)
    elif base in ("int", "SymInt"):
        s = INTS
    elif re.fullmatch(r"(int|SymInt)\[\d*\]", base):
        s = st.lists(INTS, max_size=4) | INTS
    elif base == "float":
        s = FLOATS
    elif base == "float[]":
        s = st.lists(FLOATS, max_size=3)
    elif base == "bool":
        s = st.booleans()
    elif base.startswith("bool["):
        s = st.lists(st.booleans(), max_size=3)
    elif base == "Scalar":
        s = INTS | FLOATS | st.booleans() | COMPLEXES
    elif base == "ScalarType":
        s = st.sampled_from(_DTYPES)
    elif base == "str":
        s = st.sampled_from(["none", "tanh", "mean", "sum", "", "left", "reflect"])
    elif base == "Device":
        s = st.sampled_from(["cpu", "cuda", "meta"])
    else:
        s = ANY
    if optional:
        s = st.none() | s
    return st.one_of(*[s] * 9, ANY)  # 1 in 10 arguments of any type


OPS = sorted(o["op"] for o in tb.ops())


# A kernel the table lost would otherwise run torch's and compare torch with itself.
pytestmark = pytest.mark.usefixtures("no_fallback")


@pytest.mark.parametrize("op", OPS)
@settings(FUZZ, max_examples=20)
@given(data=st.data())
def test_call_binding(op, data):
    schema = parse_schema(op)
    args, kwargs = [], {}
    for typ, name, has_default, kwarg_only in schema:
        if has_default and data.draw(st.integers(0, 2)) == 0:
            continue  # left to its default
        v = data.draw(value_for(typ), label=name)
        if kwarg_only or (has_default and data.draw(st.booleans())):
            kwargs[name] = v
        elif kwargs:
            kwargs[name] = v
        else:
            args.append(v)
    if data.draw(st.integers(0, 19)) == 0:
        args.append(1)  # one too many
    try:
        tb.call(op, *args, **kwargs)
        event("ran")
    except Exception as e:  # every refusal must be a typed error
        _check_typed(e)
        event(f"refused: {type(e).__name__}")
