import importlib.util

import pytest

HAS_JAX = importlib.util.find_spec("jax") is not None

requires_jax = pytest.mark.skipif(not HAS_JAX, reason="JAX is not installed (extra 'jax')")


@pytest.fixture
def fresh_dynamo():
    """dynamo's caches and tensorbridge's plan metrics cleared around a test; the plan pass on."""
    import torch

    import tensorbridge as tb
    from tensorbridge import _compile

    torch._dynamo.reset()
    tb.reset_plan_metrics()
    yield
    torch._dynamo.reset()
    _compile.fusion = True
