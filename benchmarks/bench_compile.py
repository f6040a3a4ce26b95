"""What does ``torch.compile(model, backend="tensorbridge")`` buy on small models, next to torch
eager, inductor and torchax, for inference and for one training step?

Question: for three small models -- an MLP (784-512-512-10, ReLU), a transformer block
(embedding 1000x128, layer_norm, 4-head self-attention written with explicit matmuls, gelu
MLP 128-512-128, sequence length 32) and a small convnet (conv 3->16 3x3, batch_norm, relu,
max_pool, conv 16->32, relu, adaptive_avg_pool, linear; 3x32x32 images) -- at batch 1 and 32,
how long does one inference call (``torch.no_grad``, eval mode) and one training step
(forward + loss + backward + SGD step, train mode) take with tensorbridge's compiled plans?

Peers, measured in the same run on the same weights and inputs:
* torch eager (the baseline of every ratio);
* ``torch.compile`` default (inductor), compile time excluded;
* torchax's jitted path: ``torchax.extract_jax(model)`` run under ``jax.jit`` on JAX arrays
  (training: ``jax.value_and_grad`` of the loss + an SGD update, jitted as one function);
* "tb rebuild/call": the AOT ATen graph that the tensorbridge backend receives, captured once,
  with ``tensorbridge._compile.compile_graph(gm)`` (plan construction) redone at every call,
  next to "tb plan once" (the same graphs, plans built once, called directly without dynamo's
  guards and AOT's runtime wrappers; training: the forward and backward graphs on their
  captured inputs, without the SGD step). Ratio rebuild/once = what building the plan once buys.

Loss: cross-entropy for the MLP and the convnet, mean of squares of the output for the
transformer block (torchax computes the same torch loss through ``call_torch``). torch-side
training steps: ``opt.zero_grad(); loss.backward(); opt.step()``
with ``torch.optim.SGD(lr=0.01)``, the forward+loss compiled as one function for the compiled
paths; compile is ``dynamic=False`` (tensorbridge plans take static shapes). Ratios on
min-of-repeats: peer / tensorbridge compiled (> 1.00x: tensorbridge faster), rebuild / once.
The paths of one row are warmed up and calibrated separately, then timed in alternating
repeats. Compile times are shown separately (first call). Inductor compiles take tens of
seconds each on a cold cache: once ``TB_BENCH_INDUCTOR_BUDGET`` seconds (default 120, 60 with
--quick) are spent compiling, the remaining inductor cells are n/a (run again: inductor's
on-disk cache makes the compiles quick; its key includes the thread count).

Usage: python benchmarks/bench_compile.py [--quick] [--repeats N] [--threads N]
"""

from __future__ import annotations

import copy
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import tensorbridge as tb
from _bench_util import (
    NA,
    FallbackTracker,
    env_header,
    fmt_ratio,
    geomean,
    measure_interleaved,
    na_from_exc,
    parse_args,
    print_table,
    ratio,
)
from _torchax import import_torchax
from tensorbridge._compile import compile_graph

ARGS = parse_args(
    __doc__, full_repeats=25, quick_repeats=7, full_target_s=0.01, quick_target_s=0.005
)
BUDGET_S = 0.8 if ARGS.quick else 2.0  # per row: repeating stops after this (min 3 repeats)
INDUCTOR_BUDGET_S = float(os.environ.get("TB_BENCH_INDUCTOR_BUDGET", "60" if ARGS.quick else "120"))
LR = 0.01

for name in (
    "recompile_limit",
    "cache_size_limit",
    "accumulated_recompile_limit",
    "accumulated_cache_size_limit",
):
    if hasattr(torch._dynamo.config, name):
        setattr(torch._dynamo.config, name, 256)

TORCHAX, TX_ENV, TX_NOTE = import_torchax()
torch.backends.mha.set_fastpath_enabled(True)  # importing torchax turns it off; unused here anyway


# ---- models ------------------------------------------------------------------------------------


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)
        )

    def forward(self, x):
        return self.net(x)


class TransformerBlock(nn.Module):
    def __init__(self, vocab=1000, d=128, heads=4, ff=512):
        super().__init__()
        self.heads = heads
        self.emb = nn.Embedding(vocab, d)
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, ff)
        self.fc2 = nn.Linear(ff, d)

    def forward(self, tokens):
        x = self.emb(tokens)
        b, t, d = x.shape
        hd = d // self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, hd).transpose(1, 2) for z in (q, k, v))
        att = torch.softmax(q @ k.transpose(-2, -1) * hd**-0.5, dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.bn = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.conv1(x))), 2)
        x = F.adaptive_avg_pool2d(F.relu(self.conv2(x)), 1)
        return self.fc(x.flatten(1))


def loss_fn(out, y):
    return F.cross_entropy(out, y) if out.dim() == 2 else out.pow(2).mean()


MODELS = {
    "mlp": (MLP, lambda b, g: torch.randn(b, 784, generator=g)),
    "transformer": (TransformerBlock, lambda b, g: torch.randint(0, 1000, (b, 32), generator=g)),
    "convnet": (ConvNet, lambda b, g: torch.randn(b, 3, 32, 32, generator=g)),
}


class Config:
    """One row: a model (fresh weights, seed 0), a batch size, inference or training."""

    def __init__(self, name: str, batch: int, train: bool):
        self.name, self.batch, self.train = name, batch, train
        cls, make_x = MODELS[name]
        torch.manual_seed(0)
        self.model = cls().train(train)
        g = torch.Generator().manual_seed(1)
        self.x = make_x(batch, g)
        self.y = torch.randint(0, 10, (batch,), generator=g)
        self.compile_s: dict[str, float | NA] = {}
        self.outputs: dict[str, torch.Tensor] = {}
        self._capture = None

    @property
    def label(self) -> str:
        return f"{self.name} b{self.batch} {'train' if self.train else 'infer'}"

    def fresh_model(self):
        return copy.deepcopy(self.model)


# ---- one function per measured path: (config) -> the zero-argument callable to time -----------


def _torch_step(cfg: Config, model, fwd_loss):
    """One SGD training step around `fwd_loss(x, y)` (eager or compiled)."""
    opt = torch.optim.SGD(model.parameters(), lr=LR)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = fwd_loss(cfg.x, cfg.y)
        loss.backward()
        opt.step()
        return loss

    return step


def _infer(fn, x):
    def run():
        with torch.no_grad():
            return fn(x)

    return run


def torch_eager(cfg: Config):
    model = cfg.fresh_model()
    if cfg.train:
        return _torch_step(cfg, model, lambda x, y: loss_fn(model(x), y))
    run = _infer(model, cfg.x)
    cfg.outputs["eager"] = run()
    return run


def _torch_compiled(cfg: Config, backend: str, key: str):
    model = cfg.fresh_model()
    t0 = time.perf_counter()
    if cfg.train:
        compiled = torch.compile(lambda x, y: loss_fn(model(x), y), backend=backend, dynamic=False)
        fn = _torch_step(cfg, model, compiled)
        fn()
    else:
        compiled = torch.compile(model, backend=backend, dynamic=False)
        fn = _infer(compiled, cfg.x)
        cfg.outputs[key] = fn()
    cfg.compile_s[key] = time.perf_counter() - t0
    return fn


def tensorbridge_compiled(cfg: Config):
    before = tb.diagnostics.plan_metrics()["plan_calls"]
    fn = _torch_compiled(cfg, "tensorbridge", "tb")
    if tb.diagnostics.plan_metrics()["plan_calls"] == before:
        return NA("no tensorbridge plan ran: dynamo fell back to eager")
    return fn


_INDUCTOR_SPENT = [0.0]


def inductor(cfg: Config):
    if _INDUCTOR_SPENT[0] > INDUCTOR_BUDGET_S:
        return NA(
            f"skipped: inductor compile budget ({INDUCTOR_BUDGET_S:.0f} s) used up "
            f"({_INDUCTOR_SPENT[0]:.0f} s); rerun with a warm cache or TB_BENCH_INDUCTOR_BUDGET"
        )
    t0 = time.perf_counter()
    try:
        return _torch_compiled(cfg, "inductor", "inductor")
    finally:
        _INDUCTOR_SPENT[0] += time.perf_counter() - t0


def torchax_jit(cfg: Config):
    if TORCHAX is None:
        return NA(f"torchax unavailable: {TX_NOTE}")
    import jax
    import jax.numpy as jnp
    from torchax.interop import call_torch

    model = cfg.fresh_model()
    t0 = time.perf_counter()
    states, jax_fn = TORCHAX.extract_jax(model)
    xj, yj = jnp.asarray(cfg.x.numpy()), jnp.asarray(cfg.y.numpy())
    if not cfg.train:
        jf = jax.jit(lambda s, x: jax_fn(s, (x,)))

        def run():
            return jax.block_until_ready(jf(states, xj))

        cfg.outputs["torchax"] = torch.from_numpy(np.array(run()))
        cfg.compile_s["torchax"] = time.perf_counter() - t0
        return run

    names = {n for n, _ in model.named_parameters()}
    params = {k: v for k, v in states.items() if k in names}
    buffers = {k: v for k, v in states.items() if k not in names}

    def loss_j(p, b, x, y):
        return call_torch(loss_fn, jax_fn({**p, **b}, (x,)), y)

    @jax.jit
    def step(p, b, x, y):
        loss, grads = jax.value_and_grad(loss_j)(p, b, x, y)
        return loss, jax.tree.map(lambda w, g: w - LR * g, p, grads)

    state = {"p": params}

    def run():
        loss, state["p"] = step(state["p"], buffers, xj, yj)
        return jax.block_until_ready(loss)

    run()
    cfg.compile_s["torchax"] = time.perf_counter() - t0
    return run


def _capture(cfg: Config):
    """The AOT ATen graphs (forward; and backward when training) that the tensorbridge backend
    would receive, with the inputs of their first run: [(gm, args), ...]."""
    if cfg._capture is not None:
        return cfg._capture
    from torch._dynamo.backends.common import aot_autograd

    from tensorbridge._compile import _decompositions

    graphs: dict[str, list] = {}

    def keep(kind):
        def compiler(gm, example_inputs):
            plan = compile_graph(gm, example_inputs)  # also checks that a plan can be built

            def run(args):
                if kind not in graphs:
                    graphs[kind] = [gm, list(args)]
                return plan(args)

            run._boxed_call = True
            return run

        return compiler

    def backend(gm, example_inputs):
        return aot_autograd(
            fw_compiler=keep("fw"), bw_compiler=keep("bw"), decompositions=_decompositions()
        )(gm, example_inputs)

    model = cfg.fresh_model()
    if cfg.train:
        compiled = torch.compile(lambda x, y: loss_fn(model(x), y), backend=backend, dynamic=False)
        compiled(cfg.x, cfg.y).backward()
        kinds = ("fw", "bw")
    else:
        with torch.no_grad():
            torch.compile(model, backend=backend, dynamic=False)(cfg.x)
        kinds = ("fw",)
    missing = [k for k in kinds if k not in graphs]
    if missing:
        raise RuntimeError(f"capture saw no {'/'.join(missing)} graph")
    cfg._capture = [graphs[k] for k in kinds]
    return cfg._capture


def tb_plan_rebuilt_each_call(cfg: Config):
    graphs = _capture(cfg)

    def run():
        return [compile_graph(gm)(list(args)) for gm, args in graphs]

    return run


def tb_plan_built_once(cfg: Config):
    graphs = [(compile_graph(gm), args) for gm, args in _capture(cfg)]

    def run():
        return [plan(list(args)) for plan, args in graphs]

    return run


PATHS = [
    ("eager", torch_eager),
    ("tb", tensorbridge_compiled),
    ("inductor", inductor),
    ("torchax", torchax_jit),
    ("rebuild", tb_plan_rebuilt_each_call),
    ("once", tb_plan_built_once),
]


def _diff(cfg: Config, key: str) -> str:
    if cfg.train or key not in cfg.outputs or "eager" not in cfg.outputs:
        return "-"
    a, b = cfg.outputs[key], cfg.outputs["eager"]
    return f"{(a.double() - b.double()).abs().max().item():.0e}"


def _fmt_s(x) -> str:
    if isinstance(x, NA):
        return "n/a"
    return "-" if x is None else f"{x:.1f}"


def main() -> None:
    env_header(
        "bench_compile: torch.compile(backend='tensorbridge') vs eager, inductor, torchax",
        ARGS,
        torchax_note=TX_NOTE,
    )
    print(f"inductor compile budget: {INDUCTOR_BUDGET_S:.0f} s (TB_BENCH_INDUCTOR_BUDGET)")
    tracker = FallbackTracker()
    tb.diagnostics.reset_plan_metrics()
    configs = [
        Config(name, batch, train)
        for name in MODELS
        for train in (False, True)
        for batch in (1, 32)
    ]
    rows, ctimes = [], []
    cols = {"eager/tb": [], "inductor/tb": [], "torchax/tb": [], "rebuild/once": []}
    for cfg in configs:
        torch._dynamo.reset()
        paths = []
        for key, path in PATHS:
            paths.append((key, (lambda p=path, c=cfg: _guard(p, c))))
        with tracker.path(cfg.label):
            t = measure_interleaved(
                paths, repeats=ARGS.repeats, target_s=ARGS.target_s, budget_s=BUDGET_S
            )
        r = {
            "eager/tb": ratio(t["eager"], t["tb"]),
            "inductor/tb": ratio(t["inductor"], t["tb"]),
            "torchax/tb": ratio(t["torchax"], t["tb"]),
            "rebuild/once": ratio(t["rebuild"], t["once"]),
        }
        for k, v in r.items():
            cols[k].append(v)
        rows.append(
            [
                cfg.label,
                t["eager"],
                t["tb"],
                t["inductor"],
                t["torchax"],
                t["rebuild"],
                t["once"],
                *(r[k] for k in cols),
                tracker.fallbacks_of(cfg.label),
            ]
        )
        ctimes.append(
            [
                cfg.label,
                *(_fmt_s(cfg.compile_s.get(k)) for k in ("tb", "inductor", "torchax")),
                _diff(cfg, "tb"),
                _diff(cfg, "inductor"),
                _diff(cfg, "torchax"),
            ]
        )
        print(f"  measured {cfg.label}", file=sys.stderr, flush=True)
        cfg._capture = None  # free the captured inputs
    print_table(
        "time per call (inference) / per training step, min of repeats; ratios: peer / tb compiled "
        "(> 1.00x: tb faster), rebuild / once",
        [
            "config",
            "eager",
            "tb compiled",
            "inductor",
            "torchax jit",
            "tb rebuild/call",
            "tb plan once",
            *cols,
            "tb fallbacks",
        ],
        rows,
    )
    print(
        "geomean: "
        + ", ".join(
            f"{k} {fmt_ratio(geomean(v))} (n={sum(isinstance(x, float) for x in v)})"
            for k, v in cols.items()
        )
    )
    for mode in ("infer", "train"):
        sub = [v for v, row in zip(cols["eager/tb"], rows, strict=True) if row[0].endswith(mode)]
        print(f"  geomean eager/tb, {mode}: {fmt_ratio(geomean(sub))}")
    print_table(
        "compile time of the first call (s, excluded above) and inference max|out - eager|",
        ["config", "tb", "inductor", "torchax", "tb diff", "inductor diff", "torchax diff"],
        ctimes,
    )
    print(f"tb.diagnostics.plan_metrics(): {tb.diagnostics.plan_metrics()}")
    tracker.report()


def _guard(path, cfg):
    try:
        return path(cfg)
    except Exception as e:
        if os.environ.get("TB_BENCH_TRACEBACK"):
            import traceback

            traceback.print_exc()
        return na_from_exc(e)


if __name__ == "__main__":
    main()
