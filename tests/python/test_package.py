import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from conftest import requires_jax

import tensorbridge as tb


def test_version_comes_from_one_source():
    root = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
    with open(os.path.join(root, "cmake", "VERSION")) as f:
        assert tb.__version__ == f.read().strip()


def test_onednn_isa_is_capped_below_amx():
    info = tb.diagnostics.onednn_info()
    assert info["version"].startswith("2.")
    assert info["isa_capped"] is True
    assert "amx" not in info["effective_isa"]


def test_user_isa_choice_is_respected():
    code = "import tensorbridge as tb; i = tb.diagnostics.onednn_info(); print(i['isa_capped'], i['effective_isa'])"
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
    tb.diagnostics.reset_metrics()
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = tb.call("aten::add.Tensor", a, a, alpha=2)
    np.testing.assert_array_equal(out.numpy(), a + 2 * a)
    m = tb.diagnostics.metrics()["aten::add.Tensor"]
    assert m["calls"] == 1 and m["kernel"] == 1 and m["fallback"] == 0
    assert "aten::add.Tensor" in tb.diagnostics.metrics_report()
    assert "kernel" in tb.diagnostics.explain("aten::add.Tensor")
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


def _ffi_api_version(include_dir):
    """(major, minor) that an XLA FFI c_api.h declares."""
    import re

    with open(os.path.join(include_dir, "xla", "ffi", "api", "c_api.h")) as f:
        text = f.read()
    major = re.search(r"#define XLA_FFI_API_MAJOR (\d+)", text)
    minor = re.search(r"#define XLA_FFI_API_MINOR (\d+)", text)
    assert major and minor, f"no XLA_FFI_API_MAJOR / MINOR in {include_dir}"
    return int(major.group(1)), int(minor.group(1))


def test_ffi_handler_is_built_against_the_vendored_headers():
    root = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
    vendored = _ffi_api_version(os.path.join(root, "third_party", "xla_ffi"))
    assert tuple(tb._C._ffi_api_version) == vendored


@requires_jax
def test_vendored_ffi_headers_suit_the_installed_jaxlib():
    """jaxlib registers a handler of its own major API version whose minor version it knows
    (the headers it ships declare its own version)."""
    import jax.ffi

    root = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
    major, minor = _ffi_api_version(os.path.join(root, "third_party", "xla_ffi"))
    jax_major, jax_minor = _ffi_api_version(jax.ffi.include_dir())
    assert major == jax_major and minor <= jax_minor, (
        f"vendored XLA FFI API {major}.{minor}, jaxlib's {jax_major}.{jax_minor}: update "
        "third_party/xla_ffi (see its README)"
    )


@requires_jax
def test_a_refused_ffi_handler_sends_call_torch_to_the_callback(monkeypatch):
    """jaxlib refuses a handler built for an API version it does not support: call_torch then
    takes the host callback and says why, and jit_mode='ffi' raises."""
    import jax
    import jax.numpy as jnp
    import torch

    from tensorbridge import _jax_ffi

    def refuse(*args, **kwargs):
        raise RuntimeError("the handler's API version (0.3) is incompatible (test)")

    monkeypatch.setattr(_jax_ffi, "_registered", False)
    monkeypatch.setattr(_jax_ffi, "_register_error", None)
    monkeypatch.setattr(jax.ffi, "register_ffi_target", refuse)
    x = jnp.arange(4.0, dtype=jnp.float32)
    before = tb.diagnostics.call_torch_metrics()
    out = jax.jit(lambda a: tb.call_torch(lambda t: torch.sin(t) * 3, a))(x)
    np.testing.assert_allclose(np.asarray(out), np.sin(np.arange(4.0)) * 3, rtol=1e-6)
    after = tb.diagnostics.call_torch_metrics()
    assert after["ffi_runs"] == before["ffi_runs"]
    assert after["callback_runs"] == before["callback_runs"] + 1
    assert (
        "did not register the FFI handler, built for XLA FFI API 0."
        in (after["callback_reasons"][-1])
    )
    with pytest.raises(NotImplementedError, match="did not register the FFI handler"):
        jax.jit(lambda a: tb.call_torch(lambda t: torch.cos(t), a, jit_mode="ffi"))(x)


_V99_HANDLER = """
#include "xla/ffi/api/ffi.h"
namespace ffi = xla::ffi;
static ffi::Error Impl(ffi::AnyBuffer, ffi::Result<ffi::AnyBuffer>) { return ffi::Error::Success(); }
XLA_FFI_DEFINE_HANDLER_SYMBOL(Handler, Impl,
                              ffi::Ffi::Bind().Arg<ffi::AnyBuffer>().Ret<ffi::AnyBuffer>());
"""


@requires_jax
@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to build a test handler")
def test_jaxlib_refuses_a_handler_of_an_unknown_api_version(tmp_path, monkeypatch):
    """What the guard relies on, with jaxlib's real check: a handler compiled against the
    vendored headers with the minor API version raised to 99 is refused when registered, and
    call_torch takes the callback, naming both versions."""
    import ctypes

    import jax
    import jax.numpy as jnp

    from tensorbridge import _jax_ffi

    root = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
    api = tmp_path / "inc" / "xla" / "ffi" / "api"
    shutil.copytree(os.path.join(root, "third_party", "xla_ffi", "xla", "ffi", "api"), api)
    c_api = (api / "c_api.h").read_text()
    assert "#define XLA_FFI_API_MINOR " in c_api
    (api / "c_api.h").write_text(
        re.sub(r"#define XLA_FFI_API_MINOR \d+", "#define XLA_FFI_API_MINOR 99", c_api)
    )
    (tmp_path / "h.cc").write_text(_V99_HANDLER)
    lib_path = tmp_path / "libv99.so"
    cmd = ["g++", "-std=c++17", "-shared", "-fPIC", "-w", f"-I{tmp_path / 'inc'}"]
    proc = subprocess.run([*cmd, str(tmp_path / "h.cc"), "-o", str(lib_path)], capture_output=True)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    lib = ctypes.CDLL(str(lib_path))

    monkeypatch.setattr(_jax_ffi, "TARGET", "tensorbridge_plan_api_v99_test")
    monkeypatch.setattr(_jax_ffi, "_registered", False)
    monkeypatch.setattr(_jax_ffi, "_register_error", None)
    monkeypatch.setattr(_jax_ffi._C, "_ffi_handler", lambda: jax.ffi.pycapsule(lib.Handler))
    monkeypatch.setattr(_jax_ffi._C, "_ffi_api_version", (0, 99))
    x = jnp.arange(3.0, dtype=jnp.float32)
    before = tb.diagnostics.call_torch_metrics()
    out = jax.jit(lambda a: tb.call_torch(lambda t: t * 2 + 1, a))(x)
    np.testing.assert_allclose(np.asarray(out), [1.0, 3.0, 5.0])
    after = tb.diagnostics.call_torch_metrics()
    assert after["callback_runs"] == before["callback_runs"] + 1
    reason = after["callback_reasons"][-1]
    assert "built for XLA FFI API 0.99" in reason and "incompatible" in reason, reason


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("explain", "diagnostics.explain"),
        ("metrics", "diagnostics.metrics"),
        ("profile", "diagnostics.profile"),
        ("memory_stats", "diagnostics.memory_stats"),
        ("call_torch_metrics", "diagnostics.call_torch_metrics"),
        ("get_include", "cpp.get_include"),
        ("cmake_prefix_path", "cpp.cmake_prefix_path"),
    ],
)
def test_moved_names_still_resolve_and_warn(old, new):
    module, attr = new.split(".")
    with pytest.warns(DeprecationWarning, match=rf"tensorbridge\.{old} is now .*{attr}"):
        got = getattr(tb, old)
    assert got is getattr(getattr(tb, module), attr)
    assert old not in dir(tb) and old not in tb.__all__


def test_unknown_top_level_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        tb.nonexistent  # noqa: B018


@pytest.mark.parametrize("name", ["fusion", "profiling", "pointwise_fusion", "prepack"])
def test_boolean_settings_take_only_booleans(name):
    assert getattr(tb.config, name) is (name != "profiling")  # the defaults
    for bad in (1, "on"):
        with pytest.raises(ValueError, match=rf"config\.{name} must be True or False"):
            setattr(tb.config, name, bad)


def test_settings_live_in_config():
    with pytest.raises(ValueError, match=r"config\.host_cache_limit must be an int >= 0"):
        tb.config.host_cache_limit = -1
    limit = tb.config.host_cache_limit
    try:
        tb.config.host_cache_limit = 1 << 20
        assert tb.diagnostics.memory_stats()["cache_limit_bytes"] == 1 << 20
        assert tb.config.host_cache_limit == 1 << 20
    finally:
        tb.config.host_cache_limit = limit
    try:
        with pytest.warns(DeprecationWarning, match=r"config\.profiling = on"):
            tb.set_profiling(True)
        assert tb.config.profiling is True
    finally:
        tb.config.profiling = False


@pytest.mark.parametrize(("value", "want"), [("0", False), ("off", False), ("1", True)])
def test_plan_pass_settings_from_the_environment(value, want):
    code = "import tensorbridge as tb; print(tb.config.pointwise_fusion, tb.config.prepack)"
    env = dict(os.environ, TB_POINTWISE_FUSION=value, TB_PREPACK=value)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(want), str(want)]


def test_a_bad_boolean_environment_setting_names_the_variable():
    env = dict(os.environ, TB_PREPACK="maybe")
    out = subprocess.run(
        [sys.executable, "-c", "import tensorbridge"], env=env, capture_output=True, text=True
    )
    assert out.returncode != 0 and "TB_PREPACK must be one of" in out.stderr


@pytest.mark.parametrize(
    ("module", "flag", "setting"),
    [
        ("_compile", "fusion", "fusion"),
        ("_fuse", "pointwise", "pointwise_fusion"),
        ("_epilogue", "prepack", "prepack"),
    ],
)
def test_the_documented_module_flags_still_set_config(module, flag, setting):
    import importlib

    mod = importlib.import_module(f"tensorbridge.{module}")
    message = rf"tensorbridge\.{module}\.{flag} is now tensorbridge\.config\.{setting}"
    try:
        with pytest.warns(DeprecationWarning, match=message):
            setattr(mod, flag, False)
        assert getattr(tb.config, setting) is False
        with pytest.warns(DeprecationWarning, match=message):
            assert getattr(mod, flag) is False
    finally:
        setattr(tb.config, setting, True)
