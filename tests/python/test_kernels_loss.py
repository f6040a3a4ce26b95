"""Loss kernels against torch's CPU kernels.

aten::nll_loss_forward / nll_loss_backward and their spatial form nll_loss2d_* (the end of
cross_entropy): bit for bit over dtypes, reductions, class weights and ignore_index (torch's
cascade sum over the rows), the OpInfo samples of nn.functional.nll_loss and cross_entropy with
their gradients, eager training without fallbacks, and argument errors. aten::mse_loss and
smooth_l1_loss with their backward ops: element losses and gradients bit for bit, reduced
losses to the last bits (the table's own sums), OpInfo samples, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import tensorbridge as tb
from tensorbridge._opinfo import find_opinfos, run_samples

# Kernel tests: an op the table lost raises rather than running torch's own kernel.
pytestmark = pytest.mark.usefixtures("no_fallback")


def _tb(x):
    return tb.from_dlpack(x.detach()) if isinstance(x, torch.Tensor) else x


def tbcall(name, *args):
    out = tb.call(name, *[_tb(a) for a in args])
    return (
        tuple(torch.from_dlpack(t) for t in out)
        if isinstance(out, tuple)
        else (torch.from_dlpack(out),)
    )


def _same(actual, expected):
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert torch.equal(actual.isnan(), expected.isnan())
    assert torch.equal(actual.nan_to_num(), expected.nan_to_num()), (actual, expected)


SHAPES = [(5, 7), (7,), (300, 4), (1000, 3), (0, 3)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("reduction", [0, 1, 2])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore_index", [-100, 2])
def test_nll_loss_forward_and_backward_equal_torch(dtype, reduction, weighted, ignore_index):
    g = torch.Generator().manual_seed(reduction * 10 + weighted)
    for shape in SHAPES:
        c = shape[-1]
        x = torch.randn(*shape, generator=g).to(dtype)
        if len(shape) == 2:
            t = torch.randint(0, c, shape[:1], generator=g)
            if shape[0] > 2:
                t[1] = ignore_index  # a row left out (of the sum and of total_weight)
        else:
            t = torch.tensor(1)
        w = torch.rand(c, generator=g).to(dtype) if weighted else None
        expected = torch.ops.aten.nll_loss_forward(x, t, w, reduction, ignore_index)
        actual = tbcall("aten::nll_loss_forward", x, t, w, reduction, ignore_index)
        for a, e in zip(actual, expected, strict=True):
            _same(a, e)
        go = torch.randn(expected[0].shape, generator=g).to(dtype)
        args = (go, x, t, w, reduction, ignore_index, expected[1])
        _same(
            tbcall("aten::nll_loss_backward", *args)[0],
            torch.ops.aten.nll_loss_backward(*args),
        )


SHAPES_2D = [(2, 3, 4, 5), (1, 4, 1, 1), (3, 5, 16, 16), (0, 3, 2, 2), (2, 3, 0, 4)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("reduction", [0, 1, 2])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss2d_forward_and_backward_equal_torch(dtype, reduction, weighted):
    g = torch.Generator().manual_seed(reduction * 10 + weighted)
    for shape in SHAPES_2D:
        n, c, h, w = shape
        x = torch.randn(*shape, generator=g).to(dtype)
        t = torch.randint(0, c, (n, h, w), generator=g)
        if t.numel() > 3:
            t.view(-1)[2] = 1  # an ignored pixel
        weight = torch.rand(c, generator=g).to(dtype) if weighted else None
        expected = torch.ops.aten.nll_loss2d_forward(x, t, weight, reduction, 1)
        actual = tbcall("aten::nll_loss2d_forward", x, t, weight, reduction, 1)
        for a, e in zip(actual, expected, strict=True):
            _same(a, e)
        go = torch.randn(expected[0].shape, generator=g).to(dtype)
        args = (go, x, t, weight, reduction, 1, expected[1])
        _same(
            tbcall("aten::nll_loss2d_backward", *args)[0],
            torch.ops.aten.nll_loss2d_backward(*args),
        )


def test_every_row_ignored_gives_nan_mean_as_torch():
    x = torch.randn(3, 4)
    t = torch.full((3,), -100)
    out, total = tbcall("aten::nll_loss_forward", x, t, None, 1, -100)
    assert out.isnan() and total.item() == 0.0


@pytest.mark.parametrize("name", ["nn.functional.nll_loss", "nn.functional.cross_entropy"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_opinfo_samples_run_in_the_table(name, dtype):
    # Every sample that reaches nll_loss ([C] and [N, C] inputs) or nll_loss2d ([N, C, d1, ...]
    # inputs, reshaped to 4-D) passes, gradients included, with no fallback.
    # (cross_entropy's probability-target samples never call either.)
    ops = {f"aten::nll_loss{k}_{d}" for k in ("", "2d") for d in ("forward", "backward")}
    ran = []
    for info in find_opinfos([name]):
        r = run_samples(info, dtype, grad=True)
        ran += [s for s in r.samples if s.hit & ops]
    assert len(ran) >= 8
    served = set().union(*(s.hit for s in ran))
    assert ops <= served
    assert [(s.index, s.message) for s in ran if s.status != "pass" or s.fallbacks] == []


def test_eager_classifier_training_runs_without_fallback():
    # cross_entropy on wrapped numpy weights: log_softmax + nll_loss, forward and backward, all
    # in the table; the numpy arrays take the SGD steps in place.
    torch.manual_seed(0)
    ref = torch.nn.Linear(6, 4)
    w = ref.weight.detach().numpy().copy()
    b = ref.bias.detach().numpy().copy()
    ours = torch.nn.Linear(6, 4)
    ours.weight = torch.nn.Parameter(tb.wrap(w))
    ours.bias = torch.nn.Parameter(tb.wrap(b))
    x = torch.randn(8, 6)
    y = torch.tensor([0, 1, 2, 3, 0, -100, 2, 1])
    tb.diagnostics.reset_metrics()
    for m in (ref, ours):
        opt = torch.optim.SGD(m.parameters(), lr=0.5)
        for _ in range(3):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(m(x), y).backward()
            opt.step()
    np.testing.assert_allclose(w, ref.weight.detach().numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(b, ref.bias.detach().numpy(), rtol=1e-6, atol=1e-6)
    m = tb.diagnostics.metrics()
    assert m["aten::nll_loss_forward"]["kernel"] == 3
    assert m["aten::nll_loss_backward"]["kernel"] == 3
    assert sum(v["fallback"] for v in m.values()) == 0


def test_eager_segmentation_loss_runs_without_fallback():
    # cross_entropy over [N, C, H, W] logits (per-pixel classes): nll_loss2d in the table.
    torch.manual_seed(0)
    logits = torch.randn(2, 4, 5, 6)
    target = torch.randint(0, 4, (2, 5, 6))
    target[0, 0, 0] = -100
    wrapped = tb.wrap(logits.numpy().copy()).requires_grad_()
    ref = logits.clone().requires_grad_()
    tb.diagnostics.reset_metrics()
    w = torch.rand(4)
    loss = torch.nn.functional.cross_entropy(wrapped, target, weight=w)
    expected = torch.nn.functional.cross_entropy(ref, target, weight=w)
    loss.backward()
    expected.backward()
    torch.testing.assert_close(tb.to_torch(loss.detach()), expected.detach())
    torch.testing.assert_close(tb.to_torch(wrapped.grad), ref.grad)
    m = tb.diagnostics.metrics()
    assert m["aten::nll_loss2d_forward"]["kernel"] >= 1
    assert m["aten::nll_loss2d_backward"]["kernel"] == 1
    assert sum(v["fallback"] for v in m.values()) == 0


def test_argument_errors_name_the_op_and_the_value():
    x = torch.randn(3, 4)
    with pytest.raises(IndexError, match=r"nll_loss_forward: target 4 is out of bounds for 4"):
        tbcall("aten::nll_loss_forward", x, torch.tensor([0, 4, 1]), None, 1, -100)
    with pytest.raises(IndexError, match=r"nll_loss_backward: target -1 is out of bounds"):
        tbcall(
            "aten::nll_loss_backward",
            torch.tensor(1.0),
            x,
            torch.tensor([0, -1, 1]),
            None,
            1,
            -100,
            torch.tensor(3.0),
        )
    with pytest.raises(ValueError, match=r"batch_size \(3\) to match target batch_size \(2\)"):
        tbcall("aten::nll_loss_forward", x, torch.tensor([0, 1]), None, 1, -100)
    with pytest.raises(TypeError, match="target must be int64"):
        tbcall("aten::nll_loss_forward", x, torch.zeros(3), None, 1, -100)
    with pytest.raises(ValueError, match="weight must hold one value per class"):
        tbcall("aten::nll_loss_forward", x, torch.tensor([0, 1, 2]), torch.ones(3), 1, -100)
    with pytest.raises(ValueError, match="reduction must be"):
        tbcall("aten::nll_loss_forward", x, torch.tensor([0, 1, 2]), None, 3, -100)
    with pytest.raises(ValueError, match="input must be 1-D or 2-D"):
        tbcall("aten::nll_loss_forward", torch.randn(2, 3, 4), torch.tensor([0, 1]), None, 1, -1)
    x4 = torch.randn(2, 3, 4, 5)
    with pytest.raises(ValueError, match=r"nll_loss2d_forward: target must be \[N, H, W\]"):
        tbcall("aten::nll_loss2d_forward", x4, torch.zeros(2, 4, dtype=torch.long), None, 1, -1)
    with pytest.raises(ValueError, match=r"nll_loss2d_forward: input must be 4-D"):
        tbcall("aten::nll_loss2d_forward", x, torch.tensor([0, 1, 2]), None, 1, -100)
    bad = torch.zeros(2, 4, 5, dtype=torch.long)
    bad[1, 3, 4] = 3
    with pytest.raises(IndexError, match="nll_loss2d_forward: target 3 is out of bounds for 3"):
        tbcall("aten::nll_loss2d_forward", x4, bad, None, 1, -100)


POINTWISE = [("mse_loss", ()), ("smooth_l1_loss", (1.0,)), ("smooth_l1_loss", (0.0,))]
POINTWISE += [("smooth_l1_loss", (0.5,))]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("reduction", [0, 1, 2])
@pytest.mark.parametrize("name,extra", POINTWISE)
def test_pointwise_losses_equal_torch(dtype, reduction, name, extra):
    fwd = getattr(torch.ops.aten, name)
    bwd = getattr(torch.ops.aten, name + "_backward")
    for shape in ((5, 7), (), (1000,), (0, 3)):
        g = torch.Generator().manual_seed(reduction)
        x = torch.randn(shape, generator=g).to(dtype)
        t = torch.randn(shape, generator=g).to(dtype)
        expected = fwd(x, t, reduction, *extra)
        (actual,) = tbcall(f"aten::{name}", x, t, reduction, *extra)
        if reduction == 0:
            _same(actual, expected)
        else:  # the table's sum of the same element losses
            torch.testing.assert_close(actual, expected, equal_nan=True)
        go = torch.randn(expected.shape, generator=g).to(dtype)
        args = (go, x, t, reduction, *extra)
        _same(tbcall(f"aten::{name}_backward", *args)[0], bwd(*args))


@pytest.mark.parametrize(
    "name", ["nn.functional.mse_loss", "nn.functional.smooth_l1_loss", "nn.functional.huber_loss"]
)
def test_pointwise_loss_opinfo_samples(name):
    ops = {"aten::mse_loss", "aten::smooth_l1_loss", "aten::huber_loss"}
    for info in find_opinfos([name]):
        r = run_samples(info, torch.float64, grad=True)
        fails = [(i, m) for i, m in r.failures if not m.startswith("fell back")]
        assert not fails, fails
        assert set(r.served) & ops


def test_pointwise_loss_errors():
    x = torch.randn(3)
    with pytest.raises(TypeError, match="mse_loss: input and target must be floating point"):
        tbcall("aten::mse_loss", x, torch.ones(3, dtype=torch.long), 1)
    with pytest.raises(ValueError, match="smooth_l1_loss: beta must be non-negative"):
        tbcall("aten::smooth_l1_loss", x, x, 1, -1.0)
    with pytest.raises(ValueError, match="mse_loss"):
        tbcall("aten::mse_loss", x, torch.randn(4), 1)  # shapes that do not broadcast
    with pytest.raises(ValueError, match="reduction must be"):
        tbcall("aten::mse_loss", x, x, 5)


# ---- kernels/loss_binary.cc and loss_margin.cc -----------------------------------------------
_LOSS_FAMILY = {
    f"aten::{n}{b}"
    for n in ("binary_cross_entropy", "huber_loss", "soft_margin_loss", "multi_margin_loss")
    for b in ("", "_backward")
} | {
    "aten::binary_cross_entropy_with_logits",
    "aten::multilabel_margin_loss",
    "aten::multilabel_margin_loss_forward",
    "aten::multilabel_margin_loss_backward",
    "aten::_ctc_loss",
    "aten::_ctc_loss.Tensor",
    "aten::_ctc_loss_backward",
    "aten::_ctc_loss_backward.Tensor",
}


@pytest.mark.parametrize(
    "name",
    [
        "nn.functional.binary_cross_entropy",
        "nn.functional.binary_cross_entropy_with_logits",
        "nn.functional.huber_loss",
        "nn.functional.soft_margin_loss",
        "nn.functional.multi_margin_loss",
        "nn.functional.multilabel_margin_loss",
        "nn.functional.ctc_loss",
    ],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_classification_loss_opinfo_samples(name, dtype):
    from conftest import check_family_samples

    (info,) = find_opinfos([name])
    r = run_samples(info, dtype, max_samples=12, grad=dtype == torch.float64)
    check_family_samples(r, _LOSS_FAMILY, bar=1.0)


def _loss_and_grad(fn, x, *args):
    """fn(x, *args) and its gradient for x, on torch's kernels and through the table."""
    out = []
    for wrapped in (False, True):
        xi = tb.wrap(x.detach().numpy().copy()) if wrapped else x.detach().clone()
        xi.requires_grad_()
        loss = fn(xi, *args)
        loss.backward()
        out.append(
            (
                tb.to_torch(loss.detach()) if wrapped else loss.detach(),
                tb.to_torch(xi.grad) if wrapped else xi.grad,
            )
        )
    return out


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_classification_loss_gradients_through_the_table(reduction):
    g = torch.Generator().manual_seed(7)
    x = torch.randn(6, 5, generator=g, dtype=torch.float64)
    p = torch.rand(6, 5, generator=g, dtype=torch.float64) * 0.98 + 0.01
    t01 = torch.rand(6, 5, generator=g, dtype=torch.float64)
    w = torch.rand(5, generator=g, dtype=torch.float64)
    cls = torch.randint(0, 5, (6,), generator=g)
    ml = torch.tensor([[1, 3, -1, 0, 0]] * 3 + [[4, -1, 0, 0, 0]] * 3)
    sign = torch.randint(0, 2, (6, 5), generator=g, dtype=torch.float64) * 2 - 1

    def red(f):
        return lambda *a: f(*a).sum() if reduction == "none" else f(*a)

    cases = [
        (red(lambda a, t: F.binary_cross_entropy(a, t, weight=w, reduction=reduction)), p, t01),
        (
            red(
                lambda a, t: F.binary_cross_entropy_with_logits(
                    a, t, pos_weight=w, reduction=reduction
                )
            ),
            x,
            t01,
        ),
        (red(lambda a, t: F.huber_loss(a, t, reduction=reduction, delta=0.7)), x, t01),
        (red(lambda a, t: F.soft_margin_loss(a, t, reduction=reduction)), x, sign),
        (
            red(
                lambda a, t: F.multi_margin_loss(
                    a, t, p=2, margin=0.8, weight=w, reduction=reduction
                )
            ),
            x,
            cls,
        ),
        (red(lambda a, t: F.multilabel_margin_loss(a, t, reduction=reduction)), x, ml),
    ]
    tb.diagnostics.reset_metrics()
    for fn, a, t in cases:
        (l0, g0), (l1, g1) = _loss_and_grad(fn, a, t)
        torch.testing.assert_close(l1, l0)
        torch.testing.assert_close(g1, g0)
    m = tb.diagnostics.metrics()
    assert sum(v["fallback"] for v in m.values()) == 0
    for op in (
        "binary_cross_entropy_backward",
        "huber_loss_backward",
        "multi_margin_loss_backward",
        "multilabel_margin_loss_backward",
        "soft_margin_loss_backward",
    ):
        assert m[f"aten::{op}"]["kernel"] == 1, op


@pytest.mark.parametrize("concatenated", [False, True])
@pytest.mark.parametrize("zero_infinity", [False, True])
def test_ctc_loss_and_gradient_equal_torch(concatenated, zero_infinity):
    g = torch.Generator().manual_seed(11)
    lp = torch.randn(12, 4, 6, generator=g, dtype=torch.float64).log_softmax(2)
    il = torch.tensor([12, 10, 3, 7])
    tl = torch.tensor([3, 4, 3, 0])  # sample 2 cannot fit its targets: infinite loss
    tg = torch.randint(1, 6, (4, 4), generator=g)
    tg[0, 1] = tg[0, 0]  # a repeated label needs a blank between them
    if concatenated:
        tg = torch.cat([tg[b, : tl[b]] for b in range(4)])
    (l0, g0), (l1, g1) = _loss_and_grad(
        lambda x: F.ctc_loss(x, tg, il, tl, reduction="sum", zero_infinity=zero_infinity), lp
    )
    torch.testing.assert_close(l1, l0)
    torch.testing.assert_close(g1, g0, equal_nan=True)


def test_classification_loss_errors():
    x = torch.rand(3, 4)
    with pytest.raises(ValueError, match="binary_cross_entropy: all elements of input should be"):
        tbcall("aten::binary_cross_entropy", x + 1, x)
    with pytest.raises(ValueError, match="binary_cross_entropy: using a target size"):
        tbcall("aten::binary_cross_entropy", x, x[0])
    with pytest.raises(ValueError, match="multi_margin_loss: only p == 1 and p == 2 supported"):
        tbcall("aten::multi_margin_loss", x, torch.tensor([0, 1, 2]), 3)
    with pytest.raises(IndexError, match="multi_margin_loss: target 4 is out of range"):
        tbcall("aten::multi_margin_loss", x, torch.tensor([0, 4, 2]))
    with pytest.raises(ValueError, match="huber_loss does not support non-positive values"):
        tbcall("aten::huber_loss", x, x, 1, 0.0)
    lp = torch.randn(5, 2, 4).log_softmax(2)
    with pytest.raises(
        ValueError, match="_ctc_loss: expected input_lengths to have value at most 5"
    ):
        tbcall("aten::_ctc_loss", lp, torch.ones(2, 3, dtype=torch.long), [6, 5], [3, 3])
    with pytest.raises(IndexError, match="_ctc_loss: target 7 is out of range for 4 classes"):
        tbcall("aten::_ctc_loss", lp, torch.full((2, 3), 7), [5, 5], [3, 3])
