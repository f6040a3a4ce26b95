"""PyTorch's OpInfo samples through tensorbridge's table, compared with torch's CPU kernels.

Shared by ``tests/python/test_opinfo.py``, the per-family kernel tests and
``python -m tensorbridge.coverage``. Needs torch's test utilities
(``torch.testing._internal``), which ship with torch; pytest is not needed.

Each sample of an OpInfo runs twice: once on torch's CPU kernels (the reference) and once
inside ``TableMode`` (every ATen op goes to the table). The outputs (after the sample's
``output_process_fn_grad``, as torch's ``test_compare_cpu`` does) are compared with
``torch.testing.assert_close`` at torch's tolerances for that op and dtype (``tolerances``).
A float32 or complex64 sample that misses torch's result is judged once more against the exact
result, torch's kernel in float64 / complex128 on the same inputs (``_as_accurate_as_torch``):
two kernels that sum in different orders differ by rounding, and torch's result is then not
nearer the exact one than the table's.
``tb.diagnostics.metrics()`` is read before and after each sample: the difference names the ATen overloads
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
from tensorbridge._dtypes import TORCH_DTYPES
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

# The dtypes the sweep runs OpInfo samples in (names of the one table, _dtypes.TORCH_DTYPES).
DTYPES = {
    n: TORCH_DTYPES[n]
    for n in (
        "float32",
        "float64",
        "bfloat16",
        "float16",
        "int64",
        "int32",
        "int16",
        "int8",
        "uint8",
        "bool",
        "complex64",
        "complex128",
    )
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


def _applies_on_cpu(info, dtype) -> bool:
    """True when torch applies the DecorateInfo `info` to a value comparison run on the CPU:
    one of the comparison test classes, the CPU or any device, active, and not
    ``test_compare_cpu`` (which runs on CUDA/XPU only, comparing them with the CPU)."""
    return (
        getattr(info, "cls_name", None) in _COMPARISON_TESTS
        and getattr(info, "device_type", None) in (None, "cpu")
        and getattr(info, "test_name", None) != "test_compare_cpu"
        and bool(getattr(info, "active_if", True))
        and (info.dtypes is None or dtype in info.dtypes)
    )


def tolerances(opinfo, dtype) -> tuple[float | None, float | None]:
    """(atol, rtol) for comparing `opinfo`'s outputs of `dtype` with torch's CPU kernel.

    torch's defaults for the dtype (None, None), unless a ``toleranceOverride`` torch applies
    to the op's value comparisons on the CPU raises them for this dtype: one given directly to
    the OpInfo, or through a ``DecorateInfo`` for ``TestCommon`` (or every test class) that is
    active and not restricted to another device (overrides for CUDA or for
    ``test_compare_cpu``, which compares a GPU with the CPU, do not apply). The largest such
    override is taken, never below the default.
    """
    from torch.testing._comparison import default_tolerances
    from torch.testing._internal.common_device_type import toleranceOverride

    atol = rtol = 0.0
    found = False
    for info in getattr(opinfo, "decorators", ()) or ():
        if isinstance(info, toleranceOverride):  # applied to every test on every device
            decorators = [info]
        elif getattr(info, "decorators", None) is not None and _applies_on_cpu(info, dtype):
            decorators = info.decorators
        else:
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


def _fresh(t):
    """A new leaf with the same values (and requires_grad): in-place variants must not see the
    other run's writes, and gradients are taken with respect to it."""
    if not isinstance(t, torch.Tensor):
        return t
    return t.detach().clone().requires_grad_(t.requires_grad)


def _forward_backward(opinfo, s, grad: bool, grad_outputs=None):
    """The op's output; with `grad`, also the gradients of <outputs, grad_outputs> with respect
    to the inputs that require grad (None for an input the outputs do not reach) and the
    grad_outputs used (seeded random ones unless given)."""
    out = opinfo(s.input, *s.args, **s.kwargs)
    # Gradients of the outputs as the OpInfo processes them (as torch's gradcheck does): where an
    # output is defined only up to sign (eigenvectors, singular vectors) that makes them unique.
    outs = _differentiable(s.output_process_fn_grad(out)) if grad else []
    if not outs:
        return out, None, None
    if grad_outputs is None:
        g = torch.Generator().manual_seed(1)
        grad_outputs = [torch.randn(o.shape, dtype=o.dtype, generator=g) for o in outs]
    leaves = torch.utils._pytree.tree_leaves((s.input, s.args, s.kwargs))
    inputs = [t for t in leaves if isinstance(t, torch.Tensor) and t.requires_grad]
    grads = torch.autograd.grad(outs, inputs, grad_outputs, allow_unused=True)
    return out, grads, grad_outputs


def _differentiable(out):
    return [
        t
        for t in torch.utils._pytree.tree_leaves(out)
        if isinstance(t, torch.Tensor) and t.requires_grad and t.grad_fn is not None
    ]


# The wider dtype a sample's exact result is computed in, and how much of torch's own largest
# error there the table's result may add to the tolerance.
_WIDER = {torch.float32: torch.float64, torch.complex64: torch.complex128}
_ORDER_SLACK = 2.0


def _as_accurate_as_torch(opinfo, s, dtype, atol, rtol, actual, expected, grad_outputs) -> bool:
    """True when the table's outputs (and gradients) `actual` are as near the exact result as
    torch's `expected` are: every element within the tolerance of torch's float64 (complex128)
    result on the same inputs, widened by twice torch's own largest error there.

    `actual` and `expected` are (processed outputs, gradients or None) pairs."""
    from torch.testing._comparison import default_tolerances

    wide = _WIDER.get(dtype)
    if wide is None or wide not in opinfo.supported_dtypes("cpu"):
        return False
    if atol is None or rtol is None:
        rtol, atol = default_tolerances(dtype)

    def up(t):
        if isinstance(t, torch.Tensor) and t.dtype == dtype:
            return t.detach().to(wide).requires_grad_(t.requires_grad)
        return t

    sw = s.transform(up)
    gw = None if grad_outputs is None else [g.to(wide) for g in grad_outputs]
    try:
        out, grads, _ = _forward_backward(opinfo, sw, gw is not None, gw)
    except Exception:  # torch has no wider kernel for this sample
        return False
    leaves = torch.utils._pytree.tree_leaves
    exact = leaves((sw.output_process_fn_grad(out), grads))
    mine, theirs = leaves(actual), leaves(expected)
    if not len(mine) == len(theirs) == len(exact):
        return False
    for a, e, x in zip(mine, theirs, exact, strict=True):
        if not isinstance(x, torch.Tensor):
            if a != e:
                return False
            continue
        if not isinstance(a, torch.Tensor) or a.shape != x.shape:
            return False
        a, e, x = (t.detach().to(wide) for t in (a, e, x))
        torch_err = (e - x).abs().nan_to_num(0.0).max() if x.numel() else 0.0
        ok = (a - x).abs() <= atol + rtol * x.abs() + _ORDER_SLACK * torch_err
        if not bool((ok | (a.isnan() & x.isnan())).all()):
            return False
    return True


def _run_one(opinfo, s, index, atol, rtol, grad: bool, dtype) -> Sample | None:
    s = s.transform(_fresh)
    s2 = s.transform(_fresh)
    try:
        expected, expected_grads, grad_outputs = _forward_backward(opinfo, s, grad)
    except Exception:  # torch itself rejects this sample on the CPU
        return None
    mode = TableMode()
    before = tb.diagnostics.metrics()
    status, message = "pass", ""
    try:
        with mode:
            actual, actual_grads, _ = _forward_backward(
                opinfo, s2, grad_outputs is not None, grad_outputs
            )
        compare = functools.partial(
            torch.testing.assert_close, atol=atol, rtol=rtol, equal_nan=True, check_stride=False
        )
        mine = (s2.output_process_fn_grad(actual), actual_grads)
        theirs = (s.output_process_fn_grad(expected), expected_grads)
        try:
            compare(mine[0], theirs[0])
            if grad_outputs is not None:
                compare(mine[1], theirs[1], msg=lambda m: f"gradients: {m}")
        except AssertionError:
            if not _as_accurate_as_torch(opinfo, s, dtype, atol, rtol, mine, theirs, grad_outputs):
                raise
            message = f"as near {_WIDER[dtype]}'s result as torch"
    except Exception as e:  # every failure is recorded with its message
        status, message = "fail", f"{type(e).__name__}: {str(e)[:400]}"
    delta = _metrics_delta(before, tb.diagnostics.metrics())
    hit = frozenset(
        op for op, d in delta.items() if d["kernel"] or d["composite"] or d["decomposition"]
    )
    fallbacks = frozenset(mode.fallbacks) | {op for op, d in delta.items() if d["fallback"]}
    if status == "pass" and fallbacks:
        status, message = "blocked", f"fell back: {sorted(fallbacks)}"
    return Sample(index, status, message, hit, frozenset(fallbacks))


def run_samples(opinfo, dtype, max_samples: int | None = None, grad: bool = False) -> OpInfoResult:
    """`opinfo`'s CPU samples for `dtype` (the first `max_samples` torch runs), through the table.

    With `grad` (floating dtypes the OpInfo differentiates), the samples require grad and the
    gradients of the outputs, taken with seeded random output gradients, are compared too: the
    backward ops run through the table as well. Samples are generated after
    ``torch.manual_seed(0)``, so a run sees the same ones each time.
    """
    res = OpInfoResult(opinfo_id(opinfo), dtype, getattr(opinfo, "aten_name", "") or "")
    if dtype not in opinfo.supported_dtypes("cpu"):
        return res
    grad = grad and dtype.is_floating_point and opinfo.supports_autograd
    grad = grad and dtype in opinfo.supported_backward_dtypes("cpu")
    atol, rtol = tolerances(opinfo, dtype)
    torch.manual_seed(0)
    fallback = tb.config.fallback
    # An op without a kernel runs torch's and is recorded ("blocked"), whatever the caller set.
    tb.config.fallback = "allow"
    # A kernel that declines the dtype raises its NotImplementedError (the sample is "not
    # served"): the sweep measures what the kernels serve, not torch's kernel behind them.
    tb._C._set_fallback_on_decline(False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            samples = list(opinfo.sample_inputs("cpu", dtype, requires_grad=grad))
        except Exception:  # torch cannot make samples of this op for this dtype
            tb.config.fallback = fallback
            return res
        res.available = len(samples)
        try:
            for i, s in enumerate(samples):
                if max_samples is not None and res.total >= max_samples:
                    break
                r = _run_one(opinfo, s, i, atol, rtol, grad, dtype)
                if r is not None:
                    res.samples.append(r)
        finally:
            tb.config.fallback = fallback
    return res


def _qualified(packet_name: str, overload: str) -> str:
    return f"aten::{packet_name}" + ("" if overload == "default" else f".{overload}")


@functools.cache
def core_overloads() -> tuple[str, ...]:
    """Every overload of ``torch.ops.aten`` tagged ``torch.Tag.core`` ('aten::add.Tensor')."""
    out = []
    # Every aten op torch registered (iterating torch.ops.aten lists only those loaded so far).
    names = {
        n[len("aten::") :].split(".")[0]
        for n in torch._C._dispatch_get_all_op_names()
        if n.startswith("aten::")
    }
    for name in sorted(names):
        packet = getattr(torch.ops.aten, name, None)
        if packet is None:
            continue
        for ov in packet.overloads():
            if torch.Tag.core in getattr(packet, ov).tags:
                out.append(_qualified(name, ov))
    return tuple(sorted(out))


def decomposed_by_torch(op: str) -> bool:
    """True when torch decomposes `op` (CompositeImplicitAutograd) before any dispatch mode sees
    it: the table then serves it through the ops it decomposes into."""
    return torch._C._dispatch_has_kernel_for_dispatch_key(op, "CompositeImplicitAutograd")
