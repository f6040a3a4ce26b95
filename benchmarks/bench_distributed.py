"""How fast is data-parallel training on tensorbridge.Tensor parameters, next to the same
training on plain torch tensors, and how does it scale from 1 to 2 processes?

Measured in one run, on this machine's CPU, with gloo over loopback:

* DDP (``DistributedDataParallel``, default buckets) and FSDP2 (``fully_shard`` on each block,
  then the root) training steps -- forward, MSE loss, backward with the collectives, SGD step --
  of an MLP (4 x Linear 512, GELU, 64 rows per process) and of ``tensorbridge.zoo``'s LLaMA at
  size "small" (hidden 128, 2 layers, 2 x 32 tokens per process);
* ``ddpc``: DDP over a compiled model, ``DDP(torch.compile(model, backend=...))`` (dynamo splits
  the graph at bucket boundaries): tensorbridge's backend on wrapped parameters beside inductor
  on plain ones, both compiled once in the warm-up;
* each with the parameters wrapped in place (``tb.wrap_module``) and inputs wrapped
  (``tb.wrap``), and with plain torch tensors: the baseline;
* at 1 and at 2 processes (weak scaling: the batch per process is fixed, so 2 processes do
  twice the work per step).

Timing: each process runs ``--threads`` intra-op threads (default 1, one core per process).
After warm-up steps, the two paths of a row run alternately, ``--repeats`` times ``--steps``
steps each, with a barrier before each repeat; a repeat's time is the slowest process's, and
the table gives the minimum per step over repeats (the median beside it shows the noise).
``plain/tb`` is plain time / wrapped time (> 1.00x: tensorbridge faster). ``2p/1p`` is the
throughput (rows per second over all processes) at 2 processes over that at 1. The machine's
load average is printed before and after: other work on its cores slows every column, and
the scaling column most.

Run: ``python benchmarks/bench_distributed.py [--quick] [--repeats N] [--steps N]``.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import tensorbridge as tb

CONFIGS = ["ddp-mlp", "ddp-llama", "ddpc-mlp", "ddpc-llama", "fsdp-mlp", "fsdp-llama"]


def _model(kind):
    torch.manual_seed(0)
    if kind == "mlp":
        layers = []
        for _ in range(4):
            layers += [torch.nn.Linear(512, 512), torch.nn.GELU()]
        return torch.nn.Sequential(*layers)
    from tensorbridge import zoo

    model, _ = zoo.build("llama", "small")
    return model.train()


def _batch(kind, rank):
    gen = torch.Generator().manual_seed(rank)
    if kind == "mlp":
        return torch.randn(64, 512, generator=gen), torch.randn(64, 512, generator=gen), 64
    ids = torch.randint(0, 100, (2, 32), generator=gen)
    return ids, torch.randn(2, 32, 100, generator=gen), 2


def _setup(config, wrap, rank):
    from torch.distributed.fsdp import fully_shard
    from torch.nn.parallel import DistributedDataParallel as DDP

    engine, kind = config.split("-")
    model = _model(kind)
    if wrap:
        tb.wrap_module(model)
    if engine == "ddp":
        run = DDP(model)
    elif engine == "ddpc":
        run = DDP(torch.compile(model, backend="tensorbridge" if wrap else "inductor"))
    else:
        blocks = list(model) if kind == "mlp" else list(model.model.layers)
        for b in blocks:
            if any(True for _ in b.parameters()):
                fully_shard(b)
        run = fully_shard(model)
    x, y, rows = _batch(kind, rank)
    if wrap:
        x, y = tb.wrap(x), tb.wrap(y)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    def step():
        out = run(x) if kind == "mlp" else run(input_ids=x).logits
        ((out - y) ** 2).mean().backward()
        opt.step()
        opt.zero_grad()

    return step, rows


def _time(step, steps):
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    t = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slowest process sets the pace
    return float(t) / steps


def _worker(rank, world, init_file, args, results):
    dist.init_process_group(
        "gloo",
        init_method=f"file://{init_file}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=120),
    )
    torch.set_num_threads(args.threads)
    out = {}
    for config in args.configs:
        try:
            paths = {"plain": _setup(config, False, rank), "tb": _setup(config, True, rank)}
            for step, _ in paths.values():
                for _ in range(args.warmup):
                    step()
            times = {k: [] for k in paths}
            for _ in range(args.repeats):
                for k, (step, _) in paths.items():
                    times[k].append(_time(step, args.steps))
            rows = paths["tb"][1] * world
            out[config] = {k: (min(v), statistics.median(v), rows) for k, v in times.items()}
        except Exception as e:  # one failing row does not stop the others
            out[config] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    if rank == 0:
        results.put(out)
    dist.destroy_process_group()


def _run(world, args):
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    with tempfile.TemporaryDirectory() as d:
        init_file = os.path.join(d, "rendezvous")
        procs = [
            ctx.Process(target=_worker, args=(r, world, init_file, args, results))
            for r in range(world)
        ]
        for p in procs:
            p.start()
        try:
            return results.get(timeout=args.timeout)
        finally:
            for p in procs:
                p.join(timeout=30)
                if p.is_alive():
                    p.kill()


def _ms(s):
    return f"{s * 1e3:.1f} ms"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer, shorter repeats")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads per process")
    ap.add_argument("--configs", nargs="*", default=CONFIGS, choices=CONFIGS)
    ap.add_argument("--timeout", type=float, default=900, help="seconds per process count")
    args = ap.parse_args(argv)
    args.repeats = args.repeats or (3 if args.quick else 7)
    args.steps = args.steps or (2 if args.quick else 5)
    args.warmup = 1 if args.quick else 2

    print("# bench_distributed: DDP and FSDP2 steps, tensorbridge.Tensor vs plain torch")
    print(
        f"python {sys.version.split()[0]}, torch {torch.__version__}, {os.cpu_count()} logical "
        f"CPUs, {args.threads} thread(s) per process, gloo over loopback; "
        f"{args.repeats} repeats x {args.steps} steps"
    )
    load0 = os.getloadavg()
    runs = {w: _run(w, args) for w in (1, 2)}
    load1 = os.getloadavg()
    print(
        "load average (1, 5, 15 min) before: {:.2f} {:.2f} {:.2f}, after: {:.2f} {:.2f} {:.2f}".format(
            *load0, *load1
        )
    )
    print()
    header = (
        f"{'config':<11} {'procs':>5} {'plain step':>11} {'(median)':>10} {'tb step':>10} "
        f"{'(median)':>10} {'plain/tb':>9} {'2p/1p plain':>12} {'2p/1p tb':>9}"
    )
    print(header)
    print("-" * len(header))
    for config in args.configs:
        for world in (1, 2):
            r = runs[world].get(config)
            if isinstance(r, str) or r is None:
                print(f"{config:<11} {world:>5} n/a ({r})")
                continue
            (pmin, pmed, rows), (tmin, tmed, _) = r["plain"], r["tb"]
            scale = {"plain": "", "tb": ""}
            one = runs[1].get(config)
            if world == 2 and isinstance(one, dict):
                for k in scale:
                    scale[k] = f"{(rows / r[k][0]) / (one[k][2] / one[k][0]):.2f}x"
            print(
                f"{config:<11} {world:>5} {_ms(pmin):>11} {_ms(pmed):>10} {_ms(tmin):>10} "
                f"{_ms(tmed):>10} {pmin / tmin:>8.2f}x {scale['plain']:>12} {scale['tb']:>9}"
            )


if __name__ == "__main__":
    main()
