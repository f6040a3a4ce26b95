"""Calls from several threads at once: each result equals the single-threaded one."""

import threading

import numpy as np
import pytest

import tensorbridge as tb

THREADS = 8


@pytest.fixture(autouse=True)
def _no_fallback():
    """A kernel the table lost would otherwise run torch's and compare torch with itself."""
    before = tb.config.fallback
    tb.config.fallback = "error"
    yield
    tb.config.fallback = before


def on_threads(fn, n=THREADS):
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


def test_mm_of_fresh_operands_from_eight_threads():
    # oneDNN's brgemm matmul keeps each call's A/B block addresses in its scratchpad; with the
    # cached primitive's own (library-managed) scratchpad, two threads overwrote each other's
    # and about 1 in 1,500 of these calls returned another call's product. 8 x 2,500 calls.
    calls = 2500
    wrong = []

    def work(i):
        rng = np.random.default_rng(i)
        for k in range(calls):
            p = rng.standard_normal((33, 17), dtype=np.float32)
            q = rng.standard_normal((17, 9), dtype=np.float32)
            r = np.from_dlpack(tb.call("aten::mm", tb.from_dlpack(p), tb.from_dlpack(q)))
            if not np.allclose(r, p @ q, rtol=1e-4, atol=1e-4):
                wrong.append((i, k, float(np.abs(r - p @ q).max())))

    on_threads(work)
    assert wrong == [], f"{len(wrong)} of {THREADS * calls} products wrong: {wrong[:5]}"
