"""aten::linear on tensorbridge.Tensors above autograd (python/torch_device/python_key_linear.cc):
one table call and one result wrapper instead of torch's decomposition, and in training one
backward node of its own (one table call per gradient) whose gradients, hooks, saved-tensor
checks and higher-order gradients are torch's."""

import numpy as np
import pytest
import torch
from conftest import on_threads
from test_python_key_kernels import _np, _python_route_ops, _Recorder

import tensorbridge as tb
from tensorbridge import _tensor

pytestmark = pytest.mark.skipif(
    _tensor._python_key_ops() == 0, reason="no Python-key kernels in this build"
)

RNG = np.random.default_rng(1)

_XL = RNG.standard_normal((2, 5, 6)).astype(np.float32)
_WL = RNG.standard_normal((3, 6)).astype(np.float32)
_BL = RNG.standard_normal(3).astype(np.float32)

# (name, input from _XL, with a bias, whether the kernel serves it without the decomposition)
_LINEAR_CASES = [
    ("3-D", lambda x: x, False, True),
    ("3-D bias", lambda x: x, True, True),
    ("2-D bias", lambda x: x[0], True, True),
    ("2-D", lambda x: x[1], False, True),
    ("transposed 3-D", lambda x: x.transpose(0, 1), False, True),
    ("4-D", lambda x: x.reshape(2, 5, 2, 3).transpose(2, 3).reshape(2, 5, 6)[None], False, True),
    ("transposed 3-D bias", lambda x: x.transpose(0, 1), True, False),  # matmul, then add
    ("1-D", lambda x: x[0, 0], True, False),
]


@pytest.mark.parametrize("name,make,bias,served", _LINEAR_CASES, ids=[c[0] for c in _LINEAR_CASES])
def test_linear_in_one_table_call(no_fallback, monkeypatch, name, make, bias, served):
    x = make(tb.wrap(_XL.copy()))
    w, b = tb.wrap(_WL.copy()), tb.wrap(_BL.copy()) if bias else None
    before = _tensor._linear_calls()
    with torch.no_grad():
        got, python_ops = _python_route_ops(
            lambda: torch.nn.functional.linear(x, w, b), monkeypatch
        )
    assert _tensor._linear_calls() - before == (1 if served else 0)
    assert python_ops == [] and type(got) is tb.Tensor
    tx = make(torch.from_numpy(_XL))
    want = torch.nn.functional.linear(
        tx, torch.from_numpy(_WL), torch.from_numpy(_BL) if bias else None
    )
    assert got.shape == want.shape and got.stride() == want.stride() and not got.requires_grad
    np.testing.assert_allclose(_np(got), want.numpy(), rtol=1e-5, atol=1e-6)


def test_linear_with_plain_weights_and_in_inference_mode(no_fallback):
    x = tb.wrap(_XL.copy())
    w, b = torch.from_numpy(_WL.copy()), torch.from_numpy(_BL.copy())
    before = _tensor._linear_calls()
    with torch.inference_mode():
        got = torch.nn.functional.linear(x, w, b)
    assert _tensor._linear_calls() - before == 1 and type(got) is tb.Tensor
    assert got.is_inference()
    want = torch.nn.functional.linear(torch.from_numpy(_XL), w, b)
    np.testing.assert_allclose(_np(got), want.numpy(), rtol=1e-5, atol=1e-6)


def test_linear_under_a_mode_takes_the_decomposition(no_fallback):
    x, w = tb.wrap(_XL.copy()), tb.wrap(_WL.copy())
    before = _tensor._linear_calls()
    with torch.no_grad(), _Recorder() as mode:
        torch.nn.functional.linear(x, w)
    assert "aten.mm.default" in mode.ops and "aten.t.default" in mode.ops
    assert _tensor._linear_calls() == before


def test_linear_under_autocast_casts_first(no_fallback):
    # Autocast's kernel (above this one) casts the operands and calls linear again without it.
    x, w = tb.wrap(_XL.copy()), tb.wrap(_WL.copy())
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        got = torch.nn.functional.linear(x, w)
        want = torch.nn.functional.linear(torch.from_numpy(_XL), torch.from_numpy(_WL))
    assert got.dtype == want.dtype == torch.bfloat16
    np.testing.assert_allclose(_np(got.float()), want.float().numpy(), rtol=2e-2, atol=2e-2)


def test_linear_with_forward_mode_tangents(monkeypatch):
    import torch.autograd.forward_ad as fwad

    # make_dual checks shapes with aten::is_same_size, which the table leaves to torch.
    monkeypatch.setattr(tb.config, "fallback", "allow")
    x, w = tb.wrap(_XL.copy()), tb.wrap(_WL.copy())
    tangent = tb.wrap(np.ones_like(_XL))
    before = _tensor._linear_calls()
    with torch.no_grad(), fwad.dual_level():
        out = torch.nn.functional.linear(fwad.make_dual(x, tangent), w)
        jvp = fwad.unpack_dual(out).tangent
    assert _tensor._linear_calls() == before and jvp is not None
    np.testing.assert_allclose(_np(jvp), np.ones_like(_XL) @ _WL.T, rtol=1e-5, atol=1e-5)


def test_linear_errors_are_the_decompositions(no_fallback):
    x = tb.wrap(_XL.copy())
    with torch.no_grad(), pytest.raises(ValueError, match="aten::mm"):
        torch.nn.functional.linear(x, tb.wrap(_WL[:, :4].copy()))


def test_linear_from_threads(no_fallback):
    def work(k):
        x = _XL + k
        a, w = tb.wrap(x), tb.wrap(_WL)
        for _ in range(200):
            with torch.no_grad():
                r = torch.nn.functional.linear(a, w)
            np.testing.assert_allclose(_np(r), x @ _WL.T, rtol=1e-5, atol=1e-5)

    on_threads(work, 2)


# ---- training: LinearBackward ----------------------------------------------------------------

_NAME = "tensorbridge::LinearBackward"


def _close(got, want, rtol=1e-5):
    """got (a tensor of either kind) equals torch's want within rtol of want's largest value."""
    want = want.detach().numpy()
    scale = max(float(np.abs(want).max()), 1.0)
    np.testing.assert_allclose(_np(got), want, rtol=0, atol=rtol * scale)


def _operands(x_np, bias, wants, wrap, make=lambda x: x):
    """(make(x), w, b) over copies of the arrays, as tensorbridge.Tensors (wrap) or plain tensors,
    with requires_grad set on the names in `wants`."""
    new = (lambda a: tb.wrap(a.copy())) if wrap else (lambda a: torch.from_numpy(a.copy()))
    x, w = make(new(x_np)), new(_WL)
    b = new(_BL) if bias else None
    for name, t in (("x", x), ("w", w), ("b", b)):
        if t is not None and name in wants:
            t.requires_grad_()
    return x, w, b


# (name, input from _XL, with a bias): the cases the kernel serves
_TRAIN_CASES = [c[:3] for c in _LINEAR_CASES if c[3]]
_WANTS = ["xwb", "wb", "x", "w"]


@pytest.mark.parametrize("wants", _WANTS)
@pytest.mark.parametrize("name,make,bias", _TRAIN_CASES, ids=[c[0] for c in _TRAIN_CASES])
def test_training_records_one_node_and_matches_torch(
    no_fallback, monkeypatch, name, make, bias, wants
):
    x, w, b = _operands(_XL, bias, wants, wrap=True, make=make)
    tx, tw, tb_ = _operands(_XL, bias, wants, wrap=False, make=make)
    calls, recorded = _tensor._linear_calls(), _tensor._linear_recorded()

    def step():
        out = torch.nn.functional.linear(x, w, b)
        assert out.requires_grad and out.grad_fn.name() == _NAME
        loss = (out * out).sum()
        loss.backward()
        return out

    out, python_ops = _python_route_ops(step, monkeypatch)
    assert python_ops == [] and type(out) is tb.Tensor
    assert _tensor._linear_calls() == calls + 1 and _tensor._linear_recorded() == recorded + 1
    want = torch.nn.functional.linear(tx, tw, tb_)
    (want * want).sum().backward()
    _close(out, want)
    for got, ref in ((x, tx), (w, tw), (b, tb_)):
        if ref is None:
            continue
        assert (got.grad is None) == (ref.grad is None)
        if ref.grad is not None:
            assert got.grad.shape == ref.grad.shape and type(got.grad) is tb.Tensor
            _close(got.grad, ref.grad)


def test_gradients_accumulate_and_float64(no_fallback):
    x64, w64 = _XL.astype(np.float64), _WL.astype(np.float64)
    x, w = tb.wrap(x64.copy()), tb.wrap(w64.copy()).requires_grad_()
    tx, tw = torch.from_numpy(x64), torch.from_numpy(w64.copy()).requires_grad_()
    for _ in range(2):
        torch.nn.functional.linear(x, w).tanh().sum().backward()
        torch.nn.functional.linear(tx, tw).tanh().sum().backward()
    assert w.grad.dtype == torch.float64
    _close(w.grad, tw.grad, rtol=1e-12)


def test_plain_weights_with_a_wrapped_input(no_fallback):
    x = tb.wrap(_XL.copy()).requires_grad_()
    w = torch.from_numpy(_WL.copy()).requires_grad_()
    b = torch.from_numpy(_BL.copy()).requires_grad_()
    tx, tw, tb_ = _operands(_XL, True, "xwb", wrap=False)
    recorded = _tensor._linear_recorded()
    torch.nn.functional.linear(x, w, b).sum().backward()
    torch.nn.functional.linear(tx, tw, tb_).sum().backward()
    assert _tensor._linear_recorded() == recorded + 1
    for got, ref in ((x, tx), (w, tw), (b, tb_)):
        _close(got.grad, ref.grad)


def test_retain_graph_and_backward_twice(no_fallback):
    x, w, b = _operands(_XL, True, "wb", wrap=True)
    out = torch.nn.functional.linear(x, w, b).sum()
    out.backward(retain_graph=True)
    first = _np(w.grad).copy()
    out.backward()
    np.testing.assert_allclose(_np(w.grad), 2 * first, rtol=1e-6)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        out.backward()


def test_autograd_grad_computes_only_what_is_asked(no_fallback):
    x, w, b = _operands(_XL, True, "xwb", wrap=True)
    tx, tw, tb_ = _operands(_XL, True, "xwb", wrap=False)
    (gx,) = torch.autograd.grad(torch.nn.functional.linear(x, w, b).square().sum(), x)
    (tgx,) = torch.autograd.grad(torch.nn.functional.linear(tx, tw, tb_).square().sum(), tx)
    _close(gx, tgx)
    assert w.grad is None and b.grad is None


def test_double_backward_is_torchs(no_fallback):
    x, w, b = _operands(_XL, True, "xwb", wrap=True)
    tx, tw, tb_ = _operands(_XL, True, "xwb", wrap=False)
    grads = []
    for xx, ww, bb in ((x, w, b), (tx, tw, tb_)):
        out = torch.nn.functional.linear(xx, ww, bb)
        gx, gw = torch.autograd.grad(out.square().sum(), (xx, ww), create_graph=True)
        assert gx.requires_grad and gw.requires_grad
        (gx.square().sum() + gw.square().sum()).backward()
        grads.append((xx.grad, ww.grad, bb.grad))
    for got, want in zip(*grads, strict=True):
        _close(got, want, rtol=1e-4)


@pytest.mark.parametrize("modified", ["saved input", "saved weight"])
def test_saved_operand_modified_in_place_raises(no_fallback, modified):
    for wrap in (True, False):  # torch's decomposition raises the same
        x, w, _ = _operands(_XL, False, "w" if modified == "saved input" else "x", wrap=wrap)
        out = torch.nn.functional.linear(x, w).sum()
        with torch.no_grad():
            (x if modified == "saved input" else w).add_(1.0)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            out.backward()


def test_unsaved_operand_modified_in_place_is_fine(no_fallback):
    # Only x wants a gradient: the weight is saved, the input is not (as in torch).
    x, w, _ = _operands(_XL, False, "x", wrap=True)
    out = torch.nn.functional.linear(x, w).sum()
    with torch.no_grad():
        x.add_(1.0)
    out.backward()
    np.testing.assert_allclose(_np(x.grad), np.broadcast_to(_WL.sum(0), _XL.shape), rtol=1e-5)


def test_hooks_fire(no_fallback):
    x, w, b = _operands(_XL, True, "xwb", wrap=True)
    tx, tw, tb_ = _operands(_XL, True, "xwb", wrap=False)
    seen = []
    for xx, ww, bb in ((x, w, b), (tx, tw, tb_)):
        out = torch.nn.functional.linear(xx, ww, bb)
        out.register_hook(lambda g: g * 3)  # a tensor hook changes the incoming gradient
        ww.register_hook(lambda g: g + 1)
        bb.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.shape))
        out.retain_grad()
        out.sum().backward()
        assert out.grad is not None
    assert seen == [torch.Size([3]), torch.Size([3])]
    for got, want in ((x, tx), (w, tw), (b, tb_)):
        _close(got.grad, want.grad)


def test_saved_tensor_hooks_and_checkpoint(no_fallback):
    x, w, b = _operands(_XL, True, "xwb", wrap=True)
    tx, tw, tb_ = _operands(_XL, True, "xwb", wrap=False)
    packed = []

    def pack(t):
        packed.append(t.shape)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        torch.nn.functional.linear(x, w, b).sum().backward()
    assert torch.Size([3, 6]) in packed and torch.Size([2, 5, 6]) in packed

    def block(xx, ww, bb):
        return torch.nn.functional.linear(xx, ww, bb).tanh()

    x.grad = w.grad = b.grad = None
    torch.utils.checkpoint.checkpoint(block, x, w, b, use_reentrant=False).sum().backward()
    block(tx, tw, tb_).sum().backward()
    for got, want in ((x, tx), (w, tw), (b, tb_)):
        _close(got.grad, want.grad)


def test_training_under_modes_and_tangents_is_decomposed(monkeypatch):
    import torch.autograd.forward_ad as fwad

    monkeypatch.setattr(tb.config, "fallback", "allow")  # make_dual's aten::is_same_size
    x, w, _ = _operands(_XL, False, "w", wrap=True)
    recorded = _tensor._linear_recorded()
    with _Recorder() as mode:
        out = torch.nn.functional.linear(x, w)
    assert "aten.mm.default" in mode.ops and out.grad_fn.name() != _NAME
    with fwad.dual_level():
        out = torch.nn.functional.linear(fwad.make_dual(x, tb.wrap(np.ones_like(_XL))), w)
        assert fwad.unpack_dual(out).tangent is not None
    assert out.grad_fn.name() != _NAME and _tensor._linear_recorded() == recorded


def test_training_under_autocast_records_after_the_casts(no_fallback):
    # Autocast's kernel (above this one) casts the operands, which autograd records, and calls
    # linear again without it: the node's gradients flow back through the casts.
    x, w, b = _operands(_XL, True, "xwb", wrap=True)
    tx, tw, tb_ = _operands(_XL, True, "xwb", wrap=False)
    for xx, ww, bb in ((x, w, b), (tx, tw, tb_)):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = torch.nn.functional.linear(xx, ww, bb)
        assert out.dtype == torch.bfloat16
        out.float().square().sum().backward()
    for got, want in ((x, tx), (w, tw), (b, tb_)):
        assert got.grad.dtype == torch.float32
        _close(got.grad, want.grad, rtol=3e-2)


def test_training_from_threads(no_fallback):
    def work(k):
        x_np = _XL + k
        for _ in range(50):
            x, w = tb.wrap(x_np), tb.wrap(_WL.copy()).requires_grad_()
            torch.nn.functional.linear(x, w).sum().backward()
            np.testing.assert_allclose(
                _np(w.grad), np.broadcast_to(x_np.reshape(-1, 6).sum(0), _WL.shape), rtol=1e-5
            )

    on_threads(work, 2)


@pytest.mark.parametrize("name", ["llama", "bert", "gpt2"])
def test_eager_training_step_of_zoo_models(no_fallback, name):
    # Every nn.Linear (gpt2's Conv1D is addmm of its own) of an eager training step.
    import copy

    from tensorbridge import zoo

    model, inputs = zoo.build(name, "tiny")
    wrapped = copy.deepcopy(model)
    want_loss, want_grads = zoo._train_step(model, inputs)
    tb.wrap_module(wrapped)
    recorded = _tensor._linear_recorded()
    got_loss, got_grads = zoo._train_step(wrapped, {k: tb.wrap(v) for k, v in inputs.items()})
    assert name == "gpt2" or _tensor._linear_recorded() > recorded
    assert got_grads.keys() == want_grads.keys()
    assert zoo._rel_error(got_loss, want_loss) < 1e-5
    assert zoo.grad_error(got_grads, want_grads) < 1e-4


@pytest.mark.parametrize("wants", _WANTS)
@pytest.mark.parametrize("bias", [False, True], ids=["no bias", "bias"])
def test_compiled_autograd_traces_the_node(no_fallback, bias, wants):
    from torch._dynamo import compiled_autograd

    x, w, b = _operands(_XL, bias, wants, wrap=True)
    tx, tw, tb_ = _operands(_XL, bias, wants, wrap=False)
    graphs = []

    def compiler(gm):
        graphs.append(gm.code)
        return torch.compile(gm, backend="tensorbridge", fullgraph=True)

    torch._dynamo.reset()
    for _step in range(2):  # the second backward reuses the compiled graph
        for t in (x, w, b, tx, tw, tb_):
            if t is not None:
                t.grad = None
        out = torch.nn.functional.linear(x, w, b)
        assert out.grad_fn.name() == _NAME
        with compiled_autograd._enable(compiler):
            (out * out).sum().backward()
        want = torch.nn.functional.linear(tx, tw, tb_)
        (want * want).sum().backward()
        for got, ref in ((x, tx), (w, tw), (b, tb_)):
            if ref is None:
                continue
            assert (got.grad is None) == (ref.grad is None)
            if ref.grad is not None:
                assert type(got.grad) is tb.Tensor
                _close(got.grad, ref.grad)
    assert len(graphs) == 1 and "tensorbridge_LinearBackward" in graphs[0]


def test_compiled_autograd_with_saved_tensor_hooks(no_fallback):
    from torch._dynamo import compiled_autograd

    x, w, b = _operands(_XL, True, "xwb", wrap=True)
    tx, tw, tb_ = _operands(_XL, True, "xwb", wrap=False)
    unpacked = []

    def unpack(t):
        unpacked.append(tuple(t.shape))
        return t

    torch._dynamo.reset()
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, unpack):
        out = torch.nn.functional.linear(x, w, b).tanh()
    with compiled_autograd._enable(lambda gm: torch.compile(gm, backend="eager")):
        out.sum().backward()
    torch.nn.functional.linear(tx, tw, tb_).tanh().sum().backward()
    assert (3, 6) in unpacked and (2, 5, 6) in unpacked
    for got, want in ((x, tx), (w, tw), (b, tb_)):
        _close(got.grad, want.grad)


def test_switched_off_records_the_decomposition(no_fallback):
    x, w, _ = _operands(_XL, False, "w", wrap=True)
    _tensor._linear_backward_node(False)
    try:
        out = torch.nn.functional.linear(x, w)
    finally:
        _tensor._linear_backward_node(True)
    assert out.grad_fn.name() != _NAME
    out.sum().backward()
    np.testing.assert_allclose(
        _np(w.grad), np.broadcast_to(_XL.reshape(-1, 6).sum(0), _WL.shape), rtol=1e-5
    )
    assert torch.nn.functional.linear(x, w).grad_fn.name() == _NAME
