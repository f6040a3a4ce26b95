"""What does calling a small torch function from JAX cost per call through ``tb.call_torch``?

Question: inside ``jax.jit``, ``tb.call_torch(f, x, w)`` runs the torch function one of two
ways: ``jit_mode="ffi"`` (the default where the function can be captured) captures it once
into a tensorbridge plan that an XLA FFI custom call runs on XLA's buffers with no Python per
call; ``jit_mode="callback"`` runs it on the host through ``jax.pure_callback`` (inputs and
outputs cross zero-copy as numpy arrays, the ops run on tensorbridge's kernels). How much does
one call of the jitted function cost each way, next to the same function written in JAX, and
next to torchax's ``torchax.interop.call_torch`` (which traces the torch function into JAX ops
once, so that XLA compiles it like native JAX)? And eagerly (no jit), what does one
numpy-in/numpy-out ``tb.call_torch`` call cost?

Function: ``f(x, w) = torch.tanh(x @ w).sum(-1)`` with x [8,16], w [16,16] float32 (tiny on
purpose: the figure is the per-call overhead). Baseline: pure JAX, ``jax.jit`` of
``jnp.tanh(x @ w).sum(-1)``, measured in the same run; ratio = path / pure JAX jit on
min-of-repeats (1.00x = as cheap as native JAX; higher = slower). Eager rows also show
the ratio to numpy (``np.tanh(x @ w).sum(-1)``) and to torch eager on ``torch.from_numpy``
views. Every jitted call ends with ``block_until_ready``. The paths of a group are warmed up
and calibrated separately, then timed in alternating repeats. Extra rows: ``jit(grad)`` of
``f(x, w).sum()`` with respect to (x, w), and ``jit(vmap)`` of f over a batch of 32 x's, the
same ways. The run ends with ``tb.diagnostics.call_torch_metrics()``: FFI handler runs and host callback
runs, which show the path each row took.

Usage: python benchmarks/bench_call_torch.py [--quick] [--repeats N] [--threads N]
"""

from __future__ import annotations

import sys

import numpy as np
import torch

import tensorbridge as tb
from _bench_util import (
    NA,
    FallbackTracker,
    env_header,
    fmt_median,
    measure_interleaved,
    parse_args,
    print_table,
    ratio,
)
from _torchax import import_torchax

ARGS = parse_args(
    __doc__, full_repeats=200, quick_repeats=80, full_target_s=0.001, quick_target_s=0.001
)
BUDGET_S = 1.5 if ARGS.quick else 4.0  # per group of peers: repeating stops after this

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

TORCHAX, TX_ENV, TX_NOTE = import_torchax()

RNG = np.random.default_rng(0)
XN = RNG.standard_normal((8, 16), dtype=np.float32)
WN = RNG.standard_normal((16, 16), dtype=np.float32) * np.float32(0.25)
XJ, WJ = jnp.asarray(XN), jnp.asarray(WN)


def f_torch(x, w):
    return torch.tanh(x @ w).sum(-1)


def f_jax(x, w):
    return jnp.tanh(x @ w).sum(-1)


def _ready(y):
    return jax.block_until_ready(y)


# ---- one function per measured path: each returns the zero-argument callable to time --------
# inside jax.jit


def jit_pure_jax():
    jf = jax.jit(f_jax)
    return lambda: _ready(jf(XJ, WJ))


XBJ = jnp.asarray(RNG.standard_normal((32, 8, 16), dtype=np.float32))


def jit_tb_ffi():
    jf = jax.jit(lambda x, w: tb.call_torch(f_torch, x, w, jit_mode="ffi"))
    return lambda: _ready(jf(XJ, WJ))


def jit_tb_callback():
    jf = jax.jit(lambda x, w: tb.call_torch(f_torch, x, w, jit_mode="callback"))
    return lambda: _ready(jf(XJ, WJ))


def jit_torchax_call_torch():
    if TORCHAX is None:
        return NA(f"torchax unavailable: {TX_NOTE}")
    from torchax.interop import call_torch

    jf = jax.jit(lambda x, w: call_torch(f_torch, x, w))
    return lambda: _ready(jf(XJ, WJ))


# jit(grad) of f(x, w).sum() with respect to both arguments


def grad_pure_jax():
    g = jax.jit(jax.grad(lambda x, w: f_jax(x, w).sum(), argnums=(0, 1)))
    return lambda: _ready(g(XJ, WJ))


def _grad_tb(mode):
    def make():
        g = jax.jit(
            jax.grad(lambda x, w: tb.call_torch(f_torch, x, w, jit_mode=mode).sum(), argnums=(0, 1))
        )
        return lambda: _ready(g(XJ, WJ))

    return make


grad_tb_ffi = _grad_tb("ffi")
grad_tb_callback = _grad_tb("callback")


# jit(vmap) of f over a batch of x (w shared)


def vmap_pure_jax():
    v = jax.jit(jax.vmap(f_jax, in_axes=(0, None)))
    return lambda: _ready(v(XBJ, WJ))


def _vmap_tb(mode):
    def make():
        v = jax.jit(
            jax.vmap(lambda x, w: tb.call_torch(f_torch, x, w, jit_mode=mode), in_axes=(0, None))
        )
        return lambda: _ready(v(XBJ, WJ))

    return make


vmap_tb_ffi = _vmap_tb("ffi")
vmap_tb_callback = _vmap_tb("callback")


def vmap_torchax_call_torch():
    if TORCHAX is None:
        return NA(f"torchax unavailable: {TX_NOTE}")
    from torchax.interop import call_torch

    v = jax.jit(jax.vmap(lambda x, w: call_torch(f_torch, x, w), in_axes=(0, None)))
    return lambda: _ready(v(XBJ, WJ))


def grad_torchax_call_torch():
    if TORCHAX is None:
        return NA(f"torchax unavailable: {TX_NOTE}")
    from torchax.interop import call_torch

    g = jax.jit(jax.grad(lambda x, w: call_torch(f_torch, x, w).sum(), argnums=(0, 1)))
    return lambda: _ready(g(XJ, WJ))


# eager, no jit


def eager_tb_call_torch_numpy():
    return lambda: tb.call_torch(f_torch, XN, WN)


def eager_tb_call_torch_jax():
    return lambda: _ready(tb.call_torch(f_torch, XJ, WJ))


def eager_torchax_call_torch_jax():
    if TORCHAX is None:
        return NA(f"torchax unavailable: {TX_NOTE}")
    from torchax.interop import call_torch

    return lambda: _ready(call_torch(f_torch, XJ, WJ))


def eager_torch_from_numpy():
    def run():
        with torch.no_grad():
            return f_torch(torch.from_numpy(XN), torch.from_numpy(WN)).numpy()

    return run


def eager_numpy():
    return lambda: np.tanh(XN @ WN).sum(-1)


def eager_pure_jax():
    return lambda: _ready(f_jax(XJ, WJ))


def _check(fn, batched: bool = False) -> str:
    try:
        got = np.asarray(fn()())
        x = np.asarray(XBJ) if batched else XN
        want = np.tanh(x.astype(np.float64) @ WN.astype(np.float64)).sum(-1)
        if got.shape != want.shape:
            return f"shape {got.shape}"
        return f"{np.abs(got - want).max():.1e}"
    except Exception as e:
        return f"error: {type(e).__name__}"


def main() -> None:
    env_header(
        "bench_call_torch: a small torch function called from JAX", ARGS, torchax_note=TX_NOTE
    )
    tracker = FallbackTracker()
    kw = dict(repeats=ARGS.repeats, target_s=ARGS.target_s, warmup=3, budget_s=BUDGET_S)

    def group(kind, paths):
        """Times the paths of one group in alternating repeats; {name: Timing | NA}."""
        with tracker.path(kind):
            t = measure_interleaved(paths, **kw)
        print(f"  measured {kind}", file=sys.stderr, flush=True)
        return t

    # jit and jit(grad)
    jit_rows = []
    t_jax_jit = None
    for kind, paths in (
        (
            "jit",
            [
                ("pure JAX", jit_pure_jax),
                ("tb.call_torch, FFI plan", jit_tb_ffi),
                ("tb.call_torch, pure_callback", jit_tb_callback),
                ("torchax call_torch", jit_torchax_call_torch),
            ],
        ),
        (
            "jit(grad)",
            [
                ("pure JAX", grad_pure_jax),
                ("tb.call_torch, FFI plan", grad_tb_ffi),
                ("tb.call_torch, pure_callback", grad_tb_callback),
                ("torchax call_torch", grad_torchax_call_torch),
            ],
        ),
        (
            "jit(vmap)",
            [
                ("pure JAX", vmap_pure_jax),
                ("tb.call_torch, FFI plan", vmap_tb_ffi),
                ("tb.call_torch, pure_callback", vmap_tb_callback),
                ("torchax call_torch", vmap_torchax_call_torch),
            ],
        ),
    ):
        times = group(kind, paths)
        base = times["pure JAX"]
        if kind == "jit":
            t_jax_jit = base
        for name, p in paths:
            t = times[name]
            checked = kind in ("jit", "jit(vmap)") and not isinstance(t, NA)
            check = _check(p, kind == "jit(vmap)") if checked else "-"
            jit_rows.append([kind, name, t, fmt_median(t), ratio(t, base), check])
    print_table(
        "per call inside jax.jit; ratio = path / pure JAX of the same group",
        ["mode", "path", "min", "(median)", "vs pure JAX", "max|err|"],
        jit_rows,
        left=2,
    )

    # eager
    eager_paths = [
        ("numpy (np.tanh(x @ w).sum(-1))", eager_numpy),
        ("torch eager on torch.from_numpy views", eager_torch_from_numpy),
        ("pure JAX, no jit", eager_pure_jax),
        ("tb.call_torch, numpy in/out", eager_tb_call_torch_numpy),
        ("tb.call_torch, JAX in/out", eager_tb_call_torch_jax),
        ("torchax call_torch, JAX in/out", eager_torchax_call_torch_jax),
    ]
    times = group("eager", eager_paths)
    t_np, t_torch = times[eager_paths[0][0]], times[eager_paths[1][0]]
    rows = []
    for name, p in eager_paths:
        t = times[name]
        rows.append(
            [
                name,
                t,
                fmt_median(t),
                ratio(t, t_jax_jit),
                ratio(t, t_np),
                ratio(t, t_torch),
                _check(p) if not isinstance(t, NA) else "-",
            ]
        )
    print_table(
        "eager call (no jit); ratios = path / baseline (vs JAX jit: the pure JAX jit row above)",
        ["path", "min", "(median)", "vs JAX jit", "vs numpy", "vs torch eager", "max|err|"],
        rows,
    )
    for kind in ("jit", "jit(grad)", "jit(vmap)", "eager"):
        print(f"tb fallbacks during {kind}: {tracker.fallbacks_of(kind)}")
    m = tb.diagnostics.call_torch_metrics()
    print(
        f"call_torch paths: {m['ffi_plans']} plans captured, {m['ffi_runs']} FFI handler runs, "
        f"{m['callback_runs']} host callback runs, {m['callback_signatures']} signatures on the "
        f"callback in auto mode {m['callback_reasons'] or ''}"
    )
    tracker.report()


if __name__ == "__main__":
    main()
