"""The compile backend's state (``_compile.state``): its counters and the plans it built."""

from __future__ import annotations

import collections
import types
import warnings
import weakref

from tensorbridge._config import config

__all__ = ["install_fusion_alias", "state"]


class _CompileState:
    """Everything the compile backend keeps between calls, in one place.

    ``stats``: the counters of ``plan_metrics()``. ``all_plans``: every plan built, held weakly
    (plan -> its explain entry's kind), for ``tensorbridge.diagnostics.profile``; ``profiling``:
    the profile blocks open now (plans built inside one time their nodes from the start).
    ``plans``: the latest plans built (newest last, at most ``RECENT_PLANS``), for tests and
    tools that look at what was just built. ``call_boxes``: one ``[calls]`` box per plan built,
    counted by its run function (the hot path does no more); ``plan_calls()`` sums them, less
    the sum at the last reset. ``graph_ids``, ``frames_seen``: graphs and frames seen, which tell
    a recompilation; ``compilations``: one ``_Compilation`` per backend call.
    """

    RECENT_PLANS = 64

    def __init__(self) -> None:
        self.stats: collections.Counter[str] = collections.Counter()
        self.all_plans: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.profiling: list = []
        self.plans: list = []
        self.call_boxes: list = []
        self.calls_at_reset = 0
        self.graph_ids: set = set()
        self.frames_seen: set = set()
        self.compilations: list = []  # one _compile._Compilation per backend call

    def plan_calls(self) -> int:
        return sum(box[0] for box in self.call_boxes) - self.calls_at_reset

    def add_plan(self, plan, kind: str) -> None:
        self.stats["plans_built"] += 1
        self.all_plans[plan] = kind
        self.plans.append(plan)
        del self.plans[: -self.RECENT_PLANS]
        if self.profiling:
            plan.profiling = True

    def reset(self) -> None:
        """The counters back to zero; plans already built stay (and keep their call boxes)."""
        self.stats.clear()
        self.calls_at_reset += self.plan_calls()
        self.graph_ids.clear()
        self.frames_seen.clear()
        self.compilations.clear()


state = _CompileState()


class _CompileModule(types.ModuleType):
    """``tensorbridge._compile.fusion``, the name the documentation gave ``config.fusion`` first,
    still reads and sets it (with a DeprecationWarning)."""

    @property
    def fusion(self) -> bool:
        warnings.warn(
            "tensorbridge._compile.fusion is now tensorbridge.config.fusion",
            DeprecationWarning,
            stacklevel=2,
        )
        return config.fusion

    @fusion.setter
    def fusion(self, on: bool) -> None:
        warnings.warn(
            "tensorbridge._compile.fusion is now tensorbridge.config.fusion",
            DeprecationWarning,
            stacklevel=2,
        )
        config.fusion = on


def install_fusion_alias(module: types.ModuleType) -> None:
    """Gives ``module`` (``tensorbridge._compile``) its ``fusion`` property."""
    module.__class__ = _CompileModule
