"""How fast are tensorbridge's element-wise kernels on non-contiguous layouts, next to torch eager?

Question: element-wise results follow their inputs' layout (torch's TensorIterator rule;
kernels/layout.h): on transposed and channels-last inputs, do the kernels walk memory in order
(as fast as on contiguous inputs) and give torch's strides? And do contiguous inputs keep their
speed?

Baseline: torch eager on torch tensors over the very same memory, measured in the same run
(``tb.call("aten::...")`` on ``tb.Array``s lent by DLPack; the tensorbridge figure includes
the op-table call). Ratio = torch time / tensorbridge time on min-of-repeats (>= 1.00x:
tensorbridge as fast or faster). "strides" says whether the result's strides equal torch's
(dimensions of size 1 aside).

Usage: python benchmarks/bench_layouts.py [--quick] [--repeats N] [--threads N]
"""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F

import tensorbridge as tb
from _bench_util import (
    NA,
    env_header,
    fmt_median,
    fmt_ratio,
    geomean,
    measure_interleaved,
    parse_args,
    print_table,
    ratio,
)

ARGS = parse_args(
    __doc__, full_repeats=11, quick_repeats=5, full_target_s=0.03, quick_target_s=0.015
)
BUDGET_S = 1.2 if ARGS.quick else 3.0
GEN = torch.Generator().manual_seed(0)


def _layouts(shape):
    """(name, tensor) of `shape` in each layout: C-contiguous, the last two dims transposed in
    memory, and channels-last (4-d)."""
    x = torch.randn(shape, generator=GEN)
    out = [("contiguous", x), ("transposed", x.mT.contiguous().mT)]
    if len(shape) == 4:
        out.append(("channels_last", x.contiguous(memory_format=torch.channels_last)))
    return out


def _same_strides(a: torch.Tensor, b: torch.Tensor) -> bool:
    return all(n == 1 or s == t for n, s, t in zip(a.shape, a.stride(), b.stride(), strict=True))


# (label, op, torch function of the inputs, its inputs from x, extra kwargs)
OPS = [
    ("add", "aten::add.Tensor", torch.add, lambda x: (x, x * 0.5), {}),
    ("mul scalar", "aten::mul.Tensor", torch.mul, lambda x: (x, torch.tensor(2.0)), {}),
    ("add bias[C]", "aten::add.Tensor", torch.add, lambda x: (x, torch.randn(x.shape[-1])), {}),
    ("where", "aten::where.self", torch.where, lambda x: (x > 0, x, x * 2), {}),
    ("exp", "aten::exp", torch.exp, lambda x: (x,), {}),
    ("relu", "aten::relu", torch.relu, lambda x: (x,), {}),
    ("gelu", "aten::gelu", F.gelu, lambda x: (x,), {}),
    (
        "gelu_backward",
        "aten::gelu_backward",
        torch.ops.aten.gelu_backward,
        lambda x: (x * 0.5, x),
        {},
    ),
    ("clone", "aten::clone", torch.clone, lambda x: (x,), {}),
    (
        "to bfloat16",
        "aten::_to_copy",
        torch.ops.aten._to_copy,
        lambda x: (x,),
        {"dtype": torch.bfloat16},
    ),
]
SHAPES = [(64, 256, 256), (16, 64, 56, 56)]


def _bind(fn, *args, **kwargs):
    """measure_interleaved's make_fn for fn(*args, **kwargs)."""
    return lambda: lambda: fn(*args, **kwargs)


def main() -> None:
    env_header(
        "bench_layouts: element-wise kernels on strided layouts vs torch eager, float32", ARGS
    )
    rows, ratios = [], []
    for shape in SHAPES:
        for layout, x in _layouts(shape):
            for label, op, fn, make, kw in OPS:
                args = make(x)
                arrays = [tb.from_dlpack(a) for a in args]
                want = fn(*args, **kw)
                got = torch.from_dlpack(tb.call(op, *arrays, **kw))
                t = measure_interleaved(
                    [
                        ("torch", _bind(fn, *args, **kw)),
                        ("tb", _bind(tb.call, op, *arrays, **kw)),
                    ],
                    repeats=ARGS.repeats,
                    target_s=ARGS.target_s,
                    budget_s=BUDGET_S,
                )
                r = ratio(t["torch"], t["tb"])
                ratios.append(r)
                same = (
                    "yes" if _same_strides(got, want) else f"no {got.stride()} vs {want.stride()}"
                )
                rows.append(
                    [
                        label,
                        f"{list(shape)} {layout}",
                        t["torch"],
                        fmt_median(t["torch"]),
                        t["tb"],
                        fmt_median(t["tb"]),
                        r,
                        same,
                    ]
                )
                print(f"  measured {label} {layout} {shape}", file=sys.stderr, flush=True)
    print_table(
        "per-op time, min of repeats (median); ratio = torch / tensorbridge",
        ["op", "input", "torch min", "(median)", "tb min", "(median)", "torch/tb", "strides"],
        rows,
        left=2,
    )
    g = geomean([r for r in ratios if not isinstance(r, NA)])
    print(f"geomean torch/tb over {len(ratios)} rows: {fmt_ratio(g)}")


if __name__ == "__main__":
    main()
