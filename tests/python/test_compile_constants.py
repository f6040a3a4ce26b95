"""Every kind of constant a captured graph can hold reaches the plan as bound memory: get_attr
tensors (lifted constants), tensors built inside ``forward`` (causal masks, rotary tables),
0-element tensors, and constants met while a graph with symbolic sizes is specialized. Each
runs compiled for inference and training, and its results match torch eager."""

import pytest
import torch

import tensorbridge as tb
from tensorbridge import _compile

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


class LiftedConstant(torch.nn.Module):
    """A tensor literal in forward: dynamo stores it as an attribute (get_attr)."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x) * torch.tensor([1.0, -2.0, 0.5, 3.0])


class EmptyConstant(torch.nn.Module):
    """A 0-element tensor literal, as attention-mask code builds (torch.tensor([]))."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        empty = torch.tensor([])
        return torch.cat([self.lin(x).flatten(), empty]).view(x.shape[0], 4)


class PlainAttribute(torch.nn.Module):
    """A tensor attribute that is neither a parameter nor a buffer."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.table = torch.arange(16.0).view(4, 4) / 16

    def forward(self, x):
        return self.lin(x) @ self.table


class BuiltInForward(torch.nn.Module):
    """A causal mask and a rotary table built inside forward from the input's sizes."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):  # x: [batch, seq, 4]
        seq = x.shape[1]
        mask = torch.full((seq, seq), float("-inf")).triu(1)
        pos = torch.arange(seq, dtype=torch.float32)
        inv = 1.0 / (10000 ** (torch.arange(0, 4, 2, dtype=torch.float32) / 4))
        angles = torch.outer(pos, inv)
        rot = torch.cat([angles.sin(), angles.cos()], dim=-1)
        h = self.lin(x) * rot
        scores = (h @ h.transpose(1, 2) + mask).softmax(-1)
        return scores @ h


MODELS = {
    "lifted_constant": (LiftedConstant, (3, 4)),
    "empty_constant": (EmptyConstant, (3, 4)),
    "plain_attribute": (PlainAttribute, (3, 4)),
    "built_in_forward": (BuiltInForward, (2, 5, 4)),
}


def _run(name, dynamic, train):
    make, shape = MODELS[name]
    torch.manual_seed(0)
    model = make()
    compiled = torch.compile(model, backend="tensorbridge", dynamic=dynamic)
    x = torch.randn(shape)
    if not train:
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), model(x))
        return compiled
    ref = model(x)
    ref.square().sum().backward()
    want = {k: p.grad.clone() for k, p in model.named_parameters()}
    model.zero_grad()
    out = compiled(x)
    torch.testing.assert_close(out, ref)
    out.square().sum().backward()
    for k, p in model.named_parameters():
        torch.testing.assert_close(p.grad, want[k], msg=lambda m, k=k: f"{k}: {m}")
    return compiled


@pytest.mark.parametrize("train", [False, True], ids=["inference", "training"])
@pytest.mark.parametrize("name", list(MODELS))
def test_constants_compile_and_match_torch(name, train):
    compiled = _run(name, dynamic=False, train=train)
    m = tb.diagnostics.plan_metrics(compiled)
    assert m["plans_built"] >= 1 and m["plan_calls"] >= 1
    assert "fallback nodes: none" in tb.diagnostics.explain(compiled)


@pytest.mark.parametrize("train", [False, True], ids=["inference", "training"])
@pytest.mark.parametrize("name", list(MODELS))
def test_constants_in_graphs_with_symbolic_sizes(name, train):
    # dynamic=True: the graph is specialized to each call's sizes on fake tensors, which
    # meets the constants too.
    compiled = _run(name, dynamic=True, train=train)
    assert tb.diagnostics.plan_metrics(compiled)["shape_plans"] >= 1


def test_tensor_literals_are_plan_constants():
    # A tensor literal in forward is a get_attr constant of the graph: the plan holds it
    # (an alias node over the constant's memory), built once, not a fallback.
    compiled = torch.compile(LiftedConstant(), backend="tensorbridge")
    with torch.no_grad():
        compiled(torch.randn(3, 4))
    assert "= aten::alias(Tensor[4] float32)" in tb.diagnostics.explain(compiled)


def test_tensor_attributes_are_read_at_each_call():
    # A plain tensor attribute reaches the plan as an input: an in-place change of it shows
    # in the next call (no stale copy in the plan).
    model = PlainAttribute()
    compiled = torch.compile(model, backend="tensorbridge")
    with torch.no_grad():
        compiled(torch.randn(3, 4))
        model.table.mul_(2)
        x = torch.randn(3, 4)
        torch.testing.assert_close(compiled(x), model(x))


def test_plan_errors_name_the_node():
    # A kernel error inside a plan says which graph node raised it.
    plan = tb._C.Plan()
    a = plan.add_input("a")
    (v,) = plan.add_node("aten::view", [("value", a), ("const", [5])], 1, "my_view")
    plan.set_outputs([("value", v)])
    plan.finalize()
    with pytest.raises(ValueError, match=r"Plan: node my_view \(aten::view\): .*shape"):
        plan.run([tb.from_dlpack(torch.zeros(2, 3))])


def test_results_take_the_graphs_strides_where_a_view_needs_them():
    # torch keeps a transposed input's layout through elementwise ops; a kernel that returns
    # another layout must not make the view after it fail, nor change what it reads.
    def f(x):
        y = x.transpose(1, 2) * 2  # torch: strides (12, 1, 4), x's layout
        return y.transpose(1, 2).view(y.shape[0], -1)  # a view only that layout allows

    x = torch.randn(2, 3, 4)
    compiled = torch.compile(f, backend="tensorbridge")
    torch.testing.assert_close(compiled(x), f(x))
    plans = [e["plan"] for r in _compile._records_of(compiled) for e in r.plans]
    assert plans and all(p.count("fallback") == 0 for p in plans)
    # Run the same graph's plan directly on a layout-changing kernel's result: either the
    # kernel keeps torch's layout or the plan copied its result (counted), never a failure.
    assert sum(p.restrides for p in plans) in (0, 1)


def test_plan_copies_a_result_into_the_expected_strides():
    plan = tb._C.Plan()
    a = plan.add_input("a")
    (c,) = plan.add_node("aten::clone", [("value", a), ("const", None)], 1, "c")
    (t,) = plan.add_node("aten::transpose.int", [("value", c), ("const", 0), ("const", 1)], 1, "t")
    (v,) = plan.add_node("aten::view", [("value", t), ("const", [6])], 1, "v")
    plan.set_outputs([("value", v)])
    # The graph says clone's result is column-major (so that its transpose can be viewed).
    plan.expect_strides(c, [1, 2])
    plan.finalize()
    x = torch.arange(6.0).view(2, 3)
    (out,) = plan.run([tb.from_dlpack(x)])
    torch.testing.assert_close(torch.from_dlpack(out), x.t().reshape(6))
    assert plan.restrides == 1
    (out,) = plan.run([tb.from_dlpack(x)])
    assert plan.restrides == 2
