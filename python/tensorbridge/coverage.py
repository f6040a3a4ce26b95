"""Which of ATen's core ops tensorbridge's table serves, and how its kernels fare on OpInfo samples.

    python -m tensorbridge.coverage [--dtypes float32,float64,int64,bool] [--ops add,mul]
                                    [--grad-dtypes float64] [--max-samples N] [--json]
                                    [--failures N]

Enumerates every overload of ``torch.ops.aten`` tagged ``torch.Tag.core``, says for each how the
table serves it (``kernel``; ``composite`` when it is a composite op with a kernel of its own;
``torch-decomposed`` when torch decomposes it before dispatch, so the table serves the ops it
decomposes into; ``-`` when not registered), runs PyTorch's OpInfo samples (``op_db``) through the
table (see ``tensorbridge._opinfo``; for ``--grad-dtypes`` the gradients too, so backward ops run
in the table) and attributes each sample to the overloads it hit. Prints per
core overload: how it is served, samples passed / total, the dtypes it passed samples in; then the
totals; then every ATen overload the samples exercised, core or not, with the samples each
blocked (ran on torch's kernel because the table lacks it), and the share of samples blocked.
``--ops`` limits the sweep to those OpInfos (the overload list stays complete).
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time

import tensorbridge as tb
from tensorbridge import _opinfo

# OpInfos the sweep leaves out, each with its reason.
SKIP = {
    "bernoulli": "random: tensorbridge sends random ops to torch by design",
    "multinomial": "random: tensorbridge sends random ops to torch by design",
    "normal": "random: tensorbridge sends random ops to torch by design",
    "normal.in_place": "random: tensorbridge sends random ops to torch by design",
    "normal.number_mean": "random: tensorbridge sends random ops to torch by design",
    "uniform": "random: tensorbridge sends random ops to torch by design",
    "exponential": "random: tensorbridge sends random ops to torch by design",
    "geometric": "random: tensorbridge sends random ops to torch by design",
    "log_normal": "random: tensorbridge sends random ops to torch by design",
    "cauchy": "random: tensorbridge sends random ops to torch by design",
    "rand_like": "random: tensorbridge sends random ops to torch by design",
    "randn_like": "random: tensorbridge sends random ops to torch by design",
    "randint_like": "random: tensorbridge sends random ops to torch by design",
    "randint": "random: tensorbridge sends random ops to torch by design",
    "randn": "random: tensorbridge sends random ops to torch by design",
    "nn.functional.dropout": "random: tensorbridge sends random ops to torch by design",
    "nn.functional.dropout2d": "random: tensorbridge sends random ops to torch by design",
    "nn.functional.dropout3d": "random: tensorbridge sends random ops to torch by design",
    "nn.functional.alpha_dropout": "random: tensorbridge sends random ops to torch by design",
    "nn.functional.feature_alpha_dropout.with_train": "random: tensorbridge sends random ops to torch by design",
    "nn.functional.rrelu": "random: tensorbridge sends random ops to torch by design",
    "nn.functional.fractional_max_pool2d": "random: tensorbridge sends random ops to torch by design",
    "nn.functional.fractional_max_pool3d": "random: tensorbridge sends random ops to torch by design",
    "nn.functional.multi_head_attention_forward": "random: dropout inside; torch draws the numbers",
    "nn.functional.scaled_dot_product_attention": "random: dropout inside; torch draws the numbers",
    "as_strided.partial_views": (
        "storage_offset counts from the start of torch's storage, which DLPack does not lend: "
        "the table sees the view from its first element"
    ),
    "sparse.sampled_addmm": "sparse layouts: DLPack lends strided tensors only (BufferError)",
    "empty": "uninitialized memory: torch's reference itself is arbitrary",
    "empty_like": "uninitialized memory: torch's reference itself is arbitrary",
    "empty_strided": "uninitialized memory: torch's reference itself is arbitrary",
    "empty_permuted": "uninitialized memory: torch's reference itself is arbitrary",
    "new_empty": "uninitialized memory: torch's reference itself is arbitrary",
    "new_empty_strided": "uninitialized memory: torch's reference itself is arbitrary",
}

SKIP["chalf"] = "complex32 results: tensorbridge has no complex32 dtype"
SKIP["polar"] = (
    "float64 gradients: polar's backward multiplies by the Python scalar 1j, and op arguments "
    "hold no complex numbers yet (NotImplementedError naming the scalar)"
)


def skip_reason(opinfo) -> str | None:
    return SKIP.get(_opinfo.opinfo_id(opinfo)) or SKIP.get(opinfo.name)


def served_by() -> dict[str, str]:
    """Core overload -> 'kernel' | 'composite' | 'torch-decomposed' | '-' (not registered)."""
    kernels = {o["op"] for o in tb.ops()}
    composites = {op for op, c in tb.config.composites().items() if c["has_kernel"]}
    out = {}
    for op in _opinfo.core_overloads():
        if op in composites:
            out[op] = "composite"
        elif op in kernels:
            out[op] = "kernel"
        elif _opinfo.decomposed_by_torch(op):
            out[op] = "torch-decomposed"
        else:
            out[op] = "-"
    return out


def sweep(dtypes, ops=None, max_samples=None, progress=None, grad_dtypes=("float64",)):
    """OpInfoResults of every op_db entry (or those named in `ops`) for each dtype name; for
    the dtypes in `grad_dtypes` the gradients are compared too (backward ops in the table)."""
    infos = _opinfo.find_opinfos(ops) if ops else list(_opinfo.op_db())
    results = []
    for o in infos:
        if skip_reason(o):
            continue
        for dn in dtypes:
            r = _opinfo.run_samples(
                o, _opinfo.DTYPES[dn], max_samples=max_samples, grad=dn in grad_dtypes
            )
            if progress is not None:
                progress(o, dn, r)
            if r.total:
                results.append(r)
    return results


def _attributed(op: str, r, s) -> bool:
    if op in s.hit:
        return True
    # Ops torch decomposes never reach the table by name: samples of their OpInfo count for them.
    return r.aten_name and op.split("::")[1].split(".")[0] == r.aten_name


def per_overload(results, serving):
    """overload -> {dtype name -> [passed, judged]} (blocked samples are not judged)."""
    table: dict[str, collections.defaultdict[str, list[int]]] = {
        op: collections.defaultdict(lambda: [0, 0]) for op in serving
    }
    decomposed = [op for op, how in serving.items() if how == "torch-decomposed"]
    for r in results:
        dn = str(r.dtype).replace("torch.", "")
        for s in r.samples:
            if s.status == "blocked":
                continue
            ops = {op for op in s.hit if op in table}
            ops |= {op for op in decomposed if _attributed(op, r, s)}
            for op in ops:
                cell = table[op][dn]
                cell[1] += 1
                cell[0] += s.status == "pass"
    return table


def report(results, serving, dtypes, bar=0.95) -> dict:
    table = per_overload(results, serving)
    rows = []
    for op, how in serving.items():
        cells = table[op]
        passed = sum(c[0] for c in cells.values())
        total = sum(c[1] for c in cells.values())
        below = [
            dn
            for dn in ("float32", "float64", "int64", "bool")
            if dn in cells and cells[dn][1] and cells[dn][0] / cells[dn][1] < bar
        ]
        rows.append(
            {
                "op": op,
                "served_by": how,
                "passed": passed,
                "total": total,
                "dtypes": {dn: list(cells[dn]) for dn in dtypes if dn in cells},
                "below_bar": below if how != "-" else [],
            }
        )
    per_dtype = {}
    for dn in dtypes:
        rs = [r for r in results if str(r.dtype).replace("torch.", "") == dn]
        per_dtype[dn] = {
            "passed": sum(r.passed for r in rs),
            "blocked": sum(r.blocked for r in rs),
            "total": sum(r.total for r in rs),
        }
    registered = sum(r["served_by"] != "-" for r in rows)
    total = sum(c["total"] for c in per_dtype.values())
    blocked = sum(c["blocked"] for c in per_dtype.values())
    return {
        "core_overloads": len(rows),
        "registered": registered,
        "samples": per_dtype,
        "overloads": rows,
        "below_bar": [r["op"] for r in rows if r["below_bar"]],
        "exercised": exercised(results, serving),
        "blocked_share": blocked / total if total else 0.0,
    }


def exercised(results, serving) -> list[dict]:
    """Every ATen overload the samples reached, core or not: whether it is core, the
    samples that ran it in the table (judged) and passed, and the samples it blocked (it ran
    on torch's kernel), most blocking first."""
    rows: dict[str, dict] = {}
    for r in results:
        for s in r.samples:
            for op in s.hit | s.fallbacks:
                row = rows.setdefault(
                    op, {"op": op, "core": op in serving, "passed": 0, "judged": 0, "blocked": 0}
                )
                if op in s.fallbacks:
                    row["blocked"] += 1
                elif s.status != "blocked":
                    row["judged"] += 1
                    row["passed"] += s.status == "pass"
    return sorted(rows.values(), key=lambda row: (-row["blocked"], row["op"]))


def _print(rep, dtypes, results, failures: int) -> None:
    print(f"{'core overload':44s} {'served by':16s} {'passed/total':>13s}  dtypes (passed/judged)")
    for row in rep["overloads"]:
        ds = " ".join(f"{dn}:{p}/{t}" for dn, (p, t) in row["dtypes"].items())
        flag = "  BELOW BAR: " + ",".join(row["below_bar"]) if row["below_bar"] else ""
        print(
            f"{row['op']:44s} {row['served_by']:16s} {row['passed']:6d}/{row['total']:<6d}  {ds}{flag}"
        )
    print()
    print(f"core overloads served by the table: {rep['registered']} / {rep['core_overloads']}")
    for dn, c in rep["samples"].items():
        judged = c["total"] - c["blocked"]
        pct = 100.0 * c["passed"] / judged if judged else 0.0
        print(
            f"samples {dn:9s}: {c['passed']} / {judged} passed ({pct:.1f}%), "
            f"{c['blocked']} more blocked on ops the table lacks"
        )
    print(f"overloads below the 95% bar: {rep['below_bar'] or 'none'}")
    ex = rep["exercised"]
    print(
        f"\nATen overloads the samples exercised: {len(ex)} "
        f"({sum(not row['core'] for row in ex)} outside the core set); "
        f"{sum(row['blocked'] > 0 for row in ex)} fell back to torch"
    )
    for row in ex:
        if row["blocked"]:
            print(f"  {row['op']:52s} blocked {row['blocked']} samples")
    print(f"samples blocked on ops the table lacks: {100.0 * rep['blocked_share']:.1f}%")
    if failures:
        print("\nfailures:")
        for r in results:
            fails = [(i, m) for i, m in r.failures if not m.startswith("fell back")]
            for i, m in fails[:failures]:
                print(f"  {r.op} {str(r.dtype).replace('torch.', '')} sample {i}: {m[:300]}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m tensorbridge.coverage",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--dtypes",
        default="float32,float64,int64,bool",
        help=f"comma-separated, from {','.join(_opinfo.DTYPES)}",
    )
    p.add_argument("--ops", default=None, help="comma-separated OpInfo names (default: all)")
    p.add_argument(
        "--max-samples",
        type=int,
        default=None,
        help="samples per OpInfo and dtype (the first N torch generates)",
    )
    p.add_argument(
        "--grad-dtypes",
        default="float64",
        help="dtypes whose samples also compare gradients (backward ops); '' for none",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--failures", type=int, default=0, help="failure messages shown per OpInfo")
    p.add_argument("--progress", action="store_true", help="one line per OpInfo/dtype on stderr")
    args = p.parse_args(argv)
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    unknown = [d for d in dtypes if d not in _opinfo.DTYPES]
    if unknown:
        p.error(f"unknown dtypes {unknown}; choose from {list(_opinfo.DTYPES)}")
    ops = [o.strip() for o in args.ops.split(",")] if args.ops else None

    def progress(o, dn, r):
        print(
            f"{_opinfo.opinfo_id(o):40s} {dn:9s} {r.passed}/{r.total} blocked={r.blocked}",
            file=sys.stderr,
            flush=True,
        )

    t0 = time.perf_counter()
    grad_dtypes = [d.strip() for d in args.grad_dtypes.split(",") if d.strip()]
    results = sweep(dtypes, ops, args.max_samples, progress if args.progress else None, grad_dtypes)
    rep = report(results, served_by(), dtypes)
    rep["seconds"] = round(time.perf_counter() - t0, 1)
    if args.json:
        rep["opinfos"] = [
            {
                "op": r.op,
                "dtype": str(r.dtype).replace("torch.", ""),
                "passed": r.passed,
                "blocked": r.blocked,
                "total": r.total,
                "failures": [{"sample": i, "message": m} for i, m in r.failures],
            }
            for r in results
        ]
        json.dump(rep, sys.stdout, indent=1)
        print()
    else:
        _print(rep, dtypes, results, args.failures)
        print(f"sweep took {rep['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
