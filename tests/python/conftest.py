import importlib.util
import threading

import pytest

HAS_JAX = importlib.util.find_spec("jax") is not None

requires_jax = pytest.mark.skipif(not HAS_JAX, reason="JAX is not installed (extra 'jax')")


@pytest.fixture
def fresh_dynamo():
    """dynamo's caches and tensorbridge's plan metrics cleared around a test; the plan pass on."""
    import torch

    import tensorbridge as tb

    torch._dynamo.reset()
    tb.diagnostics.reset_plan_metrics()
    yield
    torch._dynamo.reset()
    tb.config.fusion = True


@pytest.fixture
def no_fallback():
    """config.fallback = "error" for a test: a kernel the table lost raises instead of running
    torch's (which would compare torch with itself)."""
    import tensorbridge as tb

    before = tb.config.fallback
    tb.config.fallback = "error"
    yield
    tb.config.fallback = before


def check_family_samples(r, family_ops, bar=0.95):
    """Judges a family's OpInfo samples (an ``_opinfo.OpInfoResult``).

    A sample that raised or did not match torch fails the test whatever else it needed; so does
    one in which an op of this family (`family_ops`) fell back to torch. Samples that matched
    torch but needed ops of other families (blocked) are not judged; of the others, at least
    `bar` must pass. Skips only when torch has no samples, or when every sample was blocked.
    """
    if r.total == 0:
        pytest.skip(f"torch has no CPU samples of {r.op} for {r.dtype}")
    own = sorted(op for op in r.fallbacks if op in family_ops)
    assert not own, f"{r.op}: ops of this family fell back to torch: {own}"
    judged = r.total - r.blocked
    if judged == 0:
        pytest.skip(f"every sample of {r.op} needs ops of other families: {sorted(r.fallbacks)}")
    failed = [(i, m) for i, m in r.failures if not m.startswith("fell back")]
    assert r.passed / judged >= bar, f"{r.passed}/{judged} passed; first failures: {failed[:5]}"


def opinfo_cases(names, dtypes):
    """pytest params (OpInfo, dtype): each OpInfo `names` finds (every variant of a bare name) in
    each of `dtypes`, with ids like ``index_add-float32`` and ``div.trunc_rounding-float64``."""
    from tensorbridge._opinfo import find_opinfos, opinfo_id

    return [
        pytest.param(o, dt, id=f"{opinfo_id(o)}-{str(dt).replace('torch.', '')}")
        for o in find_opinfos(names)
        for dt in dtypes
    ]


def check_opinfo_samples(opinfo, dtype, family_ops, max_samples):
    """Runs up to `max_samples` of the OpInfo's samples in `dtype` (gradients too in float64)
    and judges them with ``check_family_samples`` at bar 1.0: every judged sample must pass."""
    import torch

    from tensorbridge._opinfo import run_samples

    r = run_samples(opinfo, dtype, max_samples=max_samples, grad=dtype == torch.float64)
    check_family_samples(r, family_ops, bar=1.0)


def on_threads(fn, n):
    """Runs fn(i) for i in range(n) on n threads started together; re-raises the first error."""
    errors = []
    barrier = threading.Barrier(n)

    def run(i):
        try:
            barrier.wait()
            fn(i)
        except BaseException as e:  # reported on the main thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
