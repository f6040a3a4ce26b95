"""``tensorbridge.diagnostics.profile``: where a compiled function's plans spend their time, node by node.

    with tb.diagnostics.profile(compiled) as prof:
        for _ in range(100):
            compiled(x)
    print(prof)              # per plan: the costliest nodes; then per op over all plans
    prof.nodes               # one dict per plan node: plan, node, op, served_by, calls,
                             # us_per_call (mean), min_us (fastest call), total_us, group
                             # (a fused pointwise node's ops, else None)

While the block runs, every plan of ``compiled`` (or every plan, without an argument), and
every plan built inside the block, times each node it runs (argument binding, kernel, result
storing); outside a block plans read no clock.
"""

from __future__ import annotations

import collections
from collections.abc import Callable

from tensorbridge import _compile

__all__ = ["Profile", "profile"]


class Profile:
    """The node times gathered by one ``with tb.diagnostics.profile(...)`` block."""

    def __init__(self, fn: Callable | None = None) -> None:
        self._fn = fn
        self._entries: list[dict] = []
        self._before: set[int] = set()
        self.nodes: list[dict] = []

    def _targets(self) -> list[dict]:
        if self._fn is None:
            return [{"kind": k, "plan": p} for p, k in list(_compile.state.all_plans.items())]
        return [e for r in _compile._records_of(self._fn) for e in r.plans]

    def __enter__(self) -> Profile:
        self._entries = self._targets()
        self._before = {id(e["plan"]) for e in self._entries}
        for e in self._entries:
            e["plan"].profiling = True
        _compile.state.profiling.append(self)
        return self

    def __exit__(self, *exc) -> None:
        _compile.state.profiling.remove(self)
        seen = {id(e["plan"]) for e in self._entries}
        # Plans built inside the block (first calls, recompilations) were switched on by
        # compile_graph; those of the profiled function are collected here.
        self._entries += [e for e in self._targets() if id(e["plan"]) not in seen]
        self.nodes = []
        for i, e in enumerate(self._entries):
            plan = e["plan"]
            # a fused pointwise node's ops (tensorbridge._fuse), by its plan node name
            group_ops = {name: ops for name, ops, _ in e.get("groups", [])}
            for node, op, served_by, calls, ns, min_ns in plan.node_times():
                self.nodes.append(
                    {
                        "plan": i,
                        "kind": e["kind"],
                        "node": node,
                        "op": op,
                        "served_by": served_by,
                        "calls": calls,
                        "us_per_call": ns / calls / 1e3 if calls else 0.0,
                        "min_us": min_ns / 1e3,
                        "total_us": ns / 1e3,
                        "group": group_ops.get(node),
                    }
                )
            if not _compile.state.profiling or not any(
                p._covers(plan) for p in _compile.state.profiling
            ):
                plan.profiling = False

    def _covers(self, plan) -> bool:
        return any(e["plan"] is plan for e in self._entries) or self._fn is None

    def by_op(self) -> list[tuple[str, float, int]]:
        """(op, total microseconds, node calls) over all plans, costliest first."""
        total: dict[str, float] = collections.defaultdict(float)
        calls: dict[str, int] = collections.defaultdict(int)
        for n in self.nodes:
            total[n["op"]] += n["total_us"]
            calls[n["op"]] += n["calls"]
        return sorted(((op, t, calls[op]) for op, t in total.items()), key=lambda r: -r[1])

    def table(self, top: int = 12) -> str:
        if not self.nodes:
            return "tensorbridge.diagnostics.profile: no plan ran inside the block"
        lines = []
        for i, e in enumerate(self._entries):
            rows = [n for n in self.nodes if n["plan"] == i and n["calls"]]
            if not rows:
                continue
            runs = max(n["calls"] for n in rows)
            per_run = sum(n["total_us"] for n in rows) / runs
            lines.append(
                f"{e['kind']} plan {i}: {runs} runs, {per_run:.1f} us per run in {len(rows)} nodes"
            )
            for n in sorted(rows, key=lambda n: -n["total_us"])[:top]:
                share = 100.0 * n["total_us"] / (per_run * runs) if per_run else 0.0
                group = f" fusing {n['group']}" if n["group"] else ""
                lines.append(
                    f"  {n['us_per_call']:9.2f} {share:5.1f}%  {n['min_us']:9.2f}  {n['node']} = "
                    f"{n['op']} [{n['served_by']}]{group}"
                )
        lines.append("by op, all plans:")
        grand = sum(t for _, t, _ in self.by_op()) or 1.0
        for op, t, c in self.by_op()[:top]:
            lines.append(f"  {t:11.1f} us {100.0 * t / grand:5.1f}%  {op} ({c} node calls)")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def profile(fn: Callable | None = None) -> Profile:
    """A context manager timing the nodes of ``fn``'s plans (``fn``: a
    ``torch.compile(..., backend="tensorbridge")`` module or function; without it, every
    plan). See the module docstring."""
    return Profile(fn)
