"""Pointwise fusion in compiled plans (tensorbridge._fuse, kernels/fused_pointwise.cc): every
fused plan gives what the plan built without fusion gives, on targeted graphs and on zoo
models forward and backward, and ``explain`` lists the groups the graph implies."""

from __future__ import annotations

import os
import threading

import pytest
import torch

import tensorbridge as tb
from tensorbridge import _compile, _memory, zoo

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def _run(fn, args, fused: bool):
    torch._dynamo.reset()
    old = tb.config.pointwise_fusion
    tb.config.pointwise_fusion = fused
    try:
        compiled = torch.compile(fn, backend="tensorbridge")
        out = compiled(*args)
    finally:
        tb.config.pointwise_fusion = old
    return compiled, out


def _groups(compiled) -> list:
    return [g for r in _compile._records_of(compiled) for e in r.plans for g in e.get("groups", [])]


def _same(fn, *args, groups=None, atol=None, rtol=None):
    """fn compiled with and without pointwise fusion: equal results; returns the fused groups."""
    _, want = _run(fn, args, fused=False)
    compiled, got = _run(fn, args, fused=True)
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        torch.testing.assert_close(g, w, atol=atol, rtol=rtol, equal_nan=True)
    found = _groups(compiled)
    if groups is not None:
        assert len(found) == groups, tb.diagnostics.explain(compiled)
    return found


def _gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * torch.pow(x, 3.0))))


def test_chain_becomes_one_node(no_fallback):
    x = torch.randn(64, 300)
    groups = _same(_gelu_new, x, groups=1)
    assert groups[0][1].count(",") + 1 == 8  # mul, pow, mul, add, mul, tanh, add, mul
    assert groups[0][2] == 1


def test_broadcasting_and_scalars(no_fallback):
    def f(x, b, s):
        return torch.sigmoid((x + b) * 2.5 - s) / 3 + torch.exp(-x)

    x, b, s = torch.randn(8, 33, 17), torch.randn(17), torch.randn(8, 1, 1)
    _same(f, x, b, s, groups=1)


def test_mixed_dtypes(no_fallback):
    def f(x, i, m, h):
        y = x * i + h.to(torch.float32)
        return torch.where(m, y, -y).relu() + (x > 0.5)

    x = torch.randn(16, 40)
    i = torch.randint(-5, 5, (16, 40))
    m = torch.rand(16, 40) > 0.5
    h = torch.randn(40, dtype=torch.bfloat16)
    _same(f, x, i, m, h, groups=1)


def test_float64(no_fallback):
    def f(x, y):
        return torch.nn.functional.gelu(x * y + 1) - torch.nn.functional.silu(y) * torch.tanh(x)

    _same(
        f,
        torch.randn(50, 7, dtype=torch.float64),
        torch.randn(50, 7, dtype=torch.float64),
        groups=1,
    )


def test_non_contiguous_inputs(no_fallback):
    def f(x, y):
        return torch.relu(x * 2 + y).sqrt() - 1

    x = torch.randn(30, 20).t()  # a transposed input
    y = torch.randn(20, 60)[:, ::2]  # a strided one
    _same(f, x, y)


def test_outputs_read_outside_the_group(no_fallback):
    def f(x, w):
        a = x * 3 + 1  # read by the mm below and by the group
        b = torch.tanh(a) * a
        return b, a @ w, torch.exp(a).sum()

    groups = _same(f, torch.randn(32, 16), torch.randn(16, 8))
    assert groups and all(outs >= 1 for _, _, outs in groups)
    assert any(outs == 2 for _, _, outs in groups)


def test_comparisons_and_bool_outputs(no_fallback):
    def f(x, y):
        m = (x > y) | (x < -1)
        return m, torch.where(m, x, y) * 2

    _same(f, torch.randn(100), torch.randn(100), groups=1)


def test_special_values(no_fallback):
    def f(x):
        y = torch.clamp(x * 2, -3, 3) + torch.maximum(x, -x) + torch.exp(x) * 0 + x.abs()
        return torch.nn.functional.hardtanh(y - 1, -2.5, 6.0)

    x = torch.tensor([0.0, -0.0, 1.0, -1.0, float("nan"), float("inf"), -float("inf"), 1e-40, -200])
    (group,) = _same(f, x, groups=1)
    assert "aten::hardtanh" in group[1]


def test_large_parallel_and_threads(no_fallback):
    def f(x, b):
        return torch.nn.functional.gelu(x + b) * torch.sigmoid(x)

    x, b = torch.randn(256, 1024), torch.randn(1024)
    _, want = _run(f, (x, b), fused=False)
    compiled, got = _run(f, (x, b), fused=True)
    torch.testing.assert_close(got, want)
    results = [None] * 4

    def worker(i):
        results[i] = compiled(x, b)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        torch.testing.assert_close(r, want)


def _training_fused_and_unfused(build, x_shape, loss, groups):
    """One compiled training step of the model build() makes, with pointwise fusion off and
    on (the same seed, input and loss): outputs and gradients must agree. Returns the fused
    and the unfused plan's groups, as groups(compiled) lists them."""

    def run(fused):
        torch.manual_seed(0)
        m = build()
        x = torch.randn(*x_shape, requires_grad=True)
        torch._dynamo.reset()
        old = tb.config.pointwise_fusion
        tb.config.pointwise_fusion = fused
        try:
            c = torch.compile(m, backend="tensorbridge")
            y = c(x)
            loss(y).backward()
        finally:
            tb.config.pointwise_fusion = old
        return y.detach(), x.grad, [p.grad for p in m.parameters()], groups(c)

    want = run(False)
    got = run(True)
    torch.testing.assert_close(got[0], want[0])
    torch.testing.assert_close(got[1], want[1])
    for g, w in zip(got[2], want[2], strict=True):
        torch.testing.assert_close(g, w)
    return got[3], want[3]


def test_training_graph_forward_and_backward(no_fallback):
    def build():
        return torch.nn.Sequential(
            torch.nn.Linear(24, 48),
            torch.nn.GELU(approximate="tanh"),
            torch.nn.Linear(48, 24),
            torch.nn.SiLU(),
            torch.nn.Tanh(),
        )

    got, want = _training_fused_and_unfused(build, (10, 24), lambda y: (y * y).sum(), _groups)
    assert len(got) >= 2  # forward and backward groups
    assert want == []


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16_bit_floats_compute_in_float32(no_fallback, dtype):
    # A chain on 16-bit floats is one group computing in float32 and rounding where it writes;
    # the unfused plan rounds after every op, so the fused result is at least as close to the
    # float64 result, and the two agree within the dtype's tolerance (torch.testing's rtol,
    # relative to the largest magnitude).
    x = (torch.randn(64, 300) * 2).to(dtype)
    y = torch.randn(300).to(dtype)

    def f(x, y):
        return _gelu_new(x) * torch.sigmoid(y) + (x > 1)

    _, want = _run(f, (x, y), fused=False)
    compiled, got = _run(f, (x, y), fused=True)
    assert len(_groups(compiled)) == 2  # the chain, and sigmoid(y) of another shape alone
    assert got.dtype == want.dtype == dtype
    exact = f(x.double(), y.double())
    err_fused = (got.double() - exact).abs().max().item()
    err_unfused = (want.double() - exact).abs().max().item()
    assert err_fused <= err_unfused * 1.01, (err_fused, err_unfused)
    tol = 1.6e-2 * want.float().abs().max().item()
    torch.testing.assert_close(got.float(), want.float(), rtol=0, atol=tol)


def test_autocast_casts_join_the_group(no_fallback):
    lin = torch.nn.Linear(32, 32)

    def f(x):
        h = lin(x)  # bfloat16 under autocast
        return torch.tanh(h) * 0.5 + h.float().sigmoid()

    x = torch.randn(8, 32)
    with torch.no_grad(), torch.autocast("cpu", torch.bfloat16):
        _, want = _run(f, (x,), fused=False)
        compiled, got = _run(f, (x,), fused=True)
    assert got.dtype == want.dtype == torch.float32
    (g,) = _groups(compiled)
    assert "aten::_to_copy" in g[1]
    tol = 1.6e-2 * want.abs().max().item()
    torch.testing.assert_close(got, want, rtol=0, atol=tol)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, g: torch.sigmoid(x),
        lambda x, g: torch.tanh(x),
        lambda x, g: torch.nn.functional.gelu(x),
        lambda x, g: torch.ops.aten.gelu_backward(g, x),
        lambda x, g: torch.ops.aten.silu_backward(g, x),
    ],
    ids=["sigmoid", "tanh", "gelu", "gelu_backward", "silu_backward"],
)
def test_costly_ops_alone_run_fused(no_fallback, fn):
    # Their fused float32 loops beat their own kernels: a lone one is a group of its own (not
    # in float64, whose fused loops call the C library as the kernels do).
    x, g = torch.randn(7, 300) * 4, torch.randn(7, 300)
    (group,) = _same(fn, x, g)
    assert group[1].count(",") == 0, group
    tb.diagnostics.reset_plan_metrics()
    assert _same(fn, x.double(), g.double()) == []


def _rms_norm(x, w):
    r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    return w * (x * r), r


def _softmax(x):
    e = torch.exp(x - x.amax(-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)


def _reductions(compiled) -> list:
    return [
        ops for _, ops, _ in _groups(compiled) if "mean" in ops or "sum" in ops or "amax" in ops
    ]


@pytest.mark.parametrize(
    "shape",
    [(2, 32, 128), (600, 17), (3, 1000), (5, 16), (1, 1, 4100)],
    ids=lambda s: "x".join(map(str, s)),
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_row_reductions_fuse_with_prologue_and_epilogue(no_fallback, shape, dtype):
    # Short rows run many to a block, long rows one to a block; the norm's per-row factor is
    # also a result (written once per row).
    x = torch.randn(*shape, dtype=dtype)
    w = torch.randn(shape[-1], dtype=dtype)
    compiled, got = _run(_rms_norm, (x, w), fused=True)
    torch.testing.assert_close(got, _rms_norm(x, w))
    (ops,) = _reductions(compiled)
    assert ops.split(", ")[:2] == ["aten::pow.Tensor_Scalar", "aten::mean.dim"]
    compiled, got = _run(_softmax, (x,), fused=True)
    torch.testing.assert_close(got, torch.softmax(x, -1))
    assert len(_reductions(compiled)) == 1
    tb.diagnostics.reset_plan_metrics()
    _same(_rms_norm, x, w, groups=1)
    tb.diagnostics.reset_plan_metrics()
    _same(_softmax, x, groups=1)


def test_row_reductions_special_values_and_what_stays_unfused(no_fallback):
    x = torch.randn(4, 40)
    x[1, 3], x[2, 0], x[3, 39] = float("nan"), float("inf"), -float("inf")
    _same(_softmax, x)
    tb.diagnostics.reset_plan_metrics()
    _same(lambda x: x.amax(-1, keepdim=True) * 2 + x.sum(-1, keepdim=True), x, groups=1)
    tb.diagnostics.reset_plan_metrics()

    def other_dims(x):  # no keepdim, a dtype: reductions left alone
        a = (x * 2).sum(0, keepdim=True) + 1  # a column sum: written by its group, read outside
        b = (x * 3).mean(-1) + 1
        c = (x * 4).sum(-1, keepdim=True, dtype=torch.float64) + 1
        return a, b, c

    compiled, _ = _run(other_dims, (x,), fused=True)
    (ops,) = _reductions(compiled)
    assert ops.count("aten::sum.dim_IntList") == 1 and "mean" not in ops, ops
    _same(other_dims, x)
    tb.diagnostics.reset_plan_metrics()
    long_rows, w = torch.randn(2, 20000), torch.randn(20000)  # over _MAX_ROW: unfused
    compiled, got = _run(_rms_norm, (long_rows, w), fused=True)
    assert _reductions(compiled) == []
    torch.testing.assert_close(got, _rms_norm(long_rows, w))


def test_row_reductions_in_training_graphs(no_fallback):
    class RMSNorm(torch.nn.Module):
        def __init__(self, n):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.randn(n))

        def forward(self, x):
            return _rms_norm(x, self.weight)[0]

    def build():
        return torch.nn.Sequential(torch.nn.Linear(64, 96), RMSNorm(96), torch.nn.Linear(96, 8))

    got, want = _training_fused_and_unfused(
        build, (3, 7, 64), lambda y: _softmax(y).pow(2).sum(), _reductions
    )
    assert len(got) >= 2, got  # the norm forward, and the sum of its backward
    # The forward's norm is one node although the backward reads its factor (through an alias
    # AOT autograd takes of it).
    (norm,) = [ops for ops in got if "aten::mean.dim" in ops]
    assert "aten::rsqrt" in norm and norm.endswith("aten::mul.Tensor, aten::mul.Tensor"), norm
    # The backward's row sum, what follows its expand back to the rows and the weight
    # gradient's column sum (a sibling group reading the same inputs) are one node.
    (norm_bw,) = [ops for ops in got if "aten::expand" in ops]
    ops = norm_bw.split(", ")
    assert ops.index("aten::sum.dim_IntList") < ops.index("aten::expand") < len(ops) - 1, ops
    assert ops.count("aten::sum.dim_IntList") == 2, ops
    assert want == []


def test_row_groups_take_expands_of_their_row_values(no_fallback):
    def f(x, w):
        r = torch.rsqrt((x * x).sum(-1, keepdim=True) + 1)
        e = r.expand(x.shape)  # the row value back to the rows: a copy inside the group
        return e * x + 1

    def read_outside(x, w):
        r = (x * 2).sum(-1, keepdim=True)
        e = r.expand(x.shape)
        return e * x + 1, e @ w  # the mm reads the expand too: it runs after the group

    x, w = torch.randn(6, 40), torch.randn(40, 5)
    for fn in (f, read_outside):
        tb.diagnostics.reset_plan_metrics()
        (group,) = _same(fn, x, w)
        assert "aten::expand" in group[1] and group[1].endswith("aten::add.Tensor"), group
    compiled, _ = _run(read_outside, (x, w), fused=True)
    plan = _compile._records_of(compiled)[0].plans[0]["plan"]
    assert "aten::expand(" in plan.dump()  # the mm's expand, of the group's row output


def _pointwise_plan(size, program):
    plan = tb._C.Plan()
    v = plan.add_input("x")
    (out,) = plan.add_node(
        "tensorbridge::pointwise",
        [("list", [("value", v)]), ("const", size), ("const", program)],
        1,
        "f",
    )
    plan.set_outputs([("item", out, 0)])
    plan.finalize()
    return plan


def test_bad_program_raises():
    x = tb._C.from_dlpack(torch.randn(3))
    plan = _pointwise_plan([3], "T f32;frobnicate r1 r0;O r1 float32")
    with pytest.raises(ValueError, match="unknown instruction 'frobnicate'"):
        plan.run([x])
    plan = _pointwise_plan([4], "T f32;neg r1 r0;O r1 float32")
    with pytest.raises(ValueError, match="does not broadcast to 4"):
        plan.run([x])
    plan = _pointwise_plan([3], "T f32;neg r1 r0;O r1 float64")
    with pytest.raises(ValueError, match="an output of dtype float64"):
        plan.run([x])
    plan = _pointwise_plan([3], "T f32;neg r1 r0;P r1 float32")
    with pytest.raises(ValueError, match="per-row output"):
        plan.run([x])
    empty = tb._C.from_dlpack(torch.randn(3, 0))
    plan = _pointwise_plan([3, 0], "T f32;rsum r1 r0;P r1 float32")
    with pytest.raises(ValueError, match="row reduction needs a last dimension"):
        plan.run([empty])
    plan = _pointwise_plan([3], "T f32;neg r1 r0;O r1 float32")
    (y,) = plan.run([x])
    torch.testing.assert_close(torch.from_dlpack(y), -torch.from_dlpack(x))


@pytest.mark.parametrize(
    "shape",
    [(5, 7, 9), (400, 100), (3, 1), (2, 3, 2000), (0, 6)],
    ids=lambda s: "x".join(map(str, s)),
)
def test_column_sum_outputs(no_fallback, shape):
    # "S": a register summed over every dimension but the last, in float64 and block order (the
    # same on every run, one block or many threads' shares); no rows: zeros.
    x = torch.randn(*shape)
    plan = _pointwise_plan(list(shape), "T f32;mul r1 r0 r0;S r1 float32;O r1 float32")
    (out,) = plan.run([tb._C.from_dlpack(x)])
    got = torch.from_dlpack(out)
    want = (x.double() ** 2).sum(tuple(range(x.dim() - 1)), keepdim=True).float()
    assert got.shape == want.shape
    torch.testing.assert_close(got, want)
    (again,) = plan.run([tb._C.from_dlpack(x)])
    assert torch.equal(torch.from_dlpack(again), got)


def test_column_sum_of_bool_raises():
    x = tb._C.from_dlpack(torch.randn(4, 3))
    plan = _pointwise_plan([4, 3], "T f32;gt r1 r0 k0;S r1 bool")
    with pytest.raises(ValueError, match="column-sum output"):
        plan.run([x])


def test_column_sums_and_siblings_join_one_group(no_fallback):
    def norm_backward(g, x, r, w):  # an RMS norm's gradients: dx (a row group) and dw
        dw = (g * (x * r)).sum((0, 1), keepdim=True)
        gw = g * w
        dx = gw * r - x * r.pow(3) * (gw * x).mean(-1, keepdim=True)
        return dx, dw

    g, x, w = torch.randn(2, 9, 40), torch.randn(2, 9, 40), torch.randn(40)
    r = torch.rand(2, 9, 1) + 0.5
    (group,) = _same(norm_backward, g, x, r, w)
    assert "aten::sum.dim_IntList" in group[1] and "aten::mean.dim" in group[1], group
    assert group[2] == 2, group  # dx and dw written

    def read_inside(x):  # the sum's reader cannot join the group that writes the sum
        s = (x * 2).sum(0, keepdim=True)
        return s + x

    tb.diagnostics.reset_plan_metrics()
    (group,) = _same(read_inside, torch.randn(30, 20))
    assert group[1] == "aten::mul.Tensor, aten::sum.dim_IntList", group

    def dependent(x, y):  # siblings that read each other's results through a reader stay apart
        a = x * 2 + 1
        b = torch.cumsum(a, -1) * y + x
        return a, b

    tb.diagnostics.reset_plan_metrics()
    assert len(_same(dependent, torch.randn(6, 20), torch.randn(6, 20))) == 2


def test_a_lone_op_joins_a_sibling_group(no_fallback):
    def relu6_with_mask(x):  # a ReLU6 and the mask its backward saves: one pass over x
        y = torch.nn.functional.hardtanh(x, 0.0, 6.0)
        return y, (x <= 0.0) | (x >= 6.0)

    x = torch.randn(4, 8, 33) * 4
    (group,) = _same(relu6_with_mask, x)
    assert "aten::hardtanh" in group[1] and "aten::bitwise_or.Tensor" in group[1], group
    assert group[2] == 2, group

    def lone_cast(x):  # a lone cast stays out: the plan builder may fold it elsewhere
        return x.double(), (x * 2).exp()

    tb.diagnostics.reset_plan_metrics()
    (group,) = _same(lone_cast, torch.randn(5, 7))
    assert "aten::_to_copy" not in group[1], group


@pytest.mark.parametrize("name", ["gpt2", "bert", "llama"])
def test_zoo_forward_and_backward(name):
    def run(fused):
        model, inputs = zoo.build(name)
        torch._dynamo.reset()
        old = tb.config.pointwise_fusion
        tb.config.pointwise_fusion = fused
        try:
            c = torch.compile(model, backend="tensorbridge")
            with torch.no_grad():
                out = zoo.first_output(c(**inputs))
            model.train()
            loss = zoo.loss_of(c(**inputs))
            loss.backward()
        finally:
            tb.config.pointwise_fusion = old
            model.eval()
        grads = {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}
        return out, loss.detach(), grads, _groups(c)

    want = run(False)
    got = run(True)
    torch.testing.assert_close(got[0], want[0], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(got[1], want[1], rtol=1e-4, atol=1e-5)
    assert zoo.grad_error(got[2], want[2]) < 1e-4
    assert got[3], f"{name}: no pointwise group fused"


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.exp(x) + 0,
        lambda x: torch.sigmoid(x) * 1,
        lambda x: torch.tanh(x) * 1,
        lambda x: torch.erf(x) * 1,
        lambda x: torch.nn.functional.silu(x) * 1,
        lambda x: torch.nn.functional.gelu(x) * 1,
        lambda x: torch.nn.functional.gelu(x, approximate="tanh") * 1,
        lambda x: torch.ops.aten.gelu_backward(x * 0 + 1, x),
        lambda x: torch.ops.aten.gelu_backward(x * 0 + 1, x, approximate="tanh"),
    ],
    ids=["exp", "sigmoid", "tanh", "erf", "silu", "gelu", "gelu_tanh", "gelu_bw", "gelu_tanh_bw"],
)
def test_fused_functions_match_torch_over_their_range(no_fallback, fn):
    # the vectorised float32 approximations, against torch's float64 kernels (eager; its float32
    # gelu gives NaN at +inf), from the denormal results of exp to its overflow, with the
    # special values
    x = torch.cat(
        [
            torch.linspace(-110, 95, 40001),
            torch.linspace(-1e-3, 1e-3, 2001),
            torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1e-40, -1e-40]),
        ]
    )
    groups = _same(fn, x, groups=1)
    assert groups
    _, got = _run(fn, (x,), fused=True)
    torch.testing.assert_close(got, fn(x.double()).float(), equal_nan=True)


def test_fusion_lowers_the_plan_peak_and_the_cache_follows_the_plans(no_fallback, monkeypatch):
    def f(x):
        return _gelu_new(x) * 3 + x

    # no limit set by the user, no plans sized yet, and a limit below what the plans need
    monkeypatch.setattr(tb.config, "_host_cache_limit_set", False)
    monkeypatch.setattr(_memory, "_need", 0)
    old_limit = tb._C.memory_stats()["cache_limit_bytes"]
    tb._C.set_host_cache_limit(1 << 10)

    x = torch.randn(256, 512)
    _, want = _run(f, (x,), fused=False)
    p0 = _compile.state.plans[-1]
    c1, got = _run(f, (x,), fused=True)
    p1 = _compile.state.plans[-1]
    torch.testing.assert_close(got, want)
    # unfused: a node's result and its input alive together; fused: the one output only
    assert p0.peak_bytes >= 2 * x.nbytes
    assert p1.peak_bytes == x.nbytes
    before = tb._C.storage_allocations()
    c1(x)
    after = tb._C.storage_allocations()
    assert after["count"] - before["count"] == 1
    assert after["bytes"] - before["bytes"] == x.nbytes
    # the buffer cache's limit follows the largest peak of the plans built
    limit = tb._C.memory_stats()["cache_limit_bytes"]
    tb._C.set_host_cache_limit(old_limit)
    assert _memory._need == max(p0.peak_bytes, p1.peak_bytes)
    if "TB_HOST_CACHE_MB" not in os.environ:
        assert limit == _memory.limit_for(_memory._need)


def test_explain_and_profile_show_the_groups(no_fallback):
    def f(x, w):
        a = torch.tanh(x * 2 + 1)  # group 1 (its output read by the mm)
        return torch.sigmoid(a @ w) * 3 - 1  # the sigmoid runs in the mm's epilogue, then group 2

    x, w = torch.randn(16, 8), torch.randn(8, 4)
    groups = _same(f, x, w, groups=2)
    assert [g[1] for g in groups] == [
        "aten::mul.Tensor, aten::add.Tensor, aten::tanh",
        "aten::mul.Tensor, aten::sub.Tensor",
    ]
    compiled = torch.compile(f, backend="tensorbridge")
    compiled(x, w)
    text = tb.diagnostics.explain(compiled)
    assert "2 fused pointwise groups" in text
    assert "aten::mul.Tensor, aten::sub.Tensor (1 outputs written)" in text
    with tb.diagnostics.profile(compiled) as prof:
        for _ in range(3):
            compiled(x, w)
    fused = [n for n in prof.nodes if n["group"]]
    assert len(fused) == 2 and all(n["calls"] == 3 and n["total_us"] > 0 for n in fused)
    assert "fusing aten::mul.Tensor, aten::add.Tensor, aten::tanh" in str(prof)
