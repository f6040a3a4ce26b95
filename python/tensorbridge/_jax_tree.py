"""Torch pytrees as JAX pytrees: the containers a torch function returns (dicts, tuples, named
tuples, ``torch.return_types``, ``transformers``' ``ModelOutput``s, any node type registered with
``torch.utils._pytree``), taken as they are into JAX.

``call_torch`` hands its results back in the container the torch function built, with JAX arrays
for leaves. Inside ``jax.jit`` that container is returned from a traced function, so JAX must know
it as a pytree node: ``register`` walks the output's ``TreeSpec`` and registers every node type
that JAX does not handle itself, flattening and unflattening it with torch's own functions.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import threading

import torch.utils._pytree as torch_pytree

__all__ = ["register"]

# Node types JAX takes as containers itself (torch reports every namedtuple as `namedtuple`).
_JAX_NATIVE = (
    tuple,
    list,
    dict,
    collections.OrderedDict,
    collections.defaultdict,
    type(None),
    collections.namedtuple,
)
_registered: set = set()
_lock = threading.Lock()


def register(jax, spec: torch_pytree.TreeSpec) -> None:
    """Registers with JAX every node type of `spec` that JAX does not know (once per type)."""
    todo = [spec]
    while todo:
        s = todo.pop()
        if s.is_leaf():
            continue
        todo.extend(s.children())
        t = s.type
        if t in _JAX_NATIVE or t in _registered:
            continue
        with _lock:
            if t not in _registered:
                _register_type(jax, t)
                _registered.add(t)


def _frozen(x):
    # JAX compares and hashes a node's auxiliary data (it is part of the tree structure).
    if isinstance(x, list):
        return tuple(_frozen(i) for i in x)
    return x


def _is_keyed_dataclass(t) -> bool:
    # transformers' ModelOutput: an OrderedDict subclass declared as a dataclass, whose keys are
    # the fields that are set.
    return isinstance(t, type) and issubclass(t, dict) and dataclasses.is_dataclass(t)


def _register_type(jax, t) -> None:
    node = torch_pytree.SUPPORTED_NODES[t]
    tu = jax.tree_util
    if _is_keyed_dataclass(t):

        def flatten_with_keys(obj):
            keys = tuple(obj.keys())
            return [(tu.DictKey(k), obj[k]) for k in keys], keys

        def unflatten(keys, values):
            # Field by field: the constructor's guessing (a lone first field that is iterable
            # taken for key/value pairs) must not see JAX values.
            obj = t.__new__(t)
            dict.__init__(obj)
            for k, v in zip(keys, values, strict=True):
                obj[k] = v
            return obj

        def flatten(obj):
            keys = tuple(obj.keys())
            return [obj[k] for k in keys], keys

        tu.register_pytree_with_keys(t, flatten_with_keys, unflatten, flatten)
        return

    def flatten_generic(obj):
        children, context = node.flatten_fn(obj)
        return list(children), _frozen(context)

    def unflatten_generic(context, children):
        return node.unflatten_fn(list(children), context)

    tu.register_pytree_node(t, flatten_generic, unflatten_generic)


def unflattener(jax, spec: torch_pytree.TreeSpec):
    """A function that builds, from leaves in torch's order, the JAX pytree of torch's `spec`
    (its node types registered with JAX first). JAX orders dict keys sorted, torch in
    insertion order: the leaves are permuted to match."""
    register(jax, spec)
    # Integer leaves (their torch positions): a container's constructor may look at its
    # values (ModelOutput does).
    like = torch_pytree.tree_unflatten(list(range(spec.num_leaves)), spec)
    leaves, treedef = jax.tree_util.tree_flatten(like)
    if leaves == list(range(spec.num_leaves)):
        return functools.partial(jax.tree_util.tree_unflatten, treedef)

    def unflatten(values):
        return jax.tree_util.tree_unflatten(treedef, [values[i] for i in leaves])

    return unflatten
