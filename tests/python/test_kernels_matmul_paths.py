"""The shape- and layout-specific paths of aten::mm / aten::addmm, against torch's kernels:
outer products (k = 1), the inner product on a weight read in place (few rows; the weight
transposed or row-major), and the bias-argument path of float32 linear layers."""

import pytest
import torch

import tensorbridge as tb

# Kernel tests: an op the table lost raises rather than running torch's own kernel.
pytestmark = pytest.mark.usefixtures("no_fallback")


def _mm(*args, op="aten::mm", **kw):
    return tb.to_torch(tb.call(op, *args, **kw))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("m, n", [(1, 1), (10, 512), (128, 128), (512, 784)])
def test_outer_products_are_exact(dtype, m, n):
    # k = 1: each element is one product, so any correct path gives torch's bits.
    torch.manual_seed(0)
    a, b = torch.randn(m, 1, dtype=dtype), torch.randn(1, n, dtype=dtype)
    assert torch.equal(_mm(a, b), torch.mm(a, b))
    # strided operands: a column of a wider matrix, b with a step
    a2 = torch.randn(m, 3, dtype=dtype)[:, 1:2]
    b2 = torch.randn(1, 2 * n, dtype=dtype)[:, ::2]
    assert torch.equal(_mm(a2, b2), torch.mm(a2, b2))


@pytest.mark.parametrize("rows", [1, 3, 8, 9])
@pytest.mark.parametrize("layout", ["transposed", "row-major", "strided"])
def test_few_rows_times_a_weight(rows, layout):
    torch.manual_seed(0)
    k, n = 300, 130
    a = torch.randn(rows, k)
    if layout == "transposed":
        b = torch.randn(n, k).t()  # weight.t(): the inner product reads the weight as stored
    elif layout == "row-major":
        b = torch.randn(k, n)  # (grad @ weight): the weight's other layout
    else:
        b = torch.randn(k, 2 * n)[:, ::2]  # neither: the general path
    torch.testing.assert_close(_mm(a, b), torch.mm(a, b), rtol=1e-5, atol=1e-4)
    bias = torch.randn(n)
    torch.testing.assert_close(
        _mm(bias, a, b, op="aten::addmm"), torch.addmm(bias, a, b), rtol=1e-5, atol=1e-4
    )
    # beta / alpha other than 1 take the general path
    torch.testing.assert_close(
        _mm(bias, a, b, op="aten::addmm", beta=0.5, alpha=2.0),
        torch.addmm(bias, a, b, beta=0.5, alpha=2.0),
        rtol=1e-5,
        atol=1e-4,
    )


@pytest.mark.parametrize("bias_shape", [(64,), (1, 64), (32, 64)])
def test_addmm_bias_forms(bias_shape):
    # a [n] or [1, n] bias is oneDNN's bias argument; a full [m, n] self is added as torch does
    torch.manual_seed(0)
    bias, a, w = torch.randn(*bias_shape), torch.randn(32, 48), torch.randn(64, 48)
    torch.testing.assert_close(
        _mm(bias, a, w.t(), op="aten::addmm"), torch.addmm(bias, a, w.t()), rtol=1e-5, atol=1e-5
    )
