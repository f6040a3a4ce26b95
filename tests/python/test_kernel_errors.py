"""One kind of bad input, one Python exception, whichever op family serves the op.

The table checks the tensors' devices before any kernel runs (lists of tensors included), and
the kernels share their checks (kernels/common_internal.h):

- tensors on different devices: ValueError naming the op and both devices;
- tensors on a device tensorbridge has no kernels for: NotImplementedError naming the op
  (the table finds no kernel for that device, or a kernel's CheckHost refuses it);
- a dtype a kernel has no loop for: NotImplementedError naming the op and the dtype
  (``tensorbridge.KernelDeclinedError``; with ``config.fallback = "allow"`` torch's kernel serves
  the call instead).

The "CUDA" arrays here are host memory that a hand-built DLPack capsule describes as CUDA
memory: only their description is read, so a missing check shows as a result, not a crash.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
import torch
from test_dlpack_protocol import DLDataType, DLDevice, DLManagedTensor, DLTensor, kDLCUDA

import tensorbridge as tb

pytestmark = pytest.mark.usefixtures("no_fallback")

# A prototype of our own: ctypes.pythonapi.PyCapsule_New is shared with other users (jax.ffi
# sets its argtypes to take a destructor function).
_PyCapsule_New = ctypes.PYFUNCTYPE(
    ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p
)(("PyCapsule_New", ctypes.pythonapi))

_KEEP: list[object] = []  # the host memory and DLPack structs behind the fake CUDA arrays


def cuda_array(values) -> tb.Array:
    """A float32 (or int64) tb.Array whose DLPack device is CUDA:0 (host memory underneath)."""
    a = np.ascontiguousarray(values)
    code, bits = {np.dtype(np.float32): (2, 32), np.dtype(np.int64): (0, 64)}[a.dtype]
    shape = (ctypes.c_int64 * a.ndim)(*a.shape)
    m = DLManagedTensor()
    m.dl_tensor = DLTensor(
        a.ctypes.data, DLDevice(kDLCUDA, 0), a.ndim, DLDataType(code, bits, 1), shape, None, 0
    )
    _KEEP.extend([a, shape, m])
    x = tb.from_dlpack(_PyCapsule_New(ctypes.addressof(m), b"dltensor", None))
    assert x.__dlpack_device__() == (kDLCUDA, 0)
    return x


def cpu(*shape, dtype=torch.float32):
    return tb.from_dlpack(torch.ones(shape, dtype=dtype))


# (op, arguments) of several families, each taking the bad tensor where it can hide: as a
# plain argument or inside a list of tensors.
def _mixed_device_calls(bad):
    x, i = cpu(2, 2), cpu(2, dtype=torch.int64)
    return [
        ("aten::add.Tensor", (x, bad)),  # binary
        ("aten::mm", (x, bad)),  # matmul
        ("aten::isin.Tensor_Tensor", (x, bad)),  # compare
        ("aten::cat", ([x, bad],)),  # shape copies
        ("aten::stack", ([x, bad],)),
        ("aten::index.Tensor", (bad, [i])),  # index
        ("aten::index_put", (x, [i], bad)),
        ("aten::where.self", (cpu(2, 2, dtype=torch.bool), x, bad)),  # ternary
    ]


def test_tensors_on_different_devices_are_value_errors_in_every_family():
    bad = cuda_array(np.ones((2, 2), np.float32))
    for op, args in _mixed_device_calls(bad):
        with pytest.raises(
            ValueError, match=rf"{op}: tensors on different devices \((cpu and cuda|cuda and cpu)\)"
        ):
            tb.call(op, *args)


def test_tensors_on_an_unsupported_device_are_not_implemented_in_every_family():
    a = cuda_array(np.ones((2, 2), np.float32))
    b = cuda_array(np.ones((2, 2), np.float32))
    calls = [
        ("aten::add.Tensor", (a, b)),
        ("aten::relu", (a,)),
        ("aten::sum", (a,)),
        ("aten::mm", (a, b)),
        ("aten::cat", ([a, b],)),
        ("aten::constant_pad_nd", (a, [1, 1])),
    ]
    for op, args in calls:
        with pytest.raises(NotImplementedError, match=op):
            tb.call(op, *args)


def test_a_dtype_without_a_loop_is_not_implemented_in_every_family():
    z = tb.from_dlpack(torch.ones(2, 4, dtype=torch.complex64))
    calls = [
        ("aten::relu", (z,)),  # activation
        ("aten::gelu", (z,)),
        ("aten::_softmax", (z, 1, False)),  # softmax
        ("aten::native_layer_norm", (z, [4], None, None, 1e-5)),  # norm
        ("aten::_cdist_forward", (z, z, 2.0, None)),  # distance
        ("aten::sort", (z,)),  # sort
        ("aten::cummax", (z, 1)),  # scan (cumsum and logcumsumexp serve complex)
    ]
    for op, args in calls:
        # Declined (config.fallback = "error" here): a NotImplementedError the fallback may serve.
        with pytest.raises(tb.KernelDeclinedError, match=rf"{op}.*complex64"):
            tb.call(op, *args)
