import importlib.util

import pytest

HAS_JAX = importlib.util.find_spec("jax") is not None

requires_jax = pytest.mark.skipif(not HAS_JAX, reason="JAX is not installed (extra 'jax')")
