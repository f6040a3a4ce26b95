"""Calls from several threads at once: every result equals the single-threaded one.

Each kernel family runs from 8 threads at once, first on distinct inputs (each thread cycling
through its own), then on inputs shared read-only by all threads, and every result is compared
bit for bit with the result of the same call made on one thread beforehand (one kernel on one
input gives one answer). Calls per family: 8 threads x 2 x CALLS (1,875) = 30,000, enough to
catch a race that spoils 1 call in 10,000 with probability 1 - e^-3 = 95%. The eager
``tb.Tensor`` path, torch.compile'd modules and the XLA FFI handler (jax.jit of call_torch) run
the same way.
"""

import numpy as np
import pytest
import torch
from conftest import on_threads, requires_jax

import tensorbridge as tb

THREADS = 8
CALLS = 1875  # per thread and input mode: 8 * 2 * 1875 = 30,000 calls per family
INPUTS = 3  # distinct input sets per thread


# A kernel the table lost would otherwise run torch's and compare torch with itself.
pytestmark = pytest.mark.usefixtures("no_fallback")


def _bits(result):
    """A result (an Array, a tensor or a tuple of them) as comparable bytes."""
    if isinstance(result, (tuple, list)):
        return tuple(_bits(r) for r in result)
    if isinstance(result, torch.Tensor):
        a = tb.to_numpy(result) if isinstance(result, tb.Tensor) else result.detach().numpy()
    else:
        a = np.from_dlpack(result) if isinstance(result, tb.Array) else np.asarray(result)
    return a.dtype.str, a.shape, a.tobytes()


def race(call, make_inputs, calls=CALLS):
    """call(*inputs) from THREADS threads: distinct inputs, then shared read-only ones.
    Returns the number of calls made; fails on any result that differs from one thread's."""
    rng = np.random.default_rng(0)
    distinct = [make_inputs(rng) for _ in range(THREADS * INPUTS)]
    shared = make_inputs(rng)
    for mode, inputs, pick in [
        ("distinct", distinct, lambda t, k: t * INPUTS + k % INPUTS),
        ("shared", [shared], lambda t, k: 0),
    ]:
        want = [_bits(call(*x)) for x in inputs]
        wrong = []

        def work(t, inputs=inputs, pick=pick, want=want, wrong=wrong):
            for k in range(calls):
                i = pick(t, k)
                if _bits(call(*inputs[i])) != want[i]:
                    wrong.append((t, k))

        on_threads(work, THREADS)
        assert wrong == [], f"{mode} inputs: {len(wrong)} of {THREADS * calls} results differ"
    return 2 * THREADS * calls


def arrays(*specs):
    """make_inputs from (shape, dtype) specs: tb.Arrays over fresh numpy memory."""

    def make(rng):
        out = []
        for shape, dtype in specs:
            if np.issubdtype(dtype, np.floating):
                a = rng.standard_normal(shape).astype(dtype)
            else:
                a = rng.integers(0, 4, shape).astype(dtype)
            a.setflags(write=False)
            out.append(tb.from_dlpack(a))
        return out

    return make


f32, f64, i64 = np.float32, np.float64, np.int64


def op(name, *extra, **kw):
    return lambda *a: tb.call(name, *a, *extra, **kw)


# Each family: several ops, each with its own inputs; the family's calls are split among them.
FAMILIES = {
    "elementwise": [
        (op("aten::add.Tensor"), arrays(((64, 33), f32), ((33,), f32))),
        (op("aten::mul.Tensor"), arrays(((7, 5, 3), f64), ((7, 1, 3), f64))),
        (op("aten::gelu"), arrays(((256, 64), f32))),  # oneDNN's eltwise at this size
        (op("aten::tanh"), arrays(((300,), f32))),
        (op("aten::exp"), arrays(((17, 3), f64))),
    ],
    "reductions": [
        (op("aten::sum.dim_IntList", [1]), arrays(((64, 300), f32))),
        (op("aten::mean.dim", [0]), arrays(((300, 40), f64))),
        (op("aten::amax", [1]), arrays(((33, 65), f32))),
        (op("aten::var.correction", [1]), arrays(((12, 500), f32))),
        (op("aten::cumsum", 1), arrays(((9, 70), f32))),
        (op("aten::argmax", 0), arrays(((50, 6), f32))),
    ],
    "matmul": [
        (op("aten::mm"), arrays(((33, 17), f32), ((17, 9), f32))),  # oneDNN brgemm
        (op("aten::mm"), arrays(((5, 6), f32), ((6, 7), f32))),  # the plain small-product loop
        (op("aten::mm"), arrays(((40, 1), f32), ((1, 30), f32))),  # outer product (k = 1)
        (
            lambda a, w: tb.call("aten::mm", a, tb.call("aten::t", w)),  # inner product
            arrays(((3, 64), f32), ((48, 64), f32)),
        ),
        (op("aten::addmm"), arrays(((24,), f32), ((12, 20), f32), ((20, 24), f32))),
        (op("aten::bmm"), arrays(((3, 20, 16), f32), ((3, 16, 12), f32))),
        (op("aten::mm"), arrays(((20, 30), f64), ((30, 10), f64))),  # Eigen
        (op("aten::mv"), arrays(((30, 20), f32), ((20,), f32))),
        (op("aten::dot"), arrays(((100,), f32), ((100,), f32))),
    ],
    "convolution": [
        (
            op("aten::convolution", [1, 1], [1, 1], [1, 1], False, [0, 0], 1),
            arrays(((2, 3, 10, 10), f32), ((4, 3, 3, 3), f32), ((4,), f32)),
        ),
        (
            op("aten::convolution", [2, 2], [0, 0], [1, 1], False, [0, 0], 2),
            arrays(((1, 4, 9, 9), f64), ((6, 2, 3, 3), f64), ((6,), f64)),
        ),  # im2col + GEMM
    ],
    "pooling": [
        (op("aten::max_pool2d_with_indices", [2, 2]), arrays(((2, 3, 12, 12), f32))),
        (op("aten::avg_pool2d", [3, 3], [2, 2]), arrays(((2, 3, 12, 12), f32))),
    ],
    "norms": [
        (
            lambda x, w, b: tb.call("aten::native_layer_norm", x, [48], w, b, 1e-5),
            arrays(((16, 48), f32), ((48,), f32), ((48,), f32)),
        ),
        (
            lambda x, w, b: tb.call(
                "aten::native_batch_norm", x, w, b, None, None, True, 0.1, 1e-5
            ),
            arrays(((4, 6, 5, 5), f32), ((6,), f32), ((6,), f32)),
        ),
        (op("aten::native_group_norm", None, None, 4, 8, 25, 2, 1e-5), arrays(((4, 8, 5, 5), f32))),
    ],
    "softmax": [
        (op("aten::_softmax", 1, False), arrays(((16, 70), f32))),
        (op("aten::_log_softmax", 0, False), arrays(((30, 9), f64))),
    ],
    "indexing": [
        (
            lambda x, i: tb.call("aten::index_select", x, 0, i),
            arrays(((40, 12), f32), ((25,), i64)),
        ),
        (lambda x, i: tb.call("aten::gather", x, 1, i), arrays(((10, 8), f32), ((10, 5), i64))),
        (lambda x, i: tb.call("aten::index.Tensor", x, [i]), arrays(((40, 12), f32), ((30,), i64))),
        (op("aten::embedding"), arrays(((4, 16), f32), ((50,), i64))),
    ],
    "copies": [
        (lambda x: tb.call("aten::clone", tb.call("aten::t", x)), arrays(((70, 90), f32))),
        (op("aten::_to_copy", dtype=torch.float64), arrays(((50, 30), f32))),
        (lambda a, b: tb.call("aten::cat", [a, b], 1), arrays(((20, 7), f32), ((20, 9), f32))),
        (op("aten::constant_pad_nd", [1, 2, 0, 1]), arrays(((2, 5, 6), f32))),
    ],
    "fused nodes": [
        (
            op("tensorbridge::addmm_act", activation="gelu"),
            arrays(((40,), f32), ((12, 24), f32), ((24, 40), f32)),
        ),
        (
            op("tensorbridge::addmm_act", activation="relu"),
            arrays(((40,), f32), ((3, 24), f32), ((24, 40), f32)),
        ),
        (
            op("tensorbridge::convolution_relu", [1, 1], [1, 1], [1, 1], False, [0, 0], 1),
            arrays(((2, 3, 10, 10), f32), ((4, 3, 3, 3), f32), ((4,), f32)),
        ),
    ],
}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_kernel_family_from_eight_threads(family):
    cases = FAMILIES[family]
    per_op = -(-CALLS // len(cases))
    total = sum(race(call, make, per_op) for call, make in cases)
    assert total >= 2 * THREADS * CALLS


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

    on_threads(work, THREADS)
    assert wrong == [], f"{len(wrong)} of {THREADS * calls} products wrong: {wrong[:5]}"


# ---- the eager tb.Tensor path, compiled modules, the FFI handler ---------------------------


def _wrapped(*specs):
    def make(rng):
        out = []
        for shape in specs:
            a = rng.standard_normal(shape).astype(np.float32)
            a.setflags(write=False)
            out.append(tb.wrap(a))
        return out

    return make


def test_eager_tensor_ops_from_eight_threads():
    def block(x, w, b):
        h = torch.relu(x @ w + b)
        return torch.softmax(h, dim=1), h.sum(dim=0)

    race(block, _wrapped((9, 24), (24, 40), (40,)))


def _mlp():
    return torch.nn.Sequential(torch.nn.Linear(24, 40), torch.nn.GELU(), torch.nn.Linear(40, 5))


def _convnet():
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(8 * 4 * 4, 6),
    )


@pytest.mark.usefixtures("fresh_dynamo")
@pytest.mark.parametrize(
    "make, shape", [(_mlp, (9, 24)), (_convnet, (2, 3, 8, 8))], ids=["mlp", "convnet"]
)
def test_compiled_module_from_eight_threads(make, shape):
    torch.manual_seed(0)
    model = make().eval()
    compiled = torch.compile(model, backend="tensorbridge")

    def make_inputs(rng):
        x = torch.from_numpy(rng.standard_normal(shape).astype(np.float32))
        return [x]

    def call(x):
        with torch.no_grad():
            return compiled(x)

    runs0 = tb.diagnostics.plan_metrics()["plan_calls"]
    calls = race(call, make_inputs)
    # every call ran a plan (none fell back to eager torch)
    assert tb.diagnostics.plan_metrics()["plan_calls"] - runs0 >= calls


@requires_jax
def test_ffi_handler_from_eight_threads():
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(1)
    w1, w2 = (jnp.asarray(rng.standard_normal(s).astype(np.float32)) for s in [(6, 16), (16, 3)])

    def torch_fn(x, w1, w2):
        return torch.tanh(x @ w1) @ w2

    f = jax.jit(lambda x, a, b: tb.call_torch(torch_fn, x, a, b, jit_mode="ffi"))
    runs0 = tb.diagnostics.call_torch_metrics()["ffi_runs"]
    calls = race(
        lambda x: np.asarray(f(x, w1, w2)),
        lambda rng: [jnp.asarray(rng.standard_normal((5, 6)).astype(np.float32))],
    )
    assert tb.diagnostics.call_torch_metrics()["ffi_runs"] - runs0 >= calls
