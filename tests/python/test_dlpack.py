"""DLPack with numpy, torch and JAX, both directions: pointer equality proves zero-copy.

Covers every dtype each framework has (supported ones round-trip bit-exact, the others are
refused with the producer's or our error), 0-d and size-0 shapes, ndim up to 32, transposed,
sliced and negative-stride views, the source dying while the Array lives, read-only sources,
and 100,000 wrap/unwrap cycles with flat RSS. Protocol details (max_version, copy, dl_device,
capsules, the C exchange API, shutdown) are in test_dlpack_protocol.py.
"""

import gc
import weakref

import numpy as np
import pytest
from conftest import requires_jax

import tensorbridge as tb

torch = pytest.importorskip("torch")


def torch_bytes(t):
    return t.contiguous().view(torch.uint8)


# ---- the basics ------------------------------------------------------------------------------


def test_numpy_in_and_out_share_memory():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = tb.from_dlpack(a)
    assert x.data_ptr == a.ctypes.data
    assert x.shape == (3, 4) and x.strides == (4, 1) and x.dtype == "float32"
    assert not x.read_only and x.device == "cpu"
    back = x.numpy()
    assert back.ctypes.data == a.ctypes.data
    a[0, 0] = 42
    assert back[0, 0] == 42


def test_torch_in_and_out_share_memory():
    t = torch.arange(12, dtype=torch.float64).reshape(3, 4).t()  # strided
    x = tb.from_dlpack(t)
    assert x.data_ptr == t.data_ptr()
    assert x.strides == t.stride()
    back = torch.from_dlpack(x)
    assert back.data_ptr() == t.data_ptr()
    assert torch.equal(back, t)
    back[0, 0] = -1  # writes through to the source
    assert t[0, 0] == -1


@requires_jax
def test_jax_arrays_arrive_read_only():
    import jax.numpy as jnp

    j = jnp.arange(6, dtype=jnp.float32)
    x = tb.from_dlpack(j)
    assert x.read_only
    assert x.data_ptr == j.unsafe_buffer_pointer()
    np.testing.assert_array_equal(x.numpy(), np.arange(6, dtype=np.float32))
    assert not x.numpy().flags.writeable


@requires_jax
def test_export_into_jax_is_zero_copy_for_aligned_memory():
    import jax

    t = torch.arange(64, dtype=torch.float32).reshape(8, 8)  # torch's allocator: 64-byte aligned
    x = tb.from_dlpack(t)
    j = jax.dlpack.from_dlpack(x)
    assert j.unsafe_buffer_pointer() == t.data_ptr()
    np.testing.assert_array_equal(np.asarray(j), t.numpy())
    # JAX copies what is not 64-byte aligned; the values still arrive.
    a = np.arange(17, dtype=np.float32)[1:]
    j = jax.dlpack.from_dlpack(tb.from_dlpack(a))
    np.testing.assert_array_equal(np.asarray(j), a)


@requires_jax
def test_read_only_memory_goes_back_to_jax_without_a_copy():
    """A JAX array wrapped (read-only) and handed back through tb.to_jax: JAX's importer takes
    only legacy capsules, which cannot mark memory read-only; to_jax exports it anyway, as JAX
    never writes, while the public legacy __dlpack__ still refuses."""
    import jax.numpy as jnp

    a = jnp.arange(16.0, dtype=jnp.float32).reshape(4, 4)
    t = tb.wrap(a)
    assert t.array.read_only
    back = tb.to_jax(t)
    assert back.unsafe_buffer_pointer() == a.unsafe_buffer_pointer() == t.data_ptr()
    np.testing.assert_array_equal(np.asarray(back), np.asarray(a))
    np.testing.assert_array_equal(np.asarray(tb.to_jax(t.array)), np.asarray(a))
    with pytest.raises(BufferError, match="read-only tensor cannot be exported through the legacy"):
        t.array.__dlpack__()


# ---- every dtype -----------------------------------------------------------------------------

NUMPY_SUPPORTED = [
    np.bool_,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.longlong,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
    np.ulonglong,
    np.float16,
    np.float32,
    np.float64,
    np.complex64,
    np.complex128,
]
NUMPY_REFUSED = [
    np.longdouble,
    np.clongdouble,
    "M8[s]",
    "m8[s]",
    np.object_,
    np.bytes_,
    np.str_,
    np.void,
]


@pytest.mark.parametrize("dtype", NUMPY_SUPPORTED, ids=lambda d: np.dtype(d).char)
def test_numpy_dtypes_round_trip(dtype):
    a = np.frombuffer(np.random.default_rng(0).bytes(6 * np.dtype(dtype).itemsize), dtype)
    a = (a.astype(bool) if dtype is np.bool_ else a.copy()).reshape(2, 3)
    x = tb.from_dlpack(a)
    assert x.data_ptr == a.ctypes.data
    assert x.dtype == np.dtype(dtype).name
    assert x.itemsize == a.itemsize
    back = np.from_dlpack(x)
    assert back.ctypes.data == a.ctypes.data and back.dtype == a.dtype
    assert back.tobytes() == a.tobytes()
    t = torch.from_dlpack(x)
    assert t.data_ptr() == a.ctypes.data
    assert t.numpy().tobytes() == a.tobytes()


@pytest.mark.parametrize("dtype", NUMPY_REFUSED, ids=str)
def test_numpy_dtypes_without_dlpack_codes_are_refused(dtype):
    a = np.zeros(3, dtype=dtype)
    with pytest.raises(BufferError, match="DLPack"):
        tb.from_dlpack(a)


def _torch_dtypes():
    names = sorted(
        {str(d).split(".")[1] for d in vars(torch).values() if isinstance(d, torch.dtype)}
    )
    return names


TORCH_ROUND_TRIP = [
    "bool",
    "uint8",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
]
# torch's sub-byte integer dtypes are stored one per byte and exported as int8 / uint8.
TORCH_AS_BYTES = {f"{s}int{b}": f"{s}int8" for s in ("", "u") for b in range(1, 8)}
# DLPack can describe these, tensorbridge has no such dtype: refused by us.
TORCH_REFUSED_BY_US = {"complex32": r"code=5, bits=32", "float4_e2m1fn_x2": r"lanes=2"}
# torch refuses to export these (RuntimeError, torch's choice).
TORCH_REFUSED_BY_TORCH = {
    **{n: "Bit types" for n in ("bits1x8", "bits2x4", "bits4x2", "bits8", "bits16")},
    **{n: "QUInt/QInt" for n in ("qint8", "quint8", "qint32", "quint4x2", "quint2x4")},
}


def test_every_torch_dtype_is_classified():
    known = (
        set(TORCH_ROUND_TRIP)
        | set(TORCH_AS_BYTES)
        | set(TORCH_REFUSED_BY_US)
        | set(TORCH_REFUSED_BY_TORCH)
    )
    assert set(_torch_dtypes()) - known == set()


def _torch_sample(dtype, n=6):
    gen = torch.Generator().manual_seed(1)
    raw = torch.randint(0, 256, (n * dtype.itemsize,), dtype=torch.uint8, generator=gen)
    if dtype == torch.bool:
        raw = raw % 2
    return raw.view(dtype)


@pytest.mark.parametrize("name", TORCH_ROUND_TRIP)
def test_torch_dtypes_round_trip(name):
    dtype = getattr(torch, name)
    t = _torch_sample(dtype).reshape(2, 3)
    x = tb.from_dlpack(t)
    assert x.data_ptr == t.data_ptr()
    assert x.dtype == name
    back = torch.from_dlpack(x)
    assert back.dtype == dtype and back.data_ptr() == t.data_ptr()
    assert torch.equal(torch_bytes(back), torch_bytes(t))


@pytest.mark.parametrize("name", sorted(TORCH_AS_BYTES))
def test_torch_sub_byte_ints_arrive_as_bytes(name):
    dtype = getattr(torch, name)
    t = torch.zeros(5, dtype=torch.uint8 if name.startswith("u") else torch.int8).view(dtype)
    x = tb.from_dlpack(t)
    assert x.dtype == TORCH_AS_BYTES[name] and x.data_ptr == t.data_ptr()
    assert torch.from_dlpack(x).dtype == getattr(torch, TORCH_AS_BYTES[name])


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
@pytest.mark.parametrize("name", sorted(TORCH_REFUSED_BY_US))
def test_torch_dtypes_tensorbridge_lacks_are_refused(name):
    dtype = getattr(torch, name)
    t = (
        torch.zeros(4, dtype=torch.uint8).view(dtype)
        if dtype.itemsize == 1
        else torch.zeros(4, dtype=dtype)
    )
    with pytest.raises(BufferError, match=TORCH_REFUSED_BY_US[name]):
        tb.from_dlpack(t)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name", sorted(TORCH_REFUSED_BY_TORCH))
def test_torch_dtypes_torch_cannot_export_are_refused(name):
    dtype = getattr(torch, name)
    if name.startswith(("q", "quint")):
        t = torch.quantize_per_tensor(torch.zeros(4), 0.1, 0, dtype)
    else:
        t = torch.zeros(4, dtype=torch.uint8 if dtype.itemsize == 1 else torch.int16).view(dtype)
    with pytest.raises((RuntimeError, BufferError), match=TORCH_REFUSED_BY_TORCH[name]):
        tb.from_dlpack(t)


JAX_DTYPES = [
    "bool",
    "int8",
    "int16",
    "int32",
    "uint8",
    "uint16",
    "uint32",
    "float16",
    "bfloat16",
    "float32",
    "complex64",
    "float8_e3m4",
    "float8_e4m3",
    "float8_e4m3b11fnuz",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
    "float4_e2m1fn",
]
JAX_X64_DTYPES = ["int64", "uint64", "float64", "complex128"]
JAX_NO_DLPACK = ["int2", "int4", "uint2", "uint4"]  # JAX: "has no DLPack equivalent"


def _jax_sample(dtype, n=8):
    import jax.numpy as jnp

    raw = np.random.default_rng(2).integers(0, 2, n).astype(np.float32)
    return jnp.asarray(raw).astype(dtype)


@requires_jax
@pytest.mark.parametrize("name", JAX_DTYPES + JAX_X64_DTYPES)
def test_jax_dtypes_in_and_out(name):
    import jax

    with jax.enable_x64(name in JAX_X64_DTYPES):
        j = _jax_sample(getattr(jax.numpy, name))
        x = tb.from_dlpack(j)
        assert x.dtype == name and x.read_only
        assert x.data_ptr == j.unsafe_buffer_pointer()
        # Out again: read-only cannot travel the legacy protocol JAX speaks; a copy can.
        with pytest.raises(BufferError, match="read-only"):
            jax.dlpack.from_dlpack(x)
        c = tb.from_dlpack(j, copy=True)
        assert not c.read_only and c.data_ptr != x.data_ptr
        if name == "float4_e2m1fn":  # JAX cannot import it at all (not even its own capsule)
            with pytest.raises(Exception, match="default layout"):
                jax.dlpack.from_dlpack(c)
            return
        back = jax.dlpack.from_dlpack(c)
        assert back.dtype == j.dtype and back.unsafe_buffer_pointer() == c.data_ptr
        assert np.asarray(back).tobytes() == np.asarray(j).tobytes()


@requires_jax
@pytest.mark.parametrize("name", JAX_NO_DLPACK)
def test_jax_dtypes_without_dlpack_codes_are_refused_by_jax(name):
    import jax.numpy as jnp

    j = jnp.zeros(4, getattr(jnp, name))
    with pytest.raises(Exception, match="no DLPack equivalent"):
        tb.from_dlpack(j)


# ---- shapes and strides ----------------------------------------------------------------------

SHAPES = [(), (0,), (3, 0, 2), (1,), (5,), (2, 3, 4), (1,) * 30 + (2, 3), (2,) * 10 + (1,) * 22]


@pytest.mark.parametrize(
    "shape", SHAPES, ids=lambda s: f"ndim{len(s)}-{'x'.join(map(str, s[-3:]))}"
)
def test_shapes_numpy_and_torch(shape):
    a = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    x = tb.from_dlpack(a)
    assert x.shape == shape and x.ndim == len(shape) and x.size == a.size
    if a.size:
        assert x.data_ptr == a.ctypes.data
    back = np.from_dlpack(x)
    assert back.shape == shape and np.array_equal(back, a)
    t = torch.from_dlpack(x)
    assert tuple(t.shape) == shape and np.array_equal(t.numpy(), a)
    y = tb.from_dlpack(t)
    assert y.shape == shape and (not a.size or y.data_ptr == a.ctypes.data)


@requires_jax
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"ndim{len(s)}")
def test_shapes_jax(shape):
    import jax
    import jax.numpy as jnp

    j = jnp.arange(int(np.prod(shape)), dtype=jnp.float32).reshape(shape)
    x = tb.from_dlpack(j)
    assert x.shape == shape and x.read_only
    if j.size:
        assert x.data_ptr == j.unsafe_buffer_pointer()
    back = jax.dlpack.from_dlpack(tb.from_dlpack(torch.from_dlpack(x.clone())))
    assert back.shape == shape and np.array_equal(np.asarray(back), np.asarray(j))


def test_zero_d_has_no_len_and_exports():
    x = tb.from_dlpack(np.full((), 3.5))
    assert x.shape == () and x.strides == () and x.size == 1
    with pytest.raises(TypeError, match="0-d"):
        len(x)
    assert float(np.from_dlpack(x)) == 3.5 and torch.from_dlpack(x).item() == 3.5


def test_transposed_and_sliced_views_numpy():
    base = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    for v in [
        base.T,
        base.transpose(1, 0, 2),
        base[1:, ::2, 3:],
        base[:, 1],
        base[..., ::-1],
        base[::-1, :, ::-2],
        base[2:2],
    ]:
        x = tb.from_dlpack(v)
        assert x.shape == v.shape
        assert x.strides == tuple(s // v.itemsize for s in v.strides)
        if v.size:
            assert x.data_ptr == v.ctypes.data  # the first element, offset applied
        back = np.from_dlpack(x)
        assert np.array_equal(back, v) and (not v.size or back.ctypes.data == v.ctypes.data)


def test_negative_strides_reach_numpy():
    a = np.arange(10, dtype=np.int64)[::-1]
    x = tb.from_dlpack(a)
    assert x.strides == (-1,) and x.data_ptr == a.ctypes.data
    back = np.from_dlpack(x)
    assert back.strides == a.strides and np.array_equal(back, a)
    # (torch.from_dlpack aborts the process on negative strides, from numpy too: torch's bug.)


def test_transposed_and_sliced_views_torch():
    base = torch.arange(60, dtype=torch.float32).reshape(3, 4, 5)
    for v in [
        base.permute(2, 0, 1),
        base.transpose(0, 1),
        base[1:, ::2, 3:],
        base[:, 1],
        base.diagonal(dim1=1, dim2=2),
        base[2:2],
        base.expand(2, 3, 4, 5),
    ]:
        x = tb.from_dlpack(v)
        assert x.shape == tuple(v.shape) and x.strides == v.stride()
        if v.numel():
            assert x.data_ptr == v.data_ptr()
        back = torch.from_dlpack(x)
        assert torch.equal(back, v) and (not v.numel() or back.data_ptr() == v.data_ptr())


def test_our_views_export_with_their_offsets():
    a = np.arange(24, dtype=np.float64).reshape(4, 6)
    x = tb.from_dlpack(a)
    for view, ref in [
        (x.T, a.T),
        (x.slice(1, 2, None, 2), a[:, 2::2]),
        (x.select(0, 3), a[3]),
        (x.diagonal(), a.diagonal()),
    ]:
        n = np.from_dlpack(view)
        assert n.ctypes.data == ref.ctypes.data and np.array_equal(n, ref)
        t = torch.from_dlpack(view)
        assert t.data_ptr() == ref.ctypes.data and np.array_equal(t.numpy(), ref)


# ---- lifetime --------------------------------------------------------------------------------


def test_numpy_source_deleted_while_array_lives():
    a = np.arange(1000, dtype=np.float64)
    ref = weakref.ref(a)
    x = tb.from_dlpack(a)
    del a
    gc.collect()
    assert ref() is not None  # the Array keeps it alive
    assert np.array_equal(x.numpy(), np.arange(1000.0))
    del x
    gc.collect()
    assert ref() is None  # and lets it go


def test_torch_source_deleted_while_array_lives():
    t = torch.arange(1000, dtype=torch.float32) * 2
    x = tb.from_dlpack(t)
    ptr = t.data_ptr()
    del t
    gc.collect()
    torch.ones(1000)  # reuse freed memory, if it were freed
    back = torch.from_dlpack(x)
    assert back.data_ptr() == ptr and torch.equal(back, torch.arange(1000, dtype=torch.float32) * 2)


@requires_jax
def test_jax_source_deleted_while_array_lives():
    import jax.numpy as jnp

    j = jnp.arange(1000, dtype=jnp.float32) * 3
    x = tb.from_dlpack(j)
    del j
    gc.collect()
    jnp.zeros(1000).block_until_ready()
    assert np.array_equal(x.numpy(), np.arange(1000, dtype=np.float32) * 3)


def test_array_deleted_while_exports_live():
    a = np.arange(100, dtype=np.int16)
    ref = weakref.ref(a)
    x = tb.from_dlpack(a)
    n, t = np.from_dlpack(x), torch.from_dlpack(x)
    del a, x
    gc.collect()
    assert ref() is not None
    assert np.array_equal(n, np.arange(100)) and t.sum().item() == 4950
    del n
    gc.collect()
    assert ref() is not None  # torch still holds it
    del t
    gc.collect()
    assert ref() is None


# ---- read-only -------------------------------------------------------------------------------


def test_read_only_numpy_stays_read_only():
    a = np.arange(6.0)
    a.flags.writeable = False
    x = tb.from_dlpack(a)
    assert x.read_only and x.data_ptr == a.ctypes.data
    assert "read_only=True" in repr(x)
    n = np.from_dlpack(x)
    assert not n.flags.writeable and n.ctypes.data == a.ctypes.data
    with pytest.raises(ValueError, match="read-only"):
        n[0] = 1
    with pytest.raises(BufferError, match="copy=True"):
        x.__dlpack__()  # legacy: cannot say read-only
    y = tb.from_dlpack(a, copy=True)
    assert not y.read_only and y.data_ptr != a.ctypes.data
    assert np.array_equal(y.numpy(), a) and y.numpy().flags.writeable
    z = tb.from_dlpack(x, copy=True)
    assert not z.read_only and z.data_ptr != a.ctypes.data


@requires_jax
def test_jax_read_only_whatever_the_capsule_says_and_copy_is_writable():
    import jax.numpy as jnp

    j = jnp.ones((2, 2), jnp.float32)
    # JAX hands out legacy capsules, which cannot say read-only: JAX arrays are immutable anyway.
    assert "versioned" not in repr(j.__dlpack__())
    x = tb.from_dlpack(j)
    assert x.read_only and x.T.read_only and x.slice(0, 0, 1).read_only
    with pytest.raises(BufferError, match="copy=True"):
        x.__dlpack__()
    c = tb.from_dlpack(j, copy=True)
    assert not c.read_only and c.data_ptr != j.unsafe_buffer_pointer()
    assert c.numpy().flags.writeable


# ---- 100,000 wrap/unwrap cycles, flat memory -------------------------------------------------


def _rss_kib():
    with open("/proc/self/statm") as f:
        import os

        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def _cycles(n, a, t, j):
    for _ in range(n):
        x = tb.from_dlpack(a)
        np.from_dlpack(x)
        tb.from_dlpack(x.__dlpack__(max_version=(1, 3)))
        y = tb.from_dlpack(t)
        torch.from_dlpack(y)
        tb.from_dlpack(t.__dlpack__())
        if j is not None:
            tb.from_dlpack(j)


def test_100k_wrap_unwrap_cycles_keep_memory_flat():
    a = np.ones((4, 4), np.float32)
    t = torch.ones(4, 4)
    try:
        import jax.numpy as jnp

        j = jnp.ones((4, 4))
    except ImportError:
        j = None
    ref = weakref.ref(a)
    _cycles(5_000, a, t, j)  # warm up allocators and caches
    gc.collect()
    before = _rss_kib()
    _cycles(100_000, a, t, j)
    gc.collect()
    grown = _rss_kib() - before
    # One leaked 64-byte block a cycle would be 6 MiB here.
    assert grown < 2048, f"RSS grew by {grown} KiB over 100,000 cycles"
    del a
    gc.collect()
    assert ref() is None, "a reference to the numpy source leaked"
