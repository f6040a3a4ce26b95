"""Conformance sweep: what share of PyTorch's OpInfo samples run correctly through the table?

Question: for every OpInfo of torch's ``op_db`` (less ``tensorbridge.coverage.SKIP``: random,
uninitialized and sparse ones), the first ``--max-samples`` samples per dtype, run with every
ATen op in tensorbridge's table and compared with torch's CPU kernels at torch's tolerances
(``tensorbridge._opinfo.run_samples``), how many pass, how many need an op the table lacks
(blocked), how many give a wrong value, how many raise? Baseline: torch's own CPU result.

    python benchmarks/opinfo_sweep.py [--max-samples 4] [--dtypes float32,...] [--json OUT]
                                      [--failures]

Prints one line per dtype (pass / blocked / wrong / raised and the pass rate) and the ops that
block the most samples. The whole sweep takes several minutes; the quick subset runs in
``tests/python/test_opinfo.py``.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time

from tensorbridge import coverage

DEFAULT_DTYPES = "float32,float64,int64,bool,bfloat16,float16"


def classify(sample) -> str:
    """'pass' | 'blocked' | 'wrong' (a value mismatch) | 'raised' (any other exception)."""
    if sample.status != "fail":
        return sample.status
    return "wrong" if sample.message.startswith("AssertionError") else "raised"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--max-samples", type=int, default=4)
    p.add_argument("--dtypes", default=DEFAULT_DTYPES)
    p.add_argument("--json", default=None, help="write every sample's status to this file")
    p.add_argument("--failures", action="store_true", help="print every wrong / raised sample")
    args = p.parse_args(argv)
    dtypes = [d for d in args.dtypes.split(",") if d]
    t0 = time.perf_counter()
    results = coverage.sweep(dtypes, max_samples=args.max_samples, grad_dtypes=())
    counts: dict[str, collections.Counter] = {d: collections.Counter() for d in dtypes}
    blocking: collections.Counter = collections.Counter()
    rows = []
    for r in results:
        dn = str(r.dtype).replace("torch.", "")
        for s in r.samples:
            kind = classify(s)
            counts[dn][kind] += 1
            blocking.update(s.fallbacks if kind == "blocked" else ())
            rows.append(
                {
                    "op": r.op,
                    "dtype": dn,
                    "sample": s.index,
                    "status": kind,
                    "message": s.message[:300],
                }
            )
            if args.failures and kind in ("wrong", "raised"):
                print(f"{kind:6s} {r.op} {dn} sample {s.index}: {s.message[:200]!r}")
    print(
        f"{'dtype':9s} {'samples':>7s} {'pass':>6s} {'blocked':>7s} {'wrong':>5s} {'raised':>6s}  rate"
    )
    for dn in dtypes:
        c = counts[dn]
        total = sum(c.values())
        rate = 100.0 * c["pass"] / total if total else 0.0
        print(
            f"{dn:9s} {total:7d} {c['pass']:6d} {c['blocked']:7d} {c['wrong']:5d} "
            f"{c['raised']:6d}  {rate:.1f}%"
        )
    print(
        "ops blocking the most samples:",
        ", ".join(f"{op} ({n})" for op, n in blocking.most_common(15)),
    )
    print(f"sweep took {time.perf_counter() - t0:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
