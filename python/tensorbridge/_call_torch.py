"""Torch functions called from array code: numpy in, numpy out; JAX in, JAX out; and inside
``jax.jit``, ``jax.grad`` / ``jax.vjp`` and ``jax.vmap``.

Eagerly, ``call_torch`` wraps its array arguments zero-copy as ``tensorbridge.Tensor``s, runs the
function and hands the results back (numpy results share memory; JAX takes results through
DLPack). Under JAX transforms output shapes come from running the function once per input
signature on fake tensors, and the function becomes a ``custom_vjp`` JAX function of one of
two kinds (``jit_mode``):

- ``"ffi"``: captured once into C++ plans that an XLA FFI custom call runs on XLA's buffers
  with no Python per call (``_jax_ffi``): the forward; under ``jax.grad`` a forward that also
  returns the activations the backward reads, and the backward (``_jax_grad``), for the
  inputs JAX differentiates; under ``vmap`` the plan of ``torch.func.vmap`` of the function
  (or, where that cannot be captured, the custom call once per batch element inside XLA).
- ``"callback"``: ``jax.pure_callback`` runs the function on the host per call; the backward
  pass runs torch autograd; ``vmap`` runs the whole batch at once through ``torch.func.vmap``.

Results come back as JAX pytrees of the containers the function returns (``_jax_tree``).

``"auto"`` (the default, ``tensorbridge.config.jit_mode``) takes the FFI where the function
can be captured and the callback otherwise; ``metrics`` in ``call_torch_metrics()`` say which.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.utils._pytree as torch_pytree

from tensorbridge import _jax_ffi, _jax_grad, _jax_tree
from tensorbridge._config import JIT_MODES, config
from tensorbridge._dtypes import numpy_dtype, torch_dtype
from tensorbridge._tensor import Tensor, wrap

__all__ = ["call_torch", "call_torch_metrics", "torch_function"]


def _jax():
    import jax

    return jax


def _is_jax(x) -> bool:
    mod = type(x).__module__
    return mod.startswith("jax") or mod.startswith("jaxlib")


def _torch_dtype(dtype):
    return torch_dtype(dtype, "call_torch")


def _check_leaf(x, where: str):
    if isinstance(x, np.ndarray) or _is_jax(x):
        _torch_dtype(x.dtype)
        return
    raise TypeError(
        f"call_torch: {where} is a {type(x).__name__}; pass numpy or JAX arrays (bind other "
        "arguments with functools.partial)"
    )


# ---- eager -------------------------------------------------------------------------------------


def _run_eager(fn, args, kwargs):
    leaves, spec = torch_pytree.tree_flatten((args, kwargs))
    for i, x in enumerate(leaves):
        _check_leaf(x, f"argument leaf {i}")
    to_jax = any(_is_jax(x) for x in leaves)
    tensors = [wrap(x) for x in leaves]
    a, k = torch_pytree.tree_unflatten(tensors, spec)
    with torch.no_grad():
        out = fn(*a, **k)
    if not to_jax:
        return torch_pytree.tree_map(lambda t: _export(t, False), out)
    out_leaves, out_spec = torch_pytree.tree_flatten(out)
    return _jax_tree.unflattener(_jax(), out_spec)([_export(t, True) for t in out_leaves])


def _export(t, to_jax: bool):
    if not isinstance(t, torch.Tensor):
        return t
    if isinstance(t, Tensor):
        arr = t.array
    else:
        from tensorbridge import _C

        arr = _C.from_dlpack(t.detach())
    if to_jax:
        import jax.numpy as jnp

        return jnp.from_dlpack(arr.clone() if arr.read_only else arr)
    return arr.numpy()


# ---- JAX transforms ----------------------------------------------------------------------------


def _meta_outputs(fn, leaves_spec, shapes_dtypes):
    """Output structure of fn, from a run on fake CPU tensors (shapes and dtypes, no data;
    tensors fn creates itself are fake too). Cached by the caller."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    try:
        with FakeTensorMode(allow_non_fake_inputs=True), torch.no_grad():
            fakes = [torch.empty(s, dtype=_torch_dtype(d)) for s, d in shapes_dtypes]
            args, kwargs = torch_pytree.tree_unflatten(fakes, leaves_spec)
            out = fn(*args, **kwargs)
    except Exception as e:
        raise ValueError(
            "call_torch under a JAX transform needs output shapes that depend only on input "
            f"shapes (inferred once on fake tensors); {_jax_ffi.fn_name(fn)} failed: {e}"
        ) from e
    out_leaves, out_spec = torch_pytree.tree_flatten(out)
    for i, o in enumerate(out_leaves):
        if not isinstance(o, torch.Tensor):
            where = _leaf_path(out, i)
            raise TypeError(
                f"call_torch: under a JAX transform every output must be a tensor (in dicts, "
                f"tuples, lists, dataclasses or other pytree containers), got "
                f"{type(o).__name__} at {where} of {_jax_ffi.fn_name(fn)}; return only "
                "the tensors you need"
                + (
                    " (a transformers model's KV cache: pass use_cache=False)"
                    if type(o).__name__.endswith("Cache")
                    else ""
                )
            )
    return out_spec, [(tuple(o.shape), o.dtype) for o in out_leaves]


def _leaf_path(tree, i: int) -> str:
    """Where leaf `i` of `tree` sits, for messages (its key path where the containers have keys)."""
    try:
        path = torch_pytree.tree_flatten_with_path(tree)[0][i][0]
        return torch_pytree.keystr(path) or "the output"
    except Exception:  # a container registered without keys
        return f"output leaf {i}"


class _Traced:
    """The JAX function for one torch function and one input pytree structure."""

    def __init__(self, fn, spec):
        self.fn = fn
        self.spec = spec
        self._out = {}
        self._grad_fns = {}  # differentiated-input mask -> (forward, backward) FFI functions

    def out_info(self, shapes_dtypes):
        key = tuple(shapes_dtypes)
        if key not in self._out:
            self._out[key] = _meta_outputs(self.fn, self.spec, shapes_dtypes)
        return self._out[key]

    # Host side: numpy in, numpy out, zero-copy both ways.
    def host_forward(self, *arrays):
        _jax_ffi.count_callback_run()
        tensors = [wrap(np.asarray(a)) for a in arrays]
        args, kwargs = torch_pytree.tree_unflatten(tensors, self.spec)
        with torch.no_grad():
            out = self.fn(*args, **kwargs)
        return [_export(o, False) for o in torch_pytree.tree_leaves(out)]

    def host_batched_forward(self, *arrays):
        _jax_ffi.count_callback_run()
        # vmap_method="expand_dims": batched args carry the batch axis first, the others a
        # size-1 axis there. Run the whole batch at once with torch.func.vmap.
        batch = max(a.shape[0] for a in arrays)
        in_dims: list[int | None] = []
        tensors = []
        for a in arrays:
            a = np.asarray(a)
            if a.shape[0] == batch:
                in_dims.append(0)
                tensors.append(wrap(a))
            else:
                in_dims.append(None)
                tensors.append(wrap(a[0]))

        def flat_fn(*ts):
            args, kwargs = torch_pytree.tree_unflatten(list(ts), self.spec)
            return tuple(torch_pytree.tree_leaves(self.fn(*args, **kwargs)))

        with torch.no_grad():
            outs = torch.func.vmap(flat_fn, in_dims=tuple(in_dims))(*tensors)
        return [_export(o, False) for o in outs]

    def host_backward(self, mask, *arrays_and_cts):
        """Torch autograd on the host: the gradients of the inputs in `mask`, given the
        cotangents of the floating-point outputs."""
        _jax_ffi.count_callback_run()
        n = len(mask)
        arrays, cts = arrays_and_cts[:n], arrays_and_cts[n:]
        inputs = []
        for a, m in zip(arrays, mask, strict=True):
            t = wrap(np.array(a))  # a private copy: autograd may need it writable
            inputs.append(t.requires_grad_(True) if m else t)
        args, kwargs = torch_pytree.tree_unflatten(inputs, self.spec)
        with torch.enable_grad():
            outs = torch_pytree.tree_leaves(self.fn(*args, **kwargs))
        outs = [o for o in outs if o.dtype.is_floating_point or o.dtype.is_complex]
        diff = [t for t in inputs if t.requires_grad]
        pairs = [
            (o, wrap(np.asarray(c))) for o, c in zip(outs, cts, strict=True) if o.requires_grad
        ]
        grads = (
            torch.autograd.grad(
                [o for o, _ in pairs], diff, [c for _, c in pairs], allow_unused=True
            )
            if pairs
            else [None] * len(diff)
        )
        dtypes = [a.dtype for a, m in zip(arrays, mask, strict=True) if m]
        return [
            np.zeros(t.shape, dt) if g is None else _export(g, False)
            for g, t, dt in zip(grads, diff, dtypes, strict=True)
        ]

    def _ffi_forward(self, jax, plan_id, result_shapes, jit_mode):
        """The forward through the FFI. Under ``vmap`` it runs one plan of the batched function
        (``torch.func.vmap`` of fn, captured once per batch signature); where that function
        cannot be captured, the plan of one element runs once per element inside XLA."""
        per_element = _jax_ffi.ffi_function(jax, plan_id, result_shapes)
        batched: dict = {}

        @jax.custom_batching.custom_vmap
        def forward(*arrays):
            return tuple(per_element(*arrays))

        @forward.def_vmap
        def forward_vmap(axis_size, in_batched, *arrays):
            in_dims = tuple(0 if b else None for b in in_batched)
            key = (in_dims, tuple((a.shape, np.dtype(a.dtype)) for a in arrays))
            if key not in batched:
                batched[key] = self._batched_function(jax, in_dims, arrays, jit_mode)
            f = batched[key]
            outs = f(*arrays) if f is not None else jax.vmap(per_element, in_axes=in_dims)(*arrays)
            return tuple(outs), tuple(True for _ in outs)

        return forward

    def _batched_function(self, jax, in_dims, arrays, jit_mode):
        """The JAX function (FFI path) of fn vmapped over `in_dims`, or None when it cannot
        be captured."""
        fn, spec = self.fn, self.spec

        def flat_fn(*ts):
            args, kwargs = torch_pytree.tree_unflatten(list(ts), spec)
            return tuple(torch_pytree.tree_leaves(fn(*args, **kwargs)))

        def batched_fn(*ts):
            return torch.func.vmap(flat_fn, in_dims=in_dims)(*ts)

        batched_fn.__name__ = f"vmap({_jax_ffi.fn_name(fn)})"
        traced = _Traced(batched_fn, torch_pytree.tree_flatten((tuple(arrays), {}))[1])
        shapes = tuple((tuple(a.shape), np.dtype(a.dtype)) for a in arrays)
        try:
            f, _ = traced.build(jax, shapes, jit_mode, note=False)
        except (NotImplementedError, ValueError, TypeError):
            return None
        return f if traced.uses_ffi else None

    def _plans(self, jax, shapes_dtypes, out_info, jit_mode, note=True):
        """The forward plan id, or None for the callback path."""
        if jit_mode == "callback":
            return None
        why = _jax_ffi.ffi_usable(jax)
        forced = jit_mode == "ffi"
        name = _jax_ffi.fn_name(self.fn)
        try:
            if why is not None:
                raise _jax_ffi.CaptureError(why)
            fwd = _jax_ffi.capture_forward(
                self.fn, self.spec, shapes_dtypes, out_info, _torch_dtype, allow_fallback=forced
            )
        except _jax_ffi.CaptureError as e:
            if forced:
                raise NotImplementedError(
                    f"call_torch(jit_mode='ffi'): {name} cannot run as a plan: {e}"
                ) from e
            if note:
                _jax_ffi.note_callback(f"{name}: {e}")
            return None
        return fwd

    def _grad_functions(self, jax, mask, shapes_dtypes, out_info, result_shapes, jit_mode):
        """The FFI functions (forward with saved activations, backward) of the gradient of the
        inputs in `mask`, captured on first use; None where the gradient takes the callback
        (torch autograd on the host)."""
        if mask not in self._grad_fns:
            name = _jax_ffi.fn_name(self.fn)
            try:
                plans = _jax_grad.capture(
                    self.fn,
                    self.spec,
                    shapes_dtypes,
                    out_info,
                    mask,
                    _torch_dtype,
                    allow_fallback=jit_mode == "ffi",
                )
                saved = [jax.ShapeDtypeStruct(s, numpy_dtype(d)) for s, d in plans.saved]
                grads = [
                    jax.ShapeDtypeStruct(s, d)
                    for (s, d), m in zip(shapes_dtypes, mask, strict=True)
                    if m
                ]
                self._grad_fns[mask] = (
                    _jax_ffi.ffi_function(jax, plans.forward, list(result_shapes) + saved),
                    _jax_ffi.ffi_function(jax, plans.backward, grads),
                )
            except _jax_ffi.CaptureError as e:
                _jax_ffi.note_callback(f"{name} (gradient): {e}")
                self._grad_fns[mask] = None
        return self._grad_fns[mask]

    def build(self, jax, shapes_dtypes, jit_mode="auto", note=True):
        out_spec, out_info = self.out_info(shapes_dtypes)
        out_tree = _jax_tree.unflattener(jax, out_spec)
        self._in_info = shapes_dtypes
        result_shapes = [jax.ShapeDtypeStruct(s, numpy_dtype(d)) for s, d in out_info]
        if not jax.config.jax_enable_x64:
            for i, r in enumerate(result_shapes):
                if r.dtype.itemsize == 8 and r.dtype.kind in "iuf":
                    raise TypeError(
                        f"call_torch: output {i} of {_jax_ffi.fn_name(self.fn)} is "
                        f"{r.dtype}, which JAX holds only with jax_enable_x64 on; cast it in the "
                        "torch function (e.g. .to(torch.int32)) or enable x64"
                    )
        inexact = [np.issubdtype(np.dtype(d), np.inexact) for _, d in shapes_dtypes]
        float_out = [d.is_floating_point or d.is_complex for _, d in out_info]
        n_out = len(out_info)
        fwd_plan = self._plans(jax, shapes_dtypes, out_info, jit_mode, note)
        self.uses_ffi = fwd_plan is not None

        if fwd_plan is not None:
            forward = self._ffi_forward(jax, fwd_plan, result_shapes, jit_mode)
        else:

            def forward(*arrays):
                return jax.pure_callback(
                    self._host_dispatch, result_shapes, *arrays, vmap_method="expand_dims"
                )

        def grad_functions(mask):
            if fwd_plan is None:
                return None
            return self._grad_functions(jax, mask, shapes_dtypes, out_info, result_shapes, jit_mode)

        # Inside shard_map the FFI call's results are typed as invariant over the mesh axes
        # whatever its inputs: they get the axes their inputs vary over (see _same_vma).
        def typed(outs, arrays):
            axes = frozenset().union(*(_varying_axes(jax.typeof(a)) for a in arrays))
            return tuple(_vary(jax, o, axes) for o in outs)

        @jax.custom_vjp
        def f(*arrays):
            return typed(forward(*arrays), arrays)

        # symbolic_zeros: the forward learns which inputs JAX differentiates (`perturbed`), so
        # the gradient plans compute only those; the backward learns which cotangents are zero.
        def f_fwd(*primals):
            arrays = tuple(p.value for p in primals)
            mask = tuple(bool(p.perturbed) and m for p, m in zip(primals, inexact, strict=True))
            # The mask rides in the residuals' structure: () for a differentiated input.
            marker = tuple(() if m else None for m in mask)
            fns = grad_functions(mask) if any(mask) else None
            if fns is None:
                return typed(forward(*arrays), arrays), (arrays, (), marker)
            res = fns[0](*arrays)
            return typed(res[:n_out], arrays), (arrays, tuple(res[n_out:]), marker)

        def f_bwd(res, cts):
            arrays, saved, marker = res
            mask = tuple(m == () for m in marker)
            cts = [c for c, fl in zip(cts, float_out, strict=True) if fl]
            if not any(mask) or all(isinstance(c, _symbolic_zero(jax)) for c in cts):
                return tuple(None for _ in arrays)
            cts = [
                jax.numpy.zeros(c.shape, c.dtype) if isinstance(c, _symbolic_zero(jax)) else c
                for c in cts
            ]
            fns = grad_functions(mask)
            if fns is not None:
                grads = iter(fns[1](*arrays, *saved, *cts))
            else:
                grad_shapes = [
                    jax.ShapeDtypeStruct(a.shape, a.dtype)
                    for a, m in zip(arrays, mask, strict=True)
                    if m
                ]
                grads = iter(
                    jax.pure_callback(
                        functools.partial(self.host_backward, mask),
                        grad_shapes,
                        *arrays,
                        *cts,
                        vmap_method="sequential",
                    )
                )
            return tuple(
                _vary(jax, next(grads), _varying_axes(jax.typeof(a))) if m else None
                for a, m in zip(arrays, mask, strict=True)
            )

        f.defvjp(f_fwd, f_bwd, symbolic_zeros=True)
        return f, out_tree

    def _host_dispatch(self, *arrays):
        # Under vmap (vmap_method="expand_dims") every argument gains leading axes: the batch
        # size for batched arguments, 1 for the others. One extra axis runs as one batched
        # torch call; nested vmaps peel the outer axes one by one.
        extra = max(np.ndim(a) - len(s) for a, (s, _) in zip(arrays, self._in_info, strict=True))
        if extra <= 0:
            return self.host_forward(*arrays)
        if extra == 1:
            return self.host_batched_forward(*arrays)
        batch = max(np.shape(a)[0] for a in arrays)
        rows = [
            self._host_dispatch(*[a[i if np.shape(a)[0] > 1 else 0] for a in arrays])
            for i in range(batch)
        ]
        return [np.stack([r[k] for r in rows]) for k in range(len(rows[0]))]


def _symbolic_zero(jax):
    return jax.custom_derivatives.SymbolicZero


def _run_jax(fn, args, kwargs, cache, jit_mode):
    jax = _jax()
    leaves, spec = torch_pytree.tree_flatten((args, kwargs))
    for i, x in enumerate(leaves):
        if not (isinstance(x, (np.ndarray, jax.Array)) or hasattr(x, "aval")):
            _check_leaf(x, f"argument leaf {i}")
        _torch_dtype(x.dtype)
    shapes_dtypes = tuple((tuple(x.shape), np.dtype(x.dtype)) for x in leaves)
    mode = _jit_mode(jit_mode)
    key = (spec, shapes_dtypes, mode)
    if key not in cache:
        traced = _Traced(fn, spec)
        cache[key] = (traced, *traced.build(jax, shapes_dtypes, mode))
    traced, f, out_tree = cache[key]
    outs = f(*_same_vma(jax, leaves))
    return out_tree(list(outs))


def _same_vma(jax, leaves):
    """Inside ``jax.shard_map`` (with its default ``check_vma``), JAX types each value with the
    mesh axes it varies over. The torch function is one opaque call: its inputs are cast to
    vary over the union of their axes first, as JAX does for its own primitives that mix
    varying and invariant values, so that the gradient of an invariant input (a replicated
    parameter) comes back summed over those axes (the transpose of the cast is a psum)."""
    union = frozenset().union(*(_varying_axes(jax.typeof(x)) for x in leaves))
    if not union:
        return leaves
    return [_vary(jax, x, union) for x in leaves]


def _vary(jax, x, axes: frozenset):
    """`x` typed as varying over `axes` (a no-op on its value)."""
    missing = tuple(sorted(axes - _varying_axes(jax.typeof(x))))
    return jax.lax.pcast(x, missing, to="varying") if missing else x


def _varying_axes(aval) -> frozenset:
    """The mesh axes a value varies over inside shard_map (``aval.manual_axis_type.varying``
    in JAX 0.10, ``aval.vma`` before); empty outside shard_map."""
    mat = getattr(aval, "manual_axis_type", None)
    if mat is not None:
        return frozenset(mat.varying)
    return frozenset(getattr(aval, "vma", ()))


def _jit_mode(mode):
    mode = config.jit_mode if mode is None else mode
    if mode not in JIT_MODES:
        raise ValueError(f"call_torch: jit_mode must be one of {JIT_MODES}, got {mode!r}")
    return mode


def call_torch(fn: Callable, *args: Any, jit_mode: str | None = None, **kwargs: Any) -> Any:
    """Runs torch function `fn` on numpy or JAX arrays (pytrees of them) and returns its results
    in the caller's framework. Works eagerly and inside ``jax.jit``, ``jax.grad``, ``jax.vmap``.

    `fn` may be a module or a closure over one: under JAX transforms the tensors it holds
    (parameters, buffers, constants) are captured with it, sharing their memory. Results come
    back in the containers `fn` returns (dicts, tuples, ``ModelOutput``s, ...), arrays inside.

    ``jit_mode`` (keyword, not passed to `fn`) picks how the function runs under JAX
    transforms: ``"ffi"``, ``"callback"`` or ``"auto"``; None means ``config.jit_mode``."""
    return torch_function(fn, jit_mode=jit_mode)(*args, **kwargs)


def call_torch_metrics() -> dict:
    """Which path call_torch took under ``jax.jit``: ``ffi_plans`` (plans captured and
    registered), ``ffi_runs`` / ``ffi_failures`` (FFI handler calls), ``callback_runs`` (host
    calls through ``jax.pure_callback``), ``callback_signatures`` (input signatures routed to
    the callback in auto mode) and ``callback_reasons`` (why, most recent last)."""
    return _jax_ffi.metrics()


def torch_function(fn: Callable, *, jit_mode: str | None = None) -> Callable[..., Any]:
    """Decorator form of ``call_torch``: ``torch_function(fn)(*arrays)``."""
    _jit_mode(jit_mode)
    cache: dict = {}

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        leaves = torch_pytree.tree_leaves((args, kwargs))
        if any(_is_tracer(x) for x in leaves):
            return _run_jax(fn, args, kwargs, cache, jit_mode)
        return _run_eager(fn, args, kwargs)

    wrapper.__wrapped_torch__ = fn  # type: ignore[attr-defined]
    return wrapper


def _is_tracer(x) -> bool:
    if not _is_jax(x):
        return False
    jax = _jax()
    return isinstance(x, jax.core.Tracer)
