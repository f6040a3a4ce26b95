"""torch bundles its own oneDNN (3.x), OpenMP runtime and LAPACK; tensorbridge links Debian's
oneDNN 2.6, the system OpenMP and OpenBLAS. Whatever is imported first, both must compute correctly in one
process. Each order runs in a fresh interpreter."""

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import math
    import sys
    order = sys.argv[1]
    if order == "torch-first":
        import torch
        import tensorbridge as tb
    else:
        import tensorbridge as tb
        import torch
    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 48)).astype(np.float32)
    b = rng.standard_normal((48, 32)).astype(np.float32)

    # oneDNN matmul through tensorbridge, on numpy memory.
    mm = tb.call("aten::mm", a, b).numpy()
    np.testing.assert_allclose(mm, a @ b, rtol=1e-4, atol=1e-4)

    # oneDNN eltwise through tensorbridge.
    relu = tb.call("aten::relu", a).numpy()
    np.testing.assert_array_equal(relu, np.maximum(a, 0))
    gelu = tb.call("aten::gelu", a, approximate="none").numpy()
    ref = 0.5 * a * (1 + np.vectorize(math.erf)(a / math.sqrt(2)))
    np.testing.assert_allclose(gelu, ref, rtol=1e-5, atol=1e-5)

    # bf16 matmul (the AMX path that crashes unless the ISA is capped).
    ta, tb16 = torch.from_numpy(a).bfloat16(), torch.from_numpy(b).bfloat16()
    out = torch.from_dlpack(tb.call("aten::mm", ta, tb16)).float()
    np.testing.assert_allclose(out.numpy(), (ta.float() @ tb16.float()).numpy(), rtol=2e-2, atol=2e-1)

    # torch's own oneDNN path (mkldnn conv2d) still correct beside ours.
    x = torch.from_numpy(rng.standard_normal((1, 3, 8, 8)).astype(np.float32))
    w = torch.from_numpy(rng.standard_normal((4, 3, 3, 3)).astype(np.float32))
    conv = torch.nn.functional.conv2d(x, w)
    conv_ref = torch.nn.functional.conv2d(x.double(), w.double()).float()
    np.testing.assert_allclose(conv.numpy(), conv_ref.numpy(), rtol=1e-4, atol=1e-4)

    # LAPACK: ours (OpenBLAS) and torch's (inside libtorch_cpu, whose LAPACK symbols are
    # exported too), each correct whichever library loaded first; OpenBLAS's threads beside
    # torch's OpenMP ones.
    s = a.T @ a + 48 * np.eye(48, dtype=np.float32)
    chol = torch.from_dlpack(tb.call("aten::linalg_cholesky_ex", s)[0]).numpy()
    np.testing.assert_allclose(chol @ chol.T, s, rtol=1e-4, atol=1e-3)
    sv = torch.from_dlpack(tb.call("aten::_linalg_svd", a, False, False)[1]).numpy()
    np.testing.assert_allclose(sv, np.linalg.svd(a.astype(np.float64), compute_uv=False), rtol=1e-4)
    tinv = torch.linalg.inv(torch.from_numpy(s)).numpy()
    np.testing.assert_allclose(tinv @ s, np.eye(48), atol=1e-4)
    print("ok", order, tb.diagnostics.onednn_info()["effective_isa"])
    """
)


@pytest.mark.parametrize("order", ["torch-first", "tensorbridge-first"])
def test_import_order_gives_correct_onednn_results(order):
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, order], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert proc.stdout.startswith(f"ok {order}")
