"""The epilogue pass (tensorbridge._epilogue): matrix products and convolutions with their bias,
activations, residual add and casts in one fused node, equal to the unfused plan; packed
weights of inference plans, dropped when a weight changes in place."""

import pytest
import torch

import tensorbridge as tb
from tensorbridge import _compile

pytestmark = pytest.mark.usefixtures("no_fallback")

ACTS = {
    "relu": torch.relu,
    "gelu": torch.nn.functional.gelu,
    "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
    "silu": torch.nn.functional.silu,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
}


def _close(got, want, dtype):
    if dtype == torch.bfloat16:
        # torch.testing's rtol for bfloat16, relative to the largest magnitude: the fused node
        # rounds once where the unfused plan rounds after every op.
        tol = 1.6e-2 * want.float().abs().max().item()
        torch.testing.assert_close(got.float(), want.float(), rtol=0, atol=tol)
    else:
        torch.testing.assert_close(got, want, rtol=1.3e-6, atol=1e-5)


def _plans(fn, *args, grad=False, autocast=None):
    """(fused result, unfused result, the fused forward plan's dump)."""
    outs, dumps = [], []
    for fusion in (True, False):
        torch._dynamo.reset()
        tb.config.fusion = fusion
        try:
            c = torch.compile(fn, backend="tensorbridge")
            with (
                torch.set_grad_enabled(grad),
                torch.autocast("cpu", autocast or torch.float32, enabled=autocast is not None),
            ):
                outs.append(c(*args))
                outs.append(c(*args))  # the packed weights' second call
        finally:
            tb.config.fusion = True
        fw = [
            e["plan"]
            for r in _compile.state.compilations
            for e in r.plans
            if e["kind"] == "forward"
        ]
        dumps.append(fw[-1].dump())
    torch._dynamo.reset()
    assert "tensorbridge::" not in dumps[1]
    return outs[1], outs[3], dumps[0]


class Linear(torch.nn.Module):
    def __init__(self, act, residual, bias=True, k=24, n=40):
        super().__init__()
        self.fc = torch.nn.Linear(k, n, bias=bias)
        self.act, self.residual = act, residual

    def forward(self, x, r):
        y = self.fc(x)
        if self.act:
            y = ACTS[self.act](y)
        if self.residual:
            y = y + r
        return y


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("act", [None, *ACTS])
@pytest.mark.parametrize("residual", [False, True])
def test_linear_epilogue_equals_unfused(dtype, act, residual):
    torch.manual_seed(0)
    m = Linear(act, residual).eval().to(dtype)
    x = torch.randn(3, 7, 24, dtype=dtype)  # 3-D: view -> addmm -> view
    r = torch.randn(3, 7, 40, dtype=dtype)
    got, want, dump = _plans(m, x, r)
    _close(got, want, dtype)
    assert dump.count("tensorbridge::matmul_epilogue(") == 1, dump
    assert "aten::addmm(" not in dump
    # relu ends an epilogue (oneDNN's relu loses NaN; it runs after the primitive)
    assert ("aten::add.Tensor(" in dump) == (act == "relu" and residual), dump
    if act:
        assert f"'{act}" in dump and f"aten::{act.split('_')[0]}(" not in dump
    # the ops torch runs: the fused plan against torch eager too
    with torch.no_grad():
        _close(got, m(x, r), dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_mm_with_broadcast_bias_residual_and_non_contiguous_inputs(dtype):
    torch.manual_seed(0)
    w = torch.randn(40, 24, dtype=dtype)
    b = torch.randn(40, dtype=dtype)

    def f(x, r):
        # x.t() of a [24, 12] tensor and a transposed residual: strided operands
        return torch.tanh(x.t() @ w.t() + b) + r.t()

    x = torch.randn(24, 12, dtype=dtype)
    r = torch.randn(40, 12, dtype=dtype)
    got, want, dump = _plans(f, x, r)
    _close(got, want, dtype)
    assert dump.count("tensorbridge::matmul_epilogue(") == 1, dump
    assert "'tanh,add'" in dump and "aten::mm(" not in dump


def test_bmm_epilogue_and_float64_takes_the_aten_path():
    torch.manual_seed(0)

    def f(a, b, r):
        return torch.nn.functional.silu(torch.bmm(a, b)) + r

    for dtype in (torch.float32, torch.float64):
        a, b = torch.randn(3, 5, 7, dtype=dtype), torch.randn(3, 7, 6, dtype=dtype)
        r = torch.randn(3, 5, 6, dtype=dtype)
        got, want, dump = _plans(f, a, b, r)
        _close(got, want, dtype)
        assert "tensorbridge::matmul_epilogue(" in dump and "aten::bmm(" not in dump


def test_residual_of_another_dtype_promotes_as_torch():
    # bfloat16 product + float32 residual = float32: one node, rounded once.
    torch.manual_seed(0)
    m = Linear("gelu", True).eval().to(torch.bfloat16)
    x, r = torch.randn(4, 24, dtype=torch.bfloat16), torch.randn(4, 40)
    got, want, dump = _plans(m, x, r)
    assert got.dtype == want.dtype == torch.float32
    _close(got, want, torch.bfloat16)
    assert "'gelu,add'" in dump and ", float32, " in dump


def test_autocast_folds_the_weight_and_bias_casts():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(24, 48), torch.nn.GELU(), torch.nn.Linear(48, 16))
    m.eval()
    x = torch.randn(2, 9, 24)
    got, want, dump = _plans(m, x, autocast=torch.bfloat16)
    assert got.dtype == want.dtype == torch.bfloat16
    _close(got, want, torch.bfloat16)
    assert dump.count("tensorbridge::matmul_epilogue(") == 2, dump
    # one cast left: the input's (the weights and biases are cast in the kernel)
    assert dump.count("aten::_to_copy(") == 1, dump


class Conv1D(torch.nn.Module):
    """GPT-2's linear layer: the weight is [in, out], used without a transpose."""

    def __init__(self, k, n):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(k, n) * 0.2)
        self.bias = torch.nn.Parameter(torch.randn(n))

    def forward(self, x):
        y = torch.addmm(self.bias, x.view(-1, x.shape[-1]), self.weight)
        return y.view(*x.shape[:-1], -1)


@pytest.mark.parametrize("grad", [False, True])
def test_autocast_folds_the_cast_of_an_untransposed_weight(grad):
    torch.manual_seed(0)
    m = torch.nn.Sequential(Conv1D(24, 48), torch.nn.Tanh(), Conv1D(48, 16))
    x = torch.randn(2, 9, 24)
    got, want, dump = _plans(m, x, grad=grad, autocast=torch.bfloat16)
    assert got.dtype == want.dtype == torch.bfloat16
    _close(got.detach(), want.detach(), torch.bfloat16)
    if not grad:  # the weights' and biases' casts run in the kernels (packed once)
        assert dump.count("tensorbridge::matmul_epilogue(") == 2, dump
        assert dump.count("aten::_to_copy(") == 1, dump


def test_autocast_folds_the_weight_cast_of_a_bare_mm():
    # A linear layer without bias and without an epilogue (llama's projections): the weight's
    # cast runs in the kernel, packed once.
    torch.manual_seed(0)
    q, k = torch.nn.Linear(24, 40, bias=False), torch.nn.Linear(24, 40, bias=False)

    def f(x):
        return q(x) * k(x).transpose(-1, -2).sum(-1, keepdim=True).transpose(-1, -2)

    x = torch.randn(2, 7, 24)
    got, want, dump = _plans(f, x, autocast=torch.bfloat16)
    _close(got, want, torch.bfloat16)
    assert dump.count("tensorbridge::matmul_epilogue(") == 2, dump
    assert dump.count("aten::_to_copy(") == 1, dump


def test_autocast_casts_one_value_once():
    torch.manual_seed(0)
    q, k = torch.nn.Linear(16, 16), torch.nn.Linear(16, 16)

    def f(x):
        return q(x) * k(x)

    x = torch.randn(5, 16)
    got, want, dump = _plans(f, x, autocast=torch.bfloat16)
    _close(got, want, torch.bfloat16)
    assert dump.count("aten::_to_copy(") == 1, dump


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_training_graphs_fuse_and_match(dtype):
    # The residual add is folded; an activation is not (its backward reads the product, a
    # second reader).
    torch.manual_seed(0)
    m = Linear(None, True).to(dtype)
    x = torch.randn(6, 24, dtype=dtype, requires_grad=True)
    r = torch.randn(6, 40, dtype=dtype, requires_grad=True)
    grads = []
    for fusion in (True, False):
        torch._dynamo.reset()
        tb.config.fusion = fusion
        try:
            for p in (*m.parameters(), x, r):
                p.grad = None
            c = torch.compile(m, backend="tensorbridge")
            out = c(x, r)
            out.square().sum().backward()
            grads.append([out.detach()] + [p.grad for p in (*m.parameters(), x, r)])
            fw = [
                e["plan"] for e in _compile.state.compilations[-1].plans if e["kind"] == "forward"
            ]
            assert ("tensorbridge::matmul_epilogue(" in fw[0].dump()) == fusion
        finally:
            tb.config.fusion = True
    for g, w in zip(grads[0], grads[1], strict=True):
        _close(g, w, dtype)


class ConvBlock(torch.nn.Module):
    def __init__(self, act):
        super().__init__()
        self.conv = torch.nn.Conv2d(4, 4, 3, padding=1)
        self.act = act

    def forward(self, x):
        return ACTS[self.act](self.conv(x) + x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("act", ["relu", "silu"])
def test_convolution_residual_and_activation(dtype, act):
    torch.manual_seed(0)
    m = ConvBlock(act).eval().to(dtype)
    x = torch.randn(2, 4, 6, 6, dtype=dtype)
    got, want, dump = _plans(m, x)
    _close(got, want, dtype)
    assert "tensorbridge::convolution_epilogue(" in dump and f"'add,{act}'" in dump


class ConvReshapeAct(torch.nn.Module):
    """A convolution whose result is reshaped (or copied into another layout) before its
    activation: the steps after a reshape do not fold into the convolution."""

    def __init__(self, reshape):
        super().__init__()
        self.conv = torch.nn.Conv2d(8, 6, 1)
        self.reshape = reshape

    def forward(self, x):
        y = self.conv(x)
        if self.reshape == "view":
            y = y.view(2, -1)
        elif self.reshape == "reshape":
            y = y.reshape(2, 6, 16)
        else:
            y = y.contiguous()
        return y.tanh()


@pytest.mark.parametrize("grad", [False, True], ids=["inference", "training"])
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
@pytest.mark.parametrize("reshape", ["view", "reshape", "contiguous"])
def test_convolution_steps_stop_at_a_reshape(reshape, channels_last, grad):
    if reshape == "view" and channels_last:
        pytest.skip("view of a channels-last result raises in torch itself")
    torch.manual_seed(0)
    m = ConvReshapeAct(reshape)
    x = torch.randn(2, 8, 4, 4)
    if channels_last:
        m, x = m.to(memory_format=torch.channels_last), x.to(memory_format=torch.channels_last)
    got, want, _ = _plans(m, x, grad=grad)
    ref = m(x)
    assert got.shape == ref.shape and got.stride() == ref.stride()
    _close(got.detach(), ref.detach(), torch.float32)
    _close(got.detach(), want.detach(), torch.float32)


class PadConvBnBlock(torch.nn.Module):
    """MobileNet's and ResNet's blocks: zero padding (asymmetric, as TF-style "same" padding),
    convolution, inference batch norm, then ReLU6 / hardtanh / ReLU / a residual and ReLU /
    nothing."""

    def __init__(self, tail, groups=1, stride=2):
        super().__init__()
        self.conv = torch.nn.Conv2d(8, 8, 3, stride=stride, padding=1, groups=groups, bias=False)
        self.bn = torch.nn.BatchNorm2d(8)
        self.tail = tail

    def forward(self, x, r):
        y = self.bn(self.conv(torch.nn.functional.pad(x, (0, 1, 1, 2))))
        if self.tail == "relu6":
            return torch.nn.functional.relu6(y)
        if self.tail == "hardtanh":
            return torch.nn.functional.hardtanh(y, -0.5, 0.25)
        if self.tail == "relu":
            return torch.relu(y)
        if self.tail == "add_relu":
            return torch.relu(y + r)
        return y


def _with_statistics(m, dtype):
    torch.manual_seed(1)
    with torch.no_grad():
        m.bn.running_mean.normal_()
        m.bn.running_var.uniform_(0.5, 2.0)
        m.bn.weight.normal_()
        m.bn.bias.normal_()
    return m.eval().to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("tail", ["relu6", "hardtanh", "relu", "add_relu", "none"])
@pytest.mark.parametrize("groups", [1, 8])
def test_convolution_folds_padding_batch_norm_and_clamp(dtype, tail, groups):
    m = _with_statistics(PadConvBnBlock(tail, groups), dtype)
    x = torch.randn(2, 8, 9, 10, dtype=dtype)
    x[0, 0, 0, 0] = float("nan")  # the clamp keeps NaN, as torch's hardtanh
    r = torch.randn(2, 8, 6, 6, dtype=dtype)
    got, want, dump = _plans(m, x, r)
    assert torch.equal(got.isnan(), want.isnan())
    _close(got.nan_to_num(), want.nan_to_num(), dtype)
    with torch.no_grad():
        _close(got.nan_to_num(), m(x, r).nan_to_num(), dtype)  # and to torch eager
    # One node: the padding, the norm and the tail run inside the convolution's.
    assert dump.count("tensorbridge::convolution_epilogue(") == 1
    assert "= aten::" not in dump, dump


def test_padding_read_twice_or_not_zero_is_not_folded():
    class TwoReaders(torch.nn.Module):
        def __init__(self, value):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3)
            self.value = value

        def forward(self, x):
            p = torch.nn.functional.pad(x, (1, 1, 0, 2), value=self.value)
            y = torch.relu(self.conv(p))
            return y if self.value else (y, p)

    x = torch.randn(1, 3, 6, 6)
    for value in (0.0, 1.5):
        torch.manual_seed(0)
        m = TwoReaders(value).eval()
        got, want, dump = _plans(m, x)
        torch.testing.assert_close(got, want)
        assert "constant_pad_nd" in dump and "tensorbridge::convolution_epilogue(" in dump


def test_convolution_epilogue_rejects_bad_arguments():
    x, w = torch.randn(1, 2, 5, 5), torch.randn(3, 2, 3, 3)
    args = [x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1, None]
    with pytest.raises(ValueError, match="is not hardtanh:<min>:<max>"):
        tb.call("tensorbridge::convolution_epilogue", *args, "hardtanh:1")
    with pytest.raises(ValueError, match="is not hardtanh:<min>:<max>"):
        tb.call("tensorbridge::convolution_epilogue", *args, "hardtanh:2:1")
    with pytest.raises(ValueError, match="expected 4 extra padding values, got 2"):
        tb.call("tensorbridge::convolution_epilogue", *args, "", [1, 1])
    with pytest.raises(ValueError, match="extra padding must be non-negative"):
        tb.call("tensorbridge::convolution_epilogue", *args, "", [0, -1, 0, 0])
    with pytest.raises(ValueError, match="needs both running_mean and running_var"):
        tb.call(
            "tensorbridge::convolution_epilogue", *args, "", [], None, None, torch.zeros(3), None
        )
    t = [x, torch.randn(2, 3, 3, 3), None, [1, 1], [0, 0], [1, 1], True, [0, 0], 1, None, ""]
    with pytest.raises(ValueError, match="extra padding of a transposed convolution"):
        tb.call("tensorbridge::convolution_epilogue", *t, [0, 1, 0, 1])


def test_relu_keeps_nan_as_torch():
    m = Linear("relu", False, k=4, n=8).eval()
    x = torch.randn(3, 4)
    x[1, 2] = float("nan")
    got, want, _ = _plans(m, x, torch.empty(0))
    assert torch.isnan(got[1]).all() and torch.equal(got.isnan(), want.isnan())
    _close(got.nan_to_num(), want.nan_to_num(), torch.float32)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_packed_weight_follows_an_in_place_update(dtype):
    torch.manual_seed(0)
    m = Linear("gelu", True).eval()
    x, r = torch.randn(5, 24, dtype=dtype), torch.randn(5, 40)
    c = torch.compile(m, backend="tensorbridge")
    with torch.no_grad(), torch.autocast("cpu", torch.bfloat16, enabled=dtype == torch.bfloat16):
        c(x, r)
        c(x, r)
        run = _compile.state.compilations[-1].plans[-1]
        assert "tensorbridge::matmul_epilogue(" in run["plan"].dump()
        m.fc.weight.mul_(-2.0)  # in place: the same memory, a new version
        m.fc.bias.add_(1.0)
        got = c(x, r)
        want = m(x, r)
    _close(got, want, dtype)
    # the packs were dropped and made again: the same weight twice more is served packed
    with torch.no_grad(), torch.autocast("cpu", torch.bfloat16, enabled=dtype == torch.bfloat16):
        m.fc.weight.copy_(torch.randn(40, 24))
        _close(c(x, r), m(x, r), dtype)
        _close(c(x, r), m(x, r), dtype)


def test_packed_weight_of_another_module_of_the_same_class():
    # dynamo reuses one compiled frame for modules of the same class: another weight, bound
    # at another address, is packed anew.
    torch.manual_seed(0)
    a, b = Linear("relu", False).eval(), Linear("relu", False).eval()
    x = torch.randn(4, 24)
    with torch.no_grad():
        for m in (a, b, a, b):
            _close(torch.compile(m, backend="tensorbridge")(x, x), m(x, x), torch.float32)


def test_prepack_off_keeps_the_transpose():
    m = Linear(None, False).eval()
    x = torch.randn(4, 24)
    tb.config.prepack = False
    try:
        got, want, dump = _plans(m, x, x)
    finally:
        tb.config.prepack = True
    _close(got, want, torch.float32)
    assert "tensorbridge::" not in dump and "aten::addmm(" in dump


def test_matmul_epilogue_rejects_bad_arguments():
    x, w = torch.randn(3, 4), torch.randn(4, 5)
    with pytest.raises(ValueError, match="unknown epilogue step 'erf'"):
        tb.call(
            "tensorbridge::matmul_epilogue",
            x,
            w,
            None,
            None,
            False,
            "erf",
            [3, 5],
            torch.float32,
            -1,
        )
    with pytest.raises(ValueError, match="relu may only be the last step"):
        tb.call(
            "tensorbridge::matmul_epilogue",
            x,
            w,
            None,
            None,
            False,
            "relu,tanh",
            [3, 5],
            torch.float32,
            -1,
        )
    with pytest.raises(ValueError, match="adds a residual not given"):
        tb.call(
            "tensorbridge::matmul_epilogue",
            x,
            w,
            None,
            None,
            False,
            "add",
            [3, 5],
            torch.float32,
            -1,
        )
    with pytest.raises(ValueError, match=r"cannot be multiplied"):
        tb.call(
            "tensorbridge::matmul_epilogue", x, x, None, None, False, "", [3, 4], torch.float32, -1
        )


def test_packed_plan_from_several_threads():
    import concurrent.futures

    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.GELU(), torch.nn.Linear(96, 64))
    m.eval()
    c = torch.compile(m, backend="tensorbridge")
    xs = [torch.randn(17, 64) for _ in range(8)]
    with torch.no_grad():
        want = [m(x) for x in xs]
        c(xs[0])

        def run(i):
            return [c(xs[i % 8]) for _ in range(20)]

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            results = list(pool.map(run, range(8)))
    for i, outs in enumerate(results):
        for out in outs:
            _close(out, want[i % 8], torch.float32)


@pytest.mark.parametrize("layout", ["contiguous", "permuted"])
def test_bfloat16_casts_round_as_torch(layout):
    # autocast's casts (the flat bfloat16 <-> float32 loops): bit-equal to torch, ties to
    # even, NaN, infinities, subnormals and overflow included.
    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 40, 9, generator=g) * 10 ** torch.randint(-40, 39, (6, 40, 9), generator=g)
    flat = x.view(-1)
    flat[:8] = torch.tensor(
        [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e-40, 3.4e38, -3.39e38]
    )
    flat[8:12] = torch.tensor([1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8), 1 + 2**-8 + 2**-20])
    if layout == "permuted":
        x = x.permute(2, 0, 1)
    got = tb.to_torch(tb.call("aten::_to_copy", x, dtype=torch.bfloat16))
    assert got.stride() == x.to(torch.bfloat16).stride()
    want = x.to(torch.bfloat16)
    assert torch.equal(got.view(torch.int16)[~want.isnan()], want.view(torch.int16)[~want.isnan()])
    assert torch.equal(got.isnan(), want.isnan())
    back = tb.to_torch(tb.call("aten::_to_copy", want, dtype=torch.float32))
    assert torch.equal(back.nan_to_num(), want.float().nan_to_num())


@pytest.mark.parametrize("grad", [False, True])
def test_two_products_summed_fuse_once(grad):
    # Both chains reach the add (as a backward graph's gradient sums do): one of them takes it.
    torch.manual_seed(0)
    w1, w2 = torch.randn(8, 6), torch.randn(8, 6)

    def f(a, b):
        return torch.tanh((a @ w1).view(2, 3, 6) + (b @ w2).view(2, 3, 6))

    a = torch.randn(6, 8, requires_grad=grad)
    b = torch.randn(6, 8, requires_grad=grad)
    got, want, dump = _plans(f, a, b, grad=grad)
    _close(got, want, torch.float32)
    assert dump.count("tensorbridge::matmul_epilogue(") == 1, dump
