"""How fast are tensorbridge's CPU kernels, called one op at a time, next to torch eager?

Question: for the ops that dominate real models (elementwise add/mul, reductions, matmul,
batched matmul, a ResNet 3x3 convolution, max pooling, softmax/log_softmax, layer_norm,
gelu/silu, a convnet's training batch norm forward / backward and relu gradient, CPU flash
attention forward / backward at BERT-base size and at the model zoo's small size, and the linear
algebra kernels (LAPACK) at 64x64 and 512x512), is
``tb.call("aten::...", arrays...)`` on ``tb.Array``s (made with ``tb.from_dlpack`` over numpy
memory) as fast as PyTorch?

Baseline: torch eager (the public torch function for the same ATen op, on torch tensors
over the very same memory), measured in the same run. The tensorbridge figure includes the
op-table call (argument binding, lookup, output allocation) as well as the kernel.
Ratio = torch time / tensorbridge time on min-of-repeats: >= 1.00x means tensorbridge is as
fast or faster. The two paths of an op are warmed up and calibrated separately, then timed
in alternating repeats, so that load changes hit both alike. A result check (max |tb - torch|) is printed for each op, and the ops that
fell back to torch's own kernels (tb.diagnostics.metrics()) are listed per row and at the end.

Usage: python benchmarks/bench_kernels.py [--quick] [--repeats N] [--threads N] [--only SUBSTR]
"""

from __future__ import annotations

import functools
import sys

import numpy as np
import torch
import torch.nn.functional as F

import tensorbridge as tb
from _bench_util import (
    NA,
    FallbackTracker,
    env_header,
    fmt_median,
    fmt_ratio,
    geomean,
    measure_interleaved,
    parse_args,
    print_table,
    ratio,
)

ARGS = parse_args(
    __doc__,
    full_repeats=11,
    quick_repeats=5,
    full_target_s=0.03,
    quick_target_s=0.015,
    extra=lambda p: p.add_argument(
        "--only", default=None, help="measure only the ops whose label contains this text"
    ),
)
BUDGET_S = (
    1.2 if ARGS.quick else 3.0
)  # per op (both paths): repeating stops after this (min 3 repeats)
RNG = np.random.default_rng(0)


def rand(*shape) -> np.ndarray:
    return RNG.standard_normal(shape, dtype=np.float32)


# ---- inputs: numpy memory; tb.Array and torch.Tensor views of the same buffers ---------------
N16M = 16 * 1024 * 1024
A16, B16 = rand(N16M), rand(N16M)
R2 = rand(4096, 4096)
M1, M2 = rand(1024, 1024), rand(1024, 1024)
BA, BB = rand(32, 128, 64), rand(32, 64, 128)
CX, CW = rand(8, 64, 56, 56), rand(64, 64, 3, 3) * np.float32(0.05)
PX = rand(8, 64, 112, 112)
QX = rand(32, 16, 32, 32)  # the convnet's pool (benchmarks/bench_compile.py)
QG = rand(32, 16, 16, 16)
SX = rand(1024, 4096)
LX, LW, LB = rand(4096, 768), rand(768), rand(768)
# batch norm (training) / relu gradient on a small convnet's activation
BN_X, BN_DY = rand(32, 16, 32, 32), rand(32, 16, 32, 32)
BN_W, BN_B = np.abs(rand(16)) + np.float32(0.5), rand(16)
BN_RM, BN_RV = np.zeros(16, np.float32), np.ones(16, np.float32)
_, _BN_SM, _BN_SI = torch.ops.aten.native_batch_norm(
    torch.from_numpy(BN_X),
    torch.from_numpy(BN_W),
    torch.from_numpy(BN_B),
    torch.from_numpy(BN_RM.copy()),
    torch.from_numpy(BN_RV.copy()),
    True,
    0.1,
    1e-5,
)
BN_SM, BN_SI = _BN_SM.numpy(), _BN_SI.numpy()
# attention [batch, heads, tokens, head size]: BERT-base at 512 tokens, the model zoo's configs
ATTN = {"big": (8, 12, 512, 64), "zoo": (2, 4, 32, 32)}
ATTN_QKV = {n: tuple(rand(*s) for _ in range(3)) for n, s in ATTN.items()}


@functools.cache
def _attn_saved(size: str, causal: bool):
    """Output and logsumexp of the forward (the backward's inputs) and a gradient."""
    q, k, v = (torch.from_numpy(a) for a in ATTN_QKV[size])
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal)
    return out.numpy(), lse.numpy(), rand(*ATTN[size])


def tba(x: np.ndarray):
    return tb.from_dlpack(x)


def tt(x: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(x)


# ---- one function per measured path: each returns the zero-argument callable to time --------
# tensorbridge: tb.call on tb.Arrays


def tb_add():
    a, b = tba(A16), tba(B16)
    return lambda: tb.call("aten::add.Tensor", a, b)


def tb_mul():
    a, b = tba(A16), tba(B16)
    return lambda: tb.call("aten::mul.Tensor", a, b)


def tb_sum_dim():
    x = tba(R2)
    return lambda: tb.call("aten::sum.dim_IntList", x, [1])


def tb_mean_dim():
    x = tba(R2)
    return lambda: tb.call("aten::mean.dim", x, [1])


def tb_mm():
    a, b = tba(M1), tba(M2)
    return lambda: tb.call("aten::mm", a, b)


def tb_bmm():
    a, b = tba(BA), tba(BB)
    return lambda: tb.call("aten::bmm", a, b)


def tb_conv():
    x, w = tba(CX), tba(CW)
    return lambda: tb.call(
        "aten::convolution", x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1
    )


def tb_maxpool():
    x = tba(PX)
    return lambda: tb.call(
        "aten::max_pool2d_with_indices", x, [3, 3], [2, 2], [1, 1], [1, 1], False
    )


def tb_maxpool_k2():
    x = tba(QX)
    return lambda: tb.call(
        "aten::max_pool2d_with_indices", x, [2, 2], [2, 2], [0, 0], [1, 1], False
    )


def tb_maxpool_k2_backward():
    x, gy = tba(QX), tba(QG)
    idx = tb.call("aten::max_pool2d_with_indices", x, [2, 2], [2, 2], [0, 0], [1, 1], False)[1]
    return lambda: tb.call(
        "aten::max_pool2d_with_indices_backward",
        gy,
        x,
        [2, 2],
        [2, 2],
        [0, 0],
        [1, 1],
        False,
        idx,
    )


def tb_softmax():
    x = tba(SX)
    return lambda: tb.call("aten::_softmax", x, 1, False)


def tb_log_softmax():
    x = tba(SX)
    return lambda: tb.call("aten::_log_softmax", x, 1, False)


def tb_layer_norm():
    x, w, b = tba(LX), tba(LW), tba(LB)
    return lambda: tb.call("aten::native_layer_norm", x, [768], w, b, 1e-5)


def tb_gelu():
    x = tba(A16)
    return lambda: tb.call("aten::gelu", x)


def tb_silu():
    x = tba(A16)
    return lambda: tb.call("aten::silu", x)


def tb_bn_train():
    x, w, b, rm, rv = (tba(a) for a in (BN_X, BN_W, BN_B, BN_RM, BN_RV))
    return lambda: tb.call(
        "aten::_native_batch_norm_legit_functional", x, w, b, rm, rv, True, 0.1, 1e-5
    )


def tb_bn_backward():
    dy, x, w, rm, rv, sm, si = (tba(a) for a in (BN_DY, BN_X, BN_W, BN_RM, BN_RV, BN_SM, BN_SI))
    return lambda: tb.call(
        "aten::native_batch_norm_backward", dy, x, w, rm, rv, sm, si, True, 1e-5, [True] * 3
    )


def tb_threshold_backward():
    dy, x = tba(BN_DY), tba(BN_X)
    return lambda: tb.call("aten::threshold_backward", dy, x, 0.0)


FLASH = "aten::_scaled_dot_product_flash_attention_for_cpu"


def tb_attention(size: str, causal: bool):
    def path():
        q, k, v = (tba(a) for a in ATTN_QKV[size])
        return lambda: tb.call(FLASH, q, k, v, 0.0, causal)

    return path


def tb_attention_backward(size: str, causal: bool):
    def path():
        out, lse, go = _attn_saved(size, causal)
        args = [tba(a) for a in (go, *ATTN_QKV[size], out, lse)]
        return lambda: tb.call(FLASH + "_backward", *args, 0.0, causal)

    return path


# torch eager: the public torch function for the same ATen op, same memory (torch.ops.aten
# for the autograd-internal ops: training batch norm, the gradients, and the flash attention
# op, which F.scaled_dot_product_attention calls)


def torch_add():
    a, b = tt(A16), tt(B16)
    return lambda: torch.add(a, b)


def torch_mul():
    a, b = tt(A16), tt(B16)
    return lambda: torch.mul(a, b)


def torch_sum_dim():
    x = tt(R2)
    return lambda: torch.sum(x, 1)


def torch_mean_dim():
    x = tt(R2)
    return lambda: torch.mean(x, 1)


def torch_mm():
    a, b = tt(M1), tt(M2)
    return lambda: torch.mm(a, b)


def torch_bmm():
    a, b = tt(BA), tt(BB)
    return lambda: torch.bmm(a, b)


def torch_conv():
    x, w = tt(CX), tt(CW)
    return lambda: F.conv2d(x, w, None, 1, 1)


def torch_maxpool():
    x = tt(PX)
    return lambda: F.max_pool2d_with_indices(x, 3, 2, 1)


def torch_maxpool_k2():
    x = tt(QX)
    return lambda: torch.ops.aten.max_pool2d_with_indices(x, [2, 2], [2, 2], [0, 0], [1, 1], False)


def torch_maxpool_k2_backward():
    x, gy = tt(QX), tt(QG)
    idx = torch.ops.aten.max_pool2d_with_indices(x, [2, 2], [2, 2], [0, 0], [1, 1], False)[1]
    return lambda: torch.ops.aten.max_pool2d_with_indices_backward(
        gy, x, [2, 2], [2, 2], [0, 0], [1, 1], False, idx
    )


def torch_softmax():
    x = tt(SX)
    return lambda: torch.softmax(x, 1)


def torch_log_softmax():
    x = tt(SX)
    return lambda: torch.log_softmax(x, 1)


def torch_layer_norm():
    x, w, b = tt(LX), tt(LW), tt(LB)
    return lambda: F.layer_norm(x, [768], w, b, 1e-5)


def torch_gelu():
    x = tt(A16)
    return lambda: F.gelu(x)


def torch_silu():
    x = tt(A16)
    return lambda: F.silu(x)


def torch_bn_train():
    x, w, b, rm, rv = (tt(a) for a in (BN_X, BN_W, BN_B, BN_RM, BN_RV))
    return lambda: torch.ops.aten._native_batch_norm_legit_functional(
        x, w, b, rm, rv, True, 0.1, 1e-5
    )


def torch_bn_backward():
    dy, x, w, rm, rv, sm, si = (tt(a) for a in (BN_DY, BN_X, BN_W, BN_RM, BN_RV, BN_SM, BN_SI))
    return lambda: torch.ops.aten.native_batch_norm_backward(
        dy, x, w, rm, rv, sm, si, True, 1e-5, [True] * 3
    )


def torch_threshold_backward():
    dy, x = tt(BN_DY), tt(BN_X)
    return lambda: torch.ops.aten.threshold_backward(dy, x, 0.0)


def torch_attention(size: str, causal: bool):
    def path():
        q, k, v = (tt(a) for a in ATTN_QKV[size])
        return lambda: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q, k, v, 0.0, causal
        )

    return path


def torch_attention_backward(size: str, causal: bool):
    def path():
        out, lse, go = _attn_saved(size, causal)
        args = [tt(a) for a in (go, *ATTN_QKV[size], out, lse)]
        return lambda: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
            *args, 0.0, causal
        )

    return path


def _attention_cases():
    cases = []
    for size, causal in (("big", False), ("zoo", False), ("zoo", True)):
        shape = "[" + ",".join(str(d) for d in ATTN[size]) + "]"
        kind = "causal" if causal else "full"
        cases.append(
            (
                f"flash attention fwd {kind}",
                shape,
                tb_attention(size, causal),
                torch_attention(size, causal),
            )
        )
        cases.append(
            (
                f"flash attention bwd {kind}",
                shape,
                tb_attention_backward(size, causal),
                torch_attention_backward(size, causal),
            )
        )
    return cases


# ---- linear algebra: float32 matrices at 64x64 and 512x512 ----------------------------------
# (name, ATen op, extra arguments, torch function, input kind, which output the check reads:
# one defined without a sign choice where the op has one)
LINALG = [
    ("cholesky", "aten::linalg_cholesky_ex", (), torch.linalg.cholesky_ex, "spd", 0),
    ("lu_factor", "aten::linalg_lu_factor_ex", (), torch.linalg.lu_factor_ex, "gen", 0),
    ("solve (16 rhs)", "aten::_linalg_solve_ex", ("rhs",), torch.linalg.solve_ex, "gen", 0),
    ("inv", "aten::linalg_inv_ex", (), torch.linalg.inv_ex, "gen", 0),
    ("det", "aten::_linalg_det", (), torch.linalg.det, "unit", 0),
    ("solve_triangular", "aten::linalg_solve_triangular", ("rhs",), None, "tri", 0),
    ("qr", "aten::linalg_qr", (), torch.linalg.qr, "gen", 1),
    ("svd", "aten::_linalg_svd", (), lambda a: torch.linalg.svd(a, full_matrices=False), "gen", 1),
    ("eigh", "aten::_linalg_eigh", (), torch.linalg.eigh, "spd", 0),
    ("lstsq (gelsy)", "aten::linalg_lstsq", ("rhs",), torch.linalg.lstsq, "gen", 0),
    ("pinv", "aten::linalg_pinv.atol_rtol_tensor", (), torch.linalg.pinv, "gen", 0),
    ("matrix_exp", "aten::linalg_matrix_exp", (), torch.linalg.matrix_exp, "small", 0),
]


def _linalg_input(kind: str, n: int) -> np.ndarray:
    a = rand(n, n)
    if kind == "spd":
        return (a @ a.T + n * np.eye(n, dtype=np.float32)).astype(np.float32)
    if kind == "tri":
        return (np.tril(a) + n * np.eye(n, dtype=np.float32)).astype(np.float32)
    if kind == "small":
        return (a / np.sqrt(n)).astype(np.float32)
    if kind == "unit":  # a determinant within float32's range
        return (a / (2 * np.sqrt(n)) + np.eye(n, dtype=np.float32)).astype(np.float32)
    return (a + np.sqrt(n) * np.eye(n, dtype=np.float32)).astype(np.float32)


def _linalg_cases():
    cases = []
    for n in (64, 512):
        for name, op, extra, torch_fn, kind, out in LINALG:
            a, rhs = _linalg_input(kind, n), rand(n, 16)

            def tb_path(a=a, rhs=rhs, op=op, extra=extra, out=out):
                args = [tba(a), *(tba(rhs) for _ in extra)]
                kw = {"upper": False} if op == "aten::linalg_solve_triangular" else {}
                return lambda: _nth(tb.call(op, *args, **kw), out)

            def torch_path(a=a, rhs=rhs, torch_fn=torch_fn, extra=extra, out=out):
                args = [tt(a), *(tt(rhs) for _ in extra)]
                if torch_fn is None:  # solve_triangular
                    return lambda: torch.linalg.solve_triangular(*args, upper=False)
                return lambda: _nth(torch_fn(*args), out)

            cases.append((f"linalg {name}", f"[{n},{n}]", tb_path, torch_path))
    return cases


def _nth(x, i):
    return x[i] if isinstance(x, (list, tuple)) else x


# (label, shape, tb path, torch path)
CASES = [
    ("add", "[16M] + [16M]", tb_add, torch_add),
    ("mul", "[16M] * [16M]", tb_mul, torch_mul),
    ("sum dim=1", "[4096,4096]", tb_sum_dim, torch_sum_dim),
    ("mean dim=1", "[4096,4096]", tb_mean_dim, torch_mean_dim),
    ("mm", "[1024,1024]@[1024,1024]", tb_mm, torch_mm),
    ("bmm", "[32,128,64]@[32,64,128]", tb_bmm, torch_bmm),
    ("conv2d 3x3 p1", "[8,64,56,56]*[64,64,3,3]", tb_conv, torch_conv),
    ("max_pool2d k3s2p1", "[8,64,112,112]", tb_maxpool, torch_maxpool),
    ("max_pool2d k2s2", "[32,16,32,32]", tb_maxpool_k2, torch_maxpool_k2),
    (
        "max_pool2d k2s2 backward",
        "[32,16,32,32]",
        tb_maxpool_k2_backward,
        torch_maxpool_k2_backward,
    ),
    ("softmax dim=1", "[1024,4096]", tb_softmax, torch_softmax),
    ("log_softmax dim=1", "[1024,4096]", tb_log_softmax, torch_log_softmax),
    ("layer_norm 768", "[4096,768]", tb_layer_norm, torch_layer_norm),
    ("gelu", "[16M]", tb_gelu, torch_gelu),
    ("silu", "[16M]", tb_silu, torch_silu),
    ("batch_norm train fwd", "[32,16,32,32]", tb_bn_train, torch_bn_train),
    ("batch_norm backward", "[32,16,32,32]", tb_bn_backward, torch_bn_backward),
    ("threshold_backward", "[32,16,32,32]", tb_threshold_backward, torch_threshold_backward),
    *_attention_cases(),
    *_linalg_cases(),
]


def _first(x):
    return x[0] if isinstance(x, (list, tuple)) else x


def check(tb_path, torch_path) -> str:
    """max |tb - torch| of the first output (a sanity check of what was timed, not a test)."""
    try:
        got = torch.from_dlpack(_first(tb_path()()))
        want = _first(torch_path()())
        if got.shape != want.shape:
            return f"shape {tuple(got.shape)} != {tuple(want.shape)}"
        err = (got.double() - want.double()).abs().max().item()
        return f"{err:.1e}"
    except Exception as e:
        return f"error: {type(e).__name__}"


def main() -> None:
    env_header("bench_kernels: tensorbridge kernels (tb.call) vs torch eager, float32", ARGS)
    print(f"tensorbridge table: {len(tb.ops())} ops")
    tracker = FallbackTracker()
    rows, ratios = [], []
    for label, shape, tb_path, torch_path in CASES:
        if ARGS.ns.only and ARGS.ns.only not in label:
            continue
        with tracker.path(label):
            t = measure_interleaved(
                [("torch", torch_path), ("tb", tb_path)],
                repeats=ARGS.repeats,
                target_s=ARGS.target_s,
                budget_s=BUDGET_S,
            )
            t_torch, t_tb = t["torch"], t["tb"]
            err = check(tb_path, torch_path) if not isinstance(t_tb, NA) else "-"
        r = ratio(t_torch, t_tb)
        ratios.append(r)
        rows.append(
            [
                label,
                shape,
                t_torch,
                fmt_median(t_torch),
                t_tb,
                fmt_median(t_tb),
                r,
                err,
                tracker.fallbacks_of(label),
            ]
        )
        print(f"  measured {label}", file=sys.stderr, flush=True)
    print_table(
        "per-op time, min of repeats (median); ratio = torch / tensorbridge (>= 1.00x: tb as fast or faster)",
        [
            "op",
            "shape",
            "torch min",
            "(median)",
            "tb min",
            "(median)",
            "torch/tb",
            "max|diff|",
            "tb fallbacks",
        ],
        rows,
        left=2,
    )
    g = geomean(ratios)
    print(
        f"geomean torch/tb over {sum(isinstance(r, float) for r in ratios)} measured ops: {fmt_ratio(g)}"
    )
    tracker.report()


if __name__ == "__main__":
    main()
