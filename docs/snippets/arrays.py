"""Wrapping arrays: ownership, read-only memory, lifetimes (docs/guide/arrays.rst)."""

import gc

import jax.numpy as jnp
import numpy as np
import torch

import tensorbridge as tb

# [wrap]
a = np.arange(6, dtype=np.float32).reshape(2, 3)
x = tb.from_dlpack(a)  # no copy: x reads and writes a's memory
assert x.data_ptr == a.ctypes.data
assert x.shape == (2, 3) and x.dtype == "float32"

y = tb.call("aten::mm", x, torch.ones(3, 2))  # one ATen op, by name
t = torch.from_dlpack(y)  # back to torch, zero-copy
assert t.data_ptr() == y.data_ptr
# [wrap end]

# [views]
row = x.select(0, 1)  # views share the storage: no copy
assert row.data_ptr == a.ctypes.data + 3 * 4
a[1, 0] = 42.0
assert row.numpy()[0] == 42.0
# [views end]

# [readonly]
j = jnp.ones(4, jnp.float32)
r = tb.from_dlpack(j)  # JAX arrays are immutable: they arrive read-only
assert r.read_only
try:
    tb.call("aten::add_.Tensor", r, r)  # an in-place op on it is refused
except BufferError as e:
    print("refused:", e)
# [readonly end]

# [lifetime]
b = np.ones(1000, np.float32)
z = tb.from_dlpack(b)
ptr = b.ctypes.data
del b  # the Array holds a reference: numpy's memory stays alive
gc.collect()
assert z.data_ptr == ptr and float(z.numpy().sum()) == 1000.0
del z  # the last reference: numpy's deleter runs now, exactly once
# [lifetime end]
