"""Zero padding before convolutions in training graphs (tensorbridge._joint): folded into the
convolution in the forward plan and into ``tensorbridge::convolution_backward_padded`` in the
backward plan; gradients equal torch's and the unfused plans'."""

import copy

import numpy as np
import pytest
import torch

import tensorbridge as tb
from tensorbridge import _C, _compile

pytestmark = pytest.mark.usefixtures("no_fallback")


class _TfPadded(torch.nn.Module):
    """TF-style "same" padding before a convolution (MobileNet's ports)."""

    def __init__(self, pads, stride, groups, bias):
        super().__init__()
        self.pads = pads
        self.conv = torch.nn.Conv2d(8, 8, 3, stride=stride, groups=groups, bias=bias)
        self.point = torch.nn.Conv2d(8, 6, 1)

    def forward(self, x):
        y = torch.nn.functional.relu6(self.conv(torch.nn.functional.pad(x, self.pads)))
        return self.point(y).tanh()


def _train(model, x, fusion=True):
    """(loss, input gradient, parameter gradients, the step's forward and backward plan dumps)
    of one compiled training step."""
    torch._dynamo.reset()
    tb.config.fusion = fusion
    try:
        x = x.detach().clone().requires_grad_()
        loss = torch.compile(model, backend="tensorbridge")(x).square().sum()
        loss.backward()
    finally:
        tb.config.fusion = True
    dumps = {e["kind"]: e["plan"].dump() for e in _compile.state.compilations[-1].plans}
    grads = {k: p.grad.clone() for k, p in model.named_parameters()}
    torch._dynamo.reset()
    return loss, x.grad, grads, dumps


def _assert_grads_close(got, want):
    """Gradients compared as the field does: relative to the largest gradient of the model."""
    scale = max(max(float(g.abs().max()) for g in want.values()), 1e-6)
    for k in want:
        torch.testing.assert_close(got[k], want[k], rtol=0, atol=2e-5 * scale)


_CASES = [
    ("asymmetric, stride 2, depthwise", (0, 1, 0, 1), 2, 8, False),
    ("symmetric, stride 1, depthwise", (1, 1, 1, 1), 1, 8, False),
    ("uneven, stride 1, dense, bias", (2, 0, 1, 1), 1, 1, True),
]


@pytest.mark.parametrize("case,pads,stride,groups,bias", _CASES, ids=[c[0] for c in _CASES])
def test_padded_convolutions_train_without_pad_nodes(case, pads, stride, groups, bias):
    torch.manual_seed(0)
    model = _TfPadded(pads, stride, groups, bias)
    x = torch.randn(2, 8, 9, 10)
    loss, gx, grads, dumps = _train(copy.deepcopy(model), x)
    ref = copy.deepcopy(model)
    xr = x.clone().requires_grad_()
    want_loss = ref(xr).square().sum()
    want_loss.backward()
    torch.testing.assert_close(loss, want_loss, rtol=1e-5, atol=1e-5)
    want = {k: p.grad for k, p in ref.named_parameters()}
    _assert_grads_close({**grads, "x": gx}, {**want, "x": xr.grad})
    # The padding runs inside the convolutions, forward and backward; no pad copies remain.
    assert "constant_pad_nd" not in dumps["forward"] + dumps["backward"]
    assert "tensorbridge::convolution_epilogue(" in dumps["forward"]
    assert dumps["backward"].count("tensorbridge::convolution_backward_padded(") == 1
    # The unfused plans (no folding) agree.
    _, gx_plain, grads_plain, plain = _train(copy.deepcopy(model), x, fusion=False)
    assert "convolution_backward_padded" not in plain["backward"]
    _assert_grads_close({**grads, "x": gx}, {**grads_plain, "x": gx_plain})


def test_without_recomputation_too():
    # The default partitioner (tb.config.recompute = False) also recomputes the padding.
    torch.manual_seed(4)
    model = _TfPadded((1, 1, 1, 1), 1, 8, False)
    x = torch.randn(2, 8, 6, 6)
    tb.config.recompute = False
    try:
        _, gx, grads, dumps = _train(copy.deepcopy(model), x)
    finally:
        tb.config.recompute = True
    xr = x.clone().requires_grad_()
    ref = copy.deepcopy(model)
    ref(xr).square().sum().backward()
    want = {k: p.grad for k, p in ref.named_parameters()}
    _assert_grads_close({**grads, "x": gx}, {**want, "x": xr.grad})
    assert "constant_pad_nd" not in dumps["forward"] + dumps["backward"]
    assert "tensorbridge::convolution_backward_padded(" in dumps["backward"]


def test_input_without_gradient_folds_the_weight_gradient_only():
    torch.manual_seed(1)
    model = _TfPadded((0, 1, 0, 1), 2, 1, True)
    x = torch.randn(2, 8, 8, 8)  # no gradient: the backward computes weight gradients only
    torch._dynamo.reset()
    torch.compile(model, backend="tensorbridge")(x).square().sum().backward()
    dump = next(
        e["plan"].dump() for e in _compile.state.compilations[-1].plans if e["kind"] == "backward"
    )
    ref = copy.deepcopy(model)
    for p in ref.parameters():
        p.grad = None
    ref(x).square().sum().backward()
    _assert_grads_close(
        {k: p.grad for k, p in model.named_parameters()},
        {k: p.grad for k, p in ref.named_parameters()},
    )
    assert "tensorbridge::convolution_backward_padded(" in dump and "constant_pad_nd" not in dump
    torch._dynamo.reset()


def test_pads_the_graph_returns_or_reads_twice_stay():
    class Returned(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(4, 4, 3)

        def forward(self, x):
            p = torch.nn.functional.pad(x, (1, 1, 1, 1))
            same = torch.nn.functional.pad(x, (0, 0, 0, 0))
            return self.conv(p).sum() + p.sum(), same

    torch.manual_seed(2)
    model = Returned()
    x = torch.randn(1, 4, 6, 6, requires_grad=True)
    torch._dynamo.reset()
    out, same = torch.compile(model, backend="tensorbridge")(x)
    # A pad of nothing the graph returns is its own tensor, not the input.
    assert same.data_ptr() != x.data_ptr()
    torch.testing.assert_close(same, x.detach())
    (out + same.sum()).backward()
    xr = x.detach().clone().requires_grad_()
    ref = copy.deepcopy(model)
    want, want_same = ref(xr)
    (want + want_same.sum()).backward()
    torch.testing.assert_close(x.grad, xr.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(model.conv.weight.grad, ref.conv.weight.grad, rtol=1e-5, atol=1e-4)
    torch._dynamo.reset()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_convolution_backward_padded_kernel(dtype):
    """The kernel against torch's gradients of conv(pad(x)), for each result it is asked for."""
    torch.manual_seed(3)
    x = torch.randn(2, 6, 7, 9, dtype=dtype)
    w = torch.randn(6, 3, 3, 2, dtype=dtype)
    pads = (1, 0, 2, 1)  # last dim (left, right), then dim 2
    extra = [2, 1, 1, 0]  # (left, right) per spatial dim, in dim order
    xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
    y = torch.nn.functional.conv2d(
        torch.nn.functional.pad(xr, pads), wr, stride=(2, 1), padding=(1, 0), groups=2
    )
    g = torch.randn_like(y)
    y.backward(g)

    def padded_backward(mask, extra):  # stride (2, 1), padding (1, 0), dilation 1, 2 groups
        return _C.call(
            "tensorbridge::convolution_backward_padded",
            *(tb.wrap(t) for t in (g, x, w)),
            [2, 1],
            [1, 0],
            [1, 1],
            2,
            mask,
            extra,
        )

    for mask in ([True, True, False], [False, True, False], [True, False, True]):
        gi, gw, gb = padded_backward(mask, extra)
        tol = {"rtol": 2e-2, "atol": 5e-2} if dtype == torch.bfloat16 else {}
        if mask[0]:
            torch.testing.assert_close(torch.from_dlpack(gi), xr.grad, **tol)
        if mask[1]:
            torch.testing.assert_close(torch.from_dlpack(gw), wr.grad, **tol)
        if mask[2]:
            acc = torch.float32 if dtype == torch.bfloat16 else dtype
            want_b = g.to(acc).sum((0, 2, 3)).to(dtype)
            torch.testing.assert_close(torch.from_dlpack(gb), want_b, **tol)
    with pytest.raises(ValueError, match="expected 4 extra padding values, got 2"):
        padded_backward([True, True, False], [1, 1])
    assert np.isfinite(torch.from_dlpack(gi).float().numpy()).all()
