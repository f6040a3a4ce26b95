"""What does it cost to cross the DLPack boundary, per tensor, into and out of tensorbridge?

Question: is ``tensorbridge.from_dlpack`` at least as cheap as the frameworks' own
``from_dlpack``, and how close does the C exchange API (DLPack 1.3,
``type(x).__dlpack_c_exchange_api__``) get to "free"?

Baselines, measured in the same run on the same inputs: ``torch.from_dlpack`` and
``numpy.from_dlpack``. Goals: our side of an import (ImportDLPack of the producer's tensor
and its drop, measured by the C++ benchmark ``tb_bench_dlpack_convert``) under 100 ns per
tensor; the ``__dlpack__`` path no slower than ``torch.from_dlpack`` (ratio <= 1.0).

The C-loop rows call one function on the same object n times from C (``map`` over
``itertools.repeat``, drained by a ``deque`` of length 0): no Python bytecode per tensor, so
what remains is the call itself and the function's work. They split a torch import into
tensorbridge's whole import, torch's ``__dlpack__`` export and torch's ``is_neg()`` (the
conj/neg-bit check: torch's table hands lazily conjugated or negated views out as plain
memory, so from_dlpack must ask; ``is_conj()`` too for complex dtypes), against the empty
loop. Our own side alone (ImportDLPack of a DLTensor and the drop of the tensor, the producer
left out) is ``BM_ImportDLPackAndDrop`` in the C++ benchmark ``tb_bench_dlpack_convert``
(benchmarks/bench_dlpack_convert.cc), which needs no Python.

Every figure is the minimum over interleaved repeats of a timeit loop, in ns per tensor: the
least disturbed run, the honest figure for a cost that does not depend on the data. Time is
this process's CPU time (time.process_time), which other processes on a shared machine do not
inflate; ``--wall`` measures wall-clock time instead.
Usage: python benchmarks/bench_dlpack.py [--quick] [--wall]
"""

from __future__ import annotations

import collections
import gc
import itertools
import os
import time
import timeit

import numpy as np
import torch

import tensorbridge as tb
from _bench_util import record_json
from tensorbridge import _C

try:
    import jax
    import jax.numpy as jnp
except ImportError:  # JAX is optional
    jax = None


def _parse_args():
    """--quick and --wall. This script times on its own loop rather than _bench_util's
    torch.utils.benchmark runner: its figures are CPU time per tensor (process_time), which
    other processes on a shared machine do not inflate, and half of its rows are loops run
    from C with no Python statement per call to time."""
    import argparse

    p = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer and shorter repeats")
    p.add_argument("--wall", action="store_true", help="wall-clock time instead of CPU time")
    return p.parse_args()


_ARGS = _parse_args()
QUICK = _ARGS.quick
WALL = _ARGS.wall
CLOCK = time.perf_counter if WALL else time.process_time
REPEATS = 3 if QUICK else 9
TARGET_S = 0.01 if QUICK else 0.05  # seconds of one repeat

# Inputs: small 2-d float32 tensors (the per-tensor cost does not depend on size: no copies).
A = np.ones((4, 8), np.float32)  # numpy: no exchange API, so the __dlpack__ path
T = torch.ones(4, 8)  # torch >= 2.10: the C exchange API
X = tb.from_dlpack(T)  # a tensorbridge.Array (aligned memory, so JAX can take it zero-copy)
J = jnp.ones((4, 8), jnp.float32) if jax else None


def python_loop(fn):
    """A measurement of fn(): returns a function that times one repeat (ns per call), with the
    loop count calibrated once, like timeit's autorange."""
    timer = timeit.Timer(fn, timer=CLOCK)
    number = 1
    while timer.timeit(number) < TARGET_S / 5:
        number *= 2
    number *= 5
    return lambda: timer.timeit(number) / number * 1e9


def c_loop(fn, obj):
    """A measurement of fn(obj) called n times from C (map over itertools.repeat, drained by
    a deque of length 0): no Python bytecode per tensor; ns per call."""
    n = 20_000 if QUICK else 100_000

    def run(count):
        collections.deque(map(fn, itertools.repeat(obj, count)), maxlen=0)

    run(n // 10)  # warm up
    timer = timeit.Timer(lambda: run(n), timer=CLOCK)
    return lambda: timer.timeit(1) / n * 1e9


def measure(paths) -> dict:
    """min over REPEATS of each path, the repeats interleaved (path 1, 2, ..., 1, 2, ...) so
    that a change of machine load hits every path alike."""
    timers = {p: p() for p in paths}
    best = {p: float("inf") for p in paths}
    gc.disable()
    try:
        for _ in range(REPEATS):
            for p, timer in timers.items():
                best[p] = min(best[p], timer())
    finally:
        gc.enable()
    return best


# ---- one function per measured path ----------------------------------------------------------
# Import into tensorbridge / the baselines, from numpy, torch and JAX inputs.


def tb_from_numpy():
    return python_loop(lambda: tb.from_dlpack(A))


def torch_from_numpy():
    return python_loop(lambda: torch.from_dlpack(A))


def numpy_from_numpy():
    return python_loop(lambda: np.from_dlpack(A))


def tb_from_torch():
    return python_loop(lambda: tb.from_dlpack(T))


def torch_from_torch():
    return python_loop(lambda: torch.from_dlpack(T))


def numpy_from_torch():
    return python_loop(lambda: np.from_dlpack(T))


def tb_from_jax():
    return python_loop(lambda: tb.from_dlpack(J))


def torch_from_jax():
    return python_loop(lambda: torch.from_dlpack(J))


def numpy_from_jax():
    return python_loop(lambda: np.from_dlpack(J))


def tb_from_torch_via_dlpack():  # the negotiation path, forced: torch capsule through __dlpack__
    return python_loop(lambda: tb.from_dlpack(T.__dlpack__(max_version=(1, 3))))


# The same imports called from C (no Python bytecode per tensor).


def c_empty_loop():  # the loop's own cost: a call of a builtin that does nothing
    return c_loop(id, T)


def c_from_dlpack_torch():
    return c_loop(tb.from_dlpack, T)


def c_from_dlpack_numpy():
    return c_loop(tb.from_dlpack, A)


def c_from_dlpack_array():
    return c_loop(tb.from_dlpack, X)


def c_torch_dunder_dlpack():
    return c_loop(torch.Tensor.__dlpack__, T)


def c_torch_bit_check():
    return c_loop(torch.Tensor.is_neg, T)


def c_torch_from_torch():
    return c_loop(torch.from_dlpack, T)


# Export: an Array into each framework, against that framework importing numpy / torch.


def torch_from_array():
    return python_loop(lambda: torch.from_dlpack(X))


def numpy_from_array():
    return python_loop(lambda: np.from_dlpack(X))


def jax_from_array():
    return python_loop(lambda: jax.dlpack.from_dlpack(X))


def jax_from_numpy():
    return python_loop(lambda: jax.dlpack.from_dlpack(A))


def jax_from_torch():
    return python_loop(lambda: jax.dlpack.from_dlpack(T))


def array_dunder_dlpack():
    return python_loop(lambda: X.__dlpack__(max_version=(1, 3)))


def numpy_dunder_dlpack():
    return python_loop(lambda: A.__dlpack__(max_version=(1, 3)))


def main() -> None:
    assert _C._import_path(T) == "exchange_api" and _C._import_path(A) == "dlpack"
    print(
        f"torch {torch.__version__}, numpy {np.__version__}, "
        f"jax {jax.__version__ if jax else '-'}, tensorbridge {tb.__version__}; "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"min of {REPEATS} repeats; ns per tensor ({'wall-clock' if WALL else 'CPU'} time); "
        "ratios against the baselines of the same input in this run"
    )

    sections = [
        (
            "import, numpy input",
            torch_from_numpy,
            numpy_from_numpy,
            [
                ("tb.from_dlpack(ndarray)        [__dlpack__ path]", tb_from_numpy),
                ("torch.from_dlpack(ndarray)", torch_from_numpy),
                ("numpy.from_dlpack(ndarray)", numpy_from_numpy),
            ],
        ),
        (
            "import, torch input",
            torch_from_torch,
            numpy_from_torch,
            [
                ("tb.from_dlpack(Tensor)         [C exchange API]", tb_from_torch),
                ("tb.from_dlpack(Tensor capsule) [__dlpack__ + capsule]", tb_from_torch_via_dlpack),
                ("torch.from_dlpack(Tensor)", torch_from_torch),
                ("numpy.from_dlpack(Tensor)", numpy_from_torch),
            ],
        ),
        (
            "called from C (no Python bytecode per tensor)",
            torch_from_torch,
            numpy_from_torch,
            [
                ("the loop alone: id(Tensor)", c_empty_loop),
                ("tb.from_dlpack(Tensor), whole import + Array", c_from_dlpack_torch),
                ("  torch's Tensor.is_neg() (the bit check's call)", c_torch_bit_check),
                ("  torch's Tensor.__dlpack__() (capsule export)", c_torch_dunder_dlpack),
                ("tb.from_dlpack(ndarray), whole import + Array", c_from_dlpack_numpy),
                ("tb.from_dlpack(Array), whole import + Array", c_from_dlpack_array),
                ("torch.from_dlpack(Tensor)", c_torch_from_torch),
            ],
        ),
        (
            "export an Array (baselines: numpy input)",
            torch_from_numpy,
            numpy_from_numpy,
            [
                ("torch.from_dlpack(Array)", torch_from_array),
                ("numpy.from_dlpack(Array)", numpy_from_array),
                ("Array.__dlpack__(max_version=(1, 3))", array_dunder_dlpack),
                ("ndarray.__dlpack__(max_version=(1, 3))", numpy_dunder_dlpack),
            ],
        ),
    ]
    if jax:
        sections.insert(
            2,
            (
                "import, JAX input",
                torch_from_jax,
                numpy_from_jax,
                [
                    ("tb.from_dlpack(jax.Array)      [__dlpack__ path]", tb_from_jax),
                    ("torch.from_dlpack(jax.Array)", torch_from_jax),
                    ("numpy.from_dlpack(jax.Array)", numpy_from_jax),
                ],
            ),
        )
        sections.append(
            (
                "export into JAX (baselines: numpy input)",
                torch_from_numpy,
                numpy_from_numpy,
                [
                    ("jax.dlpack.from_dlpack(Array)", jax_from_array),
                    ("jax.dlpack.from_dlpack(ndarray)", jax_from_numpy),
                    ("jax.dlpack.from_dlpack(Tensor)", jax_from_torch),
                ],
            )
        )
    paths = []
    for _, bt, bn, entries in sections:
        for p in [bt, bn] + [fn for _, fn in entries]:
            if p not in paths:
                paths.append(p)
    ns = measure(paths)
    rows = [
        (title, label, ns[fn], ns[bt], ns[bn])
        for title, bt, bn, entries in sections
        for label, fn in entries
    ]

    record_json(
        "DLPack import and export, ns per tensor",
        ["section", "path", "ns", "torch.from_dlpack ns", "numpy.from_dlpack ns"],
        [list(r) for r in rows],
    )
    width = max(len(r[1]) for r in rows)
    current = None
    for title, label, ns, bt, bn in rows:
        if title != current:
            current = title
            print(
                f"\n{title}  (baselines: torch.from_dlpack {bt:.0f} ns, "
                f"numpy.from_dlpack {bn:.0f} ns)"
            )
            print(f"  {'path':<{width}} {'ns/tensor':>10} {'/torch':>8} {'/numpy':>8}")
        print(f"  {label:<{width}} {ns:>10.1f} {ns / bt:>8.2f} {ns / bn:>8.2f}")

    get = {label.split("[")[0].strip(): ns for _, label, ns, _, _ in rows}
    loop = get["the loop alone: id(Tensor)"]
    exchange = get["tb.from_dlpack(Tensor), whole import + Array"] - loop
    exchange_array = get["tb.from_dlpack(Array), whole import + Array"] - loop
    torch_check = get["torch's Tensor.is_neg() (the bit check's call)"] - loop
    ratio_np = get["tb.from_dlpack(ndarray)"] / get["torch.from_dlpack(ndarray)"]
    ratio_t = get["tb.from_dlpack(Tensor capsule)"] / get["torch.from_dlpack(Tensor)"]
    print("\ngoals (our side of an import < 100 ns: BM_ImportDLPackAndDrop of")
    print("  tb_bench_dlpack_convert; the C-loop rows here less the loop alone, for reference)")
    print(
        f"  tb.from_dlpack(Tensor) from C:             {exchange:.1f} ns "
        f"(the Array object and torch's bit check included, is_neg() alone {torch_check:.1f} ns)"
    )
    print(f"  tb.from_dlpack(Array) from C:              {exchange_array:.1f} ns")
    print(
        f"  __dlpack__ path / torch.from_dlpack <= 1.0: numpy input {ratio_np:.2f}, "
        f"torch input {ratio_t:.2f} ({'met' if max(ratio_np, ratio_t) <= 1.0 else 'NOT met'})"
    )


if __name__ == "__main__":
    main()
