"""tensorbridge.diagnostics.profile: per-node times of compiled plans."""

import pytest
import torch

import tensorbridge as tb


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def test_profile_times_every_node_of_the_compiled_plans():
    model = _mlp()
    compiled = torch.compile(model, backend="tensorbridge", dynamic=False)
    x = torch.randn(3, 8)
    with torch.no_grad():
        compiled(x)  # built before the block
        with tb.diagnostics.profile(compiled) as prof:
            for _ in range(5):
                compiled(x)
    nodes = prof.nodes
    assert nodes, "no node was profiled"
    plans = {n["plan"] for n in nodes}
    ops = {n["op"] for n in nodes}
    assert "tensorbridge::matmul_epilogue" in ops
    for n in nodes:
        assert n["calls"] == 5, n
        assert n["total_us"] > 0.0
        assert 0.0 < n["min_us"] <= n["us_per_call"]
    # by_op sums the node times of every plan
    total = sum(n["total_us"] for n in nodes)
    assert sum(t for _, t, _ in prof.by_op()) == pytest.approx(total)
    text = str(prof)
    assert "5 runs" in text and "matmul_epilogue" in text
    assert len(plans) == 1
    # outside the block the plans no longer time their nodes
    for r in tb._compile._records_of(compiled):
        for e in r.plans:
            assert e["plan"].profiling is False


def test_profile_covers_plans_built_inside_the_block_and_training():
    model = _mlp()
    compiled = torch.compile(lambda x: model(x).sum(), backend="tensorbridge", dynamic=False)
    x = torch.randn(2, 8)
    with tb.diagnostics.profile() as prof:
        for _ in range(3):
            compiled(x).backward()
    kinds = {prof._entries[n["plan"]]["kind"] for n in prof.nodes if n["calls"]}
    assert kinds == {"forward", "backward"}
    assert all(n["calls"] == 3 for n in prof.nodes if n["calls"])


def test_plan_profiling_turns_on_and_clears():
    p = tb._C.Plan()
    v = p.add_input("x")
    (y,) = p.add_node("aten::neg", [("value", v)], 1, "y")
    p.set_outputs([("value", y)])
    with pytest.raises(ValueError, match="after Finalize"):
        p.profiling = True
    p.finalize()
    x = tb.from_dlpack(torch.ones(4))
    p.run([x])
    assert p.node_times()[0][3] == 0  # off by default: no calls counted
    p.profiling = True
    p.run([x])
    p.run([x])
    name, op, served_by, calls, ns, min_ns = p.node_times()[0]
    assert (name, op, served_by, calls) == ("y", "aten::neg", "kernel", 2)
    assert 0 < min_ns <= ns / 2
    p.profiling = True  # turning it on again clears
    assert p.node_times()[0][3] == 0
