"""Runs PyTorch's OpInfo samples through tensorbridge's table and compares with torch.

Used by test_opinfo.py and, from the command line, by kernel authors:

    python tests/python/opinfo_util.py add mul gelu --dtypes float32,int64

prints, per OpInfo and dtype, samples passed / total, the ATen overloads the samples hit in
the table, and those that fell back to torch.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import warnings

import torch
from torch.testing._internal.common_methods_invocations import op_db

from tensorbridge.testing import TableMode

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


@dataclasses.dataclass
class Result:
    op: str
    variant: str
    dtype: torch.dtype
    passed: int = 0
    total: int = 0
    served: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    fallbacks: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    failures: list = dataclasses.field(default_factory=list)


def _compare(actual, expected):
    torch.testing.assert_close(actual, expected, equal_nan=True, check_stride=False)


def run_samples(opinfo, dtype, max_samples: int | None = None) -> Result:
    """All of `opinfo`'s CPU samples for `dtype`, through the table, against torch."""
    res = Result(opinfo.name, opinfo.variant_test_name, dtype)
    if dtype not in opinfo.supported_dtypes("cpu"):
        return res
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        samples = list(opinfo.sample_inputs("cpu", dtype, requires_grad=False))
    for i, s in enumerate(samples):
        if max_samples is not None and i >= max_samples:
            break
        try:
            expected = opinfo(s.input, *s.args, **s.kwargs)
        except Exception:
            continue  # torch itself rejects this sample on the CPU
        res.total += 1
        # Fresh inputs: in-place variants must not see the reference run's writes.
        s2 = s.transform(lambda t: t.clone() if isinstance(t, torch.Tensor) else t)
        mode = TableMode()
        try:
            with mode:
                actual = opinfo(s2.input, *s2.args, **s2.kwargs)
            _compare(actual, expected)
            if not mode.fallbacks:
                res.passed += 1
            else:
                res.failures.append((i, f"fell back: {dict(mode.fallbacks)}"))
        except Exception as e:  # noqa: BLE001 - every failure is recorded with its message
            res.failures.append((i, f"{type(e).__name__}: {str(e)[:300]}"))
        res.served.update(mode.served)
        res.fallbacks.update(mode.fallbacks)
    return res


def find_opinfos(names):
    wanted = set(names)
    return [o for o in op_db if o.name in wanted or f"{o.name}.{o.variant_test_name}" in wanted]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("ops", nargs="+", help="OpInfo names (e.g. add, nn.functional.gelu)")
    p.add_argument("--dtypes", default="float32,float64,int64,bool")
    p.add_argument("--failures", type=int, default=3, help="failure messages shown per op")
    args = p.parse_args()
    for o in find_opinfos(args.ops):
        for dn in args.dtypes.split(","):
            r = run_samples(o, DTYPES[dn])
            if r.total == 0:
                continue
            name = o.name + (f".{o.variant_test_name}" if o.variant_test_name else "")
            print(f"{name:40s} {dn:9s} {r.passed:4d}/{r.total:<4d} served={dict(r.served)}"
                  + (f" fallback={dict(r.fallbacks)}" if r.fallbacks else ""))
            for i, msg in r.failures[: args.failures]:
                print(f"    sample {i}: {msg}")


if __name__ == "__main__":
    main()
