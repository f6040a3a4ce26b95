"""How fast do real torch models run from JAX through ``tb.call_torch`` / ``tb.functionalize``?

Question 1 (forward): inside ``jax.jit``, ``tb.call_torch(lambda t: model(t).last_hidden_state,
ids)`` runs a ``transformers`` model as one captured plan that an XLA FFI custom call runs on
XLA's buffers, its weights bound in place. How does one call compare with the same model in
torch eager (``torch.no_grad()``)?

Question 2 (training step): ``params, apply = tb.functionalize(model)`` and one
``jax.jit`` step of ``jax.value_and_grad`` of a mean-square loss of the last hidden state plus
an optax SGD-with-momentum update (a forward plan that saves activations, a backward plan).
How does it compare with the same step in torch eager (forward, ``backward()``,
``torch.optim.SGD(momentum=0.9).step()``)?

Question 3 (the issue's MLP goal): the optax Adam step of a functionalized torch MLP
(64-256-256-10, ReLU, batch 32, softmax cross-entropy) next to the same MLP written in pure
JAX, and next to torch eager with ``torch.optim.Adam``.

Models: BERT, GPT-2, LLaMA and ViT from ``transformers`` built by ``tensorbridge.zoo`` (small
random configs: hidden 64, 2 layers, 4 heads, MLP 128, vocabulary 100, eager attention, dropout
off; the base models of GPT-2 and LLaMA), batch 4 x 32 tokens (ViT: 4 images 3x32x32, patch
8). Baseline of each row group: torch eager, measured in the same run in alternating repeats;
ratio = path / torch eager on min-of-repeats (below 1.00x: faster than torch eager). The MLP
group's ratios are against pure JAX. ``max|err|`` compares the JAX path's output (forward) or
loss (step) with torch's. The FFI handler runs with ``tb.config.ffi_threads`` OpenMP threads
(default 1); torch eager with its intra-op threads (see the header; ``--threads N`` sets both).
The run ends with ``tb.diagnostics.call_torch_metrics()``: 0 host callbacks means every row ran on the FFI
path.

Usage: python benchmarks/bench_call_torch_models.py [--quick] [--repeats N] [--threads N]
"""

from __future__ import annotations

import sys

import numpy as np
import torch

import tensorbridge as tb
from _bench_util import (
    NA,
    env_header,
    fmt_median,
    measure_interleaved,
    parse_args,
    print_table,
    ratio,
)
from tensorbridge import zoo

ARGS = parse_args(
    __doc__, full_repeats=30, quick_repeats=8, full_target_s=0.05, quick_target_s=0.02
)
BUDGET_S = 2.0 if ARGS.quick else 6.0  # per group of peers: repeating stops after this

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402

MODELS = ("bert", "gpt2", "llama", "vit")
BATCH, SEQ = 4, 32
LR = 1e-3


# tensorbridge.zoo's builders at hidden 64, 4 heads, MLP 128, 2 layers, eager attention; the
# base models of the decoders (outputs with a last_hidden_state), no KV cache.
SIZE = dict(zoo._SIZES["tiny"], hidden=64, ffn=128)
BASE = {"gpt2": "GPT2Model", "llama": "LlamaModel"}


def make_model(name: str) -> torch.nn.Module:
    config = {"attn_implementation": "eager"}
    if name in BASE:
        config["use_cache"] = False
    return zoo.build(name, SIZE, config=config, cls=BASE.get(name))[0]


def make_input(name: str) -> np.ndarray:
    rng = np.random.default_rng(0)
    if name == "vit":
        return rng.standard_normal((BATCH, 3, 32, 32)).astype(np.float32)
    return rng.integers(0, 100, (BATCH, SEQ)).astype(np.int32)


def torch_input(x: np.ndarray) -> torch.Tensor:
    t = torch.from_numpy(x)
    return t.long() if t.dtype == torch.int32 else t


# ---- one function per measured path: each returns the zero-argument callable to time --------
# forward


def forward_torch_eager(name):
    model, x = make_model(name), torch_input(make_input(name))

    def run():
        with torch.no_grad():
            return model(x).last_hidden_state

    return run


def forward_tb_jit(name):
    model, x = make_model(name), jnp.asarray(make_input(name))
    f = jax.jit(lambda i: tb.call_torch(lambda t: model(t).last_hidden_state, i))
    return lambda: f(x).block_until_ready()


# training step


def _torch_loss(model, x):
    h = model(x).last_hidden_state
    return (h**2).mean()


def step_torch_eager(name):
    model, x = make_model(name), torch_input(make_input(name))
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)

    def run():
        opt.zero_grad(set_to_none=True)
        loss = _torch_loss(model, x)
        loss.backward()
        opt.step()
        return loss

    return run


def _jax_step(apply, tx):
    def loss(p, i):
        return jnp.mean(apply(p, i).last_hidden_state ** 2)

    @jax.jit
    def step(p, s, i):
        value, g = jax.value_and_grad(loss)(p, i)
        updates, s = tx.update(g, s, p)
        return optax.apply_updates(p, updates), s, value

    return step


def step_tb_functionalize(name):
    model, x = make_model(name), jnp.asarray(make_input(name))
    params, apply = tb.functionalize(model)
    tx = optax.sgd(LR, momentum=0.9)
    step = _jax_step(apply, tx)
    state = [params, tx.init(params)]

    def run():
        state[0], state[1], value = step(state[0], state[1], x)
        return value.block_until_ready()

    return run


# the MLP of the goal: 64-256-256-10, batch 32, Adam


MLP_X = np.random.default_rng(1).standard_normal((32, 64)).astype(np.float32)
MLP_Y = np.random.default_rng(2).integers(0, 10, 32).astype(np.int32)


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(64, 256),
        torch.nn.ReLU(),
        torch.nn.Linear(256, 256),
        torch.nn.ReLU(),
        torch.nn.Linear(256, 10),
    )


def _mlp_jax(p, x):
    h = jax.nn.relu(x @ p["0.weight"].T + p["0.bias"])
    h = jax.nn.relu(h @ p["2.weight"].T + p["2.bias"])
    return h @ p["4.weight"].T + p["4.bias"]


def _adam_step(forward):
    tx = optax.adam(LR)

    def loss(p, x, y):
        return optax.softmax_cross_entropy_with_integer_labels(forward(p, x), y).mean()

    @jax.jit
    def step(p, s, x, y):
        value, g = jax.value_and_grad(loss)(p, x, y)
        updates, s = tx.update(g, s, p)
        return optax.apply_updates(p, updates), s, value

    return tx, step


def _run_adam(params, forward):
    tx, step = _adam_step(forward)
    x, y = jnp.asarray(MLP_X), jnp.asarray(MLP_Y)
    state = [params, tx.init(params)]

    def run():
        state[0], state[1], value = step(state[0], state[1], x, y)
        return value.block_until_ready()

    return run


def mlp_pure_jax():
    params = {n: jnp.asarray(p.detach().numpy()) for n, p in _mlp().named_parameters()}
    return _run_adam(params, _mlp_jax)


def mlp_tb_functionalize():
    params, apply = tb.functionalize(_mlp())
    return _run_adam(params, apply)


def mlp_torch_eager():
    model = _mlp()
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    x, y = torch.from_numpy(MLP_X), torch.from_numpy(MLP_Y).long()

    def run():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return run


# ---- checks (fresh models: the timed ones have been trained) ------------------------------


def check_forward(name) -> str:
    try:
        got = np.asarray(forward_tb_jit(name)())
        want = forward_torch_eager(name)().numpy()
        return f"{np.abs(got - want).max():.1e}"
    except Exception as e:
        return f"error: {type(e).__name__}"


def check_step(name) -> str:
    try:
        got = float(step_tb_functionalize(name)())
        want = step_torch_eager(name)().item()
        return f"{abs(got - want):.1e}"
    except Exception as e:
        return f"error: {type(e).__name__}"


def check_mlp() -> str:
    try:
        return f"{abs(float(mlp_tb_functionalize()()) - float(mlp_pure_jax()())):.1e}"
    except Exception as e:
        return f"error: {type(e).__name__}"


def main() -> None:
    env_header("bench_call_torch_models: transformers models from JAX", ARGS)
    print(f"tb.config.ffi_threads={tb.config.ffi_threads}; models: batch {BATCH} x {SEQ} tokens")
    kw = dict(repeats=ARGS.repeats, target_s=ARGS.target_s, warmup=3, budget_s=BUDGET_S)

    def group(label, paths):
        t = measure_interleaved(paths, **kw)
        print(f"  measured {label}", file=sys.stderr, flush=True)
        return t

    rows = []
    for name in MODELS:
        for kind, torch_path, tb_path, check in (
            ("forward", forward_torch_eager, forward_tb_jit, check_forward),
            ("train step", step_torch_eager, step_tb_functionalize, check_step),
        ):
            labels = (
                ("torch eager", "tb.call_torch in jax.jit")
                if kind == "forward"
                else ("torch eager + SGD", "jit(value_and_grad) + optax")
            )
            times = group(
                f"{name} {kind}",
                [
                    (labels[0], lambda p=torch_path, n=name: p(n)),
                    (labels[1], lambda p=tb_path, n=name: p(n)),
                ],
            )
            base = times[labels[0]]
            for label in labels:
                t = times[label]
                err = check(name) if label == labels[1] and not isinstance(t, NA) else "-"
                rows.append([name, kind, label, t, fmt_median(t), ratio(t, base), err])
    print_table(
        "transformers models; ratio = path / torch eager of the same model and kind",
        ["model", "kind", "path", "min", "(median)", "vs torch eager", "max|err|"],
        rows,
        left=3,
    )

    mlp_paths = [
        ("pure JAX MLP + optax.adam", mlp_pure_jax),
        ("tb.functionalize(torch MLP) + optax.adam", mlp_tb_functionalize),
        ("torch eager + torch.optim.Adam", mlp_torch_eager),
    ]
    times = group("mlp", mlp_paths)
    base = times[mlp_paths[0][0]]
    rows = []
    for label, _ in mlp_paths:
        t = times[label]
        err = check_mlp() if label == mlp_paths[1][0] and not isinstance(t, NA) else "-"
        rows.append([label, t, fmt_median(t), ratio(t, base), err])
    print_table(
        "MLP 64-256-256-10, batch 32, one Adam training step; ratio = path / pure JAX",
        ["path", "min", "(median)", "vs pure JAX", "loss |err|"],
        rows,
    )
    m = tb.diagnostics.call_torch_metrics()
    print(
        f"call_torch paths: {m['ffi_plans']} plans captured, {m['ffi_runs']} FFI handler runs, "
        f"{m['callback_runs']} host callback runs {m['callback_reasons'] or ''}"
    )


if __name__ == "__main__":
    main()
