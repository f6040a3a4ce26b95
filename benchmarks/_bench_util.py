"""Shared helpers of the Python benchmarks (bench_kernels, bench_eager, bench_compile,
bench_call_torch, ...): timing on ``torch.utils.benchmark``, "n/a" cells for paths that fail, a
table printer with ratio columns, geometric means, JSON results, the environment header,
torchax's import, and the tensorbridge fallback counters (``tb.diagnostics.metrics()``) of a run.

Timing method (the same in every script): each measured function is called a few times to warm
up (first-call costs: lazy initialisation, JIT compilation, caches), then timed by
``torch.utils.benchmark.Timer`` (``timeit`` underneath: the garbage collector off, the thread
count left as the script set it). One path alone: ``Timer.blocked_autorange``, blocks of calls
sized so that the timer's overhead is negligible, until about ``repeats x target_s`` have run.
Peers of one table row (``measure_interleaved``): each is calibrated by ``blocked_autorange``
over ``target_s``, then their repeats of about ``target_s`` each go round-robin (A B C, A B C,
...), so that changes in machine load hit them alike; every result is a
``torch.utils.benchmark.Measurement`` (``Timing.measurement``). The minimum per call is the
least disturbed run (the figure to compare and the one ratios use); the median shows how noisy
the machine was. Timings are printed, never asserted. ``--compare`` also prints each table's
timings through ``torch.utils.benchmark.Compare``.

What ``torch.utils.benchmark`` lacks, and this file adds:

* Interleaved peers. ``blocked_autorange`` measures one statement until it is done, so a burst
  of load from another process lands on whichever peer runs then; on a shared machine that
  skews the ratios more than anything else. Its ``Timer.timeit(number)`` runs ``number // 100``
  (at least 2) warm-up calls before each timed run, which triples the cost of a repeat of a
  model forward that takes a second; the round-robin repeats therefore run the statement on
  ``timeit.Timer`` (what ``Timer`` wraps) and are stored as ``Measurement``s of the peer's task.
* A time budget per cell (``budget_s``, at least three repeats), which bounds a full run.
* Cells that failed: ``Compare`` takes only ``Measurement``s; a path that raises becomes an
  ``NA`` cell with its reason under the table instead of ending the script.
* Ratio columns against the peer of the same row, geometric means, Markdown output, and JSON
  lines (``TB_BENCH_JSON``) that ``benchmarks/report.py`` draws its charts from: ``Compare``
  prints times only, to the terminal.

Options of every script: ``--quick`` (fewer, shorter repeats), ``--repeats N``, ``--threads N``
(same thread count for torch, tensorbridge and JAX; see ``parse_args``), ``--compare``. Set
``TB_BENCH_TRACEBACK=1`` to print the traceback of every path that fails. Set
``TB_BENCH_JSON=PATH`` to append every table, cell by cell, to PATH as one JSON object a line
(``benchmarks/report.py`` reads them to draw its charts).
"""

from __future__ import annotations

import math
import os
import platform
import statistics
import sys
import time
import timeit
import traceback

__all__ = [
    "NA",
    "Args",
    "FallbackTracker",
    "Timing",
    "env_header",
    "fmt_ratio",
    "fmt_time",
    "geomean",
    "measure",
    "measure_interleaved",
    "na_from_exc",
    "parse_args",
    "print_compare",
    "print_table",
    "ratio",
    "record_json",
    "try_measure",
]


# ---- values --------------------------------------------------------------------------------


class NA:
    """A cell that could not be measured, with the reason (printed as ``n/a (reason)``).
    ``label`` is what ``print_table`` shows in the cell (the reason goes under the table):
    "n/a", or for a path that raised, say, the exception's class."""

    def __init__(self, reason: str, label: str = "n/a"):
        self.reason = " ".join(str(reason).split())
        self.label = label

    def short(self, width: int = 48) -> str:
        r = self.reason if len(self.reason) <= width else self.reason[: width - 3] + "..."
        return f"n/a ({r})"

    def __str__(self) -> str:
        return f"n/a ({self.reason})"

    __repr__ = __str__


def na_from_exc(e: BaseException) -> NA:
    msg = str(e).strip().splitlines()
    first = msg[0] if msg else ""
    # torch's dynamo errors start with a generic line; the useful part is often further on.
    return NA(f"{type(e).__name__}: {first}"[:400])


class Timing:
    """Time per call of one measured path, in nanoseconds, from the ``Measurement`` that
    ``torch.utils.benchmark`` took (``number`` calls per repeat, ``repeats`` repeats)."""

    __slots__ = ("measurement", "median_ns", "min_ns", "number", "repeats")

    def __init__(
        self, min_ns: float, median_ns: float, number: int, repeats: int, measurement=None
    ):
        self.min_ns = min_ns
        self.median_ns = median_ns
        self.number = number
        self.repeats = repeats
        self.measurement = measurement

    @classmethod
    def of(cls, measurement) -> Timing:
        """The Timing of a ``torch.utils.benchmark.Measurement``."""
        times = measurement.times
        return cls(
            min(times) * 1e9,
            statistics.median(times) * 1e9,
            measurement.number_per_run,
            len(times),
            measurement,
        )

    def __repr__(self) -> str:
        return (
            f"Timing(min={fmt_time(self.min_ns)}, median={fmt_time(self.median_ns)}, "
            f"{self.repeats}x{self.number})"
        )


# ---- the runner ------------------------------------------------------------------------------


def _timer(fn):
    """A ``torch.utils.benchmark.Timer`` of ``fn()`` that leaves torch's thread count as the
    script set it (``Timer`` otherwise sets 1 thread while it times)."""
    import torch
    from torch.utils.benchmark import Timer

    return Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())


def _measurement(timer, number: int, raw_s: list[float]):
    """Repeats of ``number`` calls each (raw seconds per repeat) as one ``Measurement`` of the
    timer's task."""
    from torch.utils.benchmark import Measurement

    return Measurement(number, raw_s, timer._task_spec)


def measure(
    fn,
    *,
    repeats: int = 15,
    target_s: float = 0.02,
    warmup: int = 2,
    max_number: int = 1_000_000,
    budget_s: float | None = None,
) -> Timing:
    """`warmup` calls, then ``Timer.blocked_autorange`` for about ``repeats x target_s`` (at
    most `budget_s`); min and median ns per call. At least three blocks: a path slower than
    the run time gets more. `max_number` is kept for the callers of the round-robin runner."""
    del max_number  # blocked_autorange sizes its blocks itself
    for _ in range(warmup):
        fn()
    run_s = repeats * target_s if budget_s is None else min(repeats * target_s, budget_s)
    timer = _timer(fn)
    m = timer.blocked_autorange(min_run_time=run_s)
    if len(m.raw_times) < 3:
        extra = timeit.Timer(stmt="fn()", globals={"fn": fn})
        raw = list(m.raw_times)
        while len(raw) < 3:
            raw.append(extra.timeit(m.number_per_run))
        m = _measurement(timer, m.number_per_run, raw)
    return Timing.of(m)


def measure_interleaved(
    paths,
    *,
    repeats: int = 15,
    target_s: float = 0.02,
    warmup: int = 2,
    max_number: int = 1_000_000,
    budget_s: float | None = None,
) -> dict:
    """Peers measured side by side: ``paths`` is a list of (label, make_fn); each make_fn()
    returns the zero-argument callable to time (or an NA, or raises: that path becomes NA).
    Each callable is warmed up, then calibrated by ``Timer.blocked_autorange`` over `target_s`
    (its first repeat); the other repeats, ``number`` calls of about `target_s` each, go
    round-robin (A B C, A B C, ...) until `repeats` or, after three, the budget (default
    ``3 x repeats x target_s`` per peer) is spent. Returns {label: Timing | NA}."""
    out: dict = {}
    live = []
    for label, make_fn in paths:
        try:
            fn = make_fn()
            if isinstance(fn, NA):
                out[label] = fn
                continue
            for _ in range(warmup):
                fn()
            live.append((label, fn))
        except Exception as e:
            if os.environ.get("TB_BENCH_TRACEBACK"):
                traceback.print_exc()
            out[label] = na_from_exc(e)
    runs: dict = {}  # label -> (torch Timer, timeit.Timer, calls per repeat, raw seconds)
    for label, fn in list(live):
        try:
            timer = _timer(fn)
            first = timer.blocked_autorange(min_run_time=target_s)
            per_call = min(first.times)
            number = max(1, min(max_number, round(target_s / per_call)))
            raw = [per_call * number]
            runs[label] = (timer, timeit.Timer(stmt="fn()", globals={"fn": fn}), number, raw)
        except Exception as e:
            out[label] = na_from_exc(e)
            live.remove((label, fn))
    per_round = sum(runs[label][3][0] for label, _ in live)
    budget = budget_s if budget_s is not None else 3 * repeats * target_s * max(1, len(live))
    start = time.perf_counter()
    for r in range(1, repeats):
        if r >= 3 and time.perf_counter() - start + per_round > budget:
            break
        for label, fn in list(live):
            _, t, number, raw = runs[label]
            try:
                raw.append(t.timeit(number))
            except Exception as e:
                out[label] = na_from_exc(e)
                live.remove((label, fn))
    for label, _fn in live:
        timer, _, number, raw = runs[label]
        out[label] = Timing.of(_measurement(timer, number, raw))
    return {label: out[label] for label, _ in paths}


def try_measure(make_fn, **kwargs) -> Timing | NA:
    """Builds the path (``make_fn()`` returns the function to time, and may itself fail) and
    measures it; any exception becomes an NA cell instead of ending the script."""
    try:
        fn = make_fn()
        if isinstance(fn, NA):
            return fn
        return measure(fn, **kwargs)
    except Exception as e:
        if os.environ.get("TB_BENCH_TRACEBACK"):
            traceback.print_exc()
        return na_from_exc(e)


# ---- arithmetic on cells ---------------------------------------------------------------------


def _ns(x):
    if isinstance(x, Timing):
        return x.min_ns
    if isinstance(x, (int, float)):
        return float(x)
    return None


def ratio(num, den) -> float | NA:
    """num / den on min times; NA when either side is."""
    if isinstance(num, NA):
        return num
    if isinstance(den, NA):
        return den
    a, b = _ns(num), _ns(den)
    if a is None or b is None or b == 0:
        return NA("no value")
    return a / b


def geomean(values) -> float | NA:
    xs = [v for v in values if isinstance(v, (int, float)) and v > 0]
    if not xs:
        return NA("no measured ratios")
    return math.exp(sum(math.log(v) for v in xs) / len(xs))


# ---- formatting ------------------------------------------------------------------------------


def fmt_time(ns) -> str:
    if isinstance(ns, NA):
        return ns.short()
    if isinstance(ns, Timing):
        ns = ns.min_ns
    if ns is None:
        return "-"
    if ns < 1e3:
        return f"{ns:.0f} ns"
    if ns < 1e6:
        return f"{ns / 1e3:.3g} us"
    if ns < 1e9:
        return f"{ns / 1e6:.3g} ms"
    return f"{ns / 1e9:.3g} s"


def fmt_median(t) -> str:
    if isinstance(t, NA):
        return "-"
    if isinstance(t, Timing):
        return fmt_time(t.median_ns)
    return "-"


def fmt_ratio(r) -> str:
    if isinstance(r, NA):
        return r.short(32)
    if r is None:
        return "-"
    return f"{r:.2f}x"


def _cell(x, footnotes: dict) -> str:
    if isinstance(x, NA):
        if x.reason not in footnotes:
            footnotes[x.reason] = len(footnotes) + 1
        return f"{x.label} [{footnotes[x.reason]}]"
    if isinstance(x, Timing):
        return fmt_time(x)
    if isinstance(x, float):
        return fmt_ratio(x)
    return str(x)


def print_table(
    title: str, headers: list[str], rows: list[list], left: int = 1, markdown: bool = False
) -> None:
    """A plain-text table (``markdown``: a GitHub-flavoured Markdown one); the first `left`
    columns are left-aligned, the others right-aligned. Cells may be str, Timing (its min
    time), float (a ratio), or NA: printed "n/a [k]" (or the NA's label), with reason k listed
    under the table."""
    record_json(title, headers, rows)
    if _COMPARE:
        print_compare(title, headers, rows)
    footnotes: dict[str, int] = {}
    cells = [[_cell(c, footnotes) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    if markdown:
        _print_markdown(title, headers, cells, widths, left, footnotes)
        return

    def line(parts):
        out = []
        for i, (p, w) in enumerate(zip(parts, widths, strict=True)):
            out.append(p.ljust(w) if i < left else p.rjust(w))
        return "  ".join(out).rstrip()

    print()
    print(f"== {title}")
    print(line(headers))
    print(line(["-" * w for w in widths]))
    for r in cells:
        print(line(r))
    for reason, k in footnotes.items():
        print(f"  n/a [{k}]: {reason}")
    sys.stdout.flush()


def print_compare(title: str, headers: list[str], rows: list[list]) -> None:
    """The table's timings through ``torch.utils.benchmark.Compare``: one row per table row
    (its first cell), one column per timed column; ratio and n/a cells are not shown there."""
    import dataclasses

    from torch.utils.benchmark import Compare, Measurement

    ms = []
    for r in rows:
        for h, c in zip(headers, r, strict=False):
            if isinstance(c, Timing) and c.measurement is not None:
                m = c.measurement
                spec = dataclasses.replace(
                    m.task_spec, label=title, sub_label=str(r[0]), description=h
                )
                ms.append(Measurement(m.number_per_run, m.raw_times, spec))
    if ms:
        cmp = Compare(ms)
        cmp.trim_significant_figures()
        cmp.print()


def _json_cell(x):
    if isinstance(x, NA):
        return {"na": x.reason}
    if isinstance(x, Timing):
        return {"min_ns": x.min_ns, "median_ns": x.median_ns}
    if isinstance(x, int | float | str) or x is None:
        return x
    return str(x)


def record_json(title: str, headers: list[str], rows: list[list]) -> None:
    """With ``TB_BENCH_JSON=PATH``: appends the table to PATH as one JSON line, with the script's
    name (timings as ``{"min_ns", "median_ns"}``, unmeasured cells as ``{"na": reason}``)."""
    path = os.environ.get("TB_BENCH_JSON")
    if not path:
        return
    import json

    record = {
        "script": os.path.basename(sys.argv[0]),
        "title": title,
        "headers": list(headers),
        "rows": [[_json_cell(c) for c in r] for r in rows],
    }
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")


def _print_markdown(title, headers, cells, widths, left, footnotes) -> None:
    def line(parts):
        return "| " + " | ".join(p.replace("|", "\\|") for p in parts) + " |"

    rule = [
        ("-" * max(3, w)) if i < left else ("-" * max(3, w - 1) + ":") for i, w in enumerate(widths)
    ]
    print()
    print(f"**{title}**")
    print()
    print(line(headers))
    print("|" + "|".join(f" {r} " for r in rule) + "|")
    for r in cells:
        print(line(r))
    if footnotes:
        print()
        for reason, k in footnotes.items():
            print(f"- [{k}] {reason.replace('|', '/')}")
    sys.stdout.flush()


# ---- arguments and environment ---------------------------------------------------------------


_COMPARE = False  # --compare: print_table also prints torch.utils.benchmark.Compare's table


class Args:
    quick: bool
    repeats: int
    target_s: float
    threads: int | None
    ns: object  # the parsed namespace, with the arguments ``extra`` added


def parse_args(
    description: str,
    full_repeats: int = 15,
    quick_repeats: int = 7,
    full_target_s: float = 0.02,
    quick_target_s: float = 0.008,
    extra=None,
) -> Args:
    """--quick, --repeats N, and --threads N; ``extra(parser)`` may add a script's own
    arguments, whose values are in ``Args.ns``.

    ``--threads N`` re-executes the script with OMP_NUM_THREADS / MKL_NUM_THREADS /
    OPENBLAS_NUM_THREADS = N (torch's and tensorbridge's OpenMP and BLAS runtimes read them when
    they load) and, for N = 1, XLA_FLAGS
    that make JAX's CPU backend single-threaded, so that every framework runs with the same
    number of threads. On a machine busier than its core count, multi-threaded kernels wait
    at every parallel-region barrier for a descheduled thread (milliseconds for a 64x64
    matmul), and ``--threads 1`` gives the more meaningful comparison."""
    import argparse

    p = argparse.ArgumentParser(description=description.strip().splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer and shorter repeats")
    p.add_argument("--repeats", type=int, default=None, help="override the repeat count")
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="threads for torch, tensorbridge (OpenMP) and JAX (re-executes the script)",
    )
    p.add_argument(
        "--compare",
        action="store_true",
        help="also print each table's timings through torch.utils.benchmark.Compare",
    )
    if extra is not None:
        extra(p)
    ns = p.parse_args()
    global _COMPARE
    _COMPARE = ns.compare
    if ns.threads is not None and os.environ.get("TB_BENCH_THREADS") != str(ns.threads):
        env = dict(os.environ)
        env["TB_BENCH_THREADS"] = str(ns.threads)
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(ns.threads)
        env["OPENBLAS_NUM_THREADS"] = str(ns.threads)  # tensorbridge's LAPACK (OpenBLAS)
        if ns.threads == 1:
            flags = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
            env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + flags).strip()
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, [sys.executable, *sys.argv], env)
    if ns.threads is not None:
        import torch

        torch.set_num_threads(ns.threads)
    a = Args()
    a.quick = ns.quick
    a.repeats = ns.repeats or (quick_repeats if ns.quick else full_repeats)
    a.target_s = quick_target_s if ns.quick else full_target_s
    a.threads = ns.threads
    a.ns = ns
    return a


def env_header(title: str, args: Args | None = None, torchax_note: str | None = None) -> None:
    """Prints what the numbers depend on: versions, threads, CPU."""
    import numpy as np
    import torch

    import tensorbridge as tb

    print(f"# {title}")
    print(
        f"python {platform.python_version()} on {platform.machine()}, "
        f"{os.cpu_count()} logical CPUs ({_cpu_name()})"
    )
    print(
        f"torch {torch.__version__} (intra-op threads {torch.get_num_threads()}, "
        f"inter-op {torch.get_num_interop_threads()}), numpy {np.__version__}"
    )
    try:
        import jax

        devs = ", ".join(str(d) for d in jax.devices())
        print(
            f"jax {jax.__version__} (devices: {devs}; XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r})"
        )
    except Exception as e:
        print(f"jax: not available ({e})")
    if torchax_note is not None:
        print(f"torchax: {torchax_note}")
    try:
        info = tb.diagnostics.onednn_info()
    except Exception as e:
        info = f"? ({e})"
    print(f"tensorbridge {tb.__version__} from {os.path.dirname(tb.__file__)}; oneDNN: {info}")
    env = {
        k: os.environ[k]
        for k in (
            "OMP_NUM_THREADS",
            "MKL_NUM_THREADS",
            "ONEDNN_MAX_CPU_ISA",
            "TB_MAX_CPU_ISA",
            "TB_DECOMPOSE",
            "XLA_FLAGS",
        )
        if k in os.environ
    }
    print(f"env: {env or '(no thread/ISA overrides)'}; tb.config.fallback={tb.config.fallback!r}")
    try:
        load = os.getloadavg()
        busy = ""
        if load[0] > (os.cpu_count() or 1):
            busy = (
                " -- BUSY MACHINE: other processes compete for the cores; absolute times are"
                " inflated"
                + (
                    ""
                    if args is not None and args.threads == 1
                    else ", and multi-threaded kernels stall at barriers (try --threads 1)"
                )
            )
        print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}{busy}")
    except OSError:
        pass
    if args is not None:
        print(
            f"timing: torch.utils.benchmark.Timer, warm-up then up to {args.repeats} repeats of "
            f"~{args.target_s * 1e3:.0f} ms each (at least one call each), min (median) per call"
            f"{'; --quick' if args.quick else ''}{f'; --threads {args.threads}' if args.threads else ''}"
        )
    sys.stdout.flush()


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


# ---- tensorbridge fallback counters ----------------------------------------------------------


class FallbackTracker:
    """Which tensorbridge ops fell back to torch's kernels, per measured path and in total.

    ``with tracker.path("label"): ...`` attributes the growth of ``tb.diagnostics.metrics()`` fallback
    counts during the block to that label."""

    def __init__(self):
        import tensorbridge as tb

        self.tb = tb
        self.per_path: dict[str, dict[str, int]] = {}
        self.served: dict[str, dict[str, int]] = {}
        self.start = self._snapshot()

    def _snapshot(self) -> dict:
        try:
            return {op: dict(m) for op, m in self.tb.diagnostics.metrics().items()}
        except Exception:
            return {}

    @staticmethod
    def _delta(before: dict, after: dict, key: str) -> dict[str, int]:
        out = {}
        for op, m in after.items():
            d = m.get(key, 0) - before.get(op, {}).get(key, 0)
            if d > 0:
                out[op] = d
        return out

    def path(self, label: str):
        tracker = self

        class _Ctx:
            def __enter__(self):
                self.before = tracker._snapshot()
                return self

            def __exit__(self, *exc):
                after = tracker._snapshot()
                fb = tracker._delta(self.before, after, "fallback")
                calls = tracker._delta(self.before, after, "calls")
                prev = tracker.per_path.setdefault(label, {})
                for op, n in fb.items():
                    prev[op] = prev.get(op, 0) + n
                prevc = tracker.served.setdefault(label, {})
                for op, n in calls.items():
                    prevc[op] = prevc.get(op, 0) + n
                return False

        return _Ctx()

    def fallbacks_of(self, label: str) -> str:
        """A short cell: the ops of `label` that fell back ("-" when none)."""
        fb = self.per_path.get(label, {})
        if not fb:
            return "-"
        return ",".join(sorted(op.replace("aten::", "") for op in fb))

    def report(self) -> None:
        after = self._snapshot()
        total_fb = self._delta(self.start, after, "fallback")
        total_calls = self._delta(self.start, after, "calls")
        print()
        print(
            "== tensorbridge ops that fell back to torch's kernels during this run (tb.diagnostics.metrics())"
        )
        if not total_fb:
            n = sum(total_calls.values())
            print(
                f"none: all {n} table calls of the run were served by tensorbridge kernels "
                "(kernel, composite or decomposition)"
            )
        else:
            width = max(len(op) for op in total_fb)
            print("op".ljust(width) + "  fallback calls / all calls")
            for op, n in sorted(total_fb.items(), key=lambda kv: -kv[1]):
                print(f"{op.ljust(width)}  {n} / {total_calls.get(op, n)}")
            paths = {p: fb for p, fb in self.per_path.items() if fb}
            if paths:
                print("by measured path:")
                for p, fb in paths.items():
                    print(f"  {p}: " + ", ".join(f"{op} ({n})" for op, n in sorted(fb.items())))
        sys.stdout.flush()
