"""Pickling, torch.save / torch.load, safetensors, transformers checkpoints and copies of
tensorbridge.Array and tensorbridge.Tensor (python/tensorbridge/_serialization.py)."""

from __future__ import annotations

import copy
import io
import pickle

import numpy as np
import pytest
import torch
from conftest import requires_jax

import tensorbridge as tb
from tensorbridge import _serialization


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))


def _roundtrip(obj, protocol=pickle.HIGHEST_PROTOCOL):
    return pickle.loads(pickle.dumps(obj, protocol=protocol))


# ---- tb.Array ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int64,
              torch.int8, torch.uint8, torch.bool, torch.complex64]
)  # fmt: skip
def test_array_pickles_by_value(dtype):
    src = (torch.arange(24) % 5).reshape(2, 3, 4).to(dtype)
    a = tb.from_dlpack(src)
    b = _roundtrip(a)
    assert isinstance(b, tb.Array)
    assert (b.shape, b.strides, b.dtype) == (a.shape, a.strides, a.dtype)
    assert b.data_ptr != a.data_ptr  # new memory, its own
    assert torch.equal(torch.from_dlpack(b), src)


@pytest.mark.parametrize(
    "view,strides",
    [
        (lambda x: x, (12, 4, 1)),
        (lambda x: x.permute(2, 0, 1), (1, 12, 4)),  # dense: the layout travels
        (lambda x: x[:, 1:, ::2], (4, 2, 1)),  # gaps: C order
        (lambda x: x[:1, :1].expand(3, 2, 4), (8, 4, 1)),  # zero strides: C order
        (lambda x: x[0, 0, 0], ()),  # 0-d
        (lambda x: x[:, :0], (0, 4, 1)),  # no elements
    ],
)
def test_array_pickle_keeps_dense_layouts_and_packs_others(view, strides):
    src = view(torch.arange(24.0).reshape(2, 3, 4))
    b = _roundtrip(tb.from_dlpack(src))
    assert b.shape == tuple(src.shape)
    if src.numel():
        assert b.strides == strides
    assert torch.equal(torch.from_dlpack(b), src)


def test_array_pickle_of_read_only_memory_is_writable():
    a = np.arange(4.0)
    a.flags.writeable = False
    b = _roundtrip(tb.from_dlpack(a))
    assert not b.read_only
    np.testing.assert_array_equal(b.numpy(), a)


def test_array_from_bytes_refuses_inconsistent_pickles():
    with pytest.raises(ValueError, match="takes 24"):
        tb._C._array_from_bytes(b"\0" * 8, (2, 3), (3, 1), "float32")
    with pytest.raises(ValueError, match="unknown dtype 'float7'"):
        tb._C._array_from_bytes(b"", (0,), (1,), "float7")
    with pytest.raises(ValueError, match="do not lay out shape"):
        tb._C._array_from_bytes(b"\0" * 24, (2, 3), (1, 1), "float32")


def test_array_copies():
    a = tb.from_dlpack(np.arange(6.0))
    assert copy.copy(a).data_ptr == a.data_ptr  # an Array is a view: copy.copy shares
    d = copy.deepcopy(a)
    assert d.data_ptr != a.data_ptr and d.numpy().tolist() == a.numpy().tolist()


# ---- tb.Tensor ---------------------------------------------------------------------------------


def test_tensor_pickles_by_value():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = tb.wrap(a).requires_grad_()
    u = _roundtrip(t)
    assert type(u) is tb.Tensor and u.requires_grad and u.is_leaf
    assert u.data_ptr() != t.data_ptr() and u.data_ptr() == u.array.data_ptr
    np.testing.assert_array_equal(tb.to_numpy(u), a)
    u.detach().add_(1)  # its own memory: the source is untouched
    assert a[0, 0] == 0
    with pytest.raises(RuntimeError, match="stand-in"):
        _serialization.reduce_tensor(tb.Tensor._from_inner(torch.empty(2, device="meta")))


def test_torch_save_writes_the_values_as_a_storage_record():
    import zipfile

    a = np.ones((256, 256), np.float32)
    buf = io.BytesIO()
    torch.save({"w": tb.wrap(a)}, buf)
    files = zipfile.ZipFile(io.BytesIO(buf.getvalue()))
    records = [i for i in files.infolist() if "/data/" in i.filename]
    assert [i.file_size for i in records] == [a.nbytes]  # raw bytes, as for a plain tensor
    pkl = next(i for i in files.infolist() if i.filename.endswith("data.pkl"))
    assert pkl.file_size < 1024


def test_processes_pickle_the_bytes():
    from multiprocessing.reduction import ForkingPickler

    a = np.arange(6, dtype=np.float32)
    blob = ForkingPickler.dumps(tb.wrap(a))
    assert a.tobytes() in bytes(blob)  # the values themselves, no shared-memory handle
    back = pickle.loads(blob)
    assert type(back) is tb.Tensor and back.data_ptr() != a.ctypes.data
    np.testing.assert_array_equal(tb.to_numpy(back), a)


def test_parameters_stay_parameters():
    p = tb.wrap_module(torch.nn.Linear(2, 2)).weight
    q = _roundtrip(p)
    assert isinstance(q, torch.nn.Parameter) and isinstance(q, tb.Tensor) and q.requires_grad
    torch.testing.assert_close(tb.to_torch(q), tb.to_torch(p), rtol=0, atol=0)


@pytest.mark.parametrize("weights_only", [True, False])
def test_torch_save_state_dict_loads_into_wrapped_and_plain_models(weights_only):
    src = tb.wrap_module(_mlp())
    buf = io.BytesIO()
    torch.save(src.state_dict(), buf)
    buf.seek(0)
    state = torch.load(buf, weights_only=weights_only)
    assert all(type(v) is tb.Tensor for v in state.values())
    x = torch.randn(5, 4)
    want = tb.to_torch(src(x)).detach()

    # into a wrapped model: written into the memory the parameters wrap (numpy here)
    torch.manual_seed(1)
    plain = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    w = plain[0].weight.detach().numpy().copy()
    wrapped = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    wrapped[0].weight = torch.nn.Parameter(tb.wrap(w))
    tb.wrap_module(wrapped)
    wrapped.load_state_dict(state)
    assert wrapped[0].weight.data_ptr() == w.ctypes.data
    np.testing.assert_array_equal(w, tb.to_numpy(src[0].weight.detach()))
    torch.testing.assert_close(tb.to_torch(wrapped(x)).detach(), want, rtol=0, atol=0)

    # into a plain model: plain parameters, the same values
    plain.load_state_dict(state)
    assert type(plain[0].weight) is torch.nn.Parameter
    torch.testing.assert_close(plain(x).detach(), want, rtol=1e-5, atol=1e-6)


def test_weights_only_uses_torchs_allow_list():
    allowed = torch.serialization.get_safe_globals()
    assert _serialization.rebuild_tensor in allowed and _serialization.rebuild_array in allowed
    buf = io.BytesIO()
    torch.save({"w": tb.wrap(np.ones(3, np.float32))}, buf)
    buf.seek(0)
    with torch.serialization.safe_globals([]):  # a context on top of the global list
        assert type(torch.load(buf, weights_only=True)["w"]) is tb.Tensor


def test_torch_save_whole_module():
    src = tb.wrap_module(_mlp())
    buf = io.BytesIO()
    torch.save(src, buf)
    buf.seek(0)
    back = torch.load(buf, weights_only=False)
    x = torch.randn(5, 4)
    p = back[0].weight
    assert isinstance(p, tb.Tensor) and isinstance(p, torch.nn.Parameter)
    assert p.data_ptr() != src[0].weight.data_ptr()
    torch.testing.assert_close(tb.to_torch(back(x)), tb.to_torch(src(x)), rtol=0, atol=0)


def test_safetensors_save_and_load():
    st = pytest.importorskip("safetensors.torch", reason="safetensors comes with transformers")
    src = tb.wrap_module(_mlp())
    blob = st.save(src.state_dict())
    state = st.load(blob)
    for k, v in src.state_dict().items():
        assert torch.equal(state[k], tb.to_torch(v)), k
    dst = tb.wrap_module(torch.nn.Sequential(*[copy.deepcopy(m) for m in _mlp()]))
    for p in dst.parameters():
        p.detach().zero_()
    dst.load_state_dict(state)
    x = torch.randn(2, 4)
    torch.testing.assert_close(tb.to_torch(dst(x)), tb.to_torch(src(x)), rtol=0, atol=0)


def test_transformers_save_pretrained_from_wrapped_parameters(tmp_path):
    pytest.importorskip("transformers", reason="transformers is not installed")
    st = pytest.importorskip("safetensors.torch", reason="safetensors comes with transformers")
    from tensorbridge import zoo

    model, inputs = zoo.build("gpt2")  # lm_head tied to the token embedding
    tb.wrap_module(model)
    with torch.no_grad():
        want = tb.to_torch(zoo.first_output(model(**inputs)))
    model.save_pretrained(tmp_path)
    saved = st.load_file(tmp_path / "model.safetensors")
    for name, p in model.named_parameters():  # tied parameters are named once
        assert torch.equal(saved[name], tb.to_torch(p.detach())), name
    back = type(model).from_pretrained(tmp_path).eval()
    assert back.lm_head.weight is back.transformer.wte.weight
    with torch.no_grad():
        torch.testing.assert_close(zoo.first_output(back(**inputs)), want, rtol=1e-4, atol=1e-5)
        again = tb.wrap_module(back)
        got = tb.to_torch(zoo.first_output(again(**inputs)))
    torch.testing.assert_close(got, want, rtol=0, atol=0)  # the same kernels, the same bits


# ---- copies -----------------------------------------------------------------------------------


def test_deepcopy_of_a_wrapped_numpy_array_wraps_a_new_numpy_array():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = tb.wrap(a)
    d = copy.deepcopy(t)
    assert type(d) is tb.Tensor and d._source == "numpy"
    assert d.data_ptr() not in (0, a.ctypes.data)
    d.add_(1)
    assert a[0, 0] == 0 and tb.to_numpy(d)[0, 0] == 1
    assert copy.deepcopy(tb.wrap(a.T)).stride() == (1, 3)  # the layout too


def test_deepcopy_keeps_the_kind_of_memory():
    t = tb.wrap(torch.arange(4.0))
    assert copy.deepcopy(t)._source == "torch"
    r = t * 2  # tensorbridge's own memory
    d = copy.deepcopy(r)
    assert "_source" not in d.__dict__ and d.data_ptr() != r.data_ptr()
    assert torch.equal(tb.to_torch(d), tb.to_torch(r))


@requires_jax
def test_deepcopy_of_a_wrapped_jax_array():
    import jax.numpy as jnp

    x = jnp.arange(4.0)
    d = copy.deepcopy(tb.wrap(x))
    assert d._source == "jax" and d.array.read_only  # JAX arrays are immutable
    np.testing.assert_array_equal(tb.to_numpy(d), np.arange(4.0))


def test_deepcopy_of_a_module_gives_independent_parameters():
    src = tb.wrap_module(_mlp())
    src(torch.randn(2, 4)).sum().backward()
    dst = copy.deepcopy(src)
    for (name, p), q in zip(src.named_parameters(), dst.parameters(), strict=True):
        assert isinstance(q, torch.nn.Parameter) and isinstance(q, tb.Tensor), name
        assert q.data_ptr() != p.data_ptr() and q._source == "torch"
        assert q.grad is not None and q.grad.data_ptr() != p.grad.data_ptr()
        assert torch.equal(tb.to_torch(q.detach()), tb.to_torch(p.detach()))
    with torch.no_grad():
        dst[0].weight.add_(1)
    assert not torch.equal(tb.to_torch(dst[0].weight.detach()), tb.to_torch(src[0].weight.detach()))


def test_copy_copy_and_clone_keep_their_torch_meanings():
    a = np.arange(3, dtype=np.float32)
    t = tb.wrap(a).requires_grad_()
    s = copy.copy(t)
    assert s.data_ptr() == t.data_ptr()  # shares, as torch's copy.copy does
    c = t.clone()
    assert c.data_ptr() != t.data_ptr() and c.grad_fn is not None
    with pytest.raises(RuntimeError, match="graph leaves"):
        copy.deepcopy(c)
    plain = torch.arange(3.0, requires_grad=True)
    assert copy.copy(plain).data_ptr() == plain.data_ptr()
    with pytest.raises(RuntimeError, match="graph leaves"):
        copy.deepcopy(plain.clone())


def test_wrap_module_keeps_tied_parameters_tied():
    emb = torch.nn.Embedding(5, 3)
    head = torch.nn.Linear(3, 5, bias=False)
    head.weight = emb.weight
    model = tb.wrap_module(torch.nn.ModuleDict({"emb": emb, "head": head}))
    assert model["head"].weight is model["emb"].weight
    assert len(list(model.parameters())) == 1


def test_torch_load_with_mmap_wraps_the_mapped_file(tmp_path):
    path = tmp_path / "w.pt"
    torch.save({"w": tb.wrap(np.arange(6, dtype=np.float32))}, path)
    w = torch.load(path, weights_only=True, mmap=True)["w"]
    assert type(w) is tb.Tensor and w.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
