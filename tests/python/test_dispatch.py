"""The op table from Python: PyTorch's schemas, argument binding, the backend-legal set,
the fallback modes, Python and C++ user kernels, metrics and introspection."""

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch

import tensorbridge as tb

# Touching every torch.ops.aten overload leaves state behind in torch that later
# torch.compile runs trip over, so the schema sweeps run in their own interpreter.
_SCHEMA_SWEEP = """
import sys, torch, tensorbridge as tb
def torch_schema(op):
    ns, _, rest = op.partition("::")
    name, _, overload = rest.partition(".")
    return str(getattr(getattr(torch.ops, ns), name).__getattr__(overload or "default")._schema)
which = sys.argv[1]
if which == "registered":
    names = {o["op"] for o in tb.ops() if o["op"].startswith("aten::")} | set(tb.config.composites())
    assert len(names) >= 100, len(names)
    bad = [op for op in sorted(names) if tb.schema(op) != torch_schema(op)]
else:
    names = [n for n, _ in tb._C._aten_schema_names()]
    assert len(names) > 2000, len(names)
    bad = [n for n in names if tb._C._parse_schema(torch_schema(n)) != torch_schema(n)]
print(len(names), "checked;", "mismatched:", bad)
sys.exit(1 if bad else 0)
"""


@pytest.mark.parametrize("which", ["registered", "all"])
def test_schemas_equal_torchs(which):
    proc = subprocess.run(
        [sys.executable, "-c", _SCHEMA_SWEEP, which], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "mismatched: []" in proc.stdout


def test_keywords_defaults_and_type_errors():
    a = np.arange(6, dtype=np.float32)
    np.testing.assert_array_equal(tb.call("aten::add.Tensor", a, a, alpha=3).numpy(), a + 3 * a)
    np.testing.assert_array_equal(tb.call("aten::add.Tensor", a, a).numpy(), a + a)  # alpha=1
    with pytest.raises(TypeError, match="unexpected keyword argument 'beta'"):
        tb.call("aten::add.Tensor", a, a, beta=2)
    with pytest.raises(TypeError, match="missing required argument 'other'"):
        tb.call("aten::add.Tensor", a)
    with pytest.raises(TypeError, match="argument 'approximate' must be str"):
        tb.call("aten::gelu", a, approximate=3)


def test_narrowing_the_legal_set_decomposes_gelu():
    x = np.linspace(-3, 3, 101, dtype=np.float32)
    ref = torch.nn.functional.gelu(torch.from_numpy(x)).numpy()
    assert "aten::gelu" in tb.config.legal_ops
    try:
        tb.diagnostics.reset_metrics()
        whole = tb.call("aten::gelu", x).numpy()
        tb.config.decompose("aten::gelu")
        assert "aten::gelu" not in tb.config.legal_ops
        assert "decomposition" in tb.diagnostics.explain("aten::gelu")
        parts = tb.call("aten::gelu", x).numpy()
        m = tb.diagnostics.metrics()
        assert m["aten::gelu"]["kernel"] == 1 and m["aten::gelu"]["decomposition"] == 1
        assert m["aten::erf"]["calls"] >= 1  # the decomposition ran through the table
    finally:
        tb.config.reset_legal_ops()
    np.testing.assert_allclose(whole, ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(parts, ref, rtol=1e-5, atol=1e-6)
    assert "kernel" in tb.diagnostics.explain("aten::gelu")


def test_legal_ops_rejects_non_composites():
    with pytest.raises(ValueError, match="not composite ops"):
        tb.config.legal_ops = {"aten::mm"}


@pytest.mark.parametrize("var", ["TB_DECOMPOSE", "TENSORBRIDGE_DECOMPOSE"])
def test_decompose_environment_variable(var):
    """TB_DECOMPOSE, and the name the documentation gave it first."""
    code = "import tensorbridge as tb; print(sorted(set(tb.config.composites()) - tb.config.legal_ops))"
    env = {k: v for k, v in os.environ.items() if not k.endswith("_DECOMPOSE")}
    env[var] = "aten::gelu,aten::_softmax"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "aten::gelu" in out.stdout and "aten::_softmax" in out.stdout


def test_has_kernel_asks_the_table():
    assert tb._C.has_kernel("aten::mm")
    assert not tb._C.has_kernel("aten::special_airy_ai")  # the fallback serves it
    assert not tb._C.has_kernel("aten::no_such_op")
    tb.config.decompose("aten::gelu")  # a composite decomposed is no kernel of its own
    try:
        assert not tb._C.has_kernel("aten::gelu")
    finally:
        tb.config.reset_legal_ops()
    assert tb._C.has_kernel("aten::gelu") == tb.diagnostics.explain("aten::gelu").startswith(
        "aten::gelu on cpu: kernel"
    )


def test_fallback_modes():
    x = np.linspace(-2, 2, 7, dtype=np.float32)
    op = "aten::special_airy_ai"  # no tensorbridge kernel
    expected = torch.special.airy_ai(torch.from_numpy(x)).numpy()
    tb.diagnostics.reset_metrics()
    np.testing.assert_allclose(tb.call(op, x).numpy(), expected, rtol=1e-6)
    assert tb.diagnostics.metrics()[op]["fallback"] == 1
    try:
        tb.config.fallback = "warn"
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            tb.call(op, x)
            tb.call(op, x)
        assert len([m for m in w if op in str(m.message)]) <= 1
        tb.config.fallback = "error"
        with pytest.raises(NotImplementedError, match=op):
            tb.call(op, x)
    finally:
        tb.config.fallback = "allow"
    with pytest.raises(ValueError, match=r"config\.fallback"):
        tb.config.fallback = "sometimes"


def test_a_declined_call_takes_the_fallback_counted_and_raises_under_error():
    op = "aten::special_airy_ai"  # a Python kernel serving float32 and declining other dtypes

    @tb.register_kernel(op)
    def airy_f32(x):
        if x.dtype != "float32":
            raise tb.KernelDeclinedError(f"{op}: dtype {x.dtype} is not supported")
        return tb.from_dlpack(torch.full(tuple(x.shape), 7.0))  # tells the kernel apart

    x32 = np.linspace(-2, 2, 5, dtype=np.float32)
    x64 = x32.astype(np.float64)
    try:
        tb.diagnostics.reset_metrics()
        np.testing.assert_array_equal(tb.call(op, x32).numpy(), np.full(5, 7.0, np.float32))
        got = tb.call(op, x64).numpy()  # declined: torch's kernel serves it
        np.testing.assert_allclose(got, torch.special.airy_ai(torch.from_numpy(x64)).numpy())
        m = tb.diagnostics.metrics()[op]
        assert (m["calls"], m["kernel"], m["fallback"], m["declined"]) == (2, 1, 1, 1)
        tb.config.fallback = "warn"  # served as under "allow" (one warning per op and process)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            np.testing.assert_allclose(tb.call(op, x64).numpy(), got)
        tb.config.fallback = "error"
        with pytest.raises(tb.KernelDeclinedError, match=rf"{op}: dtype float64") as e:
            tb.call(op, x64)
        assert isinstance(e.value, NotImplementedError)
        m = tb.diagnostics.metrics()[op]
        assert (m["fallback"], m["declined"]) == (2, 2)  # the refused call did not fall back
    finally:
        tb.config.fallback = "allow"
        airy_f32.remove()


def test_a_builtin_kernel_declining_a_dtype_falls_back():
    op = "aten::im2col"  # no complex loop in tensorbridge; torch's CPU kernel has one
    x = torch.randn(1, 2, 4, 4, dtype=torch.complex64)
    args, kw = (x.numpy(), [2, 2], [1, 1], [0, 0], [1, 1]), {}
    tb.diagnostics.reset_metrics()
    got = tb.call(op, *args, **kw)
    torch.testing.assert_close(torch.from_dlpack(got), torch.ops.aten.im2col(x, *args[1:]))
    m = tb.diagnostics.metrics()[op]
    assert (m["kernel"], m["fallback"], m["declined"]) == (0, 1, 1)
    try:
        tb.config.fallback = "error"
        with pytest.raises(tb.KernelDeclinedError, match=rf"{op}.*complex64"):
            tb.call(op, *args, **kw)
    finally:
        tb.config.fallback = "allow"


def test_fallback_writes_in_place_into_our_memory():
    x = np.linspace(0, 1, 5, dtype=np.float32)
    before = x.copy()
    tb.call("aten::special_airy_ai.out", x.copy(), out=x)  # out= through the fallback
    np.testing.assert_allclose(
        x, torch.special.airy_ai(torch.from_numpy(before)).numpy(), rtol=1e-6
    )


def test_python_kernel_overrides_and_restores():
    x = np.array([-1.0, 2.0], np.float32)

    @tb.register_kernel("aten::relu")
    def fake_relu(a):
        assert isinstance(a, tb.Array)
        return tb.from_dlpack(np.full(a.shape, 7.0, np.float32))

    try:
        assert "python:" in tb.diagnostics.explain("aten::relu")
        np.testing.assert_array_equal(tb.call("aten::relu", x).numpy(), [7.0, 7.0])
    finally:
        fake_relu.remove()
    np.testing.assert_array_equal(tb.call("aten::relu", x).numpy(), [0.0, 2.0])
    assert "kernels/" in tb.diagnostics.explain("aten::relu")


def test_python_kernel_for_a_new_op():
    with tb.register_kernel(
        "mylib::scale",
        lambda x, k: tb.from_dlpack(x.numpy() * k),
        schema="mylib::scale(Tensor x, float k=2.0) -> Tensor",
    ):
        out = tb.call("mylib::scale", np.ones(3, np.float32))
        np.testing.assert_array_equal(out.numpy(), [2.0, 2.0, 2.0])
        assert tb.schema("mylib::scale") == "mylib::scale(Tensor x, float k=2.0) -> Tensor"


def test_cpp_kernel_library_registers_into_the_same_table(tmp_path):
    src = os.path.join(os.path.dirname(__file__), "plugin", "plugin.cc")
    lib = tmp_path / "libplugin.so"
    libdir = os.path.dirname(tb.cpp.get_library())
    cmd = [
        "g++",
        "-std=c++17",
        "-O1",
        "-shared",
        "-fPIC",
        src,
        f"-I{tb.cpp.get_include()}",
        f"-L{libdir}",
        "-ltensorbridge",
        f"-Wl,-rpath,{libdir}",
        "-o",
        str(lib),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    tb.cpp.load_library(str(lib))
    assert "plugin/plugin.cc" in tb.diagnostics.explain("plugin::triple")
    np.testing.assert_array_equal(tb.call("plugin::triple", np.ones(2, np.float32)).numpy(), [3, 3])


def test_metrics_report_and_profiling():
    tb.diagnostics.reset_metrics()
    tb.config.profiling = True
    try:
        tb.call("aten::mm", np.ones((8, 8), np.float32), np.ones((8, 8), np.float32))
    finally:
        tb.config.profiling = False
    m = tb.diagnostics.metrics()["aten::mm"]
    assert m["calls"] == 1 and m["kernel"] == 1 and m["time_ns"] > 0
    report = tb.diagnostics.metrics_report()
    assert "aten::mm" in report and "fallback" in report.splitlines()[0]
    tb.diagnostics.reset_metrics()
    assert tb.diagnostics.metrics() == {}
