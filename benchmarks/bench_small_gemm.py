"""Are float32 products with few rows or a short inner dimension at least as fast on
tensorbridge's small-product kernels (kernels/cpu/small_gemm.cc) as on the oneDNN primitives
(JIT sgemm matmul, inner product) that served them before?

Baseline: another build of tensorbridge (``--baseline PYTHONPATH``, e.g. a build of the commit
before), run in its own process. The two builds run alternately, ``--rounds`` times each, in
one invocation; each round times every case (``tb.call`` of the op on the same operands:
``torch.utils.benchmark`` blocks through ``_bench_util.measure``, the fastest block's time per
call) and the table shows each build's minimum over rounds. Without ``--baseline`` the current build alone is timed.

    python benchmarks/bench_small_gemm.py --baseline /path/to/old/pkg --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

# name: (op, m, k, n, b layout); b "wt" is nn.Linear's weight.t(), "row" a row-major [k, n];
# a "col" (k < 8 cases) is the transpose of a row-major [k, m] gradient.
CASES = [
    ("mm", 2, 128, 128, "wt"),
    ("addmm", 2, 128, 128, "wt"),
    ("epilogue_tanh", 2, 128, 128, "wt"),
    ("mm", 2, 128, 128, "row"),
    ("mm", 2, 768, 768, "wt"),
    ("addmm", 2, 768, 768, "wt"),
    ("mm", 2, 768, 768, "row"),
    ("mm", 8, 128, 512, "wt"),
    ("mm", 8, 512, 128, "row"),
    ("mm", 1, 768, 768, "wt"),
    ("mm", 1, 3072, 768, "wt"),
    ("mm", 1, 768, 3072, "row"),
    ("mm_kshort", 128, 2, 128, "row"),
    ("mm_kshort", 768, 2, 768, "row"),
    ("mm_kshort", 512, 8, 512, "row"),
]


def _label(case):
    op, m, k, n, lb = case
    return f"{op} {m}x{k}x{n} b={lb}"


def worker(repeats: int) -> None:
    import torch

    import tensorbridge as tb

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _bench_util as bu

    torch.manual_seed(0)
    out = {}
    for case in CASES:
        op, m, k, n, lb = case
        b = torch.randn(n, k).t() if lb == "wt" else torch.randn(k, n)
        a = torch.randn(k, m).t() if op == "mm_kshort" else torch.randn(m, k)
        bias = torch.randn(n)
        if op in ("mm", "mm_kshort"):
            args = ("aten::mm", a, b)
        elif op == "addmm":
            args = ("aten::addmm", bias, a, b)
        else:
            w = b.t()  # the weight [n, k]
            args = (
                "tensorbridge::matmul_epilogue",
                a,
                w,
                bias,
                None,
                True,
                "tanh",
                [m, n],
                torch.float32,
                -1,
            )
        t = bu.measure(lambda args=args: tb.call(*args), repeats=repeats, warmup=50)
        out[_label(case)] = t.min_ns / 1000.0
    print(json.dumps(out))


def _run(pythonpath: str, repeats: int) -> dict:
    env = dict(os.environ, PYTHONPATH=pythonpath)
    r = subprocess.run(
        [sys.executable, __file__, "--worker", "--repeats", str(repeats)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--baseline", help="PYTHONPATH of the build to compare with")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeats", type=int, default=15, help="blocks of ~20 ms per case")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args.repeats)
        return
    builds = {"new": os.environ.get("PYTHONPATH", "")}
    if args.baseline:
        builds["old"] = args.baseline
    best: dict[str, dict[str, float]] = {name: {} for name in builds}
    order = list(builds)
    for r in range(args.rounds):
        for name in order if r % 2 == 0 else order[::-1]:
            for label, us in _run(builds[name], args.repeats).items():
                best[name][label] = min(best[name].get(label, float("inf")), us)
    print(f"load average: {os.getloadavg()}")
    head = f"{'case (min us per call)':34}" + "".join(f"{n:>10}" for n in builds)
    print(head + ("   new/old" if args.baseline else ""))
    for case in CASES:
        label = _label(case)
        row = f"{label:34}" + "".join(f"{best[n][label]:10.2f}" for n in builds)
        if args.baseline:
            row += f"{best['new'][label] / best['old'][label]:10.2f}"
        print(row)


if __name__ == "__main__":
    main()
