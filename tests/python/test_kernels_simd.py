"""The ISA-dispatched row loops (kernels/cpu/simd.cc) against torch, and across ISA versions.

The library builds its hot float loops for SSE2, AVX2 and AVX-512 and picks one at first use;
TB_MAX_CPU_ISA caps the choice. Each version must give the same bits (the loops are written
lane-wise, with no fused multiply-add), and the results must match torch / a float64 reference.
A child process per cap computes the outputs; the parent compares them.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import tensorbridge as tb

# Kernel tests: an op the table lost raises rather than running torch's own kernel.
pytestmark = pytest.mark.usefixtures("no_fallback")

CHILD = r"""
import sys
import numpy as np
import tensorbridge as tb

rng = np.random.default_rng(7)
outs = []

def arr(x):
    return np.asarray(__import__("torch").from_dlpack(x))

for dt in (np.float32, np.float64):
    for shape in [(3, 1), (5, 17), (4, 1031), (2, 70001), (9, 4096)]:
        x = rng.standard_normal(shape).astype(dt)
        outs.append(arr(tb.call("aten::sum.dim_IntList", tb.from_dlpack(x), [1])))
        outs.append(arr(tb.call("aten::mean.dim", tb.from_dlpack(x), [1])))
for shape in [(6, 768), (3, 5), (2, 3001)]:
    n = shape[-1]
    x = (rng.standard_normal(shape) * 3 + 1).astype(np.float32)
    w, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    fw = tb.call("aten::native_layer_norm", tb.from_dlpack(x), [n], tb.from_dlpack(w),
                 tb.from_dlpack(b), 1e-5)
    outs += [arr(r) for r in fw]
    # its backward (row kernel: double-lane sums, float column sums), with and without weight
    dy = rng.standard_normal(shape).astype(np.float32)
    for wb in ((tb.from_dlpack(w), tb.from_dlpack(b)), (None, None)):
        bw = tb.call("aten::native_layer_norm_backward", tb.from_dlpack(dy), tb.from_dlpack(x),
                     [n], fw[1], fw[2], *wb, [True, True, True])
        outs += [arr(r) for r in bw]
x = rng.standard_normal((2, 5, 7, 9)).astype(np.float32)
p = [rng.random(5, dtype=np.float32) for _ in range(4)]
outs.append(arr(tb.call("aten::native_batch_norm", tb.from_dlpack(x),
                        *[tb.from_dlpack(v) for v in p], False, 0.1, 1e-5)[0]))
# batch norm training statistics and backward (double-lane row sums), threshold_backward
for dt in (np.float32, np.float64):
    for shape in [(3, 4, 37), (2, 3, 16, 33), (8, 5)]:
        x = (rng.standard_normal(shape) * 2 + 3).astype(dt)
        dy = rng.standard_normal(shape).astype(dt)
        c = shape[1]
        w, b, rm, rv = (rng.random(c).astype(dt) + 0.5 for _ in range(4))
        fw = tb.call("aten::_native_batch_norm_legit_functional", tb.from_dlpack(x),
                     tb.from_dlpack(w), tb.from_dlpack(b), tb.from_dlpack(rm),
                     tb.from_dlpack(rv), True, 0.1, 1e-5)
        outs += [arr(r) for r in fw]
        bw = tb.call("aten::native_batch_norm_backward", tb.from_dlpack(dy), tb.from_dlpack(x),
                     tb.from_dlpack(w), None, None, fw[1], fw[2], True, 1e-5, [True] * 3)
        outs += [arr(r) for r in bw]
        outs.append(arr(tb.call("aten::threshold_backward", tb.from_dlpack(dy),
                                tb.from_dlpack(x), 3.0)))
np.savez(sys.argv[1], *outs)
"""


def _run(cap: str, path: str) -> list[np.ndarray]:
    env = dict(os.environ, TB_MAX_CPU_ISA=cap)
    subprocess.run([sys.executable, "-c", CHILD, path], check=True, env=env, timeout=300)
    with np.load(path) as f:
        return [f[k] for k in sorted(f.files, key=lambda k: int(k.split("_")[1]))]


def test_isa_versions_give_the_same_bits(tmp_path):
    runs = {cap: _run(cap, str(tmp_path / f"{cap}.npz")) for cap in ("sse2", "avx2", "avx512")}
    base = runs["sse2"]
    assert len(base) == 2 * 5 * 2 + 3 * (3 + 2 * 3) + 1 + 2 * 3 * (5 + 3 + 1)
    for cap, outs in runs.items():
        for i, (a, b) in enumerate(zip(base, outs, strict=True)):
            assert a.dtype == b.dtype and a.shape == b.shape, (cap, i)
            assert a.tobytes() == b.tobytes(), f"output {i} differs between sse2 and {cap}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n", [1, 15, 16, 17, 1024, 1025, 4096, 100003])
def test_row_sum_accuracy(dtype, n):
    # Pairwise lanes: error within a few ulps of sum(|x|), as a float64 reference shows.
    x = torch.randn(3, n, dtype=dtype)
    got = torch.from_dlpack(tb.call("aten::sum.dim_IntList", tb.from_dlpack(x), [1]))
    ref = x.double().sum(1)
    bound = 8 * torch.finfo(dtype).eps * x.double().abs().sum(1) + torch.finfo(dtype).tiny
    assert ((got.double() - ref).abs() <= bound).all()
    mean = torch.from_dlpack(tb.call("aten::mean.dim", tb.from_dlpack(x), [1]))
    torch.testing.assert_close(mean, x.mean(1), atol=8 * torch.finfo(dtype).eps, rtol=1e-5)


@pytest.mark.parametrize("shape", [(4, 768), (3, 1), (2, 17), (2, 5000)])
@pytest.mark.parametrize("affine", [(True, True), (True, False), (False, True), (False, False)])
def test_layer_norm_float32_row_kernel(shape, affine):
    n = shape[-1]
    x = torch.randn(shape) * 4 + 2
    w = torch.randn(n) if affine[0] else None
    b = torch.randn(n) if affine[1] else None
    got = tb.call(
        "aten::native_layer_norm",
        tb.from_dlpack(x),
        [n],
        None if w is None else tb.from_dlpack(w),
        None if b is None else tb.from_dlpack(b),
        1e-5,
    )
    want = torch.native_layer_norm(x, [n], w, b, 1e-5)
    for g, t in zip(got, want, strict=True):
        torch.testing.assert_close(torch.from_dlpack(g), t)
    torch.testing.assert_close(torch.from_dlpack(got[0]), F.layer_norm(x, [n], w, b, 1e-5))
