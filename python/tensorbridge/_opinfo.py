"""PyTorch's OpInfo samples through tensorbridge's table, compared with torch's CPU kernels.

Shared by ``tests/python/test_opinfo.py``, the per-family kernel tests and
``python -m tensorbridge.coverage``. Needs torch's test utilities
(``torch.testing._internal``), which ship with torch; pytest is not needed.

Each sample of an OpInfo runs twice: once on torch's CPU kernels (the reference) and once
inside ``TableMode`` (every ATen op goes to the table). The outputs (after the sample's
``output_process_fn_grad``, as torch's ``test_compare_cpu`` does) are compared with
``torch.testing.assert_close`` at torch's tolerances for that op and dtype (``tolerances``).
``tb.metrics()`` is read before and after each sample: the difference names the ATen overloads
the sample hit and says whether each ran on a kernel, a composite, a decomposition or the
fallback.

A sample's status:

* ``"pass"``: matched torch, and every ATen op it hit ran in the table;
* ``"fail"``: raised, or did not match torch (the message says which);
* ``"blocked"``: matched torch, but some op it needs is not registered in the table and ran on
  torch's kernel (``fallbacks`` names them; the message is ``"fell back: [ops]"``). It neither
  passes nor fails the ops it hit.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import warnings

import torch

import tensorbridge as tb
from tensorbridge.testing import TableMode

__all__ = [
    "DTYPES",
    "OpInfoResult",
    "Sample",
    "core_overloads",
    "find_opinfos",
    "op_db",
    "opinfo_id",
    "run_samples",
    "tolerances",
]

DTYPES = {
    "float32": torch.float32,
    "float64": torch.float64,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
}

# Test classes whose toleranceOverrides compare values of two implementations of an op.
_COMPARISON_TESTS = (None, "TestCommon")


@functools.cache
def op_db():
    """torch's OpInfo list (imported on first use: a few seconds)."""
    from torch.testing._internal.common_methods_invocations import op_db as db

    return tuple(db)


def opinfo_id(o) -> str:
    """'div.trunc_rounding' for an OpInfo with a variant, 'add' for one without."""
    return o.name + (f".{o.variant_test_name}" if o.variant_test_name else "")


def find_opinfos(names):
    """The OpInfos named (by 'name' or 'name.variant'), every variant of a bare name."""
    wanted = set(names)
    return [o for o in op_db() if o.name in wanted or opinfo_id(o) in wanted]


@dataclasses.dataclass
class Sample:
    index: int
    status: str  # "pass" | "fail" | "blocked"
    message: str = ""
    hit: frozenset = frozenset()  # ATen overloads the table ran ('aten::add.Tensor')
    fallbacks: frozenset = frozenset()  # ATen overloads that ran on torch's kernel


@dataclasses.dataclass
class OpInfoResult:
    op: str  # opinfo_id
    dtype: torch.dtype
    aten_name: str = ""
    samples: list = dataclasses.field(default_factory=list)
    available: int = 0  # samples torch generates (before max_samples)

    def count(self, status: str) -> int:
        return sum(s.status == status for s in self.samples)

    @property
    def total(self) -> int:
        return len(self.samples)

    @property
    def passed(self) -> int:
        return self.count("pass")

    @property
    def blocked(self) -> int:
        return self.count("blocked")

    @property
    def failures(self) -> list:
        return [(s.index, s.message) for s in self.samples if s.status != "pass"]

    @property
    def served(self) -> collections.Counter:
        return collections.Counter(op for s in self.samples for op in s.hit)

    @property
    def fallbacks(self) -> collections.Counter:
        return collections.Counter(op for s in self.samples for op in s.fallbacks)


def tolerances(opinfo, dtype) -> tuple[float | None, float | None]:
    """(atol, rtol) for comparing `opinfo`'s outputs of `dtype` with torch's CPU kernel.

    torch's defaults for the dtype (None, None), unless the OpInfo's ``toleranceOverride``
    decorators for ``TestCommon`` (the tests that compare an op's implementations and variants
    with each other, on any device) raise them for this dtype: the largest such override is taken,
    never below the default.
    """
    from torch.testing._comparison import default_tolerances
    from torch.testing._internal.common_device_type import toleranceOverride

    atol = rtol = 0.0
    found = False
    for info in getattr(opinfo, "decorators", ()) or ():
        decorators = getattr(info, "decorators", None)
        if decorators is None or getattr(info, "cls_name", None) not in _COMPARISON_TESTS:
            continue
        if info.dtypes is not None and dtype not in info.dtypes:
            continue
        for dec in decorators:
            if isinstance(dec, toleranceOverride) and dtype in dec.d:
                found = True
                atol = max(atol, dec.d[dtype].atol)
                rtol = max(rtol, dec.d[dtype].rtol)
    if not found:
        return None, None
    d_rtol, d_atol = default_tolerances(dtype)
    return max(atol, d_atol), max(rtol, d_rtol)


def _clone(t):
    return t.clone() if isinstance(t, torch.Tensor) else t


def _metrics_delta(before: dict, after: dict) -> dict[str, dict]:
    out = {}
    for op, m in after.items():
        b = before.get(op)
        d = {
            k: m[k] - (b[k] if b else 0)
            for k in ("kernel", "composite", "decomposition", "fallback")
        }
        if any(d.values()):
            out[op] = d
    return out


def _run_one(opinfo, s, index, atol, rtol) -> Sample | None:
    try:
        expected = opinfo(s.input, *s.args, **s.kwargs)
    except Exception:  # torch itself rejects this sample on the CPU
        return None
    # Fresh inputs: in-place variants must not see the reference run's writes.
    s2 = s.transform(_clone)
    mode = TableMode()
    before = tb.metrics()
    status, message = "pass", ""
    try:
        with mode:
            actual = opinfo(s2.input, *s2.args, **s2.kwargs)
        torch.testing.assert_close(
            s2.output_process_fn_grad(actual),
            s.output_process_fn_grad(expected),
            atol=atol,
            rtol=rtol,
            equal_nan=True,
            check_stride=False,
        )
    except Exception as e:  # every failure is recorded with its message
        status, message = "fail", f"{type(e).__name__}: {str(e)[:400]}"
    delta = _metrics_delta(before, tb.metrics())
    hit = frozenset(
        op for op, d in delta.items() if d["kernel"] or d["composite"] or d["decomposition"]
    )
    fallbacks = frozenset(mode.fallbacks) | {op for op, d in delta.items() if d["fallback"]}
    if status == "pass" and fallbacks:
        status, message = "blocked", f"fell back: {sorted(fallbacks)}"
    return Sample(index, status, message, hit, frozenset(fallbacks))


def run_samples(opinfo, dtype, max_samples: int | None = None) -> OpInfoResult:
    """`opinfo`'s CPU samples for `dtype` (the first `max_samples` torch runs), through the table.

    Samples are generated after ``torch.manual_seed(0)``, so a run sees the same ones each time.
    """
    res = OpInfoResult(opinfo_id(opinfo), dtype, getattr(opinfo, "aten_name", "") or "")
    if dtype not in opinfo.supported_dtypes("cpu"):
        return res
    atol, rtol = tolerances(opinfo, dtype)
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            samples = list(opinfo.sample_inputs("cpu", dtype, requires_grad=False))
        except Exception:  # torch cannot make samples of this op for this dtype
            return res
        res.available = len(samples)
        for i, s in enumerate(samples):
            if max_samples is not None and res.total >= max_samples:
                break
            r = _run_one(opinfo, s, i, atol, rtol)
            if r is not None:
                res.samples.append(r)
    return res


def _qualified(packet_name: str, overload: str) -> str:
    return f"aten::{packet_name}" + ("" if overload == "default" else f".{overload}")


@functools.cache
def core_overloads() -> tuple[str, ...]:
    """Every overload of ``torch.ops.aten`` tagged ``torch.Tag.core`` ('aten::add.Tensor')."""
    out = []
    for name in torch.ops.aten:
        packet = getattr(torch.ops.aten, name)
        for ov in packet.overloads():
            if torch.Tag.core in getattr(packet, ov).tags:
                out.append(_qualified(name, ov))
    return tuple(sorted(out))


def decomposed_by_torch(op: str) -> bool:
    """True when torch decomposes `op` (CompositeImplicitAutograd) before any dispatch mode sees
    it: the table then serves it through the ops it decomposes into."""
    return torch._C._dispatch_has_kernel_for_dispatch_key(op, "CompositeImplicitAutograd")
