"""Kernels written in Python: ``@tensorbridge.register_kernel("aten::gelu")``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, overload

from tensorbridge import _C


class KernelHandle:
    """A Python kernel installed in the table. Calling it calls the function; ``remove()`` (or
    leaving a ``with`` block) restores the kernel that served the op before."""

    def __init__(self, op: str, fn: Callable, registration: _C.KernelRegistration) -> None:
        self.op = op
        self.fn = fn
        self._registration = registration

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def remove(self) -> None:
        self._registration.remove()

    def __enter__(self) -> KernelHandle:
        return self

    def __exit__(self, *exc) -> None:
        self.remove()

    def __repr__(self) -> str:
        return f"<KernelHandle {self.op}: {self.fn.__module__}.{self.fn.__qualname__}>"


@overload
def register_kernel(op: str, fn: Callable, *, schema: str | None = None) -> KernelHandle: ...
@overload
def register_kernel(
    op: str, fn: None = None, *, schema: str | None = None
) -> Callable[[Callable], KernelHandle]: ...
def register_kernel(
    op: str, fn: Callable | None = None, *, schema: str | None = None
) -> KernelHandle | Callable[[Callable], KernelHandle]:
    """Installs `fn` as the CPU kernel of `op`, overriding any built-in kernel until removed.

    `fn` takes and returns ``tensorbridge.Array``s, with the op's arguments in PyTorch's
    schema order (keyword-only ones as keywords). Ops outside ``aten`` need their `schema`
    (``"mylib::scale(Tensor x, float k) -> Tensor"``). Usable as a decorator::

        @tensorbridge.register_kernel("aten::gelu")
        def my_gelu(x, approximate="none"): ...

        my_gelu.remove()

    `fn` may decline a call it has no loop for (a dtype, say) by raising
    ``tensorbridge.KernelDeclinedError``: the call then goes to the fallback as a built-in
    kernel's refusal does (``config.fallback``).
    """

    def install(f: Callable) -> KernelHandle:
        if schema is not None:
            _C._define(schema)
        where = f"python: {f.__module__}.{f.__qualname__}"
        return KernelHandle(op, f, _C._register_python_kernel(op, f, where))

    return install(fn) if fn is not None else install
