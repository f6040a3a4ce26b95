"""Fused attention kernels against torch's CPU kernels.

aten::_scaled_dot_product_flash_attention_for_cpu and its backward: outputs, logsumexp and
gradients within the tolerances torch's own tests allow its fused CPU kernel against the math
reference (test_transformers.py), over float32/64, bfloat16, float16, shapes with L != S, head
sizes 1 to 80, several query / key tiles, causal masks (top-left aligned), additive masks
broadcast over batch and heads, scale, grouped-query heads and empty dimensions; the strides of
every result equal torch's. aten::scaled_dot_product_attention whole and decomposed
(config.legal_ops), eager F.scaled_dot_product_attention on wrapped tensors and compiled
attention training with no fallback, concurrent calls, and argument errors."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest
import torch
import torch.nn.functional as F

import tensorbridge as tb
from tensorbridge._opinfo import find_opinfos, run_samples

FLASH = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
FLASH_BW = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward
SDPA = "aten::scaled_dot_product_attention"
DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16]

# (atol, rtol) of torch's test_scaled_dot_product_fused_attention_mask_vs_math_cpu, outputs
# and gradients; float64: assert_close's defaults for float64.
TOL = {
    torch.float32: ((1e-5, 5e-6), (1.25e-5, 5.25e-6)),
    torch.float64: ((1e-7, 1e-7), (1e-7, 1e-7)),
    torch.bfloat16: ((5e-2, 5e-2), (5e-2, 5e-2)),
    torch.float16: ((1e-2, 1e-2), (1e-1, 1e-1)),
}


@pytest.fixture(autouse=True)
def _no_fallback():
    torch.manual_seed(0)
    tb.config.fallback = "error"
    tb.diagnostics.reset_metrics()
    yield
    tb.config.fallback = "allow"
    tb.config.reset_legal_ops()


def _close(actual, expected, tol, msg=""):
    atol, rtol = tol
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, msg
    torch.testing.assert_close(tb.to_torch(actual), expected, atol=atol, rtol=rtol, msg=msg)


def _strides(actual, expected, msg=""):
    assert actual.stride() == expected.stride(), (msg, actual.stride(), expected.stride())


def _wrap(*xs):
    return [tb.wrap(x) if isinstance(x, torch.Tensor) else x for x in xs]


def _reference_lse(q, k, is_causal, attn_mask, scale):
    """logsumexp of the scores in float64 (0 for rows that see no key, as the kernels)."""
    q, k = q.double(), k.double()
    k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
    sc = scale if scale is not None else q.shape[-1] ** -0.5
    s = q @ k.transpose(-1, -2) * sc
    if is_causal:
        keep = torch.ones(s.shape[-2:], dtype=torch.bool).tril()
        s = s.masked_fill(~keep, -float("inf"))
    if attn_mask is not None:
        s = s + attn_mask.double()
    lse = torch.logsumexp(s, -1)
    return lse.masked_fill(lse == -float("inf"), 0.0)


def _check(q, k, v, is_causal=False, attn_mask=None, scale=None, grads=True):
    """Our forward and backward (eager, on wrapped tensors) against torch's, values and
    strides."""
    dtype = q.dtype
    expected = FLASH(q, k, v, is_causal=is_causal, attn_mask=attn_mask, scale=scale)
    qw, kw, vw, mw = _wrap(q, k, v, attn_mask)
    actual = FLASH(qw, kw, vw, is_causal=is_causal, attn_mask=mw, scale=scale)
    fwd_tol, grad_tol = TOL[dtype]
    _close(actual[0], expected[0], fwd_tol, "output")
    # logsumexp: float32 for the 16-bit types (torch's accumulate type). There torch's kernel
    # takes a fast exp (fexp_u20, made for bfloat16 / float16 outputs) and is off by up to
    # 1e-4; ours is checked against a float64 reference as well.
    if dtype in (torch.float32, torch.float64):
        _close(actual[1], expected[1], TOL[dtype][0], "logsumexp")
    else:
        _close(actual[1], expected[1], (1e-4, 1e-4), "logsumexp")
        ref = _reference_lse(q, k, is_causal, attn_mask, scale)
        torch.testing.assert_close(tb.to_torch(actual[1]).double(), ref, atol=1e-5, rtol=1e-5)
    meta = [t.to("meta") if isinstance(t, torch.Tensor) else t for t in (q, k, v, attn_mask)]
    meta_out = FLASH(*meta[:3], is_causal=is_causal, attn_mask=meta[3], scale=scale)
    for name, a, e, m in zip(("output", "logsumexp"), actual, expected, meta_out, strict=True):
        _strides(a, e, name)
        _strides(a, m, name + " (meta)")
    if not grads:
        return
    go = torch.randn(expected[0].shape, dtype=torch.float32).to(dtype)
    want = FLASH_BW(go, q, k, v, *expected, 0.0, is_causal, attn_mask=attn_mask, scale=scale)
    got = FLASH_BW(*_wrap(go, q, k, v, *expected), 0.0, is_causal, attn_mask=mw, scale=scale)
    meta_grads = FLASH_BW(
        *(t.to("meta") for t in (go, q, k, v, *expected)),
        0.0,
        is_causal,
        attn_mask=meta[3],
        scale=scale,
    )
    names = ("grad_query", "grad_key", "grad_value")
    for name, a, e, m in zip(names, got, want, meta_grads, strict=True):
        _close(a, e, grad_tol, name)
        _strides(a, e, name)
        _strides(a, m, name + " (meta)")
    m = tb.diagnostics.metrics()
    assert m["aten::_scaled_dot_product_flash_attention_for_cpu"]["kernel"] >= 1
    assert m["aten::_scaled_dot_product_flash_attention_for_cpu_backward"]["kernel"] >= 1


def _qkv(b, h, hk, lq, s, e, dtype=torch.float32):
    q = torch.randn(b, h, lq, e).to(dtype)
    k = torch.randn(b, hk, s, e).to(dtype)
    v = torch.randn(b, hk, s, e).to(dtype)
    return q, k, v


# (batch, heads, kv heads, L, S, head dim)
SHAPES = [
    (2, 4, 4, 5, 7, 8),  # L != S
    (1, 2, 2, 1, 9, 64),  # one query (decoding)
    (2, 3, 3, 130, 130, 1),  # head dim 1, three query tiles
    (1, 2, 2, 70, 600, 80),  # head dim 80, two key tiles
    (2, 4, 2, 33, 17, 16),  # grouped-query heads, L > S
    (1, 8, 1, 12, 12, 32),  # multi-query (one key / value head)
    (3, 1, 1, 4, 1, 8),  # one key
]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_flash_forward_and_backward_match_torch(shape, causal, dtype):
    _check(*_qkv(*shape, dtype=dtype), is_causal=causal)


def test_causal_is_top_left_aligned():
    # Query i sees keys j <= i, also when L != S: the math reference with tril(ones(L, S)).
    for lq, s in ((3, 7), (7, 3)):
        q, k, v = _qkv(1, 2, 2, lq, s, 8, torch.float64)
        mask = torch.ones(lq, s, dtype=torch.bool).tril()
        expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        actual = FLASH(*_wrap(q, k, v), is_causal=True)[0]
        torch.testing.assert_close(tb.to_torch(actual), expected)


MASK_SHAPES = [(5, 7), (5, 1), (1, 7), (2, 3, 5, 7), (2, 1, 5, 7), (1, 3, 1, 7), (1, 1, 5, 1)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("mask_shape", MASK_SHAPES, ids=str)
def test_additive_masks_broadcast_over_batch_and_heads(mask_shape, dtype):
    q, k, v = _qkv(2, 3, 3, 5, 7, 16, dtype)
    mask = torch.randn(mask_shape).to(dtype)
    if mask.numel() > 2:
        mask.view(-1)[::3] = -float("inf")
    _check(q, k, v, attn_mask=mask)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_float32_mask_with_16_bit_inputs(dtype):
    # torch takes a float32 mask with any query dtype.
    q, k, v = _qkv(2, 2, 2, 6, 9, 8, dtype)
    _check(q, k, v, attn_mask=torch.randn(6, 9), is_causal=True)


def test_fully_masked_rows_give_zero_and_logsumexp_zero_as_torch():
    q, k, v = _qkv(1, 2, 2, 4, 6, 8)
    mask = torch.zeros(4, 6)
    mask[1] = -float("inf")
    _check(q, k, v, attn_mask=mask)
    out, lse = FLASH(*_wrap(q, k, v), attn_mask=tb.wrap(mask))
    assert torch.equal(tb.to_torch(out)[:, :, 1], torch.zeros(1, 2, 8))
    assert torch.equal(tb.to_torch(lse)[:, :, 1], torch.zeros(1, 2))


@pytest.mark.parametrize("scale", [0.3, 1.0, -0.5])
def test_scale(scale):
    _check(*_qkv(2, 2, 2, 9, 11, 8), scale=scale, is_causal=scale > 0)


@pytest.mark.parametrize(
    "layout",
    ["contiguous", "heads_inner", "sliced", "expanded"],
)
def test_result_strides_follow_torch_for_input_layouts(layout):
    # The output is laid out like the query (torch's empty_like), the gradients as
    # [B, L, H, E] seen as [B, H, L, E], the logsumexp as [B, L, H].
    b, h, lq, s, e = 2, 3, 5, 7, 8

    def make(n):
        if layout == "heads_inner":  # a projection's output viewed per head (models do this)
            return torch.randn(b, n, h, e).transpose(1, 2)
        if layout == "sliced":
            return torch.randn(b, h, n, 2 * e)[..., :e]
        if layout == "expanded":
            return torch.randn(1, h, n, e).expand(b, h, n, e)
        return torch.randn(b, h, n, e)

    _check(make(lq), make(s), make(s), is_causal=True)


@pytest.mark.parametrize("shape", [(0, 2, 3, 3, 8), (2, 2, 3, 3, 0)], ids=["batch0", "headdim0"])
def test_empty_dimensions_torch_allows(shape):
    b, h, lq, s, e = shape
    q, k, v = _qkv(b, h, h, lq, s, e)
    _check(q, k, v, grads=e > 0)


@pytest.mark.parametrize("h,lq,s", [(3, 0, 5), (3, 4, 0), (0, 4, 5)], ids=["L0", "S0", "heads0"])
def test_empty_lengths_and_heads(h, lq, s):
    # torch's kernel divides by zero on these (SIGFPE); the table returns what the math
    # reference gives (no queries or heads: empty; no keys: zeros) with the meta function's
    # layout.
    q, k, v = _qkv(2, h, h, lq, s, 8)
    out, lse = FLASH(*_wrap(q, k, v))
    meta = FLASH(*(t.to("meta") for t in (q, k, v)))
    assert out.shape == meta[0].shape and out.stride() == meta[0].stride()
    assert lse.shape == meta[1].shape and lse.stride() == meta[1].stride()
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        expected = F.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(tb.to_torch(out), expected)
    go = torch.randn(out.shape)
    grads = FLASH_BW(*_wrap(go, q, k, v, tb.to_torch(out), tb.to_torch(lse)), 0.0, False)
    for g, t in zip(grads, (q, k, v), strict=True):
        assert g.shape == t.shape
        assert torch.equal(tb.to_torch(g), torch.zeros_like(t))


def test_many_heads_and_tiles_match_torch():
    # Enough (batch, head, query tile) tasks for every thread, keys beyond one tile.
    _check(*_qkv(4, 6, 6, 200, 700, 64), is_causal=True)
    _check(*_qkv(4, 6, 3, 200, 700, 64), attn_mask=torch.randn(4, 1, 200, 700))


# ---- aten::scaled_dot_product_attention: whole and decomposed ------------------------------

SDPA_CASES = {
    "plain": ({}, False),
    "causal": ({"is_causal": True}, False),
    "bool_mask": ({"attn_mask": "bool"}, False),
    "float_mask": ({"attn_mask": "float"}, False),
    "scale": ({"scale": 0.25}, False),
    "gqa": ({"enable_gqa": True, "is_causal": True}, True),
}


def _sdpa_args(kwargs, gqa, rank=4):
    q, k, v = _qkv(2, 4, 2 if gqa else 4, 6, 9, 8)
    if rank == 3:
        q, k, v = (t[0] for t in (q, k, v))
    kw = dict(kwargs)
    if kw.get("attn_mask") == "bool":
        m = torch.rand(6, 9) > 0.4
        m[2] = False  # a row that sees no key: 0, as torch's
        kw["attn_mask"] = m
    elif kw.get("attn_mask") == "float":
        kw["attn_mask"] = torch.randn(2, 1, 6, 9)
    return (q, k, v), kw


@pytest.mark.parametrize("legal", [True, False], ids=["whole", "decomposed"])
@pytest.mark.parametrize("case", list(SDPA_CASES))
def test_sdpa_whole_and_decomposed_match_torch(case, legal):
    kwargs, gqa = SDPA_CASES[case]
    (q, k, v), kw = _sdpa_args(kwargs, gqa)
    if not legal:
        tb.config.decompose(SDPA)
    assert (SDPA in tb.config.legal_ops) == legal
    expected = F.scaled_dot_product_attention(q, k, v, **kw)
    tkw = {n: tb.from_dlpack(x) if isinstance(x, torch.Tensor) else x for n, x in kw.items()}
    actual = torch.from_dlpack(tb.call(SDPA, *(tb.from_dlpack(t) for t in (q, k, v)), **tkw))
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=5e-6)
    served = tb.diagnostics.metrics()[SDPA]
    assert (served["kernel"], served["decomposition"]) == ((1, 0) if legal else (0, 1))


@pytest.mark.parametrize("legal", [True, False], ids=["whole", "decomposed"])
@pytest.mark.parametrize("shape", [(6, 8), (3, 6, 8), (2, 2, 3, 6, 8)], ids=str)
def test_sdpa_other_ranks(shape, legal):
    if not legal:
        tb.config.decompose(SDPA)
    q, k, v = (torch.randn(shape) for _ in range(3))
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    actual = tb.call(SDPA, *(tb.from_dlpack(t) for t in (q, k, v)), is_causal=True)
    torch.testing.assert_close(torch.from_dlpack(actual), expected, atol=1e-5, rtol=5e-6)


@pytest.mark.parametrize("legal", [True, False], ids=["whole", "decomposed"])
def test_sdpa_errors(legal):
    if not legal:
        tb.config.decompose(SDPA)
    q = tb.from_dlpack(torch.randn(2, 4, 6, 8))
    k3 = tb.from_dlpack(torch.randn(2, 3, 6, 8))
    with pytest.raises(NotImplementedError, match=r"scaled_dot_product_attention: dropout_p"):
        tb.call(SDPA, q, q, q, dropout_p=0.1)
    with pytest.raises(ValueError, match="attn_mask should not be set when is_causal"):
        tb.call(SDPA, q, q, q, attn_mask=tb.from_dlpack(torch.zeros(6, 6)), is_causal=True)
    with pytest.raises(ValueError, match=r"key/value heads \(3\) must divide .* query heads \(4\)"):
        tb.call(SDPA, q, k3, k3, enable_gqa=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_opinfo_samples_without_dropout_run_in_the_table(dtype):
    # torch's OpInfo samples of F.scaled_dot_product_attention, gradients included: the ones
    # without dropout pass with no fallback (some take torch's math path, whose
    # aten::_safe_softmax the table decomposes); dropout draws its numbers on torch's kernel
    # (aten::bernoulli_), by design.
    tb.config.fallback = "allow"
    samples = []
    for info in find_opinfos(["nn.functional.scaled_dot_product_attention"]):
        samples += run_samples(info, dtype, grad=True).samples
    ran = [s for s in samples if "aten::bernoulli_.float" not in s.fallbacks]
    assert len(ran) >= 12
    assert [(s.index, s.message) for s in ran if s.status != "pass" or s.fallbacks] == []
    hit = set().union(*(s.hit for s in ran))
    assert {"aten::_safe_softmax", "aten::_scaled_dot_product_flash_attention_for_cpu"} <= hit


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
def test_safe_softmax_gives_zero_rows_where_every_score_is_minus_inf(dtype):
    x = torch.randn(3, 4, 5).to(dtype)
    x[1, 2] = -float("inf")
    x[0, :, 1] = -float("inf")
    for args in ((x, -1), (x, 1), (x, -1, torch.float32)):
        expected = torch.ops.aten._safe_softmax(*args)
        actual = tb.call("aten::_safe_softmax", tb.from_dlpack(args[0]), *args[1:])
        torch.testing.assert_close(torch.from_dlpack(actual), expected)
    assert tb.diagnostics.metrics()["aten::_safe_softmax"]["decomposition"] == 3


# ---- eager and compiled use ----------------------------------------------------------------


@pytest.mark.parametrize("case", list(SDPA_CASES))
def test_eager_sdpa_on_wrapped_tensors_trains_without_fallback(case):
    kwargs, gqa = SDPA_CASES[case]
    (q, k, v), kw = _sdpa_args(kwargs, gqa)
    ref = [t.clone().requires_grad_() for t in (q, k, v)]
    ours = [tb.wrap(t.clone()).requires_grad_() for t in (q, k, v)]
    wkw = {n: tb.wrap(x) if isinstance(x, torch.Tensor) else x for n, x in kw.items()}
    expected = F.scaled_dot_product_attention(*ref, **kw)
    actual = F.scaled_dot_product_attention(*ours, **wkw)
    go = torch.randn(expected.shape)
    expected.backward(go)
    actual.backward(tb.wrap(go))
    torch.testing.assert_close(
        tb.to_torch(actual.detach()), expected.detach(), atol=1e-5, rtol=5e-6
    )
    for name, a, e in zip("qkv", ours, ref, strict=True):
        torch.testing.assert_close(
            tb.to_torch(a.grad), e.grad, atol=1.25e-5, rtol=5.25e-6, msg=name
        )
    m = tb.diagnostics.metrics()
    assert m["aten::_scaled_dot_product_flash_attention_for_cpu"]["kernel"] == 1
    assert m["aten::_scaled_dot_product_flash_attention_for_cpu_backward"]["kernel"] == 1
    assert sum(c["fallback"] for c in m.values()) == 0


class _Block(torch.nn.Module):
    def __init__(self, dim=32, heads=4):
        super().__init__()
        self.norm = torch.nn.LayerNorm(dim)
        self.attn = torch.nn.MultiheadAttention(dim, heads, batch_first=True)
        self.out = torch.nn.Linear(dim, dim)

    def forward(self, x, mask):
        h = self.norm(x)
        a, _ = self.attn(h, h, h, attn_mask=mask, need_weights=False)
        return self.out(x + a)


def test_compiled_attention_block_trains_without_fallback(fresh_dynamo):
    torch.manual_seed(0)
    ref = _Block()
    ours = _Block()
    ours.load_state_dict(ref.state_dict())
    compiled = torch.compile(ours, backend="tensorbridge")
    x = torch.randn(2, 10, 32)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(10)
    ref(x, mask).square().mean().backward()
    compiled(x, mask).square().mean().backward()
    for (n, p), (_, r) in zip(ours.named_parameters(), ref.named_parameters(), strict=True):
        torch.testing.assert_close(p.grad, r.grad, rtol=1e-4, atol=1e-5, msg=n)
    text = tb.diagnostics.explain(compiled)
    assert "forward plan" in text and "backward plan" in text, text
    assert "fallback nodes: none" in text and "fallback nodes: [" not in text, text
    assert " 0 fallback;" in text and all(
        " 0 fallback;" in line for line in text.splitlines() if "fallback;" in line
    ), text
    assert "aten::_scaled_dot_product_flash_attention_for_cpu(" in text
    assert "aten::_scaled_dot_product_flash_attention_for_cpu_backward(" in text


def test_concurrent_calls_from_threads_agree():
    # The kernels release the GIL and keep no shared mutable state.
    q, k, v = _qkv(2, 4, 4, 100, 120, 32)
    args = [tb.from_dlpack(t) for t in (q, k, v)]
    name = "aten::_scaled_dot_product_flash_attention_for_cpu"
    expected = torch.from_dlpack(tb.call(name, *args, 0.0, True)[0]).clone()
    results, errors = [], []

    def work():
        try:
            for _ in range(5):
                results.append(torch.from_dlpack(tb.call(name, *args, 0.0, True)[0]).clone())
        except Exception as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(results) == 20
    for r in results:
        assert torch.equal(r, expected)


_ISA_CHILD = r"""
import torch
import tensorbridge as tb

tb.config.fallback = "error"
torch.manual_seed(0)
flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
flash_bw = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward
# (batch, heads, kv heads, L, S, head dim, causal): micro-kernel tiles, oneDNN tiles, tails
for b, h, hk, lq, s, e, causal in [(2, 4, 2, 33, 17, 16, True), (1, 2, 2, 70, 600, 80, False),
                                   (1, 3, 3, 1, 37, 5, False), (2, 2, 1, 9, 130, 64, True)]:
    q = torch.randn(b, h, lq, e)
    k, v = torch.randn(b, hk, s, e), torch.randn(b, hk, s, e)
    mask = torch.randn(lq, s)
    out, lse = flash(q, k, v, is_causal=causal, attn_mask=mask)
    w = [tb.wrap(t) for t in (q, k, v, mask)]
    o, l = flash(*w[:3], is_causal=causal, attn_mask=w[3])
    torch.testing.assert_close(tb.to_torch(o), out, atol=1e-5, rtol=5e-6)
    torch.testing.assert_close(tb.to_torch(l), lse, atol=1e-5, rtol=5e-6)
    go = torch.randn(out.shape)
    want = flash_bw(go, q, k, v, out, lse, 0.0, causal, attn_mask=mask)
    got = flash_bw(*[tb.wrap(t) for t in (go, q, k, v, out, lse)], 0.0, causal, attn_mask=w[3])
    for a, e in zip(got, want):
        torch.testing.assert_close(tb.to_torch(a), e, atol=1.25e-5, rtol=5.25e-6)
print("ok")
"""


@pytest.mark.parametrize("isa", ["sse2", "avx2"])
def test_other_isa_versions_match_torch(isa):
    # The row loops and tile micro-kernels come in AVX-512, AVX2 and scalar versions
    # (TB_MAX_CPU_ISA caps the pick, once per process): a child process per cap.
    env = dict(os.environ, TB_MAX_CPU_ISA=isa)
    proc = subprocess.run(
        [sys.executable, "-c", _ISA_CHILD], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr


# ---- errors --------------------------------------------------------------------------------


def test_argument_errors_name_the_op_and_the_value():
    op = "aten::_scaled_dot_product_flash_attention_for_cpu"
    a = lambda *s, dtype=torch.float32: tb.from_dlpack(torch.zeros(s, dtype=dtype))  # noqa: E731
    q = a(2, 4, 6, 8)
    with pytest.raises(NotImplementedError, match=f"{op}: dropout_p = 0.5 is not supported"):
        tb.call(op, q, q, q, 0.5)
    with pytest.raises(ValueError, match=f"{op}: expected 4-d query"):
        tb.call(op, a(4, 6, 8), a(4, 6, 8), a(4, 6, 8))
    with pytest.raises(TypeError, match=f"{op}: expected query, key and value of one dtype"):
        tb.call(op, q, a(2, 4, 6, 8, dtype=torch.float64), q)
    with pytest.raises(NotImplementedError, match=f"{op}: dtype int64 is not supported"):
        i = a(2, 4, 6, 8, dtype=torch.int64)
        tb.call(op, i, i, i)
    with pytest.raises(ValueError, match=f"{op}: query, key and value must have the same head"):
        tb.call(op, q, a(2, 4, 6, 4), a(2, 4, 6, 4))
    with pytest.raises(ValueError, match=f"{op}: query, key and value must have the same batch"):
        tb.call(op, q, a(1, 4, 6, 8), a(1, 4, 6, 8))
    with pytest.raises(ValueError, match=r"key/value heads \(3\) must divide .* query heads \(4\)"):
        tb.call(op, q, a(2, 3, 6, 8), a(2, 3, 6, 8))
    with pytest.raises(ValueError, match=r"key/value heads \(8\) must divide .* query heads \(4\)"):
        tb.call(op, q, a(2, 8, 6, 8), a(2, 8, 6, 8))
    with pytest.raises(ValueError, match=f"{op}: key and value must have the same heads"):
        tb.call(op, q, a(2, 4, 6, 8), a(2, 4, 5, 8))
    with pytest.raises(TypeError, match=r"attn_mask must have the query's dtype \(float32\)"):
        tb.call(op, q, q, q, attn_mask=a(6, 6, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"attn_mask must be 2-d \[L, S\] or 4-d"):
        tb.call(op, q, q, q, attn_mask=a(4, 6, 6))
    with pytest.raises(ValueError, match=r"attn_mask of shape \[3, 6\] does not broadcast"):
        tb.call(op, q, q, q, attn_mask=a(3, 6))
    bw = op + "_backward"
    lse = a(2, 4, 5)
    with pytest.raises(ValueError, match=f"{bw}: expected logsumexp of shape"):
        tb.call(bw, q, q, q, q, q, lse, 0.0, False)
    with pytest.raises(TypeError, match=f"{bw}: expected logsumexp of dtype float32"):
        tb.call(bw, q, q, q, q, q, a(2, 4, 6, dtype=torch.float64), 0.0, False)
    with pytest.raises(ValueError, match=f"{bw}: expected grad_out of shape"):
        tb.call(bw, a(2, 4, 6, 7), q, q, q, q, a(2, 4, 6), 0.0, False)
    with pytest.raises(NotImplementedError, match=f"{bw}: dropout_p = 0.2"):
        tb.call(bw, q, q, q, q, q, a(2, 4, 6), 0.2, False)
