"""Architecture sweep: do ``transformers`` architectures beyond the model zoo run through
tensorbridge, and as accurately as torch itself?

Question: for each architecture below, built from a tiny random config (no downloads; batch 2,
8 tokens or 32-128 pixel images), do inference and one training step (loss: the mean square of
the first output) run compiled (``torch.compile(backend="tensorbridge")``) or eagerly on
wrapped parameters (``--mode eager``), and how far are the output and the gradients from the
same model in float64? Baseline: torch eager in float32, measured the same way, so a row shows
tensorbridge's error beside torch's own (``tb`` against ``torch``). Gradients are compared the
field's way: the largest difference over the largest gradient of the model; a parameter that
gets no gradient in one run and a zero gradient in the other counts as equal (AOT autograd
gives zeros where eager gives ``None``). Where float64 has no kernel (grouped matmuls of
mixture-of-experts models), torch's float32 result is the reference and torch's error is
printed as 0.

    python benchmarks/arch_sweep.py [--mode compiled|eager] [ARCH ...]

Prints one line per architecture: ``inf`` and ``train`` errors, ``CHECK`` where tensorbridge's
error exceeds ten times torch's (plus 1e-5), ``FAIL`` with the exception where it raised. Some
configs are ill-conditioned in training (batch norm over very few values): torch's own float32
error is then large too, which the ``torch`` column shows.
"""

from __future__ import annotations

import argparse
import copy
import sys

import torch

import tensorbridge as tb

# Sizes set on every config that has the attribute.
SHRINK = dict(
    hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
    num_key_value_heads=2, vocab_size=128, max_position_embeddings=64, image_size=32,
    d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
    decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, n_embd=32, n_layer=2,
    n_head=2, n_positions=64, num_layers=2, num_heads=2, d_ff=64, ffn_dim=64, head_dim=16,
    num_experts=4, num_local_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
    shared_expert_intermediate_size=32, hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0, dropout=0.0, attention_dropout=0.0, hidden_dropout=0.0,
    drop_path_rate=0.0, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, classifier_dropout=0.0,
)  # fmt: skip
# Vision architectures (pixel inputs) and the sizes of their own.
VISION = {
    "efficientnet": dict(hidden_dim=320, width_coefficient=0.25, depth_coefficient=0.2,
                         image_size=128),
    "mobilenet_v1": dict(depth_multiplier=0.25, image_size=128),
    "mobilevit": dict(hidden_sizes=[32, 32, 32], neck_hidden_sizes=[8, 8, 16, 16, 24, 24, 32],
                      image_size=64),
    "mobilevitv2": dict(width_multiplier=0.25, image_size=128),
    "regnet": dict(hidden_sizes=[16, 32, 32, 32], depths=[1, 1, 1, 1], embedding_size=16,
                   groups_width=8),
    "bit": dict(hidden_sizes=[16, 16, 32, 32], depths=[1, 1, 1, 1], embedding_size=16,
                num_groups=4),
    "levit": dict(hidden_sizes=[32, 48, 64], num_attention_heads=[1, 2, 2], depths=[1, 1, 1],
                  key_dim=[8, 8, 8], image_size=64),
    "poolformer": dict(hidden_sizes=[16, 16, 32, 32], depths=[1, 1, 1, 1]),
    "focalnet": dict(embed_dim=16, depths=[1, 1, 1, 1]),
    "glpn": dict(hidden_sizes=[16, 16, 32, 32], depths=[1, 1, 1, 1],
                 num_attention_heads=[1, 1, 2, 2], decoder_hidden_size=16),
    "pvt": dict(hidden_sizes=[16, 32, 32, 32], depths=[1, 1, 1, 1],
                num_attention_heads=[1, 1, 2, 2]),
    "swinv2": dict(embed_dim=16, depths=[1, 1], num_heads=[1, 2], window_size=4, patch_size=2),
    "hiera": dict(embed_dim=16, num_heads=[1, 1, 2, 2], depths=[1, 1, 1, 1],
                  image_size=[64, 64], patch_stride=[4, 4], patch_size=[7, 7], mlp_ratio=2.0),
    "dinov2": dict(patch_size=8),
    "beit": dict(patch_size=8),
    "vit_msn": dict(patch_size=8),
}  # fmt: skip
# Text architectures (token inputs).
TEXT = [
    "mixtral", "qwen2_moe", "mamba", "deberta-v2", "mpnet", "ernie", "layoutlm", "nystromformer",
    "rembert", "megatron-bert", "bloom", "falcon", "gpt_bigcode", "stablelm", "starcoder2",
    "olmo", "olmo2", "biogpt", "persimmon", "qwen3", "granite", "cohere",
]  # fmt: skip


def build(arch: str):
    """(model, inputs) of ``arch`` from a tiny random config."""
    import transformers

    cfg = transformers.AutoConfig.for_model(arch)
    own = VISION.get(arch, {})
    for k, v in {**SHRINK, **own}.items():
        if k == "hidden_size" and hasattr(cfg, "hidden_sizes"):
            continue  # staged vision models size their stages by hidden_sizes
        if hasattr(cfg, k) or k in own:
            try:
                setattr(cfg, k, v)
            except Exception:  # a field of another type in this config (validated)
                continue
    model = transformers.AutoModel.from_config(cfg).float()
    if arch in VISION:
        s = getattr(cfg, "image_size", 32)
        s = s if isinstance(s, int) else s[0]
        return model, {"pixel_values": torch.randn(2, 3, s, s)}
    return model, {"input_ids": torch.randint(0, 100, (2, 8))}


def _first(out):
    if isinstance(out, torch.Tensor):
        return out
    if getattr(out, "last_hidden_state", None) is not None:
        return out.last_hidden_state
    return out[0]


def _plain(t):
    return t if type(t) is torch.Tensor else torch.from_dlpack(t)


def run(model, inputs, train: bool, how: str | None):
    """(output, {parameter: gradient} or None) in float64, of one call: ``how`` None (torch
    eager), "compiled" or "eager" (tensorbridge)."""
    torch._dynamo.reset()
    m = copy.deepcopy(model)
    m.train(train)
    f = m
    if how == "compiled":
        f = torch.compile(m, backend="tensorbridge")
    elif how == "eager":
        tb.wrap_module(m)
        inputs = {k: tb.wrap(v) for k, v in inputs.items()}
    torch.manual_seed(1)
    if not train:
        with torch.no_grad():
            return _plain(_first(f(**inputs)).double()), None
    out = _first(f(**inputs))
    out.double().square().mean().backward()
    grads = {k: _plain(p.grad).double() for k, p in m.named_parameters() if p.grad is not None}
    return _plain(out.detach()).double(), grads


def error(got, want) -> float:
    """Largest output difference over the largest output; with gradients, also the largest
    gradient difference over the largest gradient."""
    err = float((got[0] - want[0]).abs().max() / (want[0].abs().max() + 1e-30))
    if want[1] is None:
        return err
    scale = max(float(g.abs().max()) for g in want[1].values())
    for k in set(got[1]) | set(want[1]):
        a, b = got[1].get(k), want[1].get(k)
        a = torch.zeros_like(b) if a is None else a
        b = torch.zeros_like(a) if b is None else b
        err = max(err, float((a - b).abs().max()) / scale)
    return err


def check(arch: str, how: str) -> str:
    torch.manual_seed(0)
    try:
        model, inputs = build(arch)
    except Exception as e:  # a config this sweep cannot shrink
        return f"{arch:14s} set-up failed: {type(e).__name__}: {str(e)[:100]}"
    cells = []
    for train in (False, True):
        name = "train" if train else "inf"
        wide = {k: v.double() if v.is_floating_point() else v for k, v in inputs.items()}
        try:
            want = run(model.double(), wide, train, None)
            model.float()
            torch_err = error(run(model, inputs, train, None), want)
        except RuntimeError:  # no float64 kernel: torch's float32 result is the reference
            model.float()
            want, torch_err = run(model, inputs, train, None), 0.0
        try:
            err = error(run(model, inputs, train, how), want)
        except Exception as e:
            lines = [x for x in str(e).splitlines() if x.strip()]
            cells.append(f"{name} FAIL {type(e).__name__}: {(lines[0] if lines else '')[:100]}")
            continue
        flag = "  CHECK" if not err <= 10 * torch_err + 1e-5 else ""
        cells.append(f"{name} tb {err:.1e} torch {torch_err:.1e}{flag}")
    return f"{arch:14s} " + " | ".join(cells)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--mode", choices=["compiled", "eager"], default="compiled")
    p.add_argument("archs", nargs="*", default=[*VISION, *TEXT])
    ns = p.parse_args(argv)
    torch.set_num_threads(1)
    torch._dynamo.config.cache_size_limit = 64
    for arch in ns.archs:
        print(check(arch, ns.mode), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
