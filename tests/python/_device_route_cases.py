"""Cases of the device route, run by test_device_route.py in a process of their own (loading
the route renames torch's PrivateUse1 device for the rest of the process). Results are
compared with torch's CPU kernels on the same values; the table's counters show which ops the
table served."""

import copy

import numpy as np
import pytest
import torch

import tensorbridge as tb
from tensorbridge import _device_route as dr
from tensorbridge import zoo

REGISTERED = dr.load()


def served_by_table(op: str) -> int:
    return tb.diagnostics.metrics().get(op, {}).get("kernel", 0)


def test_registers_table_kernels():
    for op in ("aten::add.Tensor", "aten::mm", "aten::addmm", "aten::_softmax", "aten::gelu"):
        assert op in REGISTERED
    # Views, factories and copies keep torch's own path.
    for op in ("aten::view", "aten::empty.memory_format", "aten::copy_", "aten::add.out"):
        assert op not in REGISTERED


def test_zero_copy_both_ways():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = dr.to_device(a)
    assert t.device.type == "tensorbridge"
    assert t.data_ptr() == a.ctypes.data
    assert dr.cpu_view(t).data_ptr() == a.ctypes.data
    np.testing.assert_array_equal(dr.cpu_view(t).numpy(), a)
    assert np.shares_memory(dr.cpu_view(t).numpy(), a)


def test_add_and_mm_run_in_the_table():
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((4, 4), dtype=np.float32) for _ in range(2))
    ta, tb_ = torch.from_numpy(a), torch.from_numpy(b)
    da, db = dr.to_device(a), dr.to_device(b)
    tb.diagnostics.reset_metrics()
    s, m = da + db, da @ db
    assert served_by_table("aten::add.Tensor") == 1
    assert served_by_table("aten::mm") == 1
    assert s.device.type == m.device.type == "tensorbridge"
    torch.testing.assert_close(dr.cpu_view(s), ta + tb_)
    torch.testing.assert_close(dr.cpu_view(m), ta @ tb_)


def test_in_place_writes_the_wrapped_memory():
    a = np.ones((2, 3), dtype=np.float32)
    t = dr.to_device(a)
    out = t.add_(2.0)
    assert out is t
    np.testing.assert_array_equal(a, np.full((2, 3), 3.0, np.float32))


def test_fallback_runs_torch_on_views():
    # airy_ai is not in the table: torch's CPU kernel runs on zero-copy views.
    assert "aten::special_airy_ai" not in REGISTERED
    a = np.linspace(-2, 2, 6, dtype=np.float32)
    dr.fallback_counts()
    got = torch.special.airy_ai(dr.to_device(a))
    # a structured op: its functional form reaches the fallback as its out= form
    assert dr.fallback_counts() == {"aten::special_airy_ai.out": 1}
    assert got.device.type == "tensorbridge"
    torch.testing.assert_close(dr.cpu_view(got), torch.special.airy_ai(torch.from_numpy(a)))


def test_out_variant_resized_by_the_fallback():
    a = np.arange(6, dtype=np.float32)
    out = torch.empty(0, device="tensorbridge")
    dr.fallback_counts()
    torch.cumsum(dr.to_device(a), 0, out=out)
    assert dr.fallback_counts() == {"aten::cumsum.out": 1}
    torch.testing.assert_close(dr.cpu_view(out), torch.cumsum(torch.from_numpy(a), 0))


def test_copies_between_devices():
    x = torch.randn(3, 5)
    d = x.to("tensorbridge")
    assert d.device.type == "tensorbridge" and d.data_ptr() != x.data_ptr()
    torch.testing.assert_close(d.cpu(), x)
    torch.testing.assert_close(torch.zeros(2, 2, device="tensorbridge").cpu(), torch.zeros(2, 2))


def test_autograd_linear_relu():
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((3, 4), dtype=np.float32), rng.standard_normal((5, 4), np.float32)
    cx, cw = (torch.from_numpy(v.copy()).requires_grad_() for v in (x, w))
    dx, dw = (dr.to_device(v).requires_grad_() for v in (x, w))
    torch.nn.functional.linear(cx, cw).relu().sum().backward()
    torch.nn.functional.linear(dx, dw).relu().sum().backward()
    assert dx.grad.device.type == "tensorbridge"
    torch.testing.assert_close(dr.cpu_view(dx.grad), cx.grad)
    torch.testing.assert_close(dr.cpu_view(dw.grad), cw.grad)


def test_bad_input_raises():
    with pytest.raises(RuntimeError, match="cpu_view: expected a tensor on the tensorbridge"):
        dr.cpu_view(torch.ones(2))
    with pytest.raises(RuntimeError, match="device_view: expected a CPU tensor"):
        torch.ops.tensorbridge_device.device_view(dr.to_device(np.ones(2, np.float32)))


@pytest.mark.parametrize("name", ["bert", "gpt2"])
def test_zoo_model_forward_and_backward(name):
    model, inputs = zoo.build(name, "tiny")
    dev = dr.module_to_device(copy.deepcopy(model))
    dinputs = {k: dr.to_device(v.clone()) for k, v in inputs.items()}
    assert len(list(dev.parameters())) == len(list(model.parameters()))
    assert all(q.device.type == "tensorbridge" for q in dev.parameters())
    tb.diagnostics.reset_metrics()
    with torch.no_grad():
        want = zoo.first_output(model(**inputs))
        got = zoo.first_output(dev(**dinputs))
    assert served_by_table("aten::addmm") + served_by_table("aten::mm") > 0
    torch.testing.assert_close(dr.cpu_view(got), want, rtol=1e-4, atol=1e-5)
    zoo.loss_of(model(**inputs)).backward()
    zoo.loss_of(dev(**dinputs)).backward()
    want_g = {k: p.grad for k, p in model.named_parameters() if p.grad is not None}
    got_g = {k: dr.cpu_view(p.grad) for k, p in dev.named_parameters() if p.grad is not None}
    assert got_g.keys() == want_g.keys()
    assert zoo.grad_error(got_g, want_g) < 1e-4
