"""Runs every example under examples/ in its short mode (``--quick``; demo.py as it is), each
in a process of its own with this package on the path; the C++ example is built with CMake
against this package through ``find_package(tensorbridge)``
(``tensorbridge.cpp.cmake_prefix_path``) and run."""

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest
from conftest import requires_jax

import tensorbridge as tb

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")

requires_transformers = pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None, reason="transformers is not installed"
)
requires_optax = pytest.mark.skipif(
    importlib.util.find_spec("optax") is None, reason="optax is not installed (extra 'test')"
)


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))


def run_example(name: str, *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, os.path.join(EXAMPLES, name), *args],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=600,
    )
    assert proc.returncode == 0, f"{name} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def test_every_example_has_a_test():
    scripts = sorted(f for f in os.listdir(EXAMPLES) if f.endswith(".py"))
    tested = {
        "demo.py",
        "train_numpy_weights.py",
        "jax_optax_training.py",
        "compile_transformers.py",
        "jax_jit_grad.py",
    }
    assert set(scripts) == tested


def test_demo():
    out = run_example("demo.py")  # the tour is short already (about 20 s of CPU)
    assert "All results checked against numpy / torch / JAX." in out


def test_train_numpy_weights():
    out = run_example("train_numpy_weights.py", "--quick")
    assert "5 Adam steps" in out and "numpy weights changed in place" in out


@requires_jax
@requires_optax
def test_jax_optax_training():
    out = run_example("jax_optax_training.py", "--quick")
    assert "gradients match torch autograd" in out and "0 host callbacks" in out


@requires_transformers
def test_compile_transformers():
    out = run_example("compile_transformers.py", "--quick")
    assert "forward plan" in out and "tensorbridge::matmul_epilogue" in out and "plans_built" in out


@requires_jax
def test_jax_jit_grad():
    out = run_example("jax_jit_grad.py", "--quick")
    assert "matches JAX's own" in out and "0 host callbacks" in out


def _cmake() -> str | None:
    here = os.path.join(os.path.dirname(sys.executable), "cmake")
    return here if os.path.exists(here) else shutil.which("cmake")


@pytest.mark.skipif(_cmake() is None, reason="CMake is not installed")
def test_cpp_example_against_the_package(tmp_path):
    cmake = _cmake()
    assert cmake is not None
    assert os.path.isfile(
        os.path.join(
            tb.cpp.cmake_prefix_path, "share", "cmake", "tensorbridge", "tensorbridgeConfig.cmake"
        )
    )
    build = tmp_path / "build"
    for cmd in (
        [
            cmake,
            "-S",
            os.path.join(EXAMPLES, "cpp"),
            "-B",
            str(build),
            f"-DCMAKE_PREFIX_PATH={tb.cpp.cmake_prefix_path}",
            "-DCMAKE_BUILD_TYPE=Release",
        ],
        [cmake, "--build", str(build)],
        [str(build / "consumer")],
    ):
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"{cmd}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert "consumer OK" in proc.stdout
