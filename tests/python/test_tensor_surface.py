"""The whole public torch.Tensor surface on tensorbridge.Tensor against plain tensors.

Every public name of ``dir(torch.Tensor)`` (and the operator and protocol dunders) is called on a
wrapped tensor and on a plain tensor with the same values and arguments. Each must behave the
same (equal results, the same exception type where torch itself refuses, e.g. CUDA without a
GPU) or raise the error that ``tensorbridge._tensor.UNSUPPORTED`` documents for it. The
arguments come from a hand-kept table where a method needs particular ones, otherwise from the
first of a few generic argument lists that the plain tensor accepts; ops with OpInfo method
variants are also run on their OpInfo samples (the first two of each).

``test_surface_report`` prints the counts: names checked, equal, raising as plain tensors do,
documented errors, silent differences (0).
"""

from __future__ import annotations

import math
import pickle
import warnings

import numpy as np
import pytest
import torch

import tensorbridge as tb
from tensorbridge._tensor import UNSUPPORTED


def _base():
    torch.manual_seed(0)
    return torch.rand(3, 3) + 0.5


def _other():
    return torch.rand(3, 3) + 0.5


def _leaf():
    return _base().requires_grad_()


def _idx():
    return torch.tensor([0, 2])


# Generic argument lists, tried in order until the plain tensor accepts one.
CANDIDATES = [
    lambda: (),
    lambda: (_other(),),
    lambda: (0,),
    lambda: (1,),
    lambda: (_other(), _other()),
    lambda: (0, 1),
    lambda: ((9,),),
    lambda: (torch.float64,),
    lambda: (0.5,),
    lambda: (0, _idx()),
    lambda: (torch.tensor([[0, 1, 2]]),),
]


def _grad_of(fn):
    def run(t):
        fn(t)
        return t.grad

    return run


def _retained(t):
    y = t * 2
    y.retain_grad()
    (y * y).sum().backward()
    return y.grad, y.retains_grad


def _hooked(t):
    t.register_hook(lambda g: g * 3)
    (t * t).sum().backward()
    return t.grad


def _post_hooked(t):
    seen = []
    t.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.sum().item()))
    (t * t).sum().backward()
    return seen


def _int(*shape):
    return lambda: torch.arange(1, 1 + math.prod(shape)).reshape(shape)


# name -> (make the plain tensor, arguments) or (make, None, fn(tensor) -> result)
CASES = {
    "item": (lambda: torch.tensor([2.5]), ()),
    "is_nonzero": (lambda: torch.tensor([2.5]), ()),
    "__bool__": (lambda: torch.tensor([2.5]), ()),
    "__nonzero__": (lambda: torch.tensor([2.5]), ()),
    "__float__": (lambda: torch.tensor([2.5]), ()),
    "__complex__": (lambda: torch.tensor([2.5]), ()),
    "__int__": (lambda: torch.tensor([3]), ()),
    "__long__": (lambda: torch.tensor([3]), ()),
    "__index__": (lambda: torch.tensor(3), ()),
    "__contains__": (_base, (0.0,)),
    "__getitem__": (_base, ((slice(None), 1),)),
    "__setitem__": (_base, ((0, 1), 7.0)),
    "__delitem__": (_base, (0,)),
    "__array__": (_base, ()),
    "__array_wrap__": (_base, (np.ones((3, 3), np.float32),)),
    "__reduce_ex__": (_base, None, lambda t: pickle.loads(pickle.dumps(t))),
    "__reduce__": (_base, None, lambda t: pickle.loads(pickle.dumps(t, protocol=0))),
    "__getstate__": (_base, None, lambda t: pickle.loads(pickle.dumps(t))),
    "__setstate__": (_base, None, lambda t: pickle.loads(pickle.dumps(t))),
    "__deepcopy__": (_base, ({},)),
    "__format__": (lambda: torch.tensor(2.5), (".2f",)),
    "__invert__": (_int(3, 3), ()),
    "__matmul__": (_base, (_other(),)),
    "__rmatmul__": (_base, (_other(),)),
    "__reversed__": (_base, ()),
    "__iter__": (_base, None, lambda t: list(iter(t))),
    "__len__": (_base, ()),
    "apply_": (_base, (lambda v: v * 2 + 1,)),
    "map_": (_base, (_other(), lambda a, b: a - b)),
    "map2_": (_base, (_other(), _other(), lambda a, b, c: a + b * c)),
    "as_subclass": (_base, (torch.Tensor,)),
    "backward": (_leaf, None, _grad_of(lambda t: (t * t).sum().backward())),
    "register_hook": (_leaf, None, _hooked),
    "register_post_accumulate_grad_hook": (_leaf, None, _post_hooked),
    "retain_grad": (_leaf, None, _retained),
    "retains_grad": (_leaf, None, lambda t: (t * 2).retains_grad),
    "grad": (_leaf, None, _grad_of(lambda t: t.sum().backward())),
    "requires_grad_": (_base, ()),
    "grad_fn": (_leaf, None, lambda t: type((t * 2).grad_fn).__name__),
    "is_leaf": (_leaf, None, lambda t: ((t * 2).is_leaf, t.is_leaf)),
    "output_nr": (_leaf, None, lambda t: t.unbind()[1].output_nr),
    "detach_": (_leaf, None, lambda t: (t * 2).detach_()),
    "ger": (lambda: torch.arange(3.0), (torch.arange(4.0),)),
    "imag": (lambda: torch.tensor([1 + 2j, 3 - 1j]), None, lambda t: t.imag),
    "prelu": (_base, (torch.tensor([0.25]),)),
    "orgqr": (_base, (torch.tensor([0.5, 0.25]),)),
    "unsafe_split_with_sizes": (_base, ([1, 2],)),
    "resize": (_base, (9,)),
    "resize_": (_base, ((4, 4),)),
    "resize_as_": (_base, (torch.ones(16),)),
    "is_set_to": (_base, (_other(),)),
    "module_load": (_base, (_other(),)),
    "new": (_base, ((2,),)),
    "new_tensor": (_base, ([1.0, 2.0],)),
    "type": (_base, ("torch.DoubleTensor",)),
    "type_as": (_base, (torch.ones(2, dtype=torch.float64),)),
    "is_contiguous": (
        lambda: torch.rand(1, 3, 2, 2).contiguous(memory_format=torch.channels_last),
        None,
        lambda t: [
            t.is_contiguous(memory_format=f) for f in (torch.channels_last, torch.contiguous_format)
        ],
    ),
    "dim_order": (lambda: torch.rand(2, 3, 4).transpose(0, 2), ()),
    "to": (_base, (torch.float64,)),
    "storage": (_base, ()),
    "untyped_storage": (_base, ()),
    "storage_type": (_base, ()),
    "nbytes": (lambda: torch.rand(3, 5, dtype=torch.float64), None, lambda t: t.nbytes),
    "element_size": (lambda: torch.ones(3, dtype=torch.int16), ()),
    "requires_grad": (_leaf, None, lambda t: t.requires_grad),
    "is_shared": (_base, ()),
    "share_memory_": (_base, ()),
    "set_": (_base, (torch.ones(9),)),
    "chalf": (_base, ()),
    "to_sparse": (_leaf, ()),
}
for _m in ("to_sparse_coo", "to_sparse_csr", "to_sparse_csc", "to_mkldnn"):
    CASES[_m] = (_leaf, ())
CASES["to_sparse_bsr"] = CASES["to_sparse_bsc"] = (lambda: torch.rand(4, 4).requires_grad_(), (2,))

# Values that are not defined (new uninitialised memory): metadata compared only.
UNINITIALISED = {"new_empty", "new_empty_strided", "new", "resize", "resize_", "resize_as_"}
# Addresses: the wrapped one must be the wrapped memory's, checked in test_addresses.
ADDRESSES = {"data_ptr", "const_data_ptr"}
# The object protocol, not tensor behaviour (and the display, which names the wrapper).
NOT_SURFACE = {
    "__annotations__", "__class__", "__delattr__", "__dict__", "__dir__", "__doc__",
    "__getattribute__", "__hash__", "__init__", "__init_subclass__", "__module__", "__new__",
    "__repr__", "__setattr__", "__sizeof__", "__str__", "__subclasshook__", "__weakref__",
    "__torch_dispatch__", "__torch_function__", "__dlpack_c_exchange_api__",
    "__cuda_array_interface__", "__array_priority__", "__dlpack__", "__dlpack_device__",
}  # fmt: skip


def _names():
    public = (n for n in dir(torch.Tensor) if not n.startswith("_") or n.startswith("__"))
    return sorted(n for n in public if n not in NOT_SURFACE and n not in ADDRESSES)


def _plain(x):
    return tb.to_torch(x) if isinstance(x, tb.Tensor) else x


def _same(a, b, metadata_only=False) -> str | None:
    """None when `a` (from the wrapped tensor) matches `b` (from the plain one), else why not."""
    if isinstance(b, torch.Tensor):
        if not isinstance(a, torch.Tensor):
            return f"{type(a).__name__} where torch gives a tensor"
        for attr in ("shape", "dtype", "requires_grad", "layout"):
            if getattr(a, attr) != getattr(b, attr):
                return f"{attr} {getattr(a, attr)} vs {getattr(b, attr)}"
        if metadata_only or b.layout != torch.strided:
            if b.layout != torch.strided and not metadata_only:
                return None if torch.equal(a.to_dense(), b.to_dense()) else "values differ"
            return None
        x, y = _plain(a).detach(), b.detach()
        ok = torch.equal(x, y) or (
            (y.is_floating_point() or y.is_complex())
            and torch.allclose(x, y, rtol=1e-5, atol=1e-6, equal_nan=True)
        )
        return None if ok else f"values differ: {x} vs {y}"
    if isinstance(b, torch.UntypedStorage):
        return None if bytes(a) == bytes(b) else "storage bytes differ"
    if isinstance(b, torch.TypedStorage):
        return None if a.tolist() == b.tolist() and a.dtype == b.dtype else "storage differs"
    if isinstance(b, np.ndarray):
        return None if np.array_equal(a, b) and a.dtype == b.dtype else "array differs"
    if isinstance(b, (list, tuple)):
        if type(a) is not type(b) or len(a) != len(b):
            return f"{type(a).__name__}[{len(a)}] vs {type(b).__name__}[{len(b)}]"
        for x, y in zip(a, b, strict=True):
            why = _same(x, y, metadata_only)
            if why:
                return why
        return None
    if isinstance(b, float) and math.isnan(b):
        return None if isinstance(a, float) and math.isnan(a) else f"{a} vs nan"
    if callable(b) and not isinstance(b, type):
        return None if callable(a) else f"{a!r} is not callable"
    if hasattr(b, "__next__"):  # iterators (reversed)
        return _same(list(a), list(b), metadata_only)
    return None if a == b else f"{a!r} vs {b!r}"


def _wrapped(p: torch.Tensor) -> tb.Tensor:
    return tb.wrap(p.detach().clone()).requires_grad_(p.requires_grad)


def _call(t, name, args, fn):
    if fn is not None:
        return fn(t)
    attr = getattr(t, name)
    return attr(*args) if args is not None and callable(attr) else attr


def check(name: str) -> tuple[str, str]:
    """('equal' | 'raises_as_plain' | 'raises_other_type' | 'documented' | 'differs', detail)."""
    metadata_only = name in UNINITIALISED
    if name in CASES:
        make, args, *rest = CASES[name]
        attempts = [
            (make, (lambda a=args: a) if args is not None else None, rest[0] if rest else None)
        ]
    else:
        attempts = [(_base, c, None) for c in CANDIDATES]
    is_data = not callable(getattr(torch.Tensor, name, None)) or isinstance(
        getattr(torch.Tensor, name), property
    )
    if is_data and name not in CASES:
        attempts = [(_base, None, None)]
    plain_error = None
    for make, args_fn, fn in attempts:
        p = make()
        w = _wrapped(p)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                torch.manual_seed(1)
                rp = _call(p, name, args_fn() if args_fn else None, fn)
            except Exception as e:
                plain_error = plain_error or (make, args_fn, fn, e)
                continue
            try:
                torch.manual_seed(1)
                rw = _call(w, name, args_fn() if args_fn else None, fn)
            except Exception as e:
                if name in UNSUPPORTED and UNSUPPORTED[name] in str(e):
                    return "documented", f"{type(e).__name__}: {e}"
                return "differs", f"wrapped raised {type(e).__name__}: {e}"
        if name in UNSUPPORTED:
            return "differs", "documented as unsupported, but it worked"
        why = _same(rw, rp, metadata_only) or _same(w, p, metadata_only)
        return ("differs", why) if why else ("equal", "")
    make, args_fn, fn, e = plain_error
    p = make()
    w = _wrapped(p)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            _call(w, name, args_fn() if args_fn else None, fn)
        except Exception as e2:
            if isinstance(e2, type(e)) or isinstance(e, type(e2)):
                return "raises_as_plain", f"{type(e).__name__}: {str(e)[:80]}"
            # Both refuse: a kernel's own check (TypeError naming the op and dtype) where torch
            # says NotImplementedError, e.g. bitwise_not of float32.
            if name.strip("_") in str(e2):
                return "raises_other_type", f"{type(e).__name__} / {type(e2).__name__}: {e2}"
            return "differs", f"plain raised {type(e).__name__}, wrapped {type(e2).__name__}: {e2}"
    return "differs", f"plain raised {type(e).__name__}: {e}; the wrapped tensor did not"


@pytest.mark.parametrize("name", _names())
def test_method_behaves_as_on_a_plain_tensor(name):
    kind, detail = check(name)
    assert kind != "differs", f"{name}: {detail}"


@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
def test_documented_errors_are_raised_with_their_reason(name):
    assert name in _names(), f"{name} is not a torch.Tensor method"
    kind, detail = check(name)
    assert kind == "documented", f"{name}: {kind} {detail}"


def test_addresses_are_the_wrapped_memory():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = tb.wrap(a)
    assert t.data_ptr() == t.const_data_ptr() == a.ctypes.data
    assert t[1].data_ptr() == a[1].ctypes.data  # a view: its own first element
    assert t.untyped_storage().data_ptr() == a.ctypes.data
    assert t.untyped_storage().nbytes() == a.nbytes
    assert t.storage_offset() == t[1].storage_offset() == 0  # storages begin at the view


def _opinfo_methods():
    from torch.testing._internal.common_methods_invocations import op_db

    out = []
    for op in op_db:
        for variant in (op.method_variant, op.inplace_variant):
            name = getattr(variant, "__name__", None)
            if name and hasattr(torch.Tensor, name) and not name.startswith("_"):
                out.append(pytest.param(op, name, id=f"{op.name}-{op.variant_test_name}-{name}"))
    return out


@pytest.mark.parametrize("op,name", _opinfo_methods())
def test_opinfo_method_samples(op, name):
    """The method variants of OpInfo ops on their first two samples (float32 where supported,
    else the op's first dtype): the wrapped tensor as `self`, the same values as torch's."""
    dtypes = op.supported_dtypes("cpu")
    if not dtypes:
        pytest.skip(f"{op.name} has no CPU dtypes")
    dtype = torch.float32 if torch.float32 in dtypes else sorted(dtypes, key=str)[0]
    samples = list(op.sample_inputs("cpu", dtype, requires_grad=False))[:2]
    inplace = name.endswith("_") and not name.endswith("__")
    for s in samples:
        if not isinstance(s.input, torch.Tensor) or s.input.layout != torch.strided:
            continue
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                torch.manual_seed(2)
                p = s.input.clone()
                rp = getattr(p, name)(*s.args, **s.kwargs)
            except Exception as e:
                w = _wrapped(s.input)
                with pytest.raises(Exception) as info:
                    torch.manual_seed(2)
                    getattr(w, name)(*s.args, **s.kwargs)
                assert isinstance(info.value, type(e)) or isinstance(e, type(info.value)), (
                    f"{name}: plain raised {e!r}, wrapped {info.value!r}"
                )
                continue
            w = _wrapped(s.input)
            grew = p.numel() != s.input.numel() and name != "as_strided_"  # a view op
            if any("resized" in str(c.message) for c in caught) or grew:
                # torch grew `self` (a deprecated resize of an in-place result): wrapped
                # memory cannot grow.
                with pytest.raises(BufferError, match=UNSUPPORTED["resize_"]):
                    getattr(w, name)(*s.args, **s.kwargs)
                continue
            torch.manual_seed(2)
            try:
                rw = getattr(w, name)(*s.args, **s.kwargs)
            except Exception as e:
                if name in UNSUPPORTED and UNSUPPORTED[name] in str(e):
                    continue  # documented
                raise
        why = _close(rw, rp, name) or (_close(w, p, name) if inplace else None)
        assert why is None, f"{name} on {s}: {why}"


def _close(a, b, name):
    if name in UNINITIALISED:
        return _same(a, b, metadata_only=True)
    if isinstance(b, torch.Tensor) and b.layout == torch.strided and isinstance(a, torch.Tensor):
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"{a.shape}/{a.dtype} vs {b.shape}/{b.dtype}"
        try:
            torch.testing.assert_close(_plain(a), b, rtol=1e-4, atol=1e-5, equal_nan=True)
        except AssertionError as e:
            return str(e)[:300]
        return None
    if isinstance(b, (list, tuple)) and isinstance(a, (list, tuple)) and len(a) == len(b):
        for x, y in zip(a, b, strict=True):
            why = _close(x, y, name)
            if why:
                return why
        return None
    return _same(a, b)


def test_surface_report(capsys):
    counts = dict.fromkeys(
        ("equal", "raises_as_plain", "raises_other_type", "documented", "differs"), 0
    )
    differs = []
    for name in _names():
        kind, detail = check(name)
        counts[kind] += 1
        if kind == "differs":
            differs.append(f"{name}: {detail}")
    with capsys.disabled():
        print(
            f"\ntorch.Tensor surface: {len(_names())} names checked (+ data_ptr, "
            f"const_data_ptr by address): {counts}"
        )
    assert counts["differs"] == 0, "\n".join(differs)
