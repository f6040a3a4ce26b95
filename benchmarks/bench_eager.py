"""What does one eager op cost through ``tensorbridge.Tensor``, next to plain torch and torchax?

Question: when a model's code calls torch functions (``torch.add(a, b)``, ``a @ b``, ...) on
``tensorbridge.Tensor``s (``tb.wrap`` of numpy arrays), how much time does each op take, from
tiny tensors (where per-op overhead dominates: ``__torch_dispatch__``, argument unwrapping,
the table call, wrapping the result) to large ones (where the kernel dominates)?

Routes: ``tensorbridge.Tensor`` (the ``__torch_dispatch__`` subclass) and, where the build has
it, the device route (``tensorbridge._device_route``: tensors on torch's ``PrivateUse1`` device
named ``tensorbridge``, reached from torch's C++ dispatcher without Python; "dev" columns).
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
The device route's 4x4 op is timed in the same windows.

The result wrappers come from the libtorch-linked maker (``python/torch_device/wrapper.cc``)
where the build has it; ``TB_NO_FAST_WRAPPERS=1`` times ``_make_wrapper_subclass`` instead.
Where the build has the Python-key kernels (``python/torch_device/python_key.cc``), ops on
``tb.Tensor`` go from torch's dispatcher to the table in C++ and the stage timers of
``--breakdown`` see none of them: ``TB_NO_PYTHON_KEY_KERNELS=1`` times the route through
``__torch_dispatch__`` (run both for the before / after of the per-op table).

``--models`` instead runs small ``transformers`` models (tensorbridge.zoo, size "small": hidden
128, batch 2 x 32 tokens) eagerly: inference under ``no_grad`` and one training step (forward,
loss, backward), torch eager vs the subclass (``tb.wrap_module``; "tb py": the same with every
op through ``__torch_dispatch__``, ``tb._tensor._python_route()``, where the Python-key kernels
are built) vs the device route (``module_to_device``), each on its own copy of the same
weights; ratios are torch's time over the route's (> 1.00x: the route is faster).

``--models --cpu-time`` times each step in the calling thread's CPU time instead (min of
interleaved steps; with ``--threads 1`` all the work is on that thread): steadier on a machine
busier than its cores. Not for the device route's training step, whose backward torch's
autograd engine runs on a thread of its own (that cell says n/a). Each route's step there runs
right after another route's, so every step starts with caches the other evicted: torch's
llama-small inference took 2.14 ms that way against 1.66 ms warm, tensorbridge's 2.52 against
2.14 ms, so the ratio read 0.85x where the steady state (the default wall-time mode) is 0.78x.
Judge steady-state speed by the default mode on a quiet machine.

Usage: python benchmarks/bench_eager.py [--quick] [--repeats N] [--threads N]
       [--breakdown | --models [--cpu-time]]
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np
import torch

import tensorbridge as tb
from _bench_util import (
    NA,
    FallbackTracker,
    Timing,
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
    extra=lambda p: (
        p.add_argument(
            "--breakdown", action="store_true", help="per-step time of one 4x4 add and matmul"
        ),
        p.add_argument(
            "--models", action="store_true", help="small transformers models, eager, all routes"
        ),
        p.add_argument(
            "--cpu-time",
            action="store_true",
            help="--models: each step's CPU time in the calling thread, min of interleaved steps",
        ),
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


def _load_device_route():
    """(the _device_route module, None) or (None, why it is unavailable)."""
    from tensorbridge import _device_route

    if os.environ.get("TB_BENCH_NO_DEVICE"):
        return None, "device route off (TB_BENCH_NO_DEVICE)"
    if _device_route.library_path() is None:
        return None, "device route not built (no torch CMake config at build time)"
    try:
        _device_route.load()
    except Exception as e:
        return None, f"device route failed to load: {type(e).__name__}: {e}"
    return _device_route, None


DEVICE, DEVICE_NOTE = _load_device_route()


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


def device_route(op: str, n: int):
    if DEVICE is None:
        return NA(DEVICE_NOTE)
    a, b = (DEVICE.to_device(x.copy()) for x in INPUTS[n])
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


def _check(op, n, route: str = "tb") -> str:
    try:
        want = torch_eager(op, n)()
        if route == "tb":
            got = tb.to_torch(tensorbridge_tensor(op, n)())
        else:
            got = DEVICE.cpu_view(device_route(op, n)())
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
    r_tb_torch, r_dev_torch, r_tx_tb, r_txg_tb = [], [], [], []
    for n in SIZES:
        for op in OPS:
            label = f"{op} {n}x{n}"
            with tracker.path(label):
                t = measure_interleaved(
                    [
                        ("torch", lambda op=op, n=n: torch_eager(op, n)),
                        ("tb", lambda op=op, n=n: tensorbridge_tensor(op, n)),
                        ("dev", lambda op=op, n=n: device_route(op, n)),
                        ("torchax", lambda op=op, n=n: torchax_eager(op, n)),
                    ],
                    **kw,
                )
                ok = _check(op, n) if not isinstance(t["tb"], NA) else "-"
                if not isinstance(t["dev"], NA):
                    ok += "/" + _check(op, n, "dev")
            t_torch, t_tb, t_tx = t["torch"], t["tb"], t["torchax"]
            # The environment stays entered while this variant is timed, so it cannot take
            # turns with the others (torch ops on plain tensors would run under its modes).
            if TX_ENV is not None:
                with TX_ENV:
                    t_txg = try_measure(lambda op=op, n=n: torchax_eager_global(op, n), **kw)
            else:
                t_txg = NA(f"torchax unavailable: {TX_NOTE}")
            a, b, c = ratio(t_tb, t_torch), ratio(t_tx, t_tb), ratio(t_txg, t_tb)
            d = ratio(t["dev"], t_torch)
            r_tb_torch.append(a)
            r_dev_torch.append(d)
            r_tx_tb.append(b)
            r_txg_tb.append(c)
            rows.append(
                [
                    label,
                    t_torch,
                    t_tb,
                    fmt_median(t_tb),
                    t["dev"],
                    t_tx,
                    t_txg,
                    a,
                    d,
                    b,
                    c,
                    ok,
                    tracker.fallbacks_of(label),
                ]
            )
            print(f"  measured {label}", file=sys.stderr, flush=True)
    print_table(
        "per-op time, min of repeats; tb = tensorbridge.Tensor; dev = the device route; "
        "torchax = eager, `with env` per op; torchax(g) = env entered once",
        [
            "op",
            "torch",
            "tb",
            "(tb median)",
            "dev",
            "torchax",
            "torchax(g)",
            "tb/torch",
            "dev/torch",
            "torchax/tb",
            "torchax(g)/tb",
            "tb/dev result",
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
    print(f"geomean dev/torch: {fmt_ratio(geomean(r_dev_torch))}")
    for n in SIZES:
        sub = [r for r, row in zip(r_tb_torch, rows, strict=True) if row[0].endswith(f" {n}x{n}")]
        dev = [r for r, row in zip(r_dev_torch, rows, strict=True) if row[0].endswith(f" {n}x{n}")]
        print(
            f"  geomean at {n}x{n}: tb/torch {fmt_ratio(geomean(sub))}, "
            f"dev/torch {fmt_ratio(geomean(dev))}"
        )
    tracker.report()


# ---- --breakdown ------------------------------------------------------------------------------

# Which maker of result wrappers the eager path uses (tensorbridge/_tensor.py: the
# libtorch-linked one where built, unless TB_NO_FAST_WRAPPERS is set).
WRAPPER_MAKER = (
    "_make_wrapper_subclass"
    if os.environ.get("TB_NO_FAST_WRAPPERS") or tb._tensor._wrapper_library()[0] is None
    else "libtorch-linked maker"
)


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


def _python_route_steps(best: dict, s: dict, torch_side: float, f_dev) -> list:
    """--breakdown's rows for an op through ``__torch_dispatch__`` (stage timers of
    python/src/eager.cc)."""
    return [
        ("torch eager (the peer)", best["torch"]),
        ("torch into a no-op subclass (floor)", best["noop"]),
        ("device route (PrivateUse1), for comparison", best.get("dev", f_dev)),
        ("tensorbridge, timers off", best["tb_untimed"]),
        ("tensorbridge, timers on", s["call"]),
        ("  torch: dispatch to __torch_dispatch__, return, result freed", torch_side),
        ("  C++: argument binding, op lookup", s["entry"]),
        ("  C++: unwrap arguments", s["unwrap"]),
        ("  C++: table bind/resolve/metrics/GIL", s["table"] - s["kernel"]),
        ("  C++: kernel", s["kernel"]),
        (f"  C++: result wrapper ({WRAPPER_MAKER})", s["wrap_make"]),
        ("  C++: Array object + _array attribute", s["wrap_attach"]),
        (
            "  C++: other",
            s["total"] - s["entry"] - s["unwrap"] - s["table"] - s["wrap_make"] - s["wrap_attach"],
        ),
    ]


def breakdown() -> None:
    global _NOOP_RESULT
    env_header(
        "bench_eager --breakdown: one 4x4 op through tensorbridge.Tensor, step by step", ARGS
    )
    _NOOP_RESULT = _NoOp()
    noop_a, noop_b = _NoOp(), _NoOp()
    calls = 200  # windows of ~0.3-1 ms: shorter than a time slice on a loaded machine
    rows = []
    for op in ("add", "matmul"):
        f_torch, f_tb, f_dev = torch_eager(op, 4), tensorbridge_tensor(op, 4), device_route(op, 4)
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
            with tb._tensor._python_route():
                best["tb_python"] = min(best.get("tb_python", 1e18), _window(f_tb, calls))
            if not isinstance(f_dev, NA):
                best["dev"] = min(best.get("dev", 1e18), _window(f_dev, calls))
        s = best["tb"]
        torch_side = s["call"] - s["total"]
        if s["ops"] == 0:  # the Python-key kernels took the op: no __torch_dispatch__ stages
            steps = [
                ("torch eager (the peer)", best["torch"]),
                ("torch into a no-op subclass (floor)", best["noop"]),
                ("device route (PrivateUse1), for comparison", best.get("dev", f_dev)),
                ("tensorbridge through __torch_dispatch__", best["tb_python"]),
                ("tensorbridge, Python-key kernel, timers off", best["tb_untimed"]),
                ("tensorbridge, Python-key kernel, timers on", s["call"]),
                (
                    "  torch's dispatch, conversions, GIL, result wrapper",
                    s["call"] - s["kernel"] - s["wrap_attach"],
                ),
                ("  C++: kernel", s["kernel"]),
                ("  C++: Array object + _array attribute", s["wrap_attach"]),
            ]
        else:
            steps = _python_route_steps(best, s, torch_side, f_dev)
        for name, ns in steps:
            if isinstance(ns, NA):
                rows.append([f"{op} 4x4", name, ns, "", ""])
                continue
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


# ---- --models ---------------------------------------------------------------------------------

MODELS = ["bert", "gpt2", "llama"]


def _model_paths(name: str, train: bool):
    """(label, make_fn) per route for one zoo model: inference under no_grad, or one step of
    forward, loss and backward (gradients set to None first)."""
    import copy

    from tensorbridge import zoo

    model, inputs = zoo.build(name, "small")

    def runner(m, inp):
        if not train:

            def infer():
                with torch.no_grad():
                    return m(**inp)

            return infer

        def step():
            m.zero_grad(set_to_none=True)
            zoo.loss_of(m(**inp)).backward()

        return step

    def torch_path():
        return runner(model, inputs)

    def tb_path():
        m = copy.deepcopy(model)
        tb.wrap_module(m, copy=True)
        return runner(m, {k: tb.wrap(v, copy=True) for k, v in inputs.items()})

    def tb_python_route_path():
        if not tb._tensor._python_key_ops():
            return NA("no Python-key kernels: the tb column is the Python route")
        step = tb_path()

        def run():
            with tb._tensor._python_route():
                return step()

        return run

    def tb_python_detach_path():
        if not tb._tensor._python_key_ops():
            return NA("no Python-key kernels: no detached copies in C++")
        step = tb_path()

        def run():
            with tb._tensor._python_detach():
                return step()

        return run

    def dev_path():
        if DEVICE is None:
            return NA(DEVICE_NOTE)
        if train and ARGS.ns.cpu_time:
            # torch's autograd engine runs a device's backward on a thread of its own: the
            # calling thread's CPU time would leave the backward out.
            return NA("--cpu-time: the device's backward runs on autograd's device thread")
        m = DEVICE.module_to_device(copy.deepcopy(model))
        return runner(m, {k: DEVICE.to_device(v.clone()) for k, v in inputs.items()})

    return [
        ("torch", torch_path),
        ("tb", tb_path),
        ("tb py", tb_python_route_path),
        ("tb pydet", tb_python_detach_path),
        ("dev", dev_path),
    ]


def _cpu_time_interleaved(paths, steps: int) -> dict:
    """--cpu-time: each path's step timed in the calling thread's CPU time
    (``time.thread_time_ns``), the paths taking turns for `steps` rounds; the minimum per path.
    With ``--threads 1`` every kernel runs on the calling thread, so time spent waiting for a
    core on a busy machine is left out. Returns {label: Timing | NA}."""
    out: dict = {}
    live = []
    for label, make_fn in paths:
        fn = make_fn()
        if isinstance(fn, NA):
            out[label] = fn
        else:
            fn()
            live.append((label, fn, []))
    for _ in range(steps):
        for _label, fn, times in live:
            t0 = time.thread_time_ns()
            fn()
            times.append(time.thread_time_ns() - t0)
    for label, _fn, times in live:
        times.sort()
        out[label] = Timing(float(times[0]), float(times[len(times) // 2]), 1, len(times))
    return out


def models() -> None:
    env_header(
        "bench_eager --models: small transformers models eagerly, torch vs tensorbridge.Tensor "
        "vs the device route",
        ARGS,
    )
    kw = dict(repeats=max(5, ARGS.repeats // 10), target_s=0.05, budget_s=BUDGET_S * 4)
    rows, r_tb, r_py, r_det, r_dev = [], [], [], [], []
    for name in MODELS:
        for train in (False, True):
            label = f"{name} {'train step' if train else 'inference'}"
            paths = _model_paths(name, train)
            if ARGS.ns.cpu_time:
                t = _cpu_time_interleaved(paths, steps=max(30, ARGS.repeats // 3))
            else:
                t = measure_interleaved(paths, **kw)
            a, p, d, b = (ratio(t["torch"], t[k]) for k in ("tb", "tb py", "tb pydet", "dev"))
            r_tb.append(a)
            r_py.append(p)
            r_det.append(d)
            r_dev.append(b)
            rows.append(
                [label, t["torch"], t["tb"], t["tb py"], t["tb pydet"], t["dev"], a, p, d, b]
            )
            print(f"  measured {label}", file=sys.stderr, flush=True)
    print_table(
        "small transformers models (hidden 128, batch 2 x 32), eager, min of repeats; "
        "speed = torch's time / the route's (> 1.00x: faster than torch); tb py: every op "
        "through __torch_dispatch__; tb pydet: detached copies through __torch_dispatch__",
        [
            "model",
            "torch",
            "tb",
            "tb py",
            "tb pydet",
            "dev",
            "tb speed",
            "tb py speed",
            "tb pydet speed",
            "dev speed",
        ],
        rows,
    )
    print(
        f"geomean speed vs torch eager: tb {fmt_ratio(geomean(r_tb))}, "
        f"tb py {fmt_ratio(geomean(r_py))}, tb pydet {fmt_ratio(geomean(r_det))}, "
        f"dev {fmt_ratio(geomean(r_dev))}"
    )


if __name__ == "__main__":
    if ARGS.ns.breakdown:
        breakdown()
    elif ARGS.ns.models:
        models()
    else:
        main()
