"""How does tensorbridge run real models -- the whole ``tensorbridge.zoo`` of ``transformers``
architectures -- eager, compiled, under bfloat16 autocast and in training, next to torch eager
and inductor: correct or not, how many ops fall back to torch, how fast, how much memory?

Every model of ``zoo.SPECS`` is built at size "small" (``zoo._SIZES``: hidden 128, 2 layers,
batch 2 x 32 tokens, 64x64 images; seeded random weights, no downloads, every dropout at 0) and
measured in one run, one row per model, on the same weights and inputs:

* eager: the parameters wrapped in place (``tb.wrap_module``) and the inputs wrapped
  (``tb.wrap``), inference under ``torch.no_grad``: ok (largest difference from torch eager
  within ``zoo.TOLERANCE`` of torch's largest magnitude), fallback op calls of one forward
  (``tb.diagnostics.metrics()``), speed vs torch eager;
* compiled: ``torch.compile(model, backend="tensorbridge")``, inference: ok (as eager), speed vs
  torch eager and vs inductor (``torch.compile``'s default backend), fallback nodes in the
  plans built;
* bf16: the same compiled inference under ``torch.autocast("cpu", torch.bfloat16)``: ok within
  ``BF16_TOLERANCE`` of torch eager under the same autocast (torch.testing's rtol for bfloat16,
  relative to the largest magnitude), speed vs torch eager and inductor under autocast;
* train: one compiled training step (forward, ``zoo.loss_of``, backward; gradients set to None
  before each step, no optimizer), train mode: ok (loss and every gradient as ``zoo.check``
  "train" judges them: ``zoo.grad_error``, with the float64 reference for ill-conditioned
  models), speed vs torch eager's and inductor's training step, fallback nodes of the forward
  and backward plans;
* jax fwd / jax step (``_bench_models_jax``): the model from JAX, in eval mode: ``tb.call_torch``
  of the model inside ``jax.jit`` vs torch eager under ``no_grad``, and one ``jax.jit`` step of
  ``jax.value_and_grad`` + optax SGD with momentum through ``tb.functionalize`` vs torch eager's
  forward, ``backward()`` and ``torch.optim.SGD`` step: ok as ``zoo.check``'s ``"jax_jit"`` /
  ``"jax_train"`` judge it (output, loss, gradients scaled by the largest gradient, updated
  parameters; 0 host callbacks), speed vs torch eager, and ``jax cb``: the host callbacks
  (``tb.diagnostics.call_torch_metrics()``) of the checks and timed runs, 0 when every call ran its
  captured plan in the FFI handler;
* compile s: the first call (trace, AOT autograd, plans or inductor's code generation and C++
  build) of tensorbridge and inductor, inference / training step; ``*`` marks an inductor
  compile its on-disk caches served (a cold compile takes tens of seconds; run twice to see
  both);
* peak MB: the peak memory of a training step for torch eager, tensorbridge and inductor, each
  backend in its own process (forked from a server that has imported torch, dynamo, inductor,
  transformers and tensorbridge, so module imports are not counted): the model is built and
  ``VmRSS`` read, two steps run (compile and warm-up; gradients freed, ``gc.collect``,
  ``malloc_trim``), the high-water mark ``VmHWM`` is reset to the current RSS (``echo 5 >
  /proc/self/clear_refs``, Linux >= 4.0) and one more step runs. The cell is ``VmHWM`` minus
  the RSS after building the model: the step's activations, gradients and workspace plus what
  the backend keeps resident after compiling (compiled code, caches, buffers held between
  calls; the JSON gives that part as ``resident_mb``; code counts as the kernel maps it, each
  executed page with its 64 KB neighbourhood). Where the reset is refused the peak
  includes the compile (the JSON says ``hwm_reset: false``). Both compilers' on-disk caches
  serve these processes once filled (a hit skips AOT autograd's trace and what it leaves
  behind): a full run fills them in its compiled columns; ``tb_cache_hits`` in the JSON.

Speed ratios are peer time / tensorbridge time on the minimum of repeats (> 1.00x:
tensorbridge faster). Timing is the house method of ``_bench_util`` (timeit's autorange, the
scheme of ``torch.utils.benchmark``'s ``blocked_autorange``, with the peers of a cell timed in
alternating repeats so that machine load hits them alike). A path that raises shows its
exception's class in the cell, a footnote gives the message, and the run goes on (a survey);
inductor unavailable (no C++ compiler, say) makes its cells n/a with the reason. Geomeans of
every ratio, compile time and memory column close the table, with the count of models correct
and free of fallbacks.

Usage: python benchmarks/bench_models.py [--models M ...] [--quick] [--threads N]
       [--repeats N] [--size small|medium] [--json PATH] [--markdown] [--memory-only]
``--quick``: fewer repeats, and the models bert, llama and resnet unless --models names others.
``--memory-only``: the peak MB column alone, one row per model: each backend's peak, inductor's
over tensorbridge's, and tensorbridge's parts (resident after compiling; its buffers' peak, live
and with the cache's idle blocks). ``--size medium`` (hidden 768, batch 8 x 128) is where the
activations, not the code and caches a compile leaves resident, make most of the peak.
"""

from __future__ import annotations

import contextlib
import copy
import ctypes
import gc
import json
import multiprocessing
import os
import sys
import time
import traceback

import torch

import tensorbridge as tb
from _bench_util import (
    NA,
    Timing,
    env_header,
    fmt_ratio,
    geomean,
    measure_interleaved,
    parse_args,
    print_table,
    ratio,
)
from tensorbridge import zoo

QUICK_MODELS = ["bert", "llama", "resnet"]
# torch.testing's default rtol for bfloat16, relative to the largest magnitude of torch's result.
BF16_TOLERANCE = 1.6e-2
MEMORY_TIMEOUT_S = 900  # one memory subprocess (an inductor compile on a cold cache included)
_MB = 1024.0  # /proc/self/status gives kB


def _extra_args(p) -> None:
    p.add_argument("--models", nargs="+", default=None, help=f"of: {' '.join(zoo.SPECS)}")
    p.add_argument("--size", default="small", choices=list(zoo._SIZES))
    p.add_argument("--json", default=None, metavar="PATH", help="write every figure here")
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    p.add_argument(
        "--memory-only",
        action="store_true",
        help="only the peak-memory column, with tensorbridge's part of it",
    )


def _raise_recompile_limits() -> None:
    # Every model is compiled six times (two backends x inference, autocast, training), and
    # dynamo counts them against the same code objects.
    for name in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, 256)


# ---- cells -------------------------------------------------------------------------------------


class Failed(NA):
    """A path that raised: the cell shows the exception's class, the footnote its message
    (for a backend failure inside dynamo: the backend's own exception)."""

    def __init__(self, e: BaseException):
        inner = getattr(e, "inner_exception", None)
        what = f"{type(e).__name__}: "
        if inner is not None:
            what += f"{type(inner).__name__}: "
        super().__init__((what + _first_line(inner if inner is not None else e))[:300])
        self.label = type(e).__name__


def _first_line(e: BaseException) -> str:
    lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
    return lines[0] if lines else ""


def _guarded(make_fn):
    """make_fn, with an exception turned into a Failed cell (the path is then not timed)."""

    def make():
        try:
            return make_fn()
        except Exception as e:
            if os.environ.get("TB_BENCH_TRACEBACK"):
                traceback.print_exc()
            return Failed(e)

    return make


def _ok(err, tolerance: float):
    """The cell of a correctness check: "ok", "WRONG <err>", or the path's failure."""
    if isinstance(err, NA):
        return err
    return "ok" if err <= tolerance else f"WRONG {err:.1e}"


def _plain(x) -> torch.Tensor:
    return (tb.to_torch(x) if isinstance(x, tb.Tensor) else x).detach()


def _rel(got, want) -> float:
    got, want = _plain(got).float(), want.detach().float()
    if got.shape != want.shape:
        raise AssertionError(f"shape {tuple(got.shape)}, torch {tuple(want.shape)}")
    return float((got - want).abs().max()) / max(float(want.abs().max()), 1e-12)


# ---- the measured paths: each returns the zero-argument function to time ---------------------


def _infer(fn, inputs, autocast: bool):
    def run():
        with torch.no_grad(), torch.autocast("cpu", torch.bfloat16, enabled=autocast):
            return fn(**inputs)

    return run


def _train_step(fn, model, inputs):
    """Forward, loss and backward through ``fn`` (the model or a compiled version of it);
    the gradients land in ``model``'s parameters."""
    params = [p for p in model.parameters() if p.requires_grad]

    def step():
        for p in params:
            p.grad = None
        loss = zoo.loss_of(fn(**inputs))
        loss.backward()
        return loss.detach()

    return step


def _grads(model) -> dict:
    return {k: p.grad.detach().clone() for k, p in model.named_parameters() if p.grad is not None}


class _Inductor:
    """Inductor's availability (probed once) and whether its caches served a compile."""

    reason: NA | None = None

    @classmethod
    def probe(cls) -> None:
        try:
            torch._dynamo.reset()
            x = torch.randn(8)
            if not torch.allclose(torch.compile(lambda t: t.sin() + 1)(x), x.sin() + 1):
                raise RuntimeError("a compiled sin + 1 gave a wrong result")
        except Exception as e:
            cls.reason = NA(f"inductor unavailable: {Failed(e).reason}")

    @staticmethod
    def _counts() -> tuple[int, int]:
        from torch._dynamo.utils import counters

        hits = (
            counters["inductor"]["fxgraph_cache_hit"]
            + counters["aot_autograd"]["autograd_cache_hit"]
        )
        misses = (
            counters["inductor"]["fxgraph_cache_miss"]
            + counters["aot_autograd"]["autograd_cache_miss"]
        )
        return hits, misses


def _compile(res: dict, model, backend: str, first_call):
    """torch.compile(model, backend=...); ``first_call(compiled)`` runs it once. Records the
    compile time (and for inductor whether its caches served it) in ``res``."""
    if backend == "inductor" and _Inductor.reason is not None:
        return _Inductor.reason
    compiled = torch.compile(model, backend=backend)
    # Counters since this compile only (plan_metrics(compiled) would also count the plans of
    # the other compiles of the same model class: dynamo shares their frames).
    tb.diagnostics.reset_plan_metrics()
    before_cache = _Inductor._counts()
    t0 = time.perf_counter()
    out = first_call(compiled)
    res["compile_s"][backend] = time.perf_counter() - t0
    if backend == "inductor":
        hits, misses = (a - b for a, b in zip(_Inductor._counts(), before_cache, strict=True))
        res["inductor_cached"] = hits > 0 and misses == 0
    elif tb.diagnostics.plan_metrics()["plan_calls"] == 0:
        raise RuntimeError("no tensorbridge plan ran: dynamo ran the model in torch eager")
    else:
        res["fallbacks"] = zoo._plan_fallbacks()  # fallback nodes by op, in the plans built
        res["plan_metrics"] = tb.diagnostics.plan_metrics()
    return compiled, out


def _time(res: dict, paths, args) -> None:
    t = measure_interleaved(
        [(label, _guarded(make)) for label, make in paths],
        repeats=args.repeats,
        target_s=args.target_s,
        budget_s=args.budget_s,
    )
    res["times"] = t
    res["vs"] = {k: ratio(t[k], t["tb"]) for k in t if k != "tb"}


def eager_column(model, inputs, want, args) -> dict:
    res: dict = {"err": NA("not run"), "fallbacks": {}}

    def tb_eager():
        m = copy.deepcopy(model)
        tb.wrap_module(m, copy=True)
        wrapped = {k: tb.wrap(v, copy=True) for k, v in inputs.items()}
        run = _infer(m, wrapped, False)
        tb.diagnostics.reset_metrics()
        out = run()
        res["fallbacks"] = {
            op: v["fallback"] for op, v in tb.diagnostics.metrics().items() if v["fallback"]
        }
        res["err"] = _rel(zoo.first_output(out), want)
        return run

    _time(res, [("torch", lambda: _infer(model, inputs, False)), ("tb", tb_eager)], args)
    if isinstance(res["times"]["tb"], Failed) and isinstance(res["err"], NA):
        res["err"] = res["times"]["tb"]
    return res


def compiled_column(model, inputs, want, autocast: bool, args) -> dict:
    res: dict = {"err": NA("not run"), "compile_s": {}, "fallbacks": {}}

    def path(backend):
        def make():
            def first(compiled):
                return _infer(compiled, inputs, autocast)()

            got = _compile(res, copy.deepcopy(model), backend, first)
            if isinstance(got, NA):
                return got
            compiled, out = got
            if backend == "tensorbridge":
                res["err"] = _rel(zoo.first_output(out), want)
            return _infer(compiled, inputs, autocast)

        return make

    _time(
        res,
        [
            ("torch", lambda: _infer(model, inputs, autocast)),
            ("tb", path("tensorbridge")),
            ("inductor", path("inductor")),
        ],
        args,
    )
    if isinstance(res["times"]["tb"], Failed) and isinstance(res["err"], NA):
        res["err"] = res["times"]["tb"]
    return res


def train_column(model, inputs, args) -> dict:
    res: dict = {"err": NA("not run"), "compile_s": {}, "fallbacks": {}}
    ref = copy.deepcopy(model).train()
    want_loss = _train_step(ref, ref, inputs)()
    want_grads = _grads(ref)

    def path(backend):
        def make():
            m = copy.deepcopy(model).train()
            got = _compile(res, m, backend, lambda c: _train_step(c, m, inputs)())
            if isinstance(got, NA):
                return got
            compiled, loss = got
            if backend == "tensorbridge":
                res["err"], res["detail"] = _train_error(
                    loss, _grads(m), want_loss, want_grads, model, inputs
                )
            return _train_step(compiled, m, inputs)

        return make

    _time(
        res,
        [
            ("torch", lambda: _train_step(ref, ref, inputs)),
            ("tb", path("tensorbridge")),
            ("inductor", path("inductor")),
        ],
        args,
    )
    if isinstance(res["times"]["tb"], Failed) and isinstance(res["err"], NA):
        res["err"] = res["times"]["tb"]
    return res


def _train_error(loss, grads, want_loss, want_grads, model, inputs):
    """zoo.check's "train" judgement: the loss and every gradient against torch's; where that
    exceeds the tolerance (an ill-conditioned model), ours must be about as close to a float64
    run as torch's float32 result is."""
    err = max(_rel(loss, want_loss), zoo.grad_error(grads, want_grads))
    if err <= zoo.TOLERANCE:
        return err, None
    ref = copy.deepcopy(model).double().train()
    doubled = {k: v.double() if v.is_floating_point() else v for k, v in inputs.items()}
    ref_loss = _train_step(ref, ref, doubled)()
    ref_grads = _grads(ref)
    ours = max(_rel(loss, ref_loss), zoo.grad_error(grads, ref_grads))
    theirs = max(_rel(want_loss, ref_loss), zoo.grad_error(want_grads, ref_grads))
    detail = f"vs float64: ours {ours:.2e}, torch's {theirs:.2e}"
    if ours <= 2 * theirs + zoo.TOLERANCE / 10:
        err = min(err, ours)
    return err, detail


# ---- peak memory of a training step, one process per backend --------------------------------


def _proc_status() -> dict:
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                key, value = line.split(":", 1)
                out[key] = int(value.split()[0])  # kB
    return out


def _settle() -> None:
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)  # return freed heap pages to the system


def _memory_child(name: str, size: str, backend: str, threads, conn) -> None:
    """In a process of its own: the peak RSS of one training step over the built model."""
    try:
        if threads:
            torch.set_num_threads(threads)
        _raise_recompile_limits()
        model, inputs = zoo.build(name, size)
        model.train()
        _settle()
        built = _proc_status()["VmRSS"]
        fn = model if backend == "eager" else torch.compile(model, backend=backend)
        step = _train_step(fn, model, inputs)
        step()
        step()
        for p in model.parameters():
            p.grad = None
        _settle()
        resident = _proc_status()["VmRSS"]
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # VmHWM := VmRSS
            reset = True
        except OSError:
            reset = False
        tb._C.reset_peak_memory()
        step()
        peak = _proc_status()["VmHWM"]
        stats = tb.diagnostics.memory_stats()
        conn.send(
            {
                "peak_mb": (peak - built) / _MB,
                "resident_mb": (resident - built) / _MB,
                "model_rss_mb": built / _MB,
                "hwm_reset": reset,
                # tensorbridge's buffers in that step: the most handed out at once, and that
                # plus the cache's idle blocks
                "tb_peak_live_mb": stats["peak_live_bytes"] / 2**20,
                "tb_peak_footprint_mb": stats["peak_footprint_bytes"] / 2**20,
                "tb_cache_hits": tb.diagnostics.plan_metrics()["cache_hits"],
            }
        )
    except BaseException as e:
        conn.send({"error": type(e).__name__, "reason": Failed(e).reason})
    finally:
        conn.close()


_PRELOAD = [
    "torch",
    "torch._dynamo",
    "torch._functorch.aot_autograd",
    "torch._inductor.compile_fx",
    "transformers",
    "tensorbridge",
    "tensorbridge.zoo",
]


def _memory_context():
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(_PRELOAD)
    # Start the server now: it imports the modules while the first model is measured.
    from multiprocessing import forkserver

    forkserver.ensure_running()
    return ctx


def memory_of(ctx, name: str, size: str, backend: str, threads):
    """The peak MB of `backend`'s training step (a float), or a cell saying why not."""
    if backend == "inductor" and _Inductor.reason is not None:
        return _Inductor.reason, {}
    t0 = time.perf_counter()
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_memory_child, args=(name, size, backend, threads, child))
    proc.start()
    child.close()
    try:
        if not parent.poll(MEMORY_TIMEOUT_S):
            proc.kill()
            return NA(f"memory process: no answer in {MEMORY_TIMEOUT_S} s"), {}
        r = parent.recv()
    except EOFError:
        proc.join()
        return NA(f"memory process died (exit code {proc.exitcode})"), {}
    finally:
        proc.join(5)
        if proc.is_alive():
            proc.kill()
            proc.join()
    r["seconds"] = time.perf_counter() - t0
    if "error" in r:
        return NA(r["reason"], label=r["error"]), r
    return r["peak_mb"], r


# ---- one row -------------------------------------------------------------------------------------


def bench_model(name: str, args, ctx) -> dict:
    row: dict = {"model": name, "kind": zoo.SPECS[name].kind}
    torch._dynamo.reset()
    try:
        model, inputs = zoo.build(name, args.size)
        with torch.no_grad():
            want = zoo.first_output(model(**inputs)).detach()
            with torch.autocast("cpu", torch.bfloat16):
                want_bf16 = zoo.first_output(model(**inputs)).detach()
    except Exception as e:
        row["build"] = Failed(e)
        return row
    row["seconds"] = seconds = {}
    t0 = time.perf_counter()
    row["eager"] = eager_column(model, inputs, want, args)
    seconds["eager"], t0 = time.perf_counter() - t0, time.perf_counter()
    row["compiled"] = compiled_column(model, inputs, want, False, args)
    seconds["compiled"], t0 = time.perf_counter() - t0, time.perf_counter()
    row["bf16"] = compiled_column(model, inputs, want_bf16, True, args)
    seconds["bf16"], t0 = time.perf_counter() - t0, time.perf_counter()
    row["train"] = train_column(model, inputs, args)
    seconds["train"], t0 = time.perf_counter() - t0, time.perf_counter()
    row["jax"] = _jax_cells(name, model, inputs, args)
    seconds["jax"], t0 = time.perf_counter() - t0, time.perf_counter()
    row["memory"], row["memory_detail"] = {}, {}
    for backend in ("eager", "tensorbridge", "inductor"):
        row["memory"][backend], row["memory_detail"][backend] = memory_of(
            ctx, name, args.size, backend, args.threads
        )
    seconds["memory"] = time.perf_counter() - t0
    torch._dynamo.reset()
    return row


# ---- the table -----------------------------------------------------------------------------------

HEADERS = [
    "model",
    "kind",
    "eager ok",
    "fb calls",
    "vs torch",
    "comp ok",
    "vs torch",
    "vs ind",
    "fb nodes",
    "bf16 ok",
    "vs torch",
    "vs ind",
    "train ok",
    "vs torch",
    "vs ind",
    "fb nodes",
    "tb s",
    "ind s",
    "MB torch",
    "MB tb",
    "MB ind",
    "jax fwd ok",
    "vs torch",
    "jax step ok",
    "vs torch",
    "jax cb",
]
# Columns whose geomean closes the table, and how a cell's number is read.
_RATIO_COLS = [4, 6, 7, 10, 11, 13, 14, 22, 24]
_MEM_COLS = [18, 19, 20]


def _fb_cell(res: dict):
    if isinstance(res["err"], NA) and not res["fallbacks"]:
        return "-"
    return str(sum(res["fallbacks"].values()))


def _seconds(res: dict, backend: str, mark: bool = False):
    s = res["compile_s"].get(backend)
    if s is None:
        return None
    return f"{s:.1f}" + ("*" if mark and res.get("inductor_cached") else "")


def _compile_cell(row: dict, backend: str):
    parts = [_seconds(row[c], backend, backend == "inductor") for c in ("compiled", "train")]
    if all(p is None for p in parts):
        t = row["compiled"]["times"].get("inductor" if backend == "inductor" else "tb")
        return t if isinstance(t, NA) else "-"
    return "/".join(p or "-" for p in parts)


def _cells(row: dict) -> list:
    if "build" in row:
        return [row["model"], row["kind"]] + [row["build"]] * (len(HEADERS) - 2)
    e, c, b, t, mem = row["eager"], row["compiled"], row["bf16"], row["train"], row["memory"]
    return [
        row["model"],
        row["kind"],
        _ok(e["err"], zoo.TOLERANCE),
        _fb_cell(e),
        e["vs"]["torch"],
        _ok(c["err"], zoo.TOLERANCE),
        c["vs"]["torch"],
        c["vs"]["inductor"],
        _fb_cell(c),
        _ok(b["err"], BF16_TOLERANCE),
        b["vs"]["torch"],
        b["vs"]["inductor"],
        _ok(t["err"], zoo.TOLERANCE),
        t["vs"]["torch"],
        t["vs"]["inductor"],
        _fb_cell(t),
        _compile_cell(row, "tensorbridge"),
        _compile_cell(row, "inductor"),
        *(m if isinstance(m, NA) else f"{m:.1f}" for m in mem.values()),
        *_jax_row(row["jax"]),
    ]


def _jax_cells(name: str, model, inputs, args) -> dict | NA:
    """The JAX columns (``_bench_models_jax``), or why they are not run."""
    try:
        import jax  # noqa: F401
        import optax  # noqa: F401

        from _bench_models_jax import jax_column
    except ImportError as e:
        return NA(f"JAX columns need jax and optax: {e}")
    try:
        return jax_column(name, model, inputs, args)
    except Exception as e:
        return Failed(e)


def _jax_row(j) -> list:
    if isinstance(j, NA):
        return [j] * 5
    return [j["fwd_ok"], j["vs"]["fwd"], j["step_ok"], j["vs"]["step"], str(j["callbacks"])]


def _summary_rows(rows: list[dict], cells: list[list]) -> list[list]:
    n = len(rows)
    counts = ["models ok / no fallback", ""] + [""] * (len(HEADERS) - 2)
    means = ["geomean", ""] + [""] * (len(HEADERS) - 2)
    for i in (2, 5, 9, 12, 21, 23):
        counts[i] = f"{sum(r[i] == 'ok' for r in cells)}/{n}"
    for i in (3, 8, 15, 25):
        counts[i] = f"{sum(r[i] == '0' for r in cells)}/{n}"
    for i in _RATIO_COLS:
        g = geomean(r[i] for r in cells)
        means[i] = "-" if isinstance(g, NA) else fmt_ratio(g)
    for i in _MEM_COLS:
        g = geomean(float(r[i]) for r in cells if isinstance(r[i], str) and r[i] != "-")
        means[i] = "-" if isinstance(g, NA) else f"{g:.1f}"
    for i, backend in ((16, "tensorbridge"), (17, "inductor")):
        parts = []
        for col in ("compiled", "train"):
            g = geomean(r[col]["compile_s"].get(backend) for r in rows if col in r)
            parts.append("-" if isinstance(g, NA) else f"{g:.1f}")
        means[i] = "/".join(parts)
    return [counts, means]


def _jsonable(x):
    if isinstance(x, Timing):
        return {
            "min_ns": x.min_ns,
            "median_ns": x.median_ns,
            "repeats": x.repeats,
            "number": x.number,
        }
    if isinstance(x, NA):
        return {"na": x.label, "reason": x.reason}
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    return x


MEMORY_HEADERS = [
    "model",
    "eager MB",
    "tb MB",
    "inductor MB",
    "ind/tb",
    "tb resident",
    "tb live",
    "tb footprint",
]


def memory_only(names, args, ns) -> None:
    """The peak-memory column alone (see ``--memory-only``)."""
    ctx = _memory_context()
    rows, details = [], {}
    for name in names:
        peaks, detail = {}, {}
        for backend in ("eager", "tensorbridge", "inductor"):
            peaks[backend], detail[backend] = memory_of(ctx, name, ns.size, backend, args.threads)
        details[name] = detail
        tb_mb, ind_mb = peaks["tensorbridge"], peaks["inductor"]
        both = isinstance(tb_mb, float) and isinstance(ind_mb, float)
        mine = detail["tensorbridge"]
        rows.append(
            [name]
            + [f"{v:.1f}" if isinstance(v, float) else v for v in peaks.values()]
            + [f"{ind_mb / tb_mb:.2f}x" if both else "-"]
            + [
                f"{mine[k]:.1f}" if k in mine else "-"
                for k in ("resident_mb", "tb_peak_live_mb", "tb_peak_footprint_mb")
            ]
        )
        print(f"  {name}: {rows[-1][1:4]}", file=sys.stderr, flush=True)
    print_table(
        f"peak RSS of a training step over the built model, MB, size {ns.size!r} (ind/tb > 1: "
        "tensorbridge takes less); tb resident: after compiling and two steps; tb live / "
        "footprint: tensorbridge's buffers at the step's peak, without / with the cache's idle "
        "blocks",
        MEMORY_HEADERS,
        rows,
        left=1,
        markdown=ns.markdown,
    )
    if ns.json:
        with open(ns.json, "w") as f:
            json.dump({"size": ns.size, "memory": _jsonable(details)}, f, indent=1)
        print(f"figures written to {ns.json}")


def main() -> None:
    args = parse_args(
        __doc__,
        full_repeats=25,
        quick_repeats=5,
        full_target_s=0.01,
        quick_target_s=0.005,
        extra=_extra_args,
    )
    ns = args.ns
    names = ns.models or (QUICK_MODELS if args.quick else list(zoo.SPECS))
    unknown = [m for m in names if m not in zoo.SPECS]
    if unknown:
        sys.exit(f"unknown models {unknown}; the zoo has: {' '.join(zoo.SPECS)}")
    args.size = ns.size
    args.budget_s = 0.6 if args.quick else 3.0  # per cell: repeating stops after this (min 3)
    _raise_recompile_limits()
    if ns.memory_only:
        memory_only(names, args, ns)
        return
    torch.backends.mha.set_fastpath_enabled(True)
    start = time.perf_counter()
    env_header(
        "bench_models: the transformers zoo on tensorbridge vs torch eager and inductor", args
    )
    import transformers

    print(f"transformers {transformers.__version__}; size {args.size!r}: {zoo._SIZES[args.size]}")
    _Inductor.probe()
    print(f"inductor: {_Inductor.reason or 'available'}", flush=True)
    ctx = _memory_context()
    rows = []
    for i, name in enumerate(names, 1):
        t0 = time.perf_counter()
        rows.append(bench_model(name, args, ctx))
        parts = ", ".join(f"{k} {v:.0f}" for k, v in rows[-1].get("seconds", {}).items())
        print(
            f"  [{i}/{len(names)}] {name}: {time.perf_counter() - t0:.0f} s ({parts}; "
            f"run {time.perf_counter() - start:.0f} s)",
            file=sys.stderr,
            flush=True,
        )
    cells = [_cells(r) for r in rows]
    print_table(
        f"the zoo at size {args.size!r}: ok = torch's result within tolerance; fb = fallbacks to "
        "torch's kernels; vs = peer time / tensorbridge time (> 1.00x: tensorbridge faster); "
        "tb s / ind s = compile seconds of the first call, inference/training (* inductor's "
        "cache served it); MB = peak RSS of a training step over the built model",
        HEADERS,
        cells + _summary_rows(rows, cells),
        left=2,
        markdown=ns.markdown,
    )
    total = time.perf_counter() - start
    print(f"\n{len(names)} models in {total:.0f} s")
    if ns.json:
        with open(ns.json, "w") as f:
            json.dump(
                {
                    "size": args.size,
                    "seconds": total,
                    "threads": torch.get_num_threads(),
                    "quick": args.quick,
                    "rows": _jsonable(rows),
                },
                f,
                indent=1,
            )
        print(f"figures written to {ns.json}")


if __name__ == "__main__":
    main()
