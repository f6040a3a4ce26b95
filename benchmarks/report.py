"""Charts of tensorbridge's benchmarks: runs them (or reads a JSON file of an earlier run) and
writes PNG charts with matplotlib, for the documentation's performance page.

Question: the four figures a user asks about first, each next to the peer it is measured
against in the same run:

* ``kernels.png``: per-op speed against torch eager (``bench_kernels.py``): torch time /
  tensorbridge time per op, on min-of-repeats (> 1: tensorbridge faster).
* ``compile.png``: compiled speed-ups (``bench_compile.py``): torch eager time / time of
  tensorbridge's compiled plans, and of inductor, per model and mode (> 1: faster than eager).
* ``dlpack.png``: DLPack import and export times per tensor, in ns (``bench_dlpack.py``).
* ``call_torch.png``: ``tb.call_torch`` inside ``jax.jit`` (FFI plan and host callback)
  against the same function in pure JAX, per call (``bench_call_torch.py``).

Method: each script runs with ``--quick`` (fewer, shorter repeats) and ``--threads 1`` (one
thread for torch, tensorbridge and JAX: on a shared machine, multi-threaded kernels wait at
barriers for descheduled threads), with ``TB_BENCH_JSON`` set so that every table it prints is
also appended to a JSON file. The tables, the machine (CPU, cores, load, versions) and the
command go into one JSON document (``--json``, default ``docs/performance/results.json``), from
which the charts are drawn; ``--from-json`` redraws them without running anything.

Usage: python benchmarks/report.py [--from-json] [--json PATH] [--out DIR] [--scripts ...]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_JSON = os.path.join(ROOT, "docs", "performance", "results.json")
DEFAULT_OUT = os.path.join(ROOT, "docs", "performance")
# Settings of the environment that change what the scripts measure, recorded with the results.
ENV_VARS = ("TB_BENCH_INDUCTOR_BUDGET", "OMP_NUM_THREADS", "TB_MAX_CPU_ISA", "ONEDNN_MAX_CPU_ISA")
SCRIPTS = ("bench_kernels.py", "bench_compile.py", "bench_dlpack.py", "bench_call_torch.py")


# ---- running ----------------------------------------------------------------------------------


def machine() -> dict:
    """What the numbers depend on: the CPU, cores, load, and the versions of every framework."""
    import jax
    import numpy as np
    import torch

    import tensorbridge as tb
    from _bench_util import _cpu_name

    return {
        "cpu": _cpu_name(),
        "logical_cpus": os.cpu_count(),
        "load_average_1min": round(os.getloadavg()[0], 2),
        "os": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "jax": jax.__version__,
        "numpy": np.__version__,
        "tensorbridge": tb.__version__,
        "onednn": tb.diagnostics.onednn_info(),
    }


def run(scripts: list[str], threads: int) -> dict:
    """Runs each script with --quick --threads N; returns the document of their tables."""
    doc = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        "machine": machine(),
        "command": f"--quick --threads {threads}",
        "env": {k: os.environ[k] for k in ENV_VARS if k in os.environ},
        "scripts": {},
    }
    for script in scripts:
        with tempfile.NamedTemporaryFile(suffix=".jsonl", delete=False) as tmp:
            path = tmp.name
        env = dict(os.environ, TB_BENCH_JSON=path)
        cmd = [sys.executable, os.path.join(HERE, script), "--quick"]
        if script != "bench_dlpack.py":  # bench_dlpack is single-threaded by construction
            cmd += ["--threads", str(threads)]
        print(f"running {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
        proc = subprocess.run(cmd, env=env, cwd=HERE, capture_output=True, text=True)
        with open(path) as f:
            tables = [json.loads(line) for line in f if line.strip()]
        os.unlink(path)
        if proc.returncode != 0:
            sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
            raise SystemExit(f"{script} failed with exit code {proc.returncode}")
        doc["scripts"][script] = {"tables": tables, "stdout": proc.stdout}
    return doc


# ---- reading the tables -----------------------------------------------------------------------


def _table(doc: dict, script: str, title_start: str) -> dict | None:
    for t in doc["scripts"].get(script, {}).get("tables", []):
        if t["title"].startswith(title_start):
            return t
    return None


def _num(cell) -> float | None:
    """A ratio or a plain number; None for an unmeasured cell."""
    if isinstance(cell, int | float) and not isinstance(cell, bool):
        return float(cell)
    return None


def _min_ns(cell) -> float | None:
    return float(cell["min_ns"]) if isinstance(cell, dict) and "min_ns" in cell else None


def kernel_ratios(doc: dict) -> list[tuple[str, float]]:
    """(op and shape, torch time / tensorbridge time) per measured op."""
    t = _table(doc, "bench_kernels.py", "per-op time")
    if t is None:
        return []
    h = t["headers"]
    out = []
    for r in t["rows"]:
        tt, tb = _min_ns(r[h.index("torch min")]), _min_ns(r[h.index("tb min")])
        if tt and tb:
            out.append((f"{r[0]} {r[1]}", tt / tb))
    return out


def compile_speedups(doc: dict) -> list[tuple[str, float | None, float | None]]:
    """(config, eager / tb compiled, eager / inductor) per model and mode."""
    t = _table(doc, "bench_compile.py", "time per call")
    if t is None:
        return []
    h = t["headers"]
    out = []
    for r in t["rows"]:
        eager = _min_ns(r[h.index("eager")])
        tb, ind = _min_ns(r[h.index("tb compiled")]), _min_ns(r[h.index("inductor")])
        if eager:
            out.append((r[0], eager / tb if tb else None, eager / ind if ind else None))
    return out


def dlpack_times(doc: dict) -> list[tuple[str, str, float]]:
    """(section, path, ns per tensor) for the rows measured from Python (not the loops run
    from C: "called from C" sections, "C++ loop" in older results)."""
    t = _table(doc, "bench_dlpack.py", "DLPack import and export")
    if t is None:
        return []
    return [
        (r[0], r[1].split("[")[0].strip(), float(r[2]))
        for r in t["rows"]
        if "C++ loop" not in r[0] and "called from C" not in r[0] and _num(r[2]) is not None
    ]


def call_torch_times(doc: dict) -> list[tuple[str, str, float]]:
    """(mode, path, µs per call) inside jax.jit."""
    t = _table(doc, "bench_call_torch.py", "per call inside jax.jit")
    if t is None:
        return []
    h = t["headers"]
    out = []
    for r in t["rows"]:
        m = _min_ns(r[h.index("min")])
        if m is not None:
            out.append((r[0], r[1], m / 1e3))
    return out


# ---- charts -----------------------------------------------------------------------------------


def _footer(fig, doc: dict) -> None:
    m = doc["machine"]
    fig.text(
        0.01,
        0.005,
        f"{m['cpu']}, {m['logical_cpus']} logical CPUs, 1 thread; torch {m['torch']}, "
        f"jax {m['jax']}; {doc['date_utc']} UTC",
        fontsize=7,
        color="0.4",
    )


def plot_kernels(plt, doc: dict, path: str) -> bool:
    data = kernel_ratios(doc)
    if not data:
        return False
    labels, values = zip(*data, strict=True)
    fig, ax = plt.subplots(figsize=(8, 0.28 * len(data) + 1.4))
    colors = ["tab:green" if v >= 1 else "tab:red" for v in values]
    ax.barh(range(len(data)), values, color=colors)
    for i, v in enumerate(values):
        ax.text(v, i, f" {v:.2f}x", va="center", fontsize=6)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(data)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("torch eager time / tensorbridge time (> 1: tensorbridge faster)")
    ax.set_title("Per-op speed against torch eager (bench_kernels.py)")
    _footer(fig, doc)
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def plot_compile(plt, doc: dict, path: str) -> bool:
    data = compile_speedups(doc)
    if not data:
        return False
    import numpy as np

    labels = [d[0] for d in data]
    x = np.arange(len(data))
    fig, ax = plt.subplots(figsize=(8, 4.2))
    for off, k, name, color in ((-0.2, 1, "tensorbridge plans", "tab:blue"),
                                (0.2, 2, "inductor", "tab:orange")):  # fmt: skip
        vals = [d[k] if d[k] is not None else 0.0 for d in data]
        ax.bar(x + off, vals, width=0.4, label=name, color=color)
        for xi, d in zip(x, data, strict=True):
            if d[k] is None:  # not measured (the script says why in results.json)
                ax.text(xi + off, 1.0, "n/a", ha="center", va="bottom", fontsize=6, rotation=90)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(x, labels, rotation=35, ha="right", fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("torch eager time / compiled time")
    ax.set_title("torch.compile speed-ups over eager (bench_compile.py)")
    ax.legend(fontsize=8)
    _footer(fig, doc)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def plot_dlpack(plt, doc: dict, path: str) -> bool:
    data = dlpack_times(doc)
    if not data:
        return False
    fig, ax = plt.subplots(figsize=(8, 0.3 * len(data) + 1.4))
    sections = sorted({d[0] for d in data}, key=[d[0] for d in data].index)
    palette = dict(zip(sections, plt.get_cmap("tab10").colors, strict=False))
    ax.barh(range(len(data)), [d[2] for d in data], color=[palette[d[0]] for d in data])
    for i, d in enumerate(data):
        ax.text(d[2], i, f" {d[2]:.0f}", va="center", fontsize=6)
    ax.set_yticks(range(len(data)), [d[1] for d in data], fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlim(right=max(d[2] for d in data) * 4)
    ax.set_xlabel("ns per tensor (CPU time, min of repeats; log scale)")
    ax.set_title("DLPack import and export from Python (bench_dlpack.py)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=palette[s]) for s in sections]
    ax.legend(handles, sections, fontsize=7, loc="upper right")
    _footer(fig, doc)
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def plot_call_torch(plt, doc: dict, path: str) -> bool:
    data = call_torch_times(doc)
    if not data:
        return False
    import numpy as np

    modes = sorted({d[0] for d in data}, key=[d[0] for d in data].index)
    paths = sorted({d[1] for d in data}, key=[d[1] for d in data].index)
    x = np.arange(len(modes))
    width = 0.8 / len(paths)
    fig, ax = plt.subplots(figsize=(8, 4))
    for i, p in enumerate(paths):
        vals = {d[0]: d[2] for d in data if d[1] == p}
        ax.bar(x + (i - (len(paths) - 1) / 2) * width, [vals.get(m, 0.0) for m in modes],
               width=width, label=p)  # fmt: skip
    ax.set_xticks(x, modes)
    ax.set_yscale("log")
    ax.set_ylabel("µs per call (min of repeats)")
    ax.set_title("call_torch inside jax.jit vs pure JAX (bench_call_torch.py)")
    ax.legend(fontsize=7)
    _footer(fig, doc)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def machine_rst(doc: dict) -> str:
    """The machine and run behind the charts, as reStructuredText for the performance page."""
    m = doc["machine"]
    isa = m["onednn"]
    busy = ""
    if m["load_average_1min"] >= m["logical_cpus"]:
        busy = " (busier than its core count: absolute times are inflated, ratios less so)"
    env = " ".join(f"{k}={v}" for k, v in doc.get("env", {}).items())
    command = f"{env} {doc['command']}".strip()
    return (
        f"Run of {doc['date_utc']} UTC (``{command}``) on {m['cpu']}, "
        f"{m['logical_cpus']} logical CPUs, 1-minute load average {m['load_average_1min']} "
        f"at the start{busy}; {m['os']}; Python {m['python']}, "
        f"torch {m['torch']}, JAX {m['jax']}, numpy {m['numpy']}, tensorbridge "
        f"{m['tensorbridge']}, oneDNN {isa['version']} (ISA {isa['effective_isa']}).\n"
        + _summary(doc)
    )


def _geomean(values: list[float]) -> float:
    import math

    return math.exp(sum(math.log(v) for v in values) / len(values))


def _summary(doc: dict) -> str:
    """The run's headline figures, each a geometric mean of ratios measured side by side."""
    lines = []
    k = [r for _, r in kernel_ratios(doc)]
    if k:
        lines.append(
            f"* Per op: torch eager time / tensorbridge time, geometric mean over {len(k)} ops: "
            f"{_geomean(k):.2f}x ({sum(r >= 1 for r in k)} ops at 1.00x or faster)."
        )
    c = compile_speedups(doc)
    tb = [d[1] for d in c if d[1] is not None]
    both = [(d[1], d[2]) for d in c if d[1] is not None and d[2] is not None]
    if tb:
        line = (
            f"* Compiled: eager time / tensorbridge plan time, geometric mean over {len(tb)} "
            f"configurations: {_geomean(tb):.2f}x"
        )
        if both:
            line += (
                f"; inductor time / tensorbridge time over the {len(both)} configurations "
                f"inductor was measured on: {_geomean([a / b for a, b in both]):.2f}x"
            )
        lines.append(line + ".")
    j = call_torch_times(doc)
    for mode in dict.fromkeys(d[0] for d in j):
        t = {d[1]: d[2] for d in j if d[0] == mode}
        if "pure JAX" in t and "tb.call_torch, FFI plan" in t:
            lines.append(
                f"* ``{mode}``: call_torch on the FFI plan {t['tb.call_torch, FFI plan']:.1f} us "
                f"per call, pure JAX {t['pure JAX']:.1f} us."
            )
    return ("\nHeadline figures of this run:\n\n" + "\n".join(lines) + "\n") if lines else ""


CHARTS = {
    "kernels.png": plot_kernels,
    "compile.png": plot_compile,
    "dlpack.png": plot_dlpack,
    "call_torch.png": plot_call_torch,
}


def draw(doc: dict, out_dir: str) -> list[str]:
    """Writes the charts the document has data for; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(out_dir, exist_ok=True)
    written = [os.path.join(out_dir, "machine.rst")]
    with open(written[0], "w") as f:
        f.write(machine_rst(doc))
    for name, plot in CHARTS.items():
        path = os.path.join(out_dir, name)
        if plot(plt, doc, path):
            written.append(path)
    return written


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    p.add_argument("--from-json", action="store_true", help="draw from --json, run nothing")
    p.add_argument("--json", default=DEFAULT_JSON, help="the results document to write or read")
    p.add_argument("--out", default=DEFAULT_OUT, help="folder of the PNG charts")
    p.add_argument("--threads", type=int, default=1, help="threads of every framework")
    p.add_argument("--scripts", nargs="+", default=list(SCRIPTS), choices=SCRIPTS)
    ns = p.parse_args()
    if ns.from_json:
        with open(ns.json) as f:
            doc = json.load(f)
    else:
        doc = run(ns.scripts, ns.threads)
        os.makedirs(os.path.dirname(os.path.abspath(ns.json)), exist_ok=True)
        with open(ns.json, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
    for path in draw(doc, ns.out):
        print(path)


if __name__ == "__main__":
    main()
