"""Where does the time of one compiled call go? A batch-1 MLP (784-512-512-10, ReLU, the MLP
of bench_compile.py) in inference, ``torch.compile(model, backend="tensorbridge")``.

Question: of one call of the compiled model, how much is dynamo's guards and AOT autograd's
runtime wrappers (Python), how much the plan's own overhead (binding inputs, slots, dispatch
per node, in C++), and how much the kernels of its nodes -- with and without the fusion pass?

Measured side by side (min of interleaved repeats): torch eager; the compiled call; the same
dynamo + AOT path with a compiled graph that does nothing (the wrapper overhead); ``plan.run``
on the bound inputs (the plan alone). Kernel time: the op table's per-op timers
(``tb.config.profiling``) over ``plan.run`` calls, per call; plan overhead = plan.run - kernels. Last, at batch 4: a static graph's call next to
a call of the graph traced with a symbolic batch size (``dynamic=True``), which finds the plan
built for the call's shapes.

Usage: python benchmarks/bench_compile_overhead.py [--quick] [--repeats N] [--threads N]
"""

from __future__ import annotations

import torch
import torch.nn as nn

import tensorbridge as tb
from _bench_util import Timing, env_header, fmt_time, measure_interleaved, parse_args, print_table
from tensorbridge import _compile

ARGS = parse_args(
    __doc__, full_repeats=15, quick_repeats=5, full_target_s=0.02, quick_target_s=0.01
)


def _model():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)
    ).eval()


def _compiled(model, x, fusion: bool):
    """The compiled model, its plan and the inputs its plan receives (bound once)."""
    torch._dynamo.reset()
    tb.config.fusion = fusion
    seen = []
    real = _compile.compile_graph

    def recording(gm, example_inputs=None, **kw):
        run = real(gm, example_inputs, **kw)

        def first(args):
            if not seen:
                seen.extend(args)
            return run(args)

        first._boxed_call = True
        return first

    _compile.compile_graph = recording
    try:
        compiled = torch.compile(model, backend="tensorbridge", dynamic=False)
        compiled(x)
    finally:
        _compile.compile_graph = real
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="tensorbridge", dynamic=False)
    compiled(x)  # built again without the recording wrapper, which the timings leave out
    plan = _compile.state.plans[-1]
    return compiled, plan, [_compile._to_array(a) for a in seen]


def _noop_graph(model, x):
    """dynamo + AOT autograd around a compiled graph that returns a stored result."""
    from torch._dynamo.backends.common import aot_autograd

    def compiler(gm, example_inputs):
        out = gm(*example_inputs)
        out = list(out) if isinstance(out, (list, tuple)) else [out]

        def run(args):
            args.clear()
            return out

        run._boxed_call = True
        return run

    torch._dynamo.reset()
    fn = torch.compile(model, backend=aot_autograd(fw_compiler=compiler), dynamic=False)
    fn(x)
    return fn


def _kernel_ns(plan, inputs, calls: int) -> dict:
    tb.diagnostics.reset_metrics()
    tb.config.profiling = True
    try:
        for _ in range(calls):
            plan.run(inputs)
    finally:
        tb.config.profiling = False
    return {op: m["time_ns"] / calls for op, m in tb.diagnostics.metrics().items()}


def main() -> None:
    env_header("compiled-call breakdown: batch-1 MLP inference", ARGS)
    model = _model()
    x = torch.randn(1, 784)
    rows, kernels = [], {}
    with torch.no_grad():
        noop = _noop_graph(model, x)
        for fusion in (False, True):
            compiled, plan, inputs = _compiled(model, x, fusion)
            t = measure_interleaved(
                [
                    ("eager", lambda: lambda: model(x)),
                    ("compiled", lambda c=compiled: lambda: c(x)),
                    ("dynamo+AOT, no-op graph", lambda: lambda: noop(x)),
                    ("plan.run", lambda p=plan, i=inputs: lambda: p.run(i)),
                ],
                repeats=ARGS.repeats,
                target_s=ARGS.target_s,
            )
            k = _kernel_ns(plan, inputs, 200 if ARGS.quick else 1000)
            kernels[fusion] = k
            ksum = sum(k.values())
            plan_ns = t["plan.run"].min_ns if isinstance(t["plan.run"], Timing) else float("nan")
            rows.append(
                [
                    f"fusion {'on' if fusion else 'off'}",
                    t["eager"],
                    t["compiled"],
                    t["dynamo+AOT, no-op graph"],
                    t["plan.run"],
                    fmt_time(ksum),
                    fmt_time(plan_ns - ksum),
                ]
            )
    print_table(
        "one call (min of repeats)",
        ["", "eager", "compiled", "dynamo+AOT no-op", "plan.run", "kernels", "plan overhead"],
        rows,
    )
    for fusion, k in kernels.items():
        print(
            f"kernel time per call, fusion {'on' if fusion else 'off'}: "
            + ", ".join(
                f"{op} {fmt_time(ns)}" for op, ns in sorted(k.items(), key=lambda kv: -kv[1])
            )
        )
    _shape_plans(model)


def _shape_plans(model) -> None:
    """A graph traced with a symbolic batch size runs on one plan per batch size: what does
    finding that plan (the call's shape signature, a lock) cost next to a static graph's call?
    Batch 4 (batch 1 is never symbolic: dynamo specializes sizes 0 and 1)."""
    x = torch.randn(4, 784)
    torch._dynamo.reset()
    static = torch.compile(model, backend="tensorbridge", dynamic=False)
    static(x)
    symbolic = torch.compile(model, backend="tensorbridge", dynamic=True)
    symbolic(x)
    symbolic(torch.randn(5, 784))
    built = tb.diagnostics.plan_metrics(symbolic)["shape_plans"]
    t = measure_interleaved(
        [
            ("eager", lambda: lambda: model(x)),
            ("static graph", lambda: lambda: static(x)),
            ("symbolic graph, shape plan", lambda: lambda: symbolic(x)),
        ],
        repeats=ARGS.repeats,
        target_s=ARGS.target_s,
    )
    print_table(
        f"batch 4, one call (min of repeats); the symbolic graph holds {built} shape plans",
        ["", "eager", "static graph", "symbolic graph, shape plan"],
        [["fusion on", t["eager"], t["static graph"], t["symbolic graph, shape plan"]]],
    )


if __name__ == "__main__":
    main()
