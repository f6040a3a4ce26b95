"""What the compile backend's plans hold: explain(compiled), per-function metrics, the fusion
pass, and training-mode batch norm in the table."""

import copy

import pytest
import torch

import tensorbridge as tb
from tensorbridge import _compile

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def _relu_mlp():
    return torch.nn.Sequential(
        torch.nn.Linear(20, 32),
        torch.nn.ReLU(),
        torch.nn.Linear(32, 16),
        torch.nn.GELU(approximate="tanh"),
        torch.nn.Linear(16, 5),
    )


def _conv_relu():
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(8 * 4 * 4, 6),
    )


def _convnet():
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(8 * 4 * 4, 6),
    )


def test_explain_shows_each_plan_and_counts_recompilations():
    torch.manual_seed(0)
    model = _relu_mlp().eval()
    compiled = torch.compile(model, backend="tensorbridge", dynamic=False)
    with torch.no_grad():
        for _ in range(3):
            compiled(torch.randn(4, 20))
        compiled(torch.randn(7, 20))  # a new shape: a new plan, a recompilation
    assert tb.diagnostics.plan_metrics(compiled) == {
        "compilations": 2,
        "recompilations": 1,
        "plans_built": 2,
        "shape_plans": 0,
        "plan_calls": 4,
    }
    text = tb.diagnostics.explain(compiled)
    assert text.startswith(
        "Sequential: 2 compilations (1 recompilations), 2 plans built, 4 plan calls"
    )
    first, second = (line for line in text.splitlines() if line.startswith("compilation"))
    assert first.startswith("compilation 1: frame Sequential.forward, inputs float32[32, 20], ")
    assert "float32[4, 20]" in first and "float32[7, 20]" not in first
    assert second.startswith("compilation 2 (recompilation): frame Sequential.forward")
    assert "float32[7, 20]" in second
    assert "forward plan, 3 calls:" in text and "forward plan, 1 calls:" in text
    assert text.count("fallback nodes: none") == 2
    assert "tensorbridge::matmul_epilogue(" in text and "[kernel: kernels/epilogue.cc" in text
    assert "slots" in text and "frees s" in text
    # The op-name form is unchanged.
    assert tb.diagnostics.explain("aten::relu").startswith("aten::relu on cpu: kernel")


def test_explain_marks_composites_and_fallbacks():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Softmax(-1)).eval()
    compiled = torch.compile(model, backend="tensorbridge")
    with torch.no_grad():
        compiled(torch.randn(2, 4))
    text = tb.diagnostics.explain(compiled)
    assert "aten::_softmax(" in text
    plan = _compile.state.plans[-1]
    assert f"{plan.count('composite')} composite" in text
    assert f"{plan.count('fallback')} fallback" in text


def test_explain_follows_graph_breaks_and_keeps_functions_apart():
    def f(x):
        y = torch.relu(x) * 2
        print("graph break", end="\r")
        return y.sin()

    def g(x):
        return x.cos()

    cf = torch.compile(f, backend="tensorbridge")
    cg = torch.compile(g, backend="tensorbridge")
    assert "no tensorbridge plans built yet" in tb.diagnostics.explain(cf)
    cf(torch.randn(3))
    cg(torch.randn(3))
    mf, mg = tb.diagnostics.plan_metrics(cf), tb.diagnostics.plan_metrics(cg)
    assert mf["compilations"] == 2 and mf["plans_built"] == 2  # f and its resume function
    assert mg == {
        "compilations": 1,
        "recompilations": 0,
        "plans_built": 1,
        "shape_plans": 0,
        "plan_calls": 1,
    }
    text = tb.diagnostics.explain(cf)
    # relu and mul run as one fused pointwise node, listed by their ops
    assert "aten::relu" in text and "aten::sin(" in text and "aten::cos" not in text
    assert "torch_dynamo_resume_in_f" in text


def test_two_compiled_modules_are_explained_apart():
    a, b = torch.nn.Linear(3, 3).eval(), torch.nn.Sequential(torch.nn.Linear(3, 3)).eval()
    ca, cb = torch.compile(a, backend="tensorbridge"), torch.compile(b, backend="tensorbridge")
    with torch.no_grad():
        ca(torch.randn(2, 3))
        cb(torch.randn(2, 3))
        cb(torch.randn(2, 3))
    assert tb.diagnostics.plan_metrics(ca)["plan_calls"] == 1
    assert tb.diagnostics.plan_metrics(cb)["plan_calls"] == 2
    assert tb.diagnostics.plan_metrics()["plan_calls"] == 3
    # A second Linear runs on the frame dynamo compiled for the first: the same plan.
    c2 = torch.compile(torch.nn.Linear(3, 3).eval(), backend="tensorbridge")
    with torch.no_grad():
        c2(torch.randn(2, 3))
    assert tb.diagnostics.plan_metrics(c2) == tb.diagnostics.plan_metrics(ca)
    assert (
        tb.diagnostics.plan_metrics(ca)["plan_calls"]
        + tb.diagnostics.plan_metrics(cb)["plan_calls"]
        == 4
    )


# float32: 1 and 5 rows run oneDNN's inner product, 20 its matmul; float64: addmm + activation.
@pytest.mark.parametrize(
    ("dtype", "rows"),
    [(torch.float32, 1), (torch.float32, 5), (torch.float32, 20), (torch.float64, 5)],
)
def test_addmm_activation_fusion_matches_eager(dtype, rows):
    torch.manual_seed(0)
    model = _relu_mlp().eval().to(dtype)
    x = torch.randn(rows, 20, dtype=dtype)
    with torch.no_grad():
        out = torch.compile(model, backend="tensorbridge")(x)
        torch.testing.assert_close(out, model(x), rtol=1e-5, atol=1e-5)
    dump = _compile.state.plans[-1].dump()
    # relu and the tanh gelu are folded into their addmm; the last addmm is fused too (an
    # inference plan: its weight is packed).
    assert dump.count("tensorbridge::matmul_epilogue(") == 3
    assert "'relu'," in dump and "'gelu_tanh'," in dump
    assert "aten::relu(" not in dump and "aten::gelu(" not in dump
    assert dump.count("aten::addmm(") == 0


def test_fusion_through_a_view_and_off_switch():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    model.eval()
    x = torch.randn(2, 3, 8)  # linear on 3-D input: view -> addmm -> view -> gelu
    with torch.no_grad():
        torch.testing.assert_close(
            torch.compile(model, backend="tensorbridge")(x), model(x), rtol=1e-5, atol=1e-5
        )
        dump = _compile.state.plans[-1].dump()
        assert "tensorbridge::matmul_epilogue(" in dump and "aten::gelu(" not in dump
        torch._dynamo.reset()
        tb.config.fusion = False
        torch.compile(model, backend="tensorbridge")(x)
    dump = _compile.state.plans[-1].dump()
    assert "tensorbridge::" not in dump and "aten::gelu(" in dump


def test_convolution_relu_fusion_matches_eager():
    torch.manual_seed(0)
    model = _conv_relu().eval()
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        out = torch.compile(model, backend="tensorbridge")(x)
    torch.testing.assert_close(out, model(x), rtol=1e-5, atol=1e-5)
    dump = _compile.state.plans[-1].dump()
    assert "tensorbridge::convolution_epilogue(" in dump and "aten::relu(" not in dump


def test_fused_training_matches_torch():
    torch.manual_seed(0)
    ref = _relu_mlp()
    ours = copy.deepcopy(ref)
    compiled = torch.compile(ours, backend="tensorbridge")
    x, y = torch.randn(6, 20), torch.randint(0, 5, (6,))
    torch.nn.functional.cross_entropy(ref(x), y).backward()
    torch.nn.functional.cross_entropy(compiled(x), y).backward()
    for (n, p), (_, q) in zip(ours.named_parameters(), ref.named_parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-6, msg=n)
    fw = next(
        e["plan"] for r in _compile.state.compilations for e in r.plans if e["kind"] == "forward"
    )
    assert "tensorbridge::matmul_epilogue(" in fw.dump()


def test_convnet_training_runs_batch_norm_in_the_table():
    torch.manual_seed(0)
    ref = _convnet()
    ours = copy.deepcopy(ref)
    compiled = torch.compile(ours, backend="tensorbridge")
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.05)
    opt_ours = torch.optim.SGD(ours.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(3)
    for _ in range(5):
        x, y = torch.randn(4, 3, 8, 8, generator=g), torch.randint(0, 6, (4,), generator=g)
        for m, opt in ((ref, opt_ref), (compiled, opt_ours)):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(m(x), y).backward()
            opt.step()
    for (n, p), (_, q) in zip(ours.state_dict().items(), ref.state_dict().items(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5, msg=n)  # running stats too
    plans = [e for r in _compile.state.compilations for e in r.plans]
    assert {e["kind"] for e in plans} == {"forward", "backward"}
    assert [e["plan"].count("fallback") for e in plans] == [0] * len(plans)
    dumps = "\n".join(e["plan"].dump() for e in plans)
    assert "aten::_native_batch_norm_legit_functional(" in dumps
    assert "aten::native_batch_norm_backward(" in dumps
    assert "fallback nodes: none" in tb.diagnostics.explain(compiled)


def test_steady_state_run_allocates_one_buffer_per_computing_node():
    # Plans do not preallocate: every run gives each computing node a fresh result buffer (so
    # the outputs returned to the caller are never overwritten by a later call); views and
    # the zero-copy input bindings allocate nothing.
    torch.manual_seed(0)
    model = _relu_mlp().eval()
    compiled = torch.compile(model, backend="tensorbridge")
    x = torch.randn(1, 20)
    with torch.no_grad():
        first = compiled(x)
        before = tb._C.storage_allocations()
        outs = [compiled(x) for _ in range(10)]
        after = tb._C.storage_allocations()
    dump = _compile.state.plans[-1].dump()
    computing = dump.count("tensorbridge::matmul_epilogue(") + dump.count("aten::addmm(")
    # the weights' transposes are read by the fused nodes (packed weights)
    assert computing == 3 and dump.count("aten::permute(") == 0
    assert after["count"] - before["count"] == 10 * computing
    # The three results: 32 + 16 + 5 float32 values per run.
    assert after["bytes"] - before["bytes"] == 10 * 4 * (32 + 16 + 5)
    assert len({o.data_ptr() for o in outs}) == 10
    torch.testing.assert_close(outs[-1], first)


def test_steady_state_buffers_come_from_the_cache_not_the_c_library():
    # Freed large result buffers are kept and reused: after the first calls, a compiled
    # training step of a convnet (2 MiB activations) takes every large buffer from the cache
    # (no fresh pages to fault in).
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1),
        torch.nn.BatchNorm2d(16),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.Linear(16 * 16 * 16, 10),
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    compiled = torch.compile(lambda x: model(x).square().mean(), backend="tensorbridge")
    x = torch.randn(8, 3, 16, 16)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = compiled(x)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(3):
        step()
    before = tb.diagnostics.memory_stats()
    losses = [step() for _ in range(5)]
    after = tb.diagnostics.memory_stats()
    assert after["cache_hits"] - before["cache_hits"] >= 5 * 4  # >= 4 large buffers per step
    assert after["cache_misses"] == before["cache_misses"]
    assert after["allocations"] > before["allocations"]  # buffers are still handed out
    assert after["cached_bytes"] <= after["cache_limit_bytes"]
    assert losses[-1] < losses[0]  # the steps trained


def test_host_cache_limit_and_empty_cache():
    limit = tb.diagnostics.memory_stats()["cache_limit_bytes"]
    try:
        tb.config.host_cache_limit = 1 << 30
        a = tb.call("aten::zeros", [1 << 18])  # 1 MiB
        del a
        assert tb.diagnostics.memory_stats()["cached_bytes"] >= 1 << 20
        before = tb.diagnostics.memory_stats()
        b = tb.call("aten::ones", [1 << 18])  # the same 1 MiB block again, from the cache
        after = tb.diagnostics.memory_stats()
        assert after["cache_hits"] > before["cache_hits"]
        assert after["cache_misses"] == before["cache_misses"]
        # the 1 MiB block left the cache (a small block, under 64 KiB, that the call freed may
        # have entered it)
        assert before["cached_bytes"] - after["cached_bytes"] > (1 << 20) - (64 << 10)
        assert float(tb.to_torch(b).sum()) == float(1 << 18)  # reused memory, new values
        del b
        tb.diagnostics.empty_cache()
        assert tb.diagnostics.memory_stats()["cached_bytes"] == 0
        tb.config.host_cache_limit = 0
        c = tb.call("aten::zeros", [1 << 18])
        del c
        assert tb.diagnostics.memory_stats()["cached_bytes"] == 0
    finally:
        tb.config.host_cache_limit = limit


def test_a_large_request_takes_an_idle_cached_block_of_a_larger_class():
    # A request whose size class has no cached block takes a cached block of a larger class
    # (up to four times) rather than fresh pages; freed, that block returns to its own class.
    from tensorbridge import _C

    limit = tb.diagnostics.memory_stats()["cache_limit_bytes"]
    try:
        tb.config.host_cache_limit = 1 << 30
        tb.diagnostics.empty_cache()
        a = tb.call("aten::zeros", [3 << 17])  # 1.5 MiB
        pa = tb.to_torch(a).data_ptr()
        del a
        live = tb.diagnostics.memory_stats()["live_bytes"]
        _C.reset_peak_memory()
        before = tb.diagnostics.memory_stats()
        b = tb.call("aten::ones", [1 << 18])  # 1 MiB: takes the 1.5 MiB block
        after = tb.diagnostics.memory_stats()
        assert tb.to_torch(b).data_ptr() == pa
        assert after["cache_misses"] == before["cache_misses"]
        assert after["cache_hits"] > before["cache_hits"]
        assert after["live_bytes"] >= live + (3 << 19)  # counted at the block's size
        # no fresh 1 MiB block: the footprint grew by small blocks at most
        assert after["peak_footprint_bytes"] < before["peak_footprint_bytes"] + (64 << 10)
        assert float(tb.to_torch(b).sum()) == float(1 << 18)
        del b
        c = tb.call("aten::zeros", [3 << 17])  # back in its own class
        assert tb.to_torch(c).data_ptr() == pa
        assert tb.diagnostics.memory_stats()["peak_live_bytes"] >= live + (3 << 19)
        del c
    finally:
        tb.config.host_cache_limit = limit
        tb.diagnostics.empty_cache()


@pytest.mark.parametrize(
    "dtype, bias, transposed",
    [
        (torch.float32, True, False),  # oneDNN primitive with the relu post-op
        (torch.float32, False, False),
        (torch.bfloat16, True, False),
        (torch.float64, True, False),  # im2col + GEMM, then relu in place
        (torch.float32, True, True),  # transposed: relu after the pass
    ],
)
def test_convolution_relu_node_equals_relu_of_convolution(dtype, bias, transposed):
    torch.manual_seed(0)
    x = torch.randn(2, 3, 9, 9, dtype=dtype)
    w = torch.randn(3, 4, 3, 3, dtype=dtype) if transposed else torch.randn(4, 3, 3, 3, dtype=dtype)
    b = torch.randn(4, dtype=dtype) if bias else None
    args = (x, w, b, [2, 1], [1, 0], [1, 1], transposed, [0, 0], 1)
    want = torch.relu(torch.ops.aten.convolution(*args))
    conv = tb.to_torch(tb.call("aten::convolution", *args))
    got = tb.to_torch(tb.call("tensorbridge::convolution_relu", *args))
    assert got.dtype == dtype and got.shape == want.shape
    assert (got >= 0).all() and (got == 0).any()
    # relu of tensorbridge's own convolution, bit for bit; torch's within its tolerance
    assert torch.equal(got, torch.relu(conv))
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("rows", [1, 20])  # inner product / matmul
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_fused_linear_keeps_nan_as_torch(rows, activation):
    # oneDNN's relu post-op turns NaN into 0; torch's relu keeps NaN, and so must the fused node.
    torch.manual_seed(0)
    x = torch.randn(rows, 16)
    x[0, 3] = float("nan")
    w, b = torch.randn(8, 16), torch.randn(8)
    act = torch.relu if activation == "relu" else torch.nn.functional.gelu
    want = act(torch.addmm(b, x, w.t()))
    got = tb.to_torch(tb.call("tensorbridge::addmm_act", b, x, w.t(), activation=activation))
    assert torch.equal(got.isnan(), want.isnan()) and want.isnan().sum() == 8
    torch.testing.assert_close(got, want, equal_nan=True)


def test_convolution_relu_keeps_nan_as_torch():
    torch.manual_seed(0)
    x = torch.randn(1, 3, 8, 8)
    x[0, 0, 3, 3] = float("nan")
    args = (x, torch.randn(4, 3, 3, 3), torch.randn(4), [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
    want = torch.relu(torch.ops.aten.convolution(*args))
    got = tb.to_torch(tb.call("tensorbridge::convolution_relu", *args))
    assert torch.equal(got.isnan(), want.isnan()) and want.isnan().sum() == 36
    torch.testing.assert_close(got, want, equal_nan=True)
