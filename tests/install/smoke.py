"""Smoke test of an installed tensorbridge (the wheel that `.ci/dev test` builds with build
isolation and installs into a fresh virtual environment).

Checks, each in a process of its own: the package imports from the environment it was
installed into, with torch imported before it and after it; `call_torch` inside `jax.jit`
runs on the XLA FFI path (`call_torch_metrics()["ffi_runs"] > 0`, no host callback) and
matches JAX; where CMake is installed, examples/cpp builds against the installed package
with ``find_package(tensorbridge)`` and runs. Then prints the time of `tanh(a @ b).sum()` (32x64 @ 64x16, float32) in
`jax.jit` through `call_torch` against the same function in pure JAX, each the fastest of
several runs, measured side by side.

Usage: python tests/install/smoke.py [--quick] [--cmake PATH]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHECK_LOCATION = """
import os, sys
import tensorbridge as tb
here = os.path.realpath(tb.__file__)
assert here.startswith(os.path.realpath(sys.prefix) + os.sep), (here, sys.prefix)
print("tensorbridge", tb.__version__, "from", os.path.dirname(here))
"""

TORCH_FIRST = """
import numpy as np
import torch
import tensorbridge as tb
a = np.arange(6, dtype=np.float32).reshape(2, 3)
out = torch.from_dlpack(tb.call("aten::mm", a, np.ones((3, 2), np.float32)))
assert out.tolist() == [[3.0, 3.0], [12.0, 12.0]], out
print("torch imported first: ok")
"""

TORCH_LAST = """
import numpy as np
import tensorbridge as tb
import torch
t = tb.wrap(np.arange(4, dtype=np.float32))
assert float((t * 2).sum()) == 12.0
assert float(torch.tanh(torch.zeros(2)).sum()) == 0.0
print("torch imported last: ok")
"""

FFI_PATH = """
import jax, jax.numpy as jnp, numpy as np, torch
import tensorbridge as tb
rng = np.random.default_rng(0)
a = jnp.asarray(rng.standard_normal((32, 64), np.float32))
b = jnp.asarray(rng.standard_normal((64, 16), np.float32))
f = jax.jit(lambda a, b: tb.call_torch(lambda x, y: torch.tanh(x @ y).sum(), a, b))
got = f(a, b).block_until_ready()
want = jnp.tanh(a @ b).sum()
np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-4)
m = tb.call_torch_metrics()
assert m["ffi_runs"] > 0 and m["callback_runs"] == 0, m
print("call_torch under jax.jit on the FFI path: ok", {k: m[k] for k in ("ffi_plans", "ffi_runs")})
"""

TIMING = """
import time
import jax, jax.numpy as jnp, numpy as np, torch
import tensorbridge as tb
rng = np.random.default_rng(0)
a = jnp.asarray(rng.standard_normal((32, 64), np.float32))
b = jnp.asarray(rng.standard_normal((64, 16), np.float32))
bridged = jax.jit(lambda a, b: tb.call_torch(lambda x, y: torch.tanh(x @ y).sum(), a, b))
pure = jax.jit(lambda a, b: jnp.tanh(a @ b).sum())
calls, repeats = {calls}, {repeats}
best = {{"call_torch": float("inf"), "jax": float("inf")}}
for f in (bridged, pure):
    f(a, b).block_until_ready()
for _ in range(repeats):
    for name, f in (("call_torch", bridged), ("jax", pure)):
        t0 = time.perf_counter()
        for _ in range(calls):
            out = f(a, b)
        out.block_until_ready()
        best[name] = min(best[name], (time.perf_counter() - t0) / calls)
m = tb.call_torch_metrics()
assert m["callback_runs"] == 0, m
us = {{k: v * 1e6 for k, v in best.items()}}
print(f"tanh(a @ b).sum() 32x64 @ 64x16 float32 in jax.jit: call_torch {{us['call_torch']:.1f}} us, "
      f"pure JAX {{us['jax']:.1f}} us, ratio {{best['call_torch'] / best['jax']:.2f}}x "
      f"(fastest of {{repeats}} runs of {{calls}} calls)")
"""


def run(code: str) -> None:
    subprocess.run([sys.executable, "-c", textwrap.dedent(code)], check=True)


def build_cpp_example(cmake: str | None) -> None:
    """examples/cpp against the installed package (tensorbridge.cmake_prefix_path)."""
    if cmake is None:
        print("C++ example: skipped, CMake is not installed")
        return
    prefix = subprocess.run(
        [sys.executable, "-c", "import tensorbridge; print(tensorbridge.cmake_prefix_path)"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    with tempfile.TemporaryDirectory() as build:
        for cmd in (
            [
                cmake,
                "-S",
                os.path.join(ROOT, "examples", "cpp"),
                "-B",
                build,
                f"-DCMAKE_PREFIX_PATH={prefix}",
            ],
            [cmake, "--build", build],
        ):
            subprocess.run(cmd, check=True, capture_output=True)
        subprocess.run([os.path.join(build, "consumer")], check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer timing runs")
    parser.add_argument("--cmake", default=shutil.which("cmake"), help="the cmake to build with")
    args = parser.parse_args()
    run(CHECK_LOCATION)
    run(TORCH_FIRST)
    run(TORCH_LAST)
    run(FFI_PATH)
    build_cpp_example(args.cmake)
    calls, repeats = (200, 5) if args.quick else (1000, 10)
    run(TIMING.format(calls=calls, repeats=repeats))


if __name__ == "__main__":
    main()
