"""Memory of compiled plans (dispatch/plan.cc's liveness, tensorbridge._memory): a plan's peak
counts a buffer while any view of it is alive and the saved activations a backward plan frees
at their last use; a training step saves for backward only what is costly to recompute
(``config.recompute``) with gradients equal to torch's; the buffer cache is sized by the plans'
peaks, and a step in a steady state then allocates nothing new."""

from __future__ import annotations

import copy
import os

import pytest
import torch

import tensorbridge as tb
from tensorbridge import _C, _compile, _memory

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def _value(v):
    return ("value", v)


def _viewed_plan(with_base: bool):
    """a = x + x; v = a.t(); b = -x; c = v * b: a's buffer lives on in v until c."""
    p = _C.Plan()
    x = p.add_input("x")
    (a,) = p.add_node("aten::add.Tensor", [_value(x), _value(x), ("const", 1)], 1, "a")
    (v,) = p.add_node("aten::t", [_value(a)], 1, "v")
    (b,) = p.add_node("aten::neg", [_value(x)], 1, "b")
    (c,) = p.add_node("aten::mul.Tensor", [_value(v), _value(b)], 1, "c")
    p.set_outputs([_value(c)])
    n = 64 * 64 * 4
    for value in (a, b, c):
        p.set_value_bytes(value, n)
    if with_base:
        p.set_value_base(v, a)
    p.finalize()
    return p, n


def test_a_viewed_buffer_counts_until_its_views_last_use(no_fallback):
    x = torch.randn(64, 64)
    with_base, n = _viewed_plan(True)
    without, _ = _viewed_plan(False)
    # a, b and c alive at c's node when a lives on in its view v; without the base, a's
    # buffer would seem freed after the view node
    assert with_base.peak_bytes == 3 * n
    assert without.peak_bytes == 2 * n
    (got,) = with_base.run([_C.from_dlpack(x)])
    torch.testing.assert_close(torch.from_dlpack(got), (x + x).t() * -x)


def test_inputs_given_bytes_count_until_their_last_use():
    p = _C.Plan()
    x = p.add_input("x")
    (y,) = p.add_node("aten::neg", [_value(x)], 1, "y")
    (z,) = p.add_node("aten::neg", [_value(y)], 1, "z")
    p.set_outputs([_value(z)])
    p.set_value_bytes(x, 1000)
    p.set_value_bytes(y, 100)
    p.set_value_bytes(z, 10)
    p.finalize()
    # x and y at y's node; y and z at z's (x freed after its last use)
    assert p.peak_bytes == 1100


def test_a_view_base_must_come_before_the_view():
    p = _C.Plan()
    x = p.add_input("x")
    (y,) = p.add_node("aten::neg", [_value(x)], 1, "y")
    with pytest.raises(ValueError, match="the base must be a value made before its view"):
        p.set_value_base(x, y)


class _Mlp(torch.nn.Module):
    """Linear layers with a tanh-approximated gelu written out (a chain of element-wise ops
    whose intermediates the backward needs unless it recomputes them)."""

    def __init__(self, width: int = 256):
        super().__init__()
        self.fc1 = torch.nn.Linear(width, 4 * width)
        self.fc2 = torch.nn.Linear(4 * width, width)

    def forward(self, x):
        h = self.fc1(x)
        h = 0.5 * h * (1.0 + torch.tanh(0.7978845608028654 * (h + 0.044715 * torch.pow(h, 3.0))))
        return self.fc2(h)


def _step(fn, model, x):
    for p in model.parameters():
        p.grad = None
    loss = fn(x).square().mean()
    loss.backward()
    return loss.detach(), {k: p.grad.clone() for k, p in model.named_parameters()}


def _saved_bytes(fn, model, x) -> int:
    """Bytes of the distinct buffers the forward saves for backward, the parameters' and the
    input's left out (the plans' own results)."""
    params = {p.untyped_storage().data_ptr() for p in (*model.parameters(), x)}
    seen: dict = {}

    def pack(t):
        st = t.untyped_storage()
        if st.data_ptr() not in params:
            seen[st.data_ptr()] = st.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = fn(x).square().mean()
    loss.backward()
    return sum(seen.values())


@pytest.mark.parametrize("recompute", [True, False])
def test_training_step_equals_torch_and_recompute_saves_less(no_fallback, monkeypatch, recompute):
    torch.manual_seed(0)
    model = _Mlp()
    x = torch.randn(128, 256)
    want_loss, want_grads = _step(model, model, x)
    saved = {}
    for on in (recompute, not recompute):
        torch._dynamo.reset()
        monkeypatch.setattr(tb.config, "recompute", on)
        m = copy.deepcopy(model)
        compiled = torch.compile(m, backend="tensorbridge")
        for _ in range(2):
            loss, grads = _step(compiled, m, x)
            torch.testing.assert_close(loss, want_loss)
            for k, g in grads.items():
                torch.testing.assert_close(g, want_grads[k], msg=k)
        saved[on] = _saved_bytes(compiled, m, x)
    # without recomputing, the chain's intermediates (4 x 128 x 1024 floats each) are saved
    assert saved[True] + 3 * 128 * 1024 * 4 <= saved[False]


def test_plan_peaks_count_the_saved_activations_and_size_the_cache(no_fallback, monkeypatch):
    monkeypatch.setattr(tb.config, "_host_cache_limit_set", False)
    monkeypatch.setattr(_memory, "_need", 0)
    old_limit = _C.memory_stats()["cache_limit_bytes"]
    try:
        torch.manual_seed(0)
        model = _Mlp(512)
        x = torch.randn(512, 512)
        compiled = torch.compile(model, backend="tensorbridge")
        _step(compiled, model, x)
        (record,) = _compile._records_of(compiled)
        plans = {e["kind"]: e["plan"] for e in record.plans}
        saved = _saved_bytes(compiled, model, x)
        # the forward's saved activations live to its end, and the backward takes them
        assert plans["forward"].peak_bytes >= saved
        assert plans["backward"].peak_bytes >= saved
        assert _memory._need == max(p.peak_bytes for p in plans.values())
        limit = _C.memory_stats()["cache_limit_bytes"]
        if "TB_HOST_CACHE_MB" not in os.environ:
            assert limit == _memory.limit_for(_memory._need) < 512 << 20
        # a steady-state step: every buffer from the cache, and no more alive than it holds
        _step(compiled, model, x)
        _C.reset_peak_memory()
        before = _C.memory_stats()
        _step(compiled, model, x)
        after = _C.memory_stats()
        assert after["cache_misses"] == before["cache_misses"]
        assert after["peak_live_bytes"] <= after["cache_limit_bytes"]
    finally:
        _C.set_host_cache_limit(old_limit)
