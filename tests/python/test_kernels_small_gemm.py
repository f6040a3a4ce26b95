"""float32 products with few rows (m <= 8) or a short inner dimension (k <= 8), which run on
tensorbridge's own small-product kernels (kernels/cpu/small_gemm.cc), against torch's kernels:
every operand layout (a row- or column-major, strided, at an offset; b row-major, a transposed
weight, strided) through aten::mm, aten::addmm, bmm / baddbmm and
tensorbridge::matmul_epilogue, a compiled stack of nn.Linear in training, several threads at
once, and BERT's compiled training step creating no oneDNN JIT sgemm primitive."""

from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import sys

import pytest
import torch

import tensorbridge as tb

pytestmark = pytest.mark.usefixtures("no_fallback")

ROWS = [1, 2, 3, 7, 8]
INNER = [1, 2, 5, 8, 9, 64, 130]
COLS = [1, 15, 16, 17, 128, 257]


def _t(x):
    return tb.to_torch(x)


def _close(got, want, k):
    # float32 sums of k products in another order: the error grows with k and the magnitudes
    torch.testing.assert_close(got, want, rtol=1e-5, atol=2e-6 * (k + 1) ** 0.5 * 4)


def _a(layout, m, k):
    if layout == "row":
        return torch.randn(m, k)
    if layout == "col":
        return torch.randn(k, m).t()
    return torch.randn(m + 1, 2 * k + 3)[1:, 3::2]  # strided, at an offset


def _b(layout, k, n):
    if layout == "row":
        return torch.randn(k, n)
    if layout == "weight_t":
        return torch.randn(n, k).t()  # nn.Linear's weight.t()
    return torch.randn(2 * k + 1, n + 2)[1::2, 2:]  # rows strided, at an offset


LAYOUTS = [(a, b) for a in ("row", "col", "strided") for b in ("row", "weight_t", "strided")]


@pytest.mark.parametrize("n", COLS)
@pytest.mark.parametrize("k", INNER)
@pytest.mark.parametrize("m", ROWS)
def test_mm_and_addmm_every_layout(m, k, n):
    torch.manual_seed(m * 1000 + k * 10 + n)
    for la, lb in LAYOUTS:
        a, b, bias = _a(la, m, k), _b(lb, k, n), torch.randn(n)
        _close(_t(tb.call("aten::mm", a, b)), a @ b, k)
        _close(_t(tb.call("aten::addmm", bias, a, b)), torch.addmm(bias, a, b), k)
        # beta / alpha and a full self: out = beta * self + alpha * a @ b
        self_ = torch.randn(m, n)
        _close(
            _t(tb.call("aten::addmm", self_, a, b, beta=0.5, alpha=2.0)),
            torch.addmm(self_, a, b, beta=0.5, alpha=2.0),
            k,
        )


@pytest.mark.parametrize("k", [1, 2, 5, 8])
@pytest.mark.parametrize("m, n", [(64, 17), (128, 128), (130, 257), (9, 1)])
def test_short_inner_dimension_many_rows(m, k, n):
    # the weight gradients of linear layers at batch k
    torch.manual_seed(k)
    for la, lb in LAYOUTS:
        a, b, bias = _a(la, m, k), _b(lb, k, n), torch.randn(n)
        _close(_t(tb.call("aten::mm", a, b)), a @ b, k)
        _close(_t(tb.call("aten::addmm", bias, a, b)), torch.addmm(bias, a, b), k)


@pytest.mark.parametrize("k", [1, 3, 130])
@pytest.mark.parametrize("n", [1024, 1031])
def test_one_row_wide(k, n):
    # one row times a wide b: b's rows streamed into the output row
    torch.manual_seed(k + n)
    for la, lb in LAYOUTS:
        a, b, bias = _a(la, 1, k), _b(lb, k, n), torch.randn(n)
        _close(_t(tb.call("aten::mm", a, b)), a @ b, k)
        _close(_t(tb.call("aten::addmm", bias, a, b)), torch.addmm(bias, a, b), k)


def test_special_values_and_beta_zero():
    a, b = torch.randn(2, 40), torch.randn(40, 33)
    a[0, 3] = float("nan")
    b[5, 7] = float("inf")
    want = a @ b
    got = _t(tb.call("aten::mm", a, b))
    assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.isinf(), want.isinf())
    # beta = 0 ignores self, NaN included
    self_ = torch.full((2, 33), float("nan"))
    a2 = torch.randn(2, 40)
    _close(
        _t(tb.call("aten::addmm", self_, a2, b.nan_to_num(0.0), beta=0.0)),
        a2 @ b.nan_to_num(0.0),
        40,
    )


@pytest.mark.parametrize("m, k, n", [(2, 64, 33), (8, 9, 128), (40, 3, 17), (3, 130, 1)])
def test_bmm_and_baddbmm(m, k, n):
    torch.manual_seed(0)
    a = torch.randn(4, k, m).transpose(1, 2)  # column-major matrices
    b = torch.randn(4, n, k).transpose(1, 2)
    _close(_t(tb.call("aten::bmm", a, b)), torch.bmm(a, b), k)
    self_ = torch.randn(4, m, n)
    _close(
        _t(tb.call("aten::baddbmm", self_, a, b, beta=0.25, alpha=-1.5)),
        torch.baddbmm(self_, a, b, beta=0.25, alpha=-1.5),
        k,
    )
    # one b for the whole batch (batch stride 0)
    b1 = torch.randn(k, n).expand(4, k, n)
    _close(_t(tb.call("aten::bmm", a, b1)), torch.bmm(a, b1), k)


def _epilogue_ref(x, w, bias, residual, steps, dtype):
    y = x @ w
    if bias is not None:
        y = y + bias
    for s in steps:
        if s == "add":
            y = y + residual.reshape(y.shape)
        elif s == "gelu_tanh":
            y = torch.nn.functional.gelu(y, approximate="tanh")
        else:
            y = (
                getattr(torch, s)(y)
                if s in ("tanh", "sigmoid", "relu")
                else getattr(torch.nn.functional, s)(y)
            )
    return y.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("epilogue", ["", "tanh", "gelu,add,relu", "gelu_tanh", "silu,add"])
@pytest.mark.parametrize("m, k, n", [(2, 128, 128), (1, 9, 17), (7, 130, 257), (128, 2, 128)])
def test_matmul_epilogue(m, k, n, epilogue, dtype):
    torch.manual_seed(0)
    steps = [s for s in epilogue.split(",") if s]
    x = torch.randn(m + 2, k)[2:]
    weight = torch.randn(n, k)
    bias = torch.randn(n)
    residual = torch.randn(m, n) if "add" in steps else None
    got = tb.call(
        "tensorbridge::matmul_epilogue",
        x,
        weight,
        bias,
        residual,
        True,
        epilogue,
        [m, n],
        dtype,
        -1,
    )
    want = _epilogue_ref(x, weight.t(), bias, residual, steps, dtype)
    if dtype == torch.bfloat16:
        torch.testing.assert_close(_t(got), want, rtol=1.6e-2, atol=1e-2)
    else:
        _close(_t(got), want, k)
    # batched, no bias, weight row-major
    xb, wb = torch.randn(3, m, k), torch.randn(3, k, n)
    res3 = torch.randn(3 * m * n) if residual is not None else None
    got = tb.call(
        "tensorbridge::matmul_epilogue", xb, wb, None, res3, False, epilogue, [3, m, n], dtype, -1
    )
    want = _epilogue_ref(xb, wb, None, res3, steps, dtype)
    if dtype == torch.bfloat16:
        torch.testing.assert_close(_t(got), want, rtol=1.6e-2, atol=1e-2)
    else:
        _close(_t(got), want, k)


def test_matmul_epilogue_relu_keeps_nan():
    x, w = torch.randn(2, 16), torch.randn(16, 20)
    x[1, 0] = float("nan")
    got = _t(
        tb.call(
            "tensorbridge::matmul_epilogue",
            x,
            w,
            None,
            None,
            False,
            "relu",
            [2, 20],
            torch.float32,
            -1,
        )
    )
    want = torch.relu(x @ w)
    assert torch.equal(got.isnan(), want.isnan())
    torch.testing.assert_close(got.nan_to_num(0.0), want.nan_to_num(0.0))


@pytest.mark.usefixtures("fresh_dynamo")
@pytest.mark.parametrize("batch", [1, 2, 8])
def test_compiled_linear_stack_training(batch):
    # forward: few rows; backward: the weight gradients have k = batch
    torch.manual_seed(batch)
    model = torch.nn.Sequential(
        torch.nn.Linear(130, 64),
        torch.nn.Tanh(),
        torch.nn.Linear(64, 17),
        torch.nn.ReLU(),
        torch.nn.Linear(17, 5),
    )
    x = torch.randn(batch, 130)
    model(x).square().sum().backward()
    want = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    compiled = torch.compile(model, backend="tensorbridge")
    compiled(x).square().sum().backward()
    scale = max(g.abs().max().item() for g in want)
    for p, w in zip(model.parameters(), want, strict=True):
        torch.testing.assert_close(p.grad / scale, w / scale, rtol=0, atol=1e-5)


def test_several_threads_at_once():
    torch.manual_seed(0)
    cases = [
        (_a(la, m, k), _b(lb, k, n))
        for la, lb in LAYOUTS
        for m, k, n in [(2, 128, 128), (128, 2, 128), (7, 130, 17), (1, 64, 257)]
    ]
    want = [_t(tb.call("aten::mm", a, b)) for a, b in cases]

    def work(seed):
        for i in range(20):
            j = (seed + i) % len(cases)
            if not torch.equal(_t(tb.call("aten::mm", *cases[j])), want[j]):
                return False
        return True

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        assert all(pool.map(work, range(8)))


_BERT_STEP = """
import json, torch, tensorbridge as tb, tensorbridge.zoo as zoo
torch.set_num_threads(1)
model, inputs = zoo.build("bert", "small")
model.train()
fn = torch.compile(model, backend="tensorbridge")
for _ in range(2):
    zoo.loss_of(fn(**inputs)).backward()
print(json.dumps(tb.diagnostics.onednn_info()))
"""


def test_bert_training_step_creates_no_jit_sgemm():
    # BERT's pooler runs 2-row products (and their K = 2 weight gradient): oneDNN would run
    # them on its JIT sgemm (impl "gemm:jit" / "x64:gemm:jit"). A fresh process counts every
    # primitive the kernels create.
    pytest.importorskip("transformers", reason="transformers is not installed")
    info = tb.diagnostics.onednn_info()
    if not info["effective_isa"].startswith("avx512") or "TB_MAX_CPU_ISA" in os.environ:
        pytest.skip("the small-product kernels read a transposed weight in place on AVX-512 only")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    env.pop("ONEDNN_VERBOSE", None)
    out = subprocess.run(
        [sys.executable, "-c", _BERT_STEP], env=env, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-3000:]
    created = json.loads(out.stdout.strip().splitlines()[-1])["primitives_created"]
    assert sum(created.values()) > 0, created  # the counter sees the brgemm matmuls
    jit = {name: c for name, c in created.items() if "gemm:jit" in name}
    assert not jit, f"oneDNN JIT sgemm primitives created: {created}"


def test_primitive_counter_counts_by_name():
    # a float32 product with many rows and a long inner dimension stays on oneDNN
    before = tb.diagnostics.onednn_info()["primitives_created"]
    a, b = torch.randn(67, 45), torch.randn(45, 71)  # a shape no other test uses
    _close(_t(tb.call("aten::mm", a, b)), a @ b, 45)
    after = tb.diagnostics.onednn_info()["primitives_created"]
    assert sum(after.values()) == sum(before.values()) + 1, (before, after)
