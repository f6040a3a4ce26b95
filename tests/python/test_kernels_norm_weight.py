"""aten::_weight_norm_interface and its backward (kernels/norm_weight.cc) against torch's CPU
kernels, and weight-normalized layers (torch.nn.utils.parametrizations.weight_norm, as
Wav2Vec2's positional convolution uses) training eagerly in the table with no fallback."""

from __future__ import annotations

import pytest
import torch

import tensorbridge as tb

TOL = {torch.float32: 1e-5, torch.float64: 1e-12, torch.bfloat16: 2e-2, torch.float16: 2e-3}


# A kernel the table lost would otherwise run torch's and compare torch with itself.
pytestmark = pytest.mark.usefixtures("no_fallback")


def _t(xs):
    return [torch.from_dlpack(x) for x in xs]


# torch's fused CPU kernel takes the first or the last dimension (others go through
# norm_except_dim, a composite of other ops).
CASES = [((4, 3, 5), 0), ((4, 3, 5), 2), ((6,), 0), ((2, 3, 4, 5), 3), ((16, 1, 1), 0)]


@pytest.mark.parametrize("dtype", list(TOL))
@pytest.mark.parametrize("shape,dim", CASES)
def test_weight_norm_forward_and_backward_equal_torch(dtype, shape, dim):
    g_ = torch.Generator().manual_seed(0)
    v = torch.randn(shape, generator=g_).to(dtype)
    gshape = [1] * len(shape)
    gshape[dim] = shape[dim]
    g = torch.randn(gshape, generator=g_).to(dtype)
    w, norms = torch._weight_norm_interface(v, g, dim)
    got_w, got_norms = _t(tb.call("aten::_weight_norm_interface", v, g, dim))
    tol = TOL[dtype]
    assert got_w.dtype == w.dtype and got_norms.dtype == norms.dtype  # float32 norms for 16-bit
    assert got_norms.shape == norms.shape
    torch.testing.assert_close(got_w, w, rtol=tol, atol=tol)
    torch.testing.assert_close(got_norms, norms, rtol=tol, atol=tol)
    grad_w = torch.randn(shape, generator=g_).to(dtype)
    want = torch.ops.aten._weight_norm_interface_backward(grad_w, v, g, norms, dim)
    got = _t(tb.call("aten::_weight_norm_interface_backward", grad_w, v, g, norms, dim))
    for a, b in zip(got, want, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype
        torch.testing.assert_close(a, b, rtol=tol, atol=tol)


def test_weight_norm_errors_name_the_op():
    v = torch.randn(4, 3)
    with pytest.raises(ValueError, match="aten::_weight_norm_interface: g must have one element"):
        tb.call("aten::_weight_norm_interface", v, torch.ones(3, 1), 0)
    with pytest.raises(TypeError, match="aten::_weight_norm_interface: v and g must be"):
        tb.call("aten::_weight_norm_interface", v.long(), torch.ones(4, 1).long(), 0)


def test_weight_normalized_conv_trains_in_the_table():
    torch.manual_seed(0)
    conv = torch.nn.Conv1d(8, 8, 5, padding=2, groups=2)
    conv = torch.nn.utils.parametrizations.weight_norm(conv, name="weight", dim=2)
    ref = torch.nn.Sequential(conv)
    x = torch.randn(2, 8, 12)
    out = ref(x)
    out.square().mean().backward()
    want = {k: p.grad.clone() for k, p in ref.named_parameters()}
    ref.zero_grad()
    wrapped = tb.wrap_module(ref, copy=True)
    tb.diagnostics.reset_metrics()
    got = wrapped(tb.wrap(x, copy=True))
    got.square().mean().backward()
    torch.testing.assert_close(tb.to_torch(got.detach()), out.detach(), rtol=1e-5, atol=1e-6)
    for k, p in wrapped.named_parameters():
        torch.testing.assert_close(tb.to_torch(p.grad), want[k], rtol=1e-5, atol=1e-6)
    m = tb.diagnostics.metrics()
    assert m["aten::_weight_norm_interface"]["kernel"] >= 1
    assert m["aten::_weight_norm_interface_backward"]["kernel"] >= 1
