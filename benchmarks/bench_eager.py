"""What does one eager op cost through ``tensorbridge.Tensor``, next to plain torch and torchax?

Question: when a model's code calls torch functions (``torch.add(a, b)``, ``a @ b``, ...) on
``tensorbridge.Tensor``s (``tb.wrap`` of numpy arrays), how much time does each op take, from
tiny tensors (where per-op overhead dominates: ``__torch_dispatch__``, argument unwrapping,
the table call, wrapping the result) to large ones (where the kernel dominates)?

Baselines, measured in the same run on the same values: plain torch eager on torch tensors
(the floor), and torchax in eager mode (torch ops on ``torchax.tensor.Tensor``s inside
``torchax.default_env()``, each op run by JAX on the CPU; its time includes
``block_until_ready`` on the result, since JAX dispatches asynchronously). Ops: add, mul,
matmul, relu, sum (full reduction) on 4x4, 64x64 and 1024x1024 float32.
torch, tensorbridge and torchax (with the environment entered per op) are timed in
alternating repeats; torchax with the environment entered once is timed right after.
Ratios on min-of-repeats: tb/torch (1.00x = no overhead over torch; higher = slower) and
torchax/tb (> 1.00x: tensorbridge faster than torchax).

``--breakdown`` instead splits one 4x4 add and one 4x4 matmul into the steps of the path, from
the stage timers of python/src/eager.cc (``_C._eager_timing``) and the table's kernel timer
(``_C.set_profiling``), beside torch eager and a do-nothing wrapper subclass (torch's own cost
of dispatching into ``__torch_dispatch__``) measured in the same run. Per window of calls the
timers are summed and divided by the calls; the window with the least total time is shown.

Usage: python benchmarks/bench_eager.py [--quick] [--repeats N] [--threads N] [--breakdown]
"""

from __future__ import annotations

import sys
import time

import numpy as np
import torch

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
    try_measure,
)
from _torchax import import_torchax
from tensorbridge import _C

ARGS = parse_args(
    __doc__,
    full_repeats=150,
    quick_repeats=60,
    full_target_s=0.001,
    quick_target_s=0.001,
    extra=lambda p: p.add_argument(
        "--breakdown", action="store_true", help="per-step time of one 4x4 add and matmul"
    ),
)
# Many ~1 ms windows: the minimum of short windows is the least disturbed on a shared machine.
# Per group of peers, repeating stops after BUDGET_S seconds (min 3 repeats).
BUDGET_S = 1.0 if ARGS.quick else 2.5
SIZES = [4, 64, 1024]
OPS = ["add", "mul", "matmul", "relu", "sum"]
RNG = np.random.default_rng(0)
INPUTS = {
    n: (
        RNG.standard_normal((n, n), dtype=np.float32),
        RNG.standard_normal((n, n), dtype=np.float32),
    )
    for n in SIZES
}

TORCHAX, TX_ENV, TX_NOTE = import_torchax()


def _op(name):
    return {
        "add": lambda a, b: torch.add(a, b),
        "mul": lambda a, b: torch.mul(a, b),
        "matmul": lambda a, b: torch.matmul(a, b),
        "relu": lambda a, b: torch.relu(a),
        "sum": lambda a, b: torch.sum(a),
    }[name]


# ---- one function per measured path: (op, n) -> the zero-argument callable to time ----------


def torch_eager(op: str, n: int):
    a, b = (torch.from_numpy(x.copy()) for x in INPUTS[n])
    f = _op(op)
    return lambda: f(a, b)


def tensorbridge_tensor(op: str, n: int):
    a, b = (tb.wrap(x.copy()) for x in INPUTS[n])
    f = _op(op)
    return lambda: f(a, b)


def torchax_eager(op: str, n: int):
    if TORCHAX is None:
        return NA(f"torchax unavailable: {TX_NOTE}")
    import jax.numpy as jnp

    a, b = (TORCHAX.tensor.Tensor(jnp.asarray(x), TX_ENV) for x in INPUTS[n])
    f = _op(op)

    def run():
        # Ops on torchax tensors only run inside the environment; JAX is asynchronous, so
        # wait for the result. Entering the environment is part of each call here; the
        # torchax(g) column enters it once (like `torchax.enable_globally()`).
        with TX_ENV:
            return f(a, b).jax().block_until_ready()

    return run


def torchax_eager_global(op: str, n: int):
    """Same as torchax_eager but with the environment entered once around the whole timing
    (like `torchax.enable_globally()`); measured by main() inside `with TX_ENV`."""
    if TORCHAX is None:
        return NA(f"torchax unavailable: {TX_NOTE}")
    import jax.numpy as jnp

    a, b = (TORCHAX.tensor.Tensor(jnp.asarray(x), TX_ENV) for x in INPUTS[n])
    f = _op(op)
    return lambda: f(a, b).jax().block_until_ready()


def _check(op, n) -> str:
    try:
        want = torch_eager(op, n)()
        got = tb.to_torch(tensorbridge_tensor(op, n)())
        tol = 1e-3 * max(1.0, want.abs().max().item())
        return "ok" if torch.allclose(got, want, atol=tol, rtol=1e-4) else "MISMATCH"
    except Exception as e:
        return f"error: {type(e).__name__}"


def main() -> None:
    env_header(
        "bench_eager: per-op eager time, torch vs tensorbridge.Tensor vs torchax",
        ARGS,
        torchax_note=TX_NOTE,
    )
    tracker = FallbackTracker()
    kw = dict(repeats=ARGS.repeats, target_s=ARGS.target_s, budget_s=BUDGET_S)
    rows = []
    r_tb_torch, r_tx_tb, r_txg_tb = [], [], []
    for n in SIZES:
        for op in OPS:
            label = f"{op} {n}x{n}"
            with tracker.path(label):
                t = measure_interleaved(
                    [
                        ("torch", lambda op=op, n=n: torch_eager(op, n)),
                        ("tb", lambda op=op, n=n: tensorbridge_tensor(op, n)),
                        ("torchax", lambda op=op, n=n: torchax_eager(op, n)),
                    ],
                    **kw,
                )
                ok = _check(op, n) if not isinstance(t["tb"], NA) else "-"
            t_torch, t_tb, t_tx = t["torch"], t["tb"], t["torchax"]
            # The environment stays entered while this variant is timed, so it cannot take
            # turns with the others (torch ops on plain tensors would run under its modes).
            if TX_ENV is not None:
                with TX_ENV:
                    t_txg = try_measure(lambda op=op, n=n: torchax_eager_global(op, n), **kw)
            else:
                t_txg = NA(f"torchax unavailable: {TX_NOTE}")
            a, b, c = ratio(t_tb, t_torch), ratio(t_tx, t_tb), ratio(t_txg, t_tb)
            r_tb_torch.append(a)
            r_tx_tb.append(b)
            r_txg_tb.append(c)
            rows.append(
                [
                    label,
                    t_torch,
                    t_tb,
                    fmt_median(t_tb),
                    t_tx,
                    t_txg,
                    a,
                    b,
                    c,
                    ok,
                    tracker.fallbacks_of(label),
                ]
            )
            print(f"  measured {label}", file=sys.stderr, flush=True)
    print_table(
        "per-op time, min of repeats; tb = tensorbridge.Tensor; torchax = eager, `with env` per op; "
        "torchax(g) = env entered once",
        [
            "op",
            "torch",
            "tb",
            "(tb median)",
            "torchax",
            "torchax(g)",
            "tb/torch",
            "torchax/tb",
            "torchax(g)/tb",
            "tb result",
            "tb fallbacks",
        ],
        rows,
    )
    print(
        f"geomean tb/torch: {fmt_ratio(geomean(r_tb_torch))} (lower is better for tb; 1.00x = parity)"
    )
    print(
        f"geomean torchax/tb: {fmt_ratio(geomean(r_tx_tb))}, torchax(g)/tb: {fmt_ratio(geomean(r_txg_tb))} "
        "(> 1.00x: tb faster)"
    )
    for n in SIZES:
        sub = [r for r, row in zip(r_tb_torch, rows, strict=True) if row[0].endswith(f" {n}x{n}")]
        print(f"  geomean tb/torch at {n}x{n}: {fmt_ratio(geomean(sub))}")
    tracker.report()


# ---- --breakdown ------------------------------------------------------------------------------


class _NoOp(torch.Tensor):
    """A wrapper subclass whose __torch_dispatch__ returns a prepared result: what torch itself
    spends to reach a Python __torch_dispatch__ and come back."""

    @staticmethod
    def __new__(cls):
        return torch.Tensor._make_wrapper_subclass(cls, (4, 4), dtype=torch.float32)

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return _NOOP_RESULT


_NOOP_RESULT = None


def _window(fn, calls: int) -> float:
    t0 = time.perf_counter_ns()
    for _ in range(calls):
        fn()
    return (time.perf_counter_ns() - t0) / calls


def _timed_window(fn, calls: int) -> dict:
    """One window of `calls` calls of `fn` with the stage and kernel timers on: ns per call."""
    _C._eager_timing(True)
    _C.reset_metrics()
    _C.set_profiling(True)
    wall = _window(fn, calls)
    stages = _C._eager_timing(False)
    _C.set_profiling(False)
    kernel = sum(m["time_ns"] for m in tb.diagnostics.metrics().values())
    out = {k: v / calls for k, v in stages.items() if k != "ops"}
    out.update(call=wall, kernel=kernel / calls, ops=stages["ops"] / calls)
    return out


def breakdown() -> None:
    global _NOOP_RESULT
    env_header(
        "bench_eager --breakdown: one 4x4 op through tensorbridge.Tensor, step by step", ARGS
    )
    _NOOP_RESULT = _NoOp()
    noop_a, noop_b = _NoOp(), _NoOp()
    calls = 2000
    rows = []
    for op in ("add", "matmul"):
        f_torch, f_tb = torch_eager(op, 4), tensorbridge_tensor(op, 4)
        f = _op(op)
        f_noop = lambda f=f: f(noop_a, noop_b)  # noqa: E731
        best: dict = {}
        deadline = time.perf_counter() + BUDGET_S * 2
        for r in range(ARGS.repeats):
            if r >= 5 and time.perf_counter() > deadline:
                break
            t_torch, t_noop, tb_win = _window(f_torch, calls), _window(f_noop, calls), None
            tb_win = _timed_window(f_tb, calls)
            best["torch"] = min(best.get("torch", t_torch), t_torch)
            best["noop"] = min(best.get("noop", t_noop), t_noop)
            if "tb" not in best or tb_win["call"] < best["tb"]["call"]:
                best["tb"] = tb_win
            best["tb_untimed"] = min(best.get("tb_untimed", 1e18), _window(f_tb, calls))
        s = best["tb"]
        torch_side = s["call"] - s["total"]
        steps = [
            ("torch eager (the peer)", best["torch"]),
            ("torch into a no-op subclass (floor)", best["noop"]),
            ("tensorbridge, timers off", best["tb_untimed"]),
            ("tensorbridge, timers on", s["call"]),
            ("  torch: dispatch to __torch_dispatch__, return, result freed", torch_side),
            ("  C++: argument binding, op lookup", s["entry"]),
            ("  C++: unwrap arguments", s["unwrap"]),
            ("  C++: table bind/resolve/metrics/GIL", s["table"] - s["kernel"]),
            ("  C++: kernel", s["kernel"]),
            ("  C++: _make_wrapper_subclass", s["wrap_make"]),
            ("  C++: Array object + _array attribute", s["wrap_attach"]),
            (
                "  C++: other",
                s["total"]
                - s["entry"]
                - s["unwrap"]
                - s["table"]
                - s["wrap_make"]
                - s["wrap_attach"],
            ),
        ]
        for name, ns in steps:
            share = f"{ns / s['call'] * 100:.0f}%" if name.startswith("  ") else ""
            rows.append([f"{op} 4x4", name, f"{ns:.0f}", share, f"{ns / best['torch']:.2f}x"])
        rows.append(
            [f"{op} 4x4", "  ops through __torch_dispatch__ per call", f"{s['ops']:.0f}", "", ""]
        )
    print_table(
        "one 4x4 op, ns per call (min-of-windows); share = of the timed tensorbridge call; "
        "x = relative to torch eager",
        ["op", "step", "ns", "share", "vs torch"],
        rows,
        left=2,
    )


if __name__ == "__main__":
    breakdown() if ARGS.ns.breakdown else main()
