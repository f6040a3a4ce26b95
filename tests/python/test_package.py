import os
import subprocess
import sys

import numpy as np
import pytest

import tensorbridge as tb


def test_version_comes_from_one_source():
    root = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
    with open(os.path.join(root, "cmake", "VERSION")) as f:
        assert tb.__version__ == f.read().strip()


def test_onednn_isa_is_capped_below_amx():
    info = tb.onednn_info()
    assert info["version"].startswith("2.")
    assert info["isa_capped"] is True
    assert "amx" not in info["effective_isa"]


def test_user_isa_choice_is_respected():
    code = "import tensorbridge as tb; i = tb.onednn_info(); print(i['isa_capped'], i['effective_isa'])"
    env = dict(os.environ, ONEDNN_MAX_CPU_ISA="AVX2")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "avx2"]


def test_bf16_matmul_does_not_crash_and_is_correct():
    torch = pytest.importorskip("torch")
    a = torch.randn(128, 64).bfloat16()
    b = torch.randn(64, 96).bfloat16()
    out = torch.from_dlpack(tb.call("aten::mm", a, b))
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), a.float() @ b.float(), rtol=2e-2, atol=3e-1)


def test_call_runs_through_the_table_and_counts():
    tb.reset_metrics()
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = tb.call("aten::add.Tensor", a, a, alpha=2)
    np.testing.assert_array_equal(out.numpy(), a + 2 * a)
    m = tb.metrics()["aten::add.Tensor"]
    assert m["calls"] == 1 and m["kernel"] == 1 and m["fallback"] == 0
    assert "aten::add.Tensor" in tb.metrics_report()
    assert "kernel" in tb.explain("aten::add.Tensor")
    assert any(o["op"] == "aten::mm" for o in tb.ops())


def test_unknown_op_is_a_clear_error():
    with pytest.raises(NotImplementedError, match="aten::not_an_op"):
        tb.call("aten::not_an_op", np.zeros(2, np.float32))


def test_kernel_errors_become_python_exceptions():
    a = np.zeros((2, 3), np.float32)
    with pytest.raises(ValueError, match=r"aten::mm.*\[2, 3\].*\[2, 3\]"):
        tb.call("aten::mm", a, a)
    with pytest.raises(TypeError, match="aten::mm: missing required argument 'mat2'"):
        tb.call("aten::mm", a)
