"""A zoo of real models from ``transformers``, built from small random configs (no downloads),
and the checks that run them through tensorbridge the way a user would.

Each ``Spec`` builds one architecture on the CPU with every dropout and masking probability
at 0, and its inputs at a batch size and sequence length. ``check`` runs one of six modes and
compares with torch eager on the same weights and inputs:

- ``"eager"``: the model's parameters and buffers wrapped in place (``tb.wrap_module``), the
  inputs wrapped (``tb.wrap``): every ATen op runs in the table;
- ``"compiled"``: ``torch.compile(model, backend="tensorbridge")``, inference;
- ``"train"``: one compiled training step: the loss and every parameter's gradient;
- ``"generate"``: ``model.generate(max_new_tokens=...)`` (greedy, KV cache) on wrapped
  parameters, eager and compiled (decoders only);
- ``"jax_jit"``: ``tb.call_torch`` of the model inside ``jax.jit``, the inputs JAX arrays (token
  ids as int32);
- ``"jax_train"``: one ``jax.jit(jax.value_and_grad(...))`` + optax SGD step through
  ``tb.functionalize``, against torch autograd and ``torch.optim.SGD``; both JAX modes must run
  on the FFI path (``call_torch_metrics()``: 0 host callbacks). See ``tensorbridge._zoo_jax``.

Gradients are compared the way the field does: each difference scaled by the model's largest
gradient (some gradients, such as those of attention key biases, are zero in exact arithmetic
and hold only rounding noise in any two implementations).

``python -m tensorbridge.zoo [--models ...] [--modes ...]`` prints one line per model and mode
(every mode by default; the JAX modes where ``jax`` and ``optax`` are installed).
``transformers`` is needed (it is not a dependency of tensorbridge).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import time
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["JAX_MODES", "SPECS", "TOLERANCE", "Spec", "check", "main"]

# The config sizes: "tiny" for tests, "small" for benchmarks, "medium" (BERT-base widths) for
# benchmarks where activations outweigh fixed costs (memory).
_SIZES = {
    "tiny": dict(hidden=32, heads=4, kv_heads=2, layers=2, ffn=64, batch=2, seq=16, image=32),
    "small": dict(hidden=128, heads=4, kv_heads=2, layers=2, ffn=256, batch=2, seq=32, image=64),
    "medium": dict(
        hidden=768, heads=12, kv_heads=4, layers=2, ffn=3072, batch=8, seq=128, image=128
    ),
}
_VOCAB = 100


@dataclasses.dataclass
class Spec:
    """One architecture: ``build(size)`` returns the model (eval mode, no dropout),
    ``inputs(size, gen)`` the keyword arguments of its ``forward``."""

    name: str
    kind: str  # "encoder", "decoder", "encoder-decoder", "vision", "speech"
    build: Callable[[dict], torch.nn.Module]
    inputs: Callable[[dict, torch.Generator], dict]
    generates: bool = False  # a causal LM head exists: "generate" applies


def _tokens(s, gen):
    return torch.randint(0, _VOCAB, (s["batch"], s["seq"]), generator=gen)


def _text(s, gen):
    ids = _tokens(s, gen)
    mask = torch.ones_like(ids)
    mask[0, -3:] = 0  # padding in the first sequence: the attention mask matters
    return {"input_ids": ids, "attention_mask": mask}


def _seq2seq(s, gen):
    d = _text(s, gen)
    d["decoder_input_ids"] = _tokens(s, gen)[:, : s["seq"] // 2]
    return d


def _pixels(s, gen, channels=3):
    return {
        "pixel_values": torch.randn(s["batch"], channels, s["image"], s["image"], generator=gen)
    }


def _audio(s, gen):
    return {"input_values": torch.randn(s["batch"], 1600, generator=gen)}


def _mel(s, gen):
    return {
        "input_features": torch.randn(s["batch"], 16, 2 * s["seq"], generator=gen),
        "decoder_input_ids": _tokens(s, gen)[:, : s["seq"] // 2],
    }


def _t():
    import transformers

    return transformers


def _cfg(s, config_cls, **kw):
    """A config of ``config_cls`` from the builder's fields, with ``s["config"]``'s overrides."""
    kw.update(s.get("config") or {})
    return config_cls(**kw)


def _model(s, t, cls_name: str, cfg):
    """The model: the builder's class, or ``s["cls"]`` (the base model of an LM, say)."""
    return getattr(t, s.get("cls") or cls_name)(cfg)


def _bert_like(cls_name, config_name, **extra):
    def build(s):
        t = _t()
        cfg = _cfg(
            s,
            getattr(t, config_name),
            vocab_size=_VOCAB,
            hidden_size=s["hidden"],
            num_hidden_layers=s["layers"],
            num_attention_heads=s["heads"],
            intermediate_size=s["ffn"],
            max_position_embeddings=128,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
            **extra,
        )
        return _model(s, t, cls_name, cfg)

    return build


def _decoder(cls_name, config_name, **extra):
    def build(s):
        t = _t()
        kw = dict(
            vocab_size=_VOCAB,
            hidden_size=s["hidden"],
            num_hidden_layers=s["layers"],
            num_attention_heads=s["heads"],
            intermediate_size=s["ffn"],
            max_position_embeddings=128,
        )
        kw.update(extra)
        cfg = _cfg(s, getattr(t, config_name), **kw)
        for k in ("attention_dropout", "hidden_dropout", "resid_pdrop", "embd_pdrop"):
            if hasattr(cfg, k):
                setattr(cfg, k, 0.0)
        return _model(s, t, cls_name, cfg)

    return build


def _distilbert(s):
    t = _t()
    cfg = _cfg(
        s,
        t.DistilBertConfig,
        vocab_size=_VOCAB,
        dim=s["hidden"],
        n_layers=s["layers"],
        n_heads=s["heads"],
        hidden_dim=s["ffn"],
        max_position_embeddings=128,
        dropout=0.0,
        attention_dropout=0.0,
    )
    return _model(s, t, "DistilBertModel", cfg)


def _gpt2(s):
    t = _t()
    cfg = _cfg(
        s,
        t.GPT2Config,
        vocab_size=_VOCAB,
        n_embd=s["hidden"],
        n_layer=s["layers"],
        n_head=s["heads"],
        n_inner=s["ffn"],
        n_positions=128,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=0,
        eos_token_id=0,
    )
    return _model(s, t, "GPT2LMHeadModel", cfg)


def _gpt_neox(s):
    t = _t()
    cfg = _cfg(
        s,
        t.GPTNeoXConfig,
        vocab_size=_VOCAB,
        hidden_size=s["hidden"],
        num_hidden_layers=s["layers"],
        num_attention_heads=s["heads"],
        intermediate_size=s["ffn"],
        max_position_embeddings=128,
        attention_dropout=0.0,
        hidden_dropout=0.0,
        bos_token_id=0,
        eos_token_id=0,
    )
    return _model(s, t, "GPTNeoXModel", cfg)


def _opt(s):
    t = _t()
    cfg = _cfg(
        s,
        t.OPTConfig,
        vocab_size=_VOCAB,
        hidden_size=s["hidden"],
        num_hidden_layers=s["layers"],
        num_attention_heads=s["heads"],
        ffn_dim=s["ffn"],
        word_embed_proj_dim=s["hidden"],
        max_position_embeddings=128,
        dropout=0.0,
        attention_dropout=0.0,
        layerdrop=0.0,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=1,
    )
    return _model(s, t, "OPTModel", cfg)


def _t5(s):
    t = _t()
    cfg = _cfg(
        s,
        t.T5Config,
        vocab_size=_VOCAB,
        d_model=s["hidden"],
        d_kv=s["hidden"] // s["heads"],
        d_ff=s["ffn"],
        num_layers=s["layers"],
        num_heads=s["heads"],
        dropout_rate=0.0,
        decoder_start_token_id=0,
    )
    return _model(s, t, "T5Model", cfg)


def _bart(s):
    t = _t()
    cfg = _cfg(
        s,
        t.BartConfig,
        vocab_size=_VOCAB,
        d_model=s["hidden"],
        encoder_layers=s["layers"],
        decoder_layers=s["layers"],
        encoder_attention_heads=s["heads"],
        decoder_attention_heads=s["heads"],
        encoder_ffn_dim=s["ffn"],
        decoder_ffn_dim=s["ffn"],
        max_position_embeddings=128,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        encoder_layerdrop=0.0,
        decoder_layerdrop=0.0,
    )
    return _model(s, t, "BartModel", cfg)


def _whisper(s):
    t = _t()
    cfg = _cfg(
        s,
        t.WhisperConfig,
        vocab_size=_VOCAB,
        num_mel_bins=16,
        d_model=s["hidden"],
        encoder_layers=s["layers"],
        decoder_layers=s["layers"],
        encoder_attention_heads=s["heads"],
        decoder_attention_heads=s["heads"],
        encoder_ffn_dim=s["ffn"],
        decoder_ffn_dim=s["ffn"],
        max_source_positions=s["seq"],
        max_target_positions=128,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        encoder_layerdrop=0.0,
        decoder_layerdrop=0.0,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=0,
        decoder_start_token_id=0,
    )
    return _model(s, t, "WhisperModel", cfg)


def _vit(cls_name, config_name):
    def build(s):
        t = _t()
        cfg = _cfg(
            s,
            getattr(t, config_name),
            image_size=s["image"],
            patch_size=8,
            hidden_size=s["hidden"],
            num_hidden_layers=s["layers"],
            num_attention_heads=s["heads"],
            intermediate_size=s["ffn"],
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
        )
        return _model(s, t, cls_name, cfg)

    return build


def _swin(s):
    t = _t()
    cfg = _cfg(
        s,
        t.SwinConfig,
        image_size=s["image"],
        patch_size=4,
        embed_dim=16,
        depths=[1, 1],
        num_heads=[2, 4],
        window_size=4,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        drop_path_rate=0.0,
    )
    return _model(s, t, "SwinModel", cfg)


def _resnet(s):
    t = _t()
    cfg = _cfg(s, t.ResNetConfig, embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1])
    return _model(s, t, "ResNetModel", cfg)


def _convnext(s):
    t = _t()
    cfg = _cfg(
        s, t.ConvNextConfig, num_stages=2, hidden_sizes=[16, 32], depths=[1, 1], drop_path_rate=0.0
    )
    return _model(s, t, "ConvNextModel", cfg)


def _segformer(s):
    t = _t()
    cfg = _cfg(
        s,
        t.SegformerConfig,
        num_encoder_blocks=2,
        depths=[1, 1],
        sr_ratios=[2, 1],
        hidden_sizes=[16, 32],
        num_attention_heads=[1, 2],
        patch_sizes=[7, 3],
        strides=[4, 2],
        mlp_ratios=[2, 2],
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        classifier_dropout_prob=0.0,
        drop_path_rate=0.0,
    )
    return _model(s, t, "SegformerModel", cfg)


def _mobilenet_v2(s):
    t = _t()
    cfg = _cfg(s, t.MobileNetV2Config, image_size=s["image"], depth_multiplier=0.35)
    return _model(s, t, "MobileNetV2Model", cfg)


def _wav2vec2(s):
    t = _t()
    cfg = _cfg(
        s,
        t.Wav2Vec2Config,
        vocab_size=_VOCAB,
        hidden_size=s["hidden"],
        num_hidden_layers=s["layers"],
        num_attention_heads=s["heads"],
        intermediate_size=s["ffn"],
        conv_dim=(16, 16, 16),
        conv_stride=(5, 4, 4),
        conv_kernel=(10, 4, 4),
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=4,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        feat_proj_dropout=0.0,
        final_dropout=0.0,
        layerdrop=0.0,
        mask_time_prob=0.0,
        mask_feature_prob=0.0,
    )
    return _model(s, t, "Wav2Vec2Model", cfg)


SPECS: dict[str, Spec] = {
    s.name: s
    for s in [
        Spec("bert", "encoder", _bert_like("BertModel", "BertConfig"), _text),
        Spec("distilbert", "encoder", _distilbert, _text),
        Spec(
            "roberta", "encoder", _bert_like("RobertaModel", "RobertaConfig", pad_token_id=1), _text
        ),
        Spec(
            "albert", "encoder", _bert_like("AlbertModel", "AlbertConfig", embedding_size=16), _text
        ),
        Spec(
            "electra",
            "encoder",
            _bert_like("ElectraModel", "ElectraConfig", embedding_size=16),
            _text,
        ),
        Spec("gpt2", "decoder", _gpt2, _text, generates=True),
        Spec(
            "llama",
            "decoder",
            _decoder("LlamaForCausalLM", "LlamaConfig", num_key_value_heads=2),
            _text,
            generates=True,
        ),
        Spec(
            "mistral",
            "decoder",
            _decoder("MistralModel", "MistralConfig", num_key_value_heads=2, sliding_window=8),
            _text,
        ),
        Spec(
            "qwen2", "decoder", _decoder("Qwen2Model", "Qwen2Config", num_key_value_heads=2), _text
        ),
        Spec(
            "gemma",
            "decoder",
            _decoder("GemmaModel", "GemmaConfig", num_key_value_heads=2, head_dim=8),
            _text,
        ),
        Spec("phi", "decoder", _decoder("PhiModel", "PhiConfig"), _text),
        Spec("gpt_neox", "decoder", _gpt_neox, _text),
        Spec("opt", "decoder", _opt, _text),
        Spec("t5", "encoder-decoder", _t5, _seq2seq),
        Spec("bart", "encoder-decoder", _bart, _seq2seq),
        Spec("whisper", "speech", _whisper, _mel),
        Spec("wav2vec2", "speech", _wav2vec2, _audio),
        Spec("vit", "vision", _vit("ViTModel", "ViTConfig"), _pixels),
        Spec("deit", "vision", _vit("DeiTModel", "DeiTConfig"), _pixels),
        Spec("swin", "vision", _swin, _pixels),
        Spec("resnet", "vision", _resnet, _pixels),
        Spec("convnext", "vision", _convnext, _pixels),
        Spec("segformer", "vision", _segformer, _pixels),
        Spec("mobilenet_v2", "vision", _mobilenet_v2, _pixels),
    ]
}


def build(
    name: str,
    size: str | dict = "tiny",
    seed: int = 0,
    *,
    config: dict | None = None,
    cls: str | None = None,
):
    """(model, inputs) of one architecture: eval mode, float32, on the CPU, seeded. ``size``
    names one of ``_SIZES`` or is a dict of the same fields; ``config`` overrides fields of
    the ``transformers`` config (``attn_implementation="eager"``, ``use_cache=False``), and
    ``cls`` names the ``transformers`` class to build instead of the zoo's (``"GPT2Model"``
    for the base model of GPT-2)."""
    spec = SPECS[name]
    s = dict(_SIZES[size] if isinstance(size, str) else size, config=config, cls=cls)
    torch.manual_seed(seed)
    model = spec.build(s).eval()
    gen = torch.Generator().manual_seed(seed + 1)
    return model, spec.inputs(s, gen)


def first_output(out) -> torch.Tensor:
    """The model's main output: logits or the last hidden state."""
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, dict):
        for k in ("logits", "last_hidden_state"):
            if k in out and out[k] is not None:
                return out[k]
        return next(v for v in out.values() if isinstance(v, torch.Tensor))
    return out[0]


def loss_of(out) -> torch.Tensor:
    """A loss that reaches every parameter the main output depends on: the mean squared
    distance to a fixed random target (a loss that only reads the output's norm would have
    zero gradient in exact arithmetic behind a final layer norm)."""
    y = first_output(out).float()
    gen = torch.Generator().manual_seed(1234)
    target = torch.randn(tuple(y.shape), generator=gen)
    return ((y - target) ** 2).mean()


def grad_error(got: dict, want: dict) -> float:
    """The largest gradient difference over the model, scaled by its largest gradient."""
    scale = max(float(g.abs().max()) for g in want.values() if g.numel())
    worst = 0.0
    for k, w in want.items():
        g = got.get(k)
        if g is None:
            raise AssertionError(f"no gradient for {k}")
        if w.numel():
            worst = max(worst, float((torch.as_tensor(g) - w).abs().max()) / scale)
    return worst


@contextlib.contextmanager
def _fallback_counting():
    import tensorbridge as tb

    before = tb.diagnostics.metrics()
    box: dict = {}
    yield box
    after = tb.diagnostics.metrics()

    def delta(op, k):
        return after[op][k] - before.get(op, {}).get(k, 0)

    box["fallbacks"] = {op: delta(op, "fallback") for op in after if delta(op, "fallback")}
    box["calls"] = sum(delta(op, "calls") for op in after)


@dataclasses.dataclass
class Result:
    model: str
    mode: str
    ok: bool  # within TOLERANCE of torch, or (ill-conditioned) as close to float64 as torch
    max_error: float  # relative to the reference's largest magnitude (grads: see grad_error)
    fallbacks: dict  # op -> fallback calls
    seconds: float
    detail: Any = None


def _rel_error(got: torch.Tensor, want: torch.Tensor) -> float:
    got = torch.as_tensor(got).detach().float()
    want = want.detach().float()
    if got.shape != want.shape:
        raise AssertionError(f"shape {tuple(got.shape)}, torch {tuple(want.shape)}")
    scale = max(float(want.abs().max()), 1e-12)
    return float((got - want).abs().max()) / scale


# The modes that run the model from JAX (``tensorbridge._zoo_jax``).
JAX_MODES = ("jax_jit", "jax_train")

# The largest difference from torch a float32 result may have, relative to the largest
# magnitude of torch's result (for gradients: of the model's largest gradient).
TOLERANCE = 1e-4


def _double(x):
    return x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x


def _plain(x):
    import tensorbridge as tb

    return tb.to_torch(x) if isinstance(x, tb.Tensor) else x


def check(name: str, mode: str, size: str = "tiny", new_tokens: int = 8) -> Result:
    """Runs one model in one mode (see the module documentation) against torch eager."""
    import tensorbridge as tb

    spec = SPECS[name]
    model, inputs = build(name, size)
    tb.diagnostics.reset_plan_metrics()
    t0 = time.perf_counter()
    detail = None
    ok = None  # None: decided by err <= TOLERANCE
    if mode == "eager":
        with torch.no_grad():
            want = first_output(model(**inputs))
        tb.wrap_module(model, copy=True)
        wrapped = {k: tb.wrap(v, copy=True) for k, v in inputs.items()}
        with _fallback_counting() as fb, torch.no_grad():
            got = first_output(model(**wrapped))
        err = _rel_error(_plain(got), want)
    elif mode == "compiled":
        with torch.no_grad():
            want = first_output(model(**inputs))
        compiled = torch.compile(model, backend="tensorbridge")
        with _fallback_counting() as fb, torch.no_grad():
            got = first_output(compiled(**inputs))
        err = _rel_error(got, want)
        fb["fallbacks"].update(_plan_fallbacks(compiled))
    elif mode == "train":
        import copy

        reference = copy.deepcopy(model)
        want_loss, want_grads = _train_step(model, inputs)
        compiled = torch.compile(model, backend="tensorbridge")
        with _fallback_counting() as fb:
            got_loss, got_grads = _train_step(compiled, inputs, params_of=model)
        err = max(_rel_error(got_loss, want_loss), grad_error(got_grads, want_grads))
        fb["fallbacks"].update(_plan_fallbacks(compiled))
        if err > TOLERANCE:
            # An ill-conditioned model (batch norm over few values, say) amplifies rounding:
            # then both float32 results are compared with a float64 run, as torch's own
            # benchmarks do, and ours must be about as close to it as torch's.
            ref_loss, ref_grads = _train_step(
                reference.double(), {k: _double(v) for k, v in inputs.items()}
            )
            ours = max(_rel_error(got_loss, ref_loss), grad_error(got_grads, ref_grads))
            theirs = max(_rel_error(want_loss, ref_loss), grad_error(want_grads, ref_grads))
            detail = f"vs float64: ours {ours:.2e}, torch's {theirs:.2e}"
            ok = ours <= 2 * theirs + TOLERANCE / 10
    elif mode in JAX_MODES:
        from tensorbridge._zoo_jax import check_jax

        ok, err, detail, calls = check_jax(name, mode, size)
        fb = {"fallbacks": {}, "calls": calls}
    elif mode == "generate":
        if not spec.generates:
            raise ValueError(f"{name} has no language-model head to generate with")
        ids = inputs["input_ids"][:1, :8]
        with torch.no_grad():
            want = model.generate(ids, max_new_tokens=new_tokens, do_sample=False, pad_token_id=0)
        tb.wrap_module(model, copy=True)
        with _fallback_counting() as fb, torch.no_grad():
            got = model.generate(
                tb.wrap(ids, copy=True), max_new_tokens=new_tokens, do_sample=False, pad_token_id=0
            )
            got = _plain(got)
            if not torch.equal(got, want):
                raise AssertionError(f"{name}: generated {got.tolist()}, torch {want.tolist()}")
            # Compiled: the forward of every step, the KV cache growing by one token a step.
            model.forward = torch.compile(model.forward, backend="tensorbridge")
            got = model.generate(ids, max_new_tokens=new_tokens, do_sample=False, pad_token_id=0)
            if not torch.equal(got, want):
                raise AssertionError(
                    f"{name}: compiled, generated {got.tolist()}, torch {want.tolist()}"
                )
        fb["fallbacks"].update(_plan_fallbacks())
        m = tb.diagnostics.plan_metrics()
        detail = (
            f"{m['compilations']} compilations ({m['recompilations']} recompilations), "
            f"{m['plans_built']} plans ({m['shape_plans']} for shapes)"
        )
        fb["compile"] = m
        err = 0.0
    else:
        raise ValueError(
            f"unknown mode {mode!r}: eager, compiled, train, generate, jax_jit or jax_train"
        )
    ok = err <= TOLERANCE if ok is None else ok
    return Result(name, mode, ok, err, fb["fallbacks"], time.perf_counter() - t0, detail)


def _plan_fallbacks(compiled=None) -> dict:
    """Fallback nodes in the plans built for ``compiled`` (None: since the last
    ``reset_plan_metrics``), by op."""
    from tensorbridge._compile import _FALLBACK_LINE, _records_of, state

    found: dict = {}
    for r in _records_of(compiled) if compiled is not None else list(state.compilations):
        for e in r.plans:
            for op in _FALLBACK_LINE.findall(e["plan"].dump()):
                found[op] = found.get(op, 0) + 1
    return found


def _train_step(model, inputs, params_of=None):
    params_of = params_of if params_of is not None else model
    params = dict(params_of.named_parameters())
    for p in params.values():
        p.grad = None
    model.train()
    try:
        loss = loss_of(model(**inputs))
        loss.backward()
    finally:
        model.eval()
    grads = {k: p.grad.detach().clone() for k, p in params.items() if p.grad is not None}
    for p in params.values():
        p.grad = None
    return loss.detach(), grads


def _has_jax() -> bool:
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("jax", "optax"))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="*", default=list(SPECS))
    modes = ["eager", "compiled", "train", "generate", *JAX_MODES]
    parser.add_argument("--modes", nargs="*", choices=modes, default=None)
    parser.add_argument("--size", default="tiny", choices=list(_SIZES))
    args = parser.parse_args(argv)
    if args.modes is None:
        args.modes = modes if _has_jax() else modes[: -len(JAX_MODES)]
    for name in args.models:
        for mode in args.modes:
            if mode == "generate" and not SPECS[name].generates:
                continue
            torch._dynamo.reset()
            try:
                r = check(name, mode, args.size)
                print(
                    f"{name:14s} {mode:9s} {'ok' if r.ok else 'WRONG'} "
                    f"err {r.max_error:.2e} fallbacks {r.fallbacks or 0} "
                    f"{r.seconds:.1f}s" + (f" ({r.detail})" if r.detail else ""),
                    flush=True,
                )
            except Exception as e:  # report and go on: this is a survey
                msg = str(e).strip().splitlines()
                print(
                    f"{name:14s} {mode:9s} FAILED {type(e).__name__}: {msg[-1] if msg else ''}"[
                        :300
                    ],
                    flush=True,
                )


if __name__ == "__main__":
    main()
