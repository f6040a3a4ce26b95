"""Zero-copy in both directions with numpy, torch and JAX: pointers, not only values."""

import numpy as np
import pytest

import tensorbridge as tb
from conftest import requires_jax


def test_numpy_in_and_out_share_memory():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = tb.from_dlpack(a)
    assert x.data_ptr == a.ctypes.data
    assert x.shape == (3, 4) and x.strides == (4, 1) and x.dtype == "float32"
    back = x.numpy()
    assert back.ctypes.data == a.ctypes.data
    a[0, 0] = 42
    assert back[0, 0] == 42


def test_torch_in_and_out_share_memory():
    torch = pytest.importorskip("torch")
    t = torch.arange(12, dtype=torch.float64).reshape(3, 4).t()  # strided
    x = tb.from_dlpack(t)
    assert x.data_ptr == t.data_ptr()
    assert x.strides == t.stride()
    back = torch.from_dlpack(x)
    assert back.data_ptr() == t.data_ptr()
    assert torch.equal(back, t)


@requires_jax
def test_jax_arrays_arrive_read_only():
    import jax.numpy as jnp

    j = jnp.arange(6, dtype=jnp.float32)
    x = tb.from_dlpack(j)
    assert x.read_only
    assert x.data_ptr == j.unsafe_buffer_pointer()
    np.testing.assert_array_equal(x.numpy(), np.arange(6, dtype=np.float32))
    assert not x.numpy().flags.writeable


def test_legacy_and_versioned_capsules():
    a = np.ones(3, np.float32)
    x = tb.from_dlpack(a)
    legacy = x.__dlpack__()
    versioned = x.__dlpack__(max_version=(1, 3))
    assert "dltensor" in repr(legacy) and "versioned" not in repr(legacy)
    assert "dltensor_versioned" in repr(versioned)
    y = tb.from_dlpack(versioned)
    assert y.data_ptr == a.ctypes.data
    with pytest.raises(BufferError, match="already consumed"):
        tb.from_dlpack(versioned)
