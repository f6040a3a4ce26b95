"""torch.compile(backend="tensorbridge"): plans built once per graph, run in C++."""

import copy

import numpy as np
import pytest
import torch
from test_tensor import Block

import tensorbridge as tb


def _mlp():
    return torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.GELU(), torch.nn.Linear(32, 5))


def _convnet():
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(8 * 4 * 4, 6),
    )


MODELS = {
    "mlp": (_mlp, lambda g: torch.randn(4, 20, generator=g), 5),
    "transformer": (Block, lambda g: torch.randint(0, 50, (4, 12), generator=g), 7),
    "convnet": (_convnet, lambda g: torch.randn(4, 3, 8, 8, generator=g), 6),
}


pytestmark = pytest.mark.usefixtures("fresh_dynamo")


@pytest.mark.parametrize("name", list(MODELS))
def test_compiled_inference_matches_eager(name):
    make, data, _ = MODELS[name]
    torch.manual_seed(0)
    model = make().eval()
    x = data(torch.Generator().manual_seed(1))
    compiled = torch.compile(model, backend="tensorbridge")
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
    assert_plans_ran(compiled, calls=1)


def assert_plans_ran(compiled, calls):
    """`compiled`'s results came from its plans (`calls` runs), none of whose nodes ran torch's
    own kernel: a compiled call that fell back to eager torch would compare torch with itself."""
    m = tb.diagnostics.plan_metrics(compiled)
    assert m["plans_built"] >= 1 and m["plan_calls"] == calls, m
    assert "fallback nodes: none" in tb.diagnostics.explain(compiled)


def training_pair(name, **compile_kwargs):
    """A model and its compiled copy with an SGD optimizer each: ((ref, opt), (ours, compiled,
    opt))."""
    torch.manual_seed(0)
    ref = MODELS[name][0]()
    ours = copy.deepcopy(ref)
    compiled = torch.compile(ours, backend="tensorbridge", **compile_kwargs)
    return (
        (ref, torch.optim.SGD(ref.parameters(), lr=0.05, momentum=0.9)),
        (ours, compiled, torch.optim.SGD(ours.parameters(), lr=0.05, momentum=0.9)),
    )


@pytest.mark.parametrize("name", list(MODELS))
def test_compiled_training_matches_torch(name):
    _, data, classes = MODELS[name]
    (ref, opt_ref), (ours, compiled, opt_ours) = training_pair(name)
    g = torch.Generator().manual_seed(2)
    for _ in range(20):
        x, y = data(g), torch.randint(0, classes, (4,), generator=g)
        for m, opt in ((ref, opt_ref), (compiled, opt_ours)):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(m(x), y).backward()
            opt.step()
    for (n, p), (_, q) in zip(ours.named_parameters(), ref.named_parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-4, msg=n)
    assert tb.diagnostics.plan_metrics()["plans_built"] >= 2  # forward and backward


def test_compiled_attention_gradients_match_torch():
    # The core decomposition of the CPU flash attention op returns the attention weights where
    # the op returns its logsumexp; under autograd the op's own backward read them and the
    # gradients of q, k and v came out wrong. Plans keep the op whole when training.
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 6, 8, generator=g, requires_grad=True) for _ in range(3))

    def attend(q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v).square().sum()

    attend(q, k, v).backward()
    expected = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    compiled = torch.compile(attend, backend="tensorbridge")
    compiled(q, k, v).backward()
    for name, t, e in zip("qkv", (q, k, v), expected, strict=True):
        torch.testing.assert_close(t.grad, e, rtol=1e-4, atol=1e-5, msg=name)
    assert tb.diagnostics.plan_metrics()["plans_built"] == 2


def test_inference_attention_runs_on_the_fused_kernel():
    # The core decomposition of the CPU flash attention op would build the full [L, S] score
    # matrix; with the table's fused kernel, inference plans keep the op whole (as training
    # plans must).
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 6, 8, generator=g) for _ in range(3))

    def attend(q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    compiled = torch.compile(attend, backend="tensorbridge")
    torch.testing.assert_close(compiled(q, k, v), attend(q, k, v), rtol=1e-4, atol=1e-5)
    assert_plans_ran(compiled, calls=1)
    text = tb.diagnostics.explain(compiled)
    assert "0 fallback" in text and "fallback nodes: none" in text
    assert "_scaled_dot_product_flash_attention_for_cpu" in text
    assert "aten::_softmax" not in text


def test_one_plan_per_graph_and_a_new_one_per_shape():
    model = _mlp().eval()
    compiled = torch.compile(model, backend="tensorbridge", dynamic=False)
    with torch.no_grad():
        for _ in range(100):
            compiled(torch.randn(4, 20))
        assert tb.diagnostics.plan_metrics()["plans_built"] == 1
        assert tb.diagnostics.plan_metrics()["plan_calls"] == 100
        compiled(torch.randn(9, 20))
    assert tb.diagnostics.plan_metrics()["plans_built"] == 2


def test_composites_stay_whole_unless_narrowed(monkeypatch):
    monkeypatch.setattr(tb.config, "fusion", False)  # gelu would be folded into its addmm
    model = _mlp().eval()
    with torch.no_grad():
        torch.compile(model, backend="tensorbridge")(torch.randn(2, 20))
    dump = tb._compile.state.plans[-1].dump()
    assert "aten::gelu(" in dump and "aten::erf" not in dump
    torch._dynamo.reset()
    try:
        tb.config.decompose("aten::gelu")
        with torch.no_grad():
            out = torch.compile(model, backend="tensorbridge")(torch.randn(2, 20))
        dump = tb._compile.state.plans[-1].dump()
        assert "aten::gelu(" not in dump and "aten::erf" in dump
        assert out.shape == (2, 5)
    finally:
        tb.config.reset_legal_ops()


def test_training_graphs_keep_composite_backward_ops_whole(monkeypatch):
    monkeypatch.setattr(tb.config, "pointwise_fusion", False)  # would run it in a fused node
    model = _mlp()
    compiled = torch.compile(model, backend="tensorbridge")
    compiled(torch.randn(3, 20)).sum().backward()
    dumps = "\n".join(p.dump() for p in tb._compile.state.plans[-2:])
    assert "aten::gelu_backward(" in dumps


def test_relu_backward_stays_one_threshold_backward_node():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 5))
    ref = copy.deepcopy(model)
    x = torch.randn(3, 20)
    torch.compile(model, backend="tensorbridge")(x).sum().backward()
    bw = tb._compile.state.plans[-1].dump()
    assert "aten::threshold_backward(" in bw and "aten::where" not in bw
    ref(x).sum().backward()
    for p, q in zip(model.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5)


def _alias_graph():
    """An ATen graph whose first two outputs alias its inputs and whose third is computed."""
    from torch.fx.experimental.proxy_tensor import make_fx

    aten = torch.ops.aten
    return make_fx(
        lambda x, w: (aten.view.default(x, [-1]), aten.t.default(w), aten.mm.default(x, w))
    )(torch.randn(2, 3), torch.randn(3, 3))


def test_plain_inputs_are_bound_and_outputs_returned_without_copies():
    run = tb._compile.compile_graph(_alias_graph())
    x = torch.randn(2, 3)
    w = torch.nn.Parameter(torch.randn(3, 3))
    args = [x, w]
    outs = run(args)
    assert args == []  # boxed convention: the caller's references are dropped
    assert all(type(o) is torch.Tensor for o in outs)
    assert outs[0].data_ptr() == x.data_ptr() and outs[0].shape == (6,)
    assert outs[1].data_ptr() == w.data_ptr() and outs[1].stride() == (1, 3)
    torch.testing.assert_close(outs[2], x @ w.detach())
    # a non-contiguous input is bound as it is (strides kept, no copy)
    from torch.fx.experimental.proxy_tensor import make_fx

    aten = torch.ops.aten
    run = tb._compile.compile_graph(
        make_fx(lambda a: (aten.t.default(a), aten.mul.Tensor(a, 2)))(torch.randn(2, 3))
    )
    xt = torch.randn(3, 2).t()
    t, doubled = run([xt])
    assert t.data_ptr() == xt.data_ptr() and t.is_contiguous()
    torch.testing.assert_close(doubled, xt * 2)


def test_an_output_that_is_an_input_is_that_very_object():
    from torch.fx.experimental.proxy_tensor import make_fx

    aten = torch.ops.aten
    gm = make_fx(lambda x, w: (aten.mm.default(x, w), w, x))(torch.randn(2, 3), torch.randn(3, 3))
    run = tb._compile.compile_graph(gm)
    x, w = torch.randn(2, 3), torch.nn.Parameter(torch.randn(3, 3))
    y, w_out, x_out = run([x, w])
    assert w_out is w and x_out is x
    torch.testing.assert_close(y, x @ w.detach())


def test_other_inputs_go_through_the_converter():
    # A tensorbridge.Tensor is bound through its Array (zero-copy); ints stay ints.
    run = tb._compile.compile_graph(_alias_graph())
    x = tb.wrap(torch.randn(2, 3))
    w = torch.randn(3, 3)
    outs = run([x, w])
    assert outs[0].data_ptr() == x._array.data_ptr
    torch.testing.assert_close(outs[2], tb.to_torch(x) @ w)


def test_compiled_outputs_stay_correct_over_repeated_calls():
    # Results of earlier calls are kept alive and must not be overwritten by later calls.
    torch.manual_seed(0)
    model = _mlp().eval()
    compiled = torch.compile(model, backend="tensorbridge")
    xs = [torch.randn(4, 20) for _ in range(5)]
    with torch.no_grad():
        outs = [compiled(x) for x in xs for _ in range(2)]
        want = [model(x) for x in xs for _ in range(2)]
    for got, ref in zip(outs, want, strict=True):
        torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-5)
    assert len({o.data_ptr() for o in outs}) == len(outs)
    assert_plans_ran(compiled, calls=10)


def test_export_runs_on_a_plan():
    torch.manual_seed(0)
    model = _convnet().eval()
    x = torch.randn(2, 3, 8, 8)
    ep = torch.export.export(model, (x,))
    run = tb.load_exported(ep)
    calls = tb.diagnostics.plan_metrics()["plan_calls"]
    torch.testing.assert_close(run(x), model(x), rtol=1e-4, atol=1e-5)
    assert tb.diagnostics.plan_metrics()["plan_calls"] == calls + 1  # the plan ran, not eager torch
    assert run.plan.num_nodes > 3


@pytest.mark.parametrize("wrapped", ["x", "w", "b", "xw", "wb", "xb", "xwb"])
def test_wrapped_and_plain_tensors_mix_in_compiled_calls(wrapped):
    # Any mix of wrapped and plain inputs and parameters traces (a plain argument is a fake
    # tensor while dynamo traces; it must not be bound as memory) and runs on the wrapped
    # memory itself.
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    w = model.weight.detach().numpy().copy()
    b = model.bias.detach().numpy().copy()
    if "w" in wrapped:
        model.weight = torch.nn.Parameter(tb.wrap(w))
    if "b" in wrapped:
        model.bias = torch.nn.Parameter(tb.wrap(b))
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    x = tb.wrap(a) if "x" in wrapped else torch.from_numpy(a)
    compiled = torch.compile(model, backend="tensorbridge", dynamic=False)
    y = compiled(x)
    assert_plans_ran(compiled, calls=1)
    expected = torch.from_numpy(a @ w.T + b)
    torch.testing.assert_close(tb.to_torch(y.detach()) if isinstance(y, tb.Tensor) else y, expected)
    if "w" in wrapped:
        w *= 2  # the plan reads the numpy array in place
        y = compiled(x)
        expected = torch.from_numpy(a @ w.T + b)
        got = tb.to_torch(y.detach()) if isinstance(y, tb.Tensor) else y.detach()
        torch.testing.assert_close(got, expected)
    # a training graph (the parameters require grad): its backward plan is built with the
    # forward when the compile cache stores both, else at the first backward (never run here)
    built = 2 if tb._compile_cache.enabled() else 1
    assert tb.diagnostics.plan_metrics(compiled)["plans_built"] == built


def test_wrapped_numpy_parameters_are_used_in_place():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    w = model.weight.detach().numpy().copy()
    b = model.bias.detach().numpy().copy()
    model.weight = torch.nn.Parameter(tb.wrap(w))
    model.bias = torch.nn.Parameter(tb.wrap(b))
    assert tb.to_torch(model.weight).data_ptr() == w.ctypes.data
    compiled = torch.compile(model, backend="tensorbridge")
    x = torch.randn(2, 4)
    y = compiled(x)
    torch.testing.assert_close(
        tb.to_torch(y.detach()), x @ torch.from_numpy(w).T + torch.from_numpy(b)
    )
    y.sum().backward()
    before = w.copy()
    torch.optim.SGD(model.parameters(), lr=0.1).step()
    np.testing.assert_allclose(w, before - 0.1 * np.tile(x.sum(0).numpy(), (3, 1)), rtol=1e-5)
    assert tb.to_torch(model.weight).data_ptr() == w.ctypes.data


@pytest.mark.usefixtures("no_fallback")
def test_backward_through_one_of_several_outputs_that_require_grad():
    # The engine's zero gradient of an output the loss does not use is a plain tensor where
    # AOT autograd traced a tensorbridge.Tensor tangent (torch raised "Expected a Tensor
    # tangent but got a plain Tensor"); a decoder's key/value cache beside its logits is such
    # an output.
    rng = np.random.default_rng(0)
    w_np, x_np = rng.random((4, 4), np.float32), rng.random((3, 4), np.float32)

    def f(x, w):
        h = x @ w
        return h.relu(), h.sin()

    w = tb.wrap(w_np.copy()).requires_grad_(True)
    out, unused = torch.compile(f, backend="tensorbridge")(tb.wrap(x_np), w)
    assert unused.requires_grad
    out.sum().backward()
    wt = torch.from_numpy(w_np.copy()).requires_grad_(True)
    f(torch.from_numpy(x_np), wt)[0].sum().backward()
    assert isinstance(w.grad, tb.Tensor)
    torch.testing.assert_close(tb.to_torch(w.grad), wt.grad)


@pytest.mark.usefixtures("no_fallback")
def test_compiled_decoder_training_with_its_kv_cache_output():
    # transformers' LLaMA returns its key/value cache (use_cache=True, the default) beside the
    # logits; the loss reads the logits only.
    from tensorbridge import zoo

    ref, inputs = zoo.build("llama", "tiny")
    ref.train()
    ours = copy.deepcopy(ref)
    assert ours.config.use_cache
    tb.wrap_module(ours)
    compiled = torch.compile(ours, backend="tensorbridge")
    ids = inputs["input_ids"]
    for m, x in ((ref, ids), (compiled, tb.wrap(ids))):
        out = m(input_ids=x)
        assert out.past_key_values is not None
        out.logits.square().mean().backward()
    scale = max(p.grad.abs().max() for p in ref.parameters())
    for (n, p), (_, q) in zip(ours.named_parameters(), ref.named_parameters(), strict=True):
        torch.testing.assert_close(
            tb.to_torch(p.grad) / scale, q.grad / scale, rtol=1e-4, atol=1e-5, msg=n
        )
