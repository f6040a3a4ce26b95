"""Smoke test of an installed tensorbridge (the wheel that `.ci/dev test` builds with build
isolation and installs into a fresh virtual environment).

Checks, in processes of their own: the package imports from the environment it was
installed into, with torch imported before it and after it; where CMake is installed,
examples/cpp builds against the installed package with ``find_package(tensorbridge)`` and
runs; `call_torch` inside `jax.jit` runs on the XLA FFI path
(`call_torch_metrics()["ffi_runs"] > 0`, no host callback) and matches JAX. Then prints the
time of `tanh(a @ b).sum()` (32x64 @ 64x16, float32) in `jax.jit` through `call_torch` (FFI
path and host callback) against the same function in pure JAX, each the fastest of several
runs, side by side.

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

TORCH_FIRST = """
import os, sys
import numpy as np
import torch
import tensorbridge as tb
here = os.path.realpath(tb.__file__)
assert here.startswith(os.path.realpath(sys.prefix) + os.sep), (here, sys.prefix)
print("tensorbridge", tb.__version__, "from", os.path.dirname(here))
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

# The FFI path, then the timing: the same function through call_torch on the FFI path, on the
# host callback (jit_mode="callback", what a build without the FFI handler runs) and in pure
# JAX, interleaved, each the fastest of `repeats` runs of `calls` calls.
FFI_PATH_AND_TIMING = """
import time
import jax, jax.numpy as jnp, numpy as np, torch
import tensorbridge as tb
rng = np.random.default_rng(0)
a = jnp.asarray(rng.standard_normal((32, 64), np.float32))
b = jnp.asarray(rng.standard_normal((64, 16), np.float32))
fn = lambda x, y: torch.tanh(x @ y).sum()
ffi = jax.jit(lambda a, b: tb.call_torch(fn, a, b))
got = ffi(a, b).block_until_ready()
want = jnp.tanh(a @ b).sum()
np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-4)
m = tb.diagnostics.call_torch_metrics()
assert m["ffi_runs"] > 0 and m["callback_runs"] == 0, m
print("call_torch under jax.jit on the FFI path: ok", {{k: m[k] for k in ("ffi_plans", "ffi_runs")}})

callback = jax.jit(lambda a, b: tb.call_torch(fn, a, b, jit_mode="callback"))
pure = jax.jit(lambda a, b: jnp.tanh(a @ b).sum())
calls, repeats = {calls}, {repeats}
fns = {{"call_torch (FFI)": ffi, "call_torch (callback)": callback, "pure JAX": pure}}
best = {{k: float("inf") for k in fns}}
for f in fns.values():
    f(a, b).block_until_ready()
for _ in range(repeats):
    for name, f in fns.items():
        t0 = time.perf_counter()
        for _ in range(calls):
            out = f(a, b)
        out.block_until_ready()
        best[name] = min(best[name], (time.perf_counter() - t0) / calls)
jax_t = best["pure JAX"]
print("tanh(a @ b).sum(), 32x64 @ 64x16 float32, in jax.jit (fastest of", repeats, "runs of",
      calls, "calls):")
for name, t in best.items():
    print(f"  {{name:22s}} {{t * 1e6:8.1f}} us  {{t / jax_t:6.2f}}x pure JAX")
"""


def run(code: str) -> None:
    subprocess.run([sys.executable, "-c", textwrap.dedent(code)], check=True)


def build_cpp_example(cmake: str | None) -> None:
    """examples/cpp against the installed package (tensorbridge.cpp.cmake_prefix_path)."""
    if cmake is None:
        print("C++ example: skipped, CMake is not installed")
        return
    prefix = subprocess.run(
        [sys.executable, "-c", "import tensorbridge; print(tensorbridge.cpp.cmake_prefix_path)"],
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
    run(TORCH_FIRST)
    run(TORCH_LAST)
    build_cpp_example(args.cmake)
    calls, repeats = (200, 5) if args.quick else (1000, 10)
    run(FFI_PATH_AND_TIMING.format(calls=calls, repeats=repeats))


if __name__ == "__main__":
    main()
