"""Does memory grow over a long run of wrap / export / op cycles?

Question: after a million cycles of importing numpy memory (``tb.from_dlpack``), running a
table op on it (``tb.call``), exporting the result (numpy's and torch's ``from_dlpack``), an
eager op on a wrapped tensor (``tb.wrap``) and a refused call (an error raised through the
table), is the process's resident memory where it was after the warm-up? A leak of one small
object per cycle shows up as tens of MB here.

Baseline, in the same run: the same number of cycles of the nearest pure numpy/torch loop
(``torch.from_dlpack`` of the array, the same op in torch, ``numpy.from_dlpack`` back, and a
refused torch call), whose growth is the interpreter's and the frameworks' own.

Reported (not asserted): resident set size (``/proc/self/statm``) after the warm-up and at
checkpoints, its growth per million cycles, and tensorbridge's host cache (``tb.diagnostics.memory_stats``),
which holds freed blocks for reuse by design and is reported apart.
Usage: python benchmarks/bench_soak.py [--cycles N] [--quick]
"""

from __future__ import annotations

import argparse
import gc
import os
import time

import numpy as np
import torch

import tensorbridge as tb

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def tensorbridge_cycle(arrays):
    """One cycle per array: import, op, export (numpy and torch), eager op, refused call."""
    for a in arrays:
        x = tb.from_dlpack(a)
        y = tb.call("aten::add.Tensor", x, x, alpha=2)
        np.from_dlpack(y)
        torch.from_dlpack(y)
        tb.to_numpy(tb.wrap(a) * 2)
        try:
            tb.call("aten::mm", x, x)  # 1-d operands: a ValueError through the table
        except ValueError:
            pass


def torch_cycle(arrays):
    """The same cycle on numpy and torch alone."""
    for a in arrays:
        x = torch.from_dlpack(a)
        y = torch.add(x, x, alpha=2)
        np.from_dlpack(y)
        (x * 2).numpy()
        try:
            torch.mm(x, x)
        except RuntimeError:
            pass


def soak(name, cycle, cycles, checkpoints, batch):
    arrays = [
        np.random.default_rng(i).standard_normal(17 + i).astype(np.float32) for i in range(batch)
    ]
    for _ in range(max(1, 10_000 // batch)):  # warm-up: caches, lazy initialisation
        cycle(arrays)
    gc.collect()
    start_rss = rss_bytes()
    done, rows, t0 = 0, [], time.perf_counter()
    step = cycles // checkpoints
    while done < cycles:
        for _ in range(step // batch):
            cycle(arrays)
        done += step
        gc.collect()
        rows.append((done, rss_bytes() - start_rss))
    elapsed = time.perf_counter() - t0
    print(
        f"\n{name}: {cycles:,} cycles in {elapsed:.1f} s, RSS after warm-up {start_rss / 2**20:.1f} MiB"
    )
    for n, grow in rows:
        print(f"  {n:>10,} cycles: RSS {grow / 2**20:+8.2f} MiB")
    growth = rows[-1][1] - rows[0][1]  # from the first checkpoint on
    per_million = growth / max(1, cycles - rows[0][0]) * 1e6
    print(f"  growth after the first checkpoint: {per_million / 2**20:+.2f} MiB per million cycles")
    return per_million


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cycles", type=int, default=1_000_000)
    p.add_argument("--quick", action="store_true", help="100,000 cycles")
    args = p.parse_args()
    cycles = 100_000 if args.quick else args.cycles
    torch.set_num_threads(1)
    print(f"tensorbridge soak: {cycles:,} cycles of 5 crossings each, torch {torch.__version__}")
    ours = soak("tensorbridge", tensorbridge_cycle, cycles, checkpoints=10, batch=10)
    stats = tb.diagnostics.memory_stats()
    print(f"  host cache now: {stats}")
    peer = soak("numpy + torch (baseline)", torch_cycle, cycles, checkpoints=10, batch=10)
    print(
        f"\nRSS growth per million cycles: tensorbridge {ours / 2**20:+.2f} MiB, "
        f"numpy + torch {peer / 2**20:+.2f} MiB"
    )


if __name__ == "__main__":
    main()
