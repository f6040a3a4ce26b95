"""Stride conformance: every kernel's result has the strides torch gives it.

Compiled plans are built from graphs traced with torch's meta functions, so a kernel whose
result is laid out otherwise makes the plan copy it into the graph's layout (``restrides``).
This sweep runs PyTorch's OpInfo samples (float32, forward and gradients) through the table in
``StrideMode``: every ATen op the table serves is also run by torch on fake CPU tensors with the
same strides (what a graph traced by torch.compile holds; torch's CPU kernel for the few ops
fake tensors cannot run), and the strides of each tensor result are compared (dimensions of
size 1 and results with no elements are ignored). Each sample runs in
four layouts of its tensor inputs: as generated (mostly contiguous), transposed (the last two
dimensions stored in the other order), channels-last (4-d, 5-d; 3-d as [N, L, C] storage) and
strided (every other element of the last dimension). The OpInfo's own results are also
compared with torch eager's (reported, not asserted: where torch's CPU kernel and its fake
kernel disagree, e.g. batch_norm or conv1d on transposed inputs, the table follows the fake
kernel, as a compiled plan needs).

``test_strides`` runs a fixed subset (``SUBSET``, the op families plans run most) in well under
a minute. The whole sweep is ``python tests/python/test_kernel_strides.py [--max-samples N]
[--ops a,b]``, which prints the mismatching overloads by kernel file.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import functools
import json
import os
import sys
import warnings

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._pytree import tree_leaves, tree_map

import tensorbridge as tb
from tensorbridge import _opinfo, coverage
from tensorbridge.testing import TableMode, qualified_name

# ---- layouts of a sample's tensor inputs ------------------------------------------------------


def _relayout(t: torch.Tensor, layout: str) -> torch.Tensor | None:
    """`t`'s values in another memory layout, or None when the layout does not apply to it."""
    if t.layout != torch.strided or t.numel() <= 1:
        return None
    if layout == "transposed" and t.dim() >= 2:
        return t.mT.contiguous().mT
    if layout == "channels_last":
        if t.dim() == 4:
            return t.contiguous(memory_format=torch.channels_last)
        if t.dim() == 5:
            return t.contiguous(memory_format=torch.channels_last_3d)
        if t.dim() == 3:
            return t.transpose(1, 2).contiguous().transpose(1, 2)
        return None
    if layout == "strided" and t.dim() >= 1:
        wide = torch.empty((*t.shape[:-1], 2 * t.shape[-1]), dtype=t.dtype)
        out = wide[..., ::2]
        out.copy_(t)
        return out
    return None


LAYOUTS = ("as_generated", "transposed", "channels_last", "strided")


def _sample_in(sample, layout: str):
    """A fresh copy of `sample` (new leaves, requires_grad kept) with its tensors in `layout`;
    None when no tensor of it changes layout."""
    changed = False

    def f(t):
        nonlocal changed
        if not isinstance(t, torch.Tensor):
            return t
        v = None if layout == "as_generated" else _relayout(t.detach(), layout)
        if v is None:
            v = t.detach().clone()
        else:
            changed = True
        return v.requires_grad_(t.requires_grad)

    s = sample.transform(f)
    return s if changed or layout == "as_generated" else None


# ---- the per-op check ------------------------------------------------------------------------


def _sig(t: torch.Tensor) -> tuple:
    """Strides with dimensions of size 1 blanked (any stride is right for them)."""
    return tuple(None if n == 1 else s for n, s in zip(t.shape, t.stride(), strict=True))


def _tensors(x) -> list:
    return [t for t in tree_leaves(x) if isinstance(t, torch.Tensor)]


def _mutates(func) -> bool:
    return any(a.alias_info is not None and a.alias_info.is_write for a in func._schema.arguments)


@dataclasses.dataclass
class Mismatch:
    op: str  # 'aten::mul.Tensor'
    shapes: str  # the input shapes and strides
    got: tuple
    want: tuple  # torch's strides: what a traced graph holds


class StrideMode(TableMode):
    """TableMode (strict: an op the table lacks raises) that checks each served op's result
    strides against torch's: the op run on fake CPU tensors with the same layouts (what
    torch.compile traces a graph with), or, for ops that cannot run on fake tensors
    (data-dependent shapes), torch's CPU kernel."""

    def __init__(self):
        super().__init__(strict=True)
        self.checked: collections.Counter[str] = collections.Counter()
        self.mismatches: list[Mismatch] = []
        self._fake = FakeTensorMode()

    def _reference(self, func, args, kwargs) -> list:
        def fake(x):
            return self._fake.from_tensor(x) if isinstance(x, torch.Tensor) else x

        try:
            with self._fake:
                return _tensors(func(*tree_map(fake, args), **tree_map(fake, kwargs)))
        except Exception:  # no fake kernel for these inputs: torch's CPU kernel
            return _tensors(func(*args, **kwargs))

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = super().__torch_dispatch__(func, types, args, kwargs)
        if _mutates(func):  # in-place and out=: the result is the argument
            return out
        name = qualified_name(func)
        want = self._reference(func, args, kwargs)
        self.checked[name] += 1
        for g, w in zip(_tensors(out), want, strict=False):
            if g.numel() and _sig(g) != _sig(w):
                shapes = ", ".join(f"{tuple(a.shape)}:{a.stride()}" for a in _tensors(args))
                self.mismatches.append(Mismatch(name, shapes, g.stride(), w.stride()))
        return out


# ---- one OpInfo -------------------------------------------------------------------------------


@dataclasses.dataclass
class SampleResult:
    index: int
    layout: str
    status: str  # "checked" | "blocked" (an op outside the table) | "error" (raised)
    message: str = ""
    mismatches: list = dataclasses.field(default_factory=list)  # per-op Mismatch
    result_mismatch: str = ""  # the OpInfo's own results, table vs torch


def _differentiable(out) -> list:
    return [t for t in _tensors(out) if t.requires_grad and t.grad_fn is not None]


def _run(opinfo, s, grad_outputs=None):
    """opinfo(s); with `grad_outputs`, also the gradients of its differentiable outputs with
    respect to the inputs that require grad."""
    out = opinfo(s.input, *s.args, **s.kwargs)
    outs = _differentiable(out) if grad_outputs else []
    inputs = [t for t in _tensors((s.input, s.args, s.kwargs)) if t.requires_grad]
    if outs and inputs and len(outs) == len(grad_outputs):
        torch.autograd.grad(outs, inputs, grad_outputs, allow_unused=True)
    return out


def _grad_outputs(expected) -> list | None:
    """Seeded output gradients laid out like torch's outputs (as the backward of the op after
    it would hand them over); None when an output is not a strided tensor."""
    g = torch.Generator().manual_seed(1)
    outs = _differentiable(expected)
    if any(o.layout != torch.strided for o in outs):
        return None
    return [torch.empty_like(o).copy_(torch.randn(o.shape, generator=g)) for o in outs]


def _check_sample(opinfo, sample, index: int, layout: str, grad: bool) -> SampleResult | None:
    ref_s, tab_s = _sample_in(sample, layout), _sample_in(sample, layout)
    if ref_s is None:
        return None
    try:
        expected = _run(opinfo, ref_s)
    except Exception:  # torch itself rejects this sample on the CPU
        return None
    grad_outputs = _grad_outputs(expected) if grad else None
    mode = StrideMode()
    try:
        with mode:
            actual = _run(opinfo, tab_s, grad_outputs)
    except NotImplementedError as e:
        if "not served by tensorbridge's table" in str(e):
            return SampleResult(index, layout, "blocked", str(e))
        return SampleResult(index, layout, "error", f"NotImplementedError: {str(e)[:300]}")
    except Exception as e:  # a kernel raised where torch did not: the OpInfo sweep's business
        return SampleResult(index, layout, "error", f"{type(e).__name__}: {str(e)[:300]}")
    r = SampleResult(index, layout, "checked", mismatches=mode.mismatches)
    got, want = _tensors(actual), _tensors(expected)
    for i, (g, w) in enumerate(zip(got, want, strict=False)):
        if g.numel() and g.shape == w.shape and _sig(g) != _sig(w):
            r.result_mismatch = f"result {i}: {g.stride()} (torch {w.stride()})"
    return r


def check_opinfo(opinfo, max_samples: int | None = None, layouts=LAYOUTS) -> list[SampleResult]:
    """Every sample of `opinfo` for float32 (the first `max_samples`), in each of `layouts`."""
    dtype = torch.float32
    if dtype not in opinfo.supported_dtypes("cpu"):
        return []
    grad = opinfo.supports_autograd and dtype in opinfo.supported_backward_dtypes("cpu")
    torch.manual_seed(0)
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            samples = list(opinfo.sample_inputs("cpu", dtype, requires_grad=grad))
        except Exception:  # torch cannot make samples of this op for float32
            return []
        for i, s in enumerate(samples[:max_samples]):
            for layout in layouts:
                r = _check_sample(opinfo, s, i, layout, grad)
                if r is not None:
                    out.append(r)
    return out


# ---- the fast subset ---------------------------------------------------------------------------

SUBSET = (
    # element-wise: binary, comparison, ternary, unary, activations and their gradients
    "add",
    "mul",
    "div.no_rounding_mode",
    "where",
    "eq",
    "abs",
    "exp",
    "sigmoid",
    "tanh",
    "nn.functional.relu",
    "nn.functional.gelu",
    "nn.functional.silu",
    # copies, conversions, factories
    "clone",
    "contiguous",
    "to",
    "zeros_like",
    # normalizations
    "softmax",
    "log_softmax",
    "nn.functional.layer_norm",
    "nn.functional.batch_norm",
    # shape, indexing, sorting
    "cat",
    "flip",
    "sort",
    "nonzero",
    "__getitem__",
    "index_put",
    "slice_scatter",
    # convolution, pooling, padding
    "nn.functional.conv2d",
    "nn.functional.max_pool2d",
    "nn.functional.avg_pool2d",
    "constant_pad_nd",
)
SUBSET_SAMPLES = 3


# A kernel the table lost would otherwise run torch's and compare torch with itself.
pytestmark = pytest.mark.usefixtures("no_fallback")


@functools.cache
def _subset_results(op_id: str) -> tuple:
    (opinfo,) = [o for o in _opinfo.op_db() if _opinfo.opinfo_id(o) == op_id]
    return tuple(check_opinfo(opinfo, max_samples=SUBSET_SAMPLES))


@pytest.mark.parametrize("op_id", SUBSET)
def test_strides(op_id):
    results = _subset_results(op_id)
    checked = [r for r in results if r.status == "checked"]
    assert checked, f"no sample of {op_id} ran in the table: {[r.message for r in results][:3]}"
    bad = [
        (r.index, r.layout, m.op, m.shapes, m.got, m.want) for r in checked for m in r.mismatches
    ]
    assert not bad, f"{len(bad)} results with strides other than torch's, e.g. {bad[:3]}"


def test_subset_covers_every_layout():
    """The subset's samples ran in the table in each layout, and the ops checked include the
    element-wise, copy, normalization, indexing and convolution families."""
    checked = [r for op_id in SUBSET for r in _subset_results(op_id) if r.status == "checked"]
    assert {r.layout for r in checked} == set(LAYOUTS)
    assert sum(len(r.mismatches) for r in checked) == 0
    ops = collections.Counter()
    for op_id in (
        "add",
        "clone",
        "nn.functional.batch_norm",
        "__getitem__",
        "nn.functional.conv2d",
    ):
        mode = StrideMode()
        (opinfo,) = [o for o in _opinfo.op_db() if _opinfo.opinfo_id(o) == op_id]
        sample = next(iter(opinfo.sample_inputs("cpu", torch.float32)))
        with mode:
            opinfo(sample.input, *sample.args, **sample.kwargs)
        ops.update(mode.checked)
    assert {"aten::add.Tensor", "aten::clone", "aten::index.Tensor", "aten::convolution"} <= set(
        ops
    ), ops


def test_stride_mode_sees_a_wrong_layout():
    """The check itself: a kernel whose result is laid out otherwise than torch's is reported,
    with the op, torch's strides and ours."""

    def transposed_clone(x, memory_format=None):
        # The values of x, stored with the last two dimensions swapped.
        t = torch.from_dlpack(x)
        return tb.from_dlpack(t.mT.contiguous().mT)

    x = torch.randn(4, 6)
    handle = tb.register_kernel("aten::clone", transposed_clone)
    try:
        with StrideMode() as mode:
            y = x.clone()
    finally:
        handle.remove()
    assert torch.equal(y, x) and mode.checked["aten::clone"] == 1
    (m,) = mode.mismatches
    assert (m.op, m.got, m.want) == ("aten::clone", (1, 4), (6, 1))


# ---- the whole sweep -----------------------------------------------------------------------


def _family(op: str, where: dict) -> str:
    return where.get(op, "?").split(":")[0]


def _record(oid: str, rs: list[SampleResult]) -> dict:
    return {
        "opinfo": oid,
        "status": dict(collections.Counter(r.status for r in rs)),
        "mismatches": [
            [r.index, r.layout, m.op, m.shapes, list(m.got), list(m.want)]
            for r in rs
            for m in r.mismatches
        ],
        "results": [[r.index, r.layout, r.result_mismatch] for r in rs if r.result_mismatch],
    }


def _sweep(infos, max_samples, out_path):
    """Runs the OpInfos not yet in `out_path` (JSON lines, one per OpInfo), appending."""
    done = set()
    if out_path and os.path.exists(out_path):
        with open(out_path) as f:
            done = {json.loads(line)["opinfo"] for line in f if line.strip()}
    records = []
    for o in infos:
        oid = _opinfo.opinfo_id(o)
        if oid in done:
            continue
        try:
            rec = _record(oid, check_opinfo(o, max_samples))
        except Exception as e:  # the harness failed on this OpInfo (its samples, its outputs)
            rec = {"opinfo": oid, "status": {"harness": 1}, "mismatches": [], "results": []}
            rec["error"] = f"{type(e).__name__}: {str(e)[:200]}"
        print(f"{oid}: {rec['status']}", file=sys.stderr, flush=True)
        records.append(rec)
        if out_path:
            with open(out_path, "a") as f:
                f.write(json.dumps(rec) + "\n")
    return records


def _summary(records, where: dict, listed: int) -> None:
    status = collections.Counter()
    for rec in records:
        status.update(rec["status"])
    checked = sum("checked" in rec["status"] for rec in records)
    by_op = collections.defaultdict(list)
    for rec in records:
        for index, layout, op, shapes, got, want in rec["mismatches"]:
            by_op[op].append((rec["opinfo"], index, layout, shapes, got, want))
    bad_opinfos = {oid for v in by_op.values() for oid, *_ in v}
    bad_samples = {(oid, i, lay) for v in by_op.values() for oid, i, lay, *_ in v}
    bad_results = sum(len(rec["results"]) for rec in records)
    print(
        f"OpInfos: {len(records)} ({checked} with a sample checked); samples x layouts: "
        f"{dict(status)}"
    )
    print(
        f"mismatching: {len(by_op)} overloads, {len(bad_opinfos)} OpInfos, {len(bad_samples)} "
        f"samples x layouts; OpInfo results with other strides than torch's: {bad_results}"
    )
    families = collections.defaultdict(lambda: [set(), set()])
    for op, v in by_op.items():
        f = families[_family(op, where)]
        f[0].add(op)
        f[1].update((oid, i, lay) for oid, i, lay, *_ in v)
    for fam, (ops, samples) in sorted(families.items(), key=lambda kv: -len(kv[1][1])):
        print(f"  {fam}: {len(ops)} overloads, {len(samples)} samples x layouts: {sorted(ops)}")
    for op, v in sorted(by_op.items()):
        print(f"{op} ({where.get(op, '?')}): {len(v)}")
        for oid, i, lay, shapes, got, want in v[:listed]:
            print(f"    {oid}[{i}] {lay}: {shapes} -> {tuple(got)}, torch {tuple(want)}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", default="", help="OpInfo ids, comma-separated (default: all)")
    parser.add_argument("--max-samples", type=int, default=None)
    parser.add_argument("--list", type=int, default=3, help="mismatches shown per overload")
    parser.add_argument(
        "--out", default="", help="JSON lines file: results appended per OpInfo, a rerun resumes"
    )
    a = parser.parse_args(argv)
    tb.config.fallback = "error"
    infos = _opinfo.find_opinfos(a.ops.split(",")) if a.ops else list(_opinfo.op_db())
    infos = [o for o in infos if coverage.skip_reason(o) is None]
    records = _sweep(infos, a.max_samples, a.out)
    if a.out:
        wanted = {_opinfo.opinfo_id(o) for o in infos}
        with open(a.out) as f:
            records = [r for r in map(json.loads, f) if r["opinfo"] in wanted]
    _summary(records, {o["op"]: o["registered_at"] for o in tb.ops()}, a.list)
    return 0


if __name__ == "__main__":
    sys.exit(main())
