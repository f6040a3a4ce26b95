"""Graphs traced with symbolic sizes (dynamo's automatic dynamic shapes, dynamic=True, exports
with dynamic_shapes) run on one static plan per distinct input shape, built at first use."""

import threading

import numpy as np
import pytest
import torch
from test_compile import MODELS, training_pair

import tensorbridge as tb
from tensorbridge import _compile

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def _batch(data, g, n):
    """The model's example input at batch size n."""
    x = data(g)
    return x[:1].expand(n, *x.shape[1:]).clone() + (
        torch.randn(n, *x.shape[1:], generator=g) if x.is_floating_point() else 0
    )


@pytest.mark.parametrize("name", list(MODELS))
def test_default_compile_follows_batch_size_changes(name):
    # torch.compile's default (dynamic=None) recompiles with a symbolic batch size at the
    # second size it sees; every later size runs on a plan of its own.
    make, data, _ = MODELS[name]
    torch.manual_seed(0)
    model = make().eval()
    compiled = torch.compile(model, backend="tensorbridge")
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for n in (2, 3, 5):
            x = _batch(data, g, n)
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
        m = tb.diagnostics.plan_metrics(compiled)
        assert m["compilations"] == 2  # the static graph of size 2, then the symbolic one
        # sizes 3 and 5 on plans of the symbolic graph (and 2 too, when its guards come first)
        assert m["shape_plans"] in (2, 3)
        assert m["plans_built"] == 1 + m["shape_plans"]
        for n in (3, 2, 5, 5, 3):  # every size seen before: nothing is built again
            x = _batch(data, g, n)
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
    again = tb.diagnostics.plan_metrics(compiled)
    assert again["compilations"] == 2
    assert again["plans_built"] == 1 + again["shape_plans"]
    assert again["shape_plans"] <= 3
    assert again["plan_calls"] == 8


@pytest.mark.parametrize("name", list(MODELS))
def test_dynamic_training_matches_torch(name):
    _, data, classes = MODELS[name]
    (ref, opt_ref), (ours, compiled, opt_ours) = training_pair(name, dynamic=True)
    g = torch.Generator().manual_seed(2)

    def steps(sizes):
        for n in sizes:
            x, y = _batch(data, g, n), torch.randint(0, classes, (n,), generator=g)
            for m, opt in ((ref, opt_ref), (compiled, opt_ours)):
                opt.zero_grad()
                torch.nn.functional.cross_entropy(m(x), y).backward()
                opt.step()

    steps([3, 5, 4, 3, 5, 4])
    first = tb.diagnostics.plan_metrics(compiled)
    assert first["shape_plans"] >= 2  # forward and backward of a symbolic graph, per size
    steps([4, 3, 5, 3, 4, 5])  # the same sizes again: nothing compiled or built
    assert tb.diagnostics.plan_metrics(compiled)["plans_built"] == first["plans_built"]
    assert tb.diagnostics.plan_metrics(compiled)["compilations"] == first["compilations"]
    for (n, p), (_, q) in zip(ours.named_parameters(), ref.named_parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-4, msg=n)


def test_explain_names_the_shapes_of_each_plan():
    make, _, _ = MODELS["mlp"]
    compiled = torch.compile(make().eval(), backend="tensorbridge", dynamic=True)
    with torch.no_grad():
        compiled(torch.randn(3, 20))
        compiled(torch.randn(7, 20))
    text = tb.diagnostics.explain(compiled)
    assert "forward plan for input shapes" in text
    assert "[3, 20]" in text and "[7, 20]" in text


def test_least_recently_used_shape_plans_are_dropped(monkeypatch):
    monkeypatch.setattr(_compile, "MAX_SHAPE_PLANS", 2)
    make, _, _ = MODELS["mlp"]
    model = make().eval()
    compiled = torch.compile(model, backend="tensorbridge", dynamic=True)
    with torch.no_grad():
        for n in (2, 3, 4, 2):  # size 2 was dropped when 4 came: built again
            x = torch.randn(n, 20)
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
    m = tb.diagnostics.plan_metrics(compiled)
    assert m["shape_plans"] == m["plans_built"] == 4
    assert tb.diagnostics.explain(compiled).count("forward plan for input shapes") == 2


def test_dynamic_graph_reads_wrapped_numpy_in_place():
    model = torch.nn.Linear(6, 2)
    w = model.weight.detach().numpy().copy()
    model.weight = torch.nn.Parameter(tb.wrap(w))
    compiled = torch.compile(model, backend="tensorbridge", dynamic=True)
    for n in (2, 5):
        a = np.random.default_rng(n).standard_normal((n, 6), dtype=np.float32)
        y = compiled(tb.wrap(a))
        expected = torch.from_numpy(a) @ torch.from_numpy(w).T + model.bias.detach()
        torch.testing.assert_close(tb.to_torch(y.detach()), expected)
    w[:] = 0  # the plans read the numpy array itself, not a copy taken at build time
    y = compiled(tb.wrap(np.ones((5, 6), np.float32)))
    torch.testing.assert_close(tb.to_torch(y.detach()), model.bias.detach().expand(5, 2))


def test_export_with_dynamic_batch_runs_one_plan_per_shape():
    make, _, _ = MODELS["convnet"]
    torch.manual_seed(0)
    model = make().eval()
    batch = torch.export.Dim("batch", min=2, max=64)
    ep = torch.export.export(model, (torch.randn(4, 3, 8, 8),), dynamic_shapes=({0: batch},))
    run = tb.load_exported(ep)
    assert run.plan is None  # one plan per input shape
    for n in (2, 9, 2):
        x = torch.randn(n, 3, 8, 8)
        torch.testing.assert_close(run(x), model(x), rtol=1e-4, atol=1e-5)
    assert tb.diagnostics.plan_metrics()["shape_plans"] == 2


def test_static_graphs_keep_their_single_plan():
    make, _, _ = MODELS["mlp"]
    compiled = torch.compile(make().eval(), backend="tensorbridge", dynamic=False)
    with torch.no_grad():
        for n in (2, 3):
            compiled(torch.randn(n, 20))
    m = tb.diagnostics.plan_metrics(compiled)
    assert m["shape_plans"] == 0
    assert m["plans_built"] == 2


def test_threads_share_compiled_plans():
    # Steady-state calls from several threads at once (compile first: dynamo's own compilation
    # is not meant to run in several threads at once); new shapes reach the symbolic graph's
    # runner from all threads together and each is built once.
    torch.manual_seed(0)
    model = MODELS["mlp"][0]().eval()
    compiled = torch.compile(model, backend="tensorbridge", dynamic=True)
    with torch.no_grad():
        compiled(torch.randn(2, 20))
    wrong, errors = [], []
    threads_of_main = torch.get_num_threads()

    def work(seed):
        # dynamo guards on torch.get_num_threads(), an OpenMP setting of each thread
        torch.set_num_threads(threads_of_main)
        g = torch.Generator().manual_seed(seed)
        try:
            for i in range(60):
                x = torch.randn(3 + i % 4, 20, generator=g)
                with torch.no_grad():
                    if not torch.allclose(compiled(x), model(x), rtol=1e-4, atol=1e-5):
                        wrong.append((seed, i))
        except Exception as e:  # reported below with the thread's seed
            errors.append((seed, repr(e)))

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and wrong == []
    m = tb.diagnostics.plan_metrics(compiled)
    assert m["shape_plans"] == m["plans_built"] == 5, tb.diagnostics.explain(
        compiled
    )  # sizes 2..6, once each
    assert m["plan_calls"] == 1 + 4 * 60
