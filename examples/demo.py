"""tensorbridge demo: what a user can do today, each step checked against PyTorch.

1. Wrap numpy and torch memory into tensorbridge's C++ tensor without copying (data
   pointers printed), and run ATen ops from the C++ table on it by name.
2. Run ordinary PyTorch code on numpy arrays: a model whose parameters are numpy memory,
   trained with torch.optim; the numpy arrays change in place; a torch.save checkpoint of
   it loaded (weights_only=True) into a new wrapped model.
3. torch.compile(model, backend="tensorbridge"): the captured graph becomes a C++ plan,
   built once, run on the wrapped arrays; new batch sizes get plans of their own.
4. A real model from transformers (LLaMA, small random config): eager on weights tensorbridge
   wraps, a compiled training step, and greedy generation with a KV cache, eager and compiled,
   all against torch; the compiled step again in two new processes, the second of which
   loads the graphs from the compile cache instead of tracing them.
5. call_torch: a torch function called from JAX, under jax.jit and jax.grad.
6. A transformers model (BERT, small random config) from JAX: its forward inside jax.jit,
   and a jax.jit(jax.value_and_grad(...)) step over its parameters, against torch autograd.
7. Two processes (torch.distributed, gloo over loopback): an all_reduce whose sum lands in a
   numpy array, and DistributedDataParallel training of wrapped parameters, against one
   plain-torch process over the whole batch.
8. How every op was served: kernel, composite, decomposition or PyTorch fallback.
"""

import copy
import datetime
import io
import json
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import torch

import tensorbridge as tb

warnings.filterwarnings("ignore")


def step1_wrap_and_call() -> None:
    print("-- 1. zero-copy wrapping and ops by ATen name")
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = torch.linspace(-1, 1, 6).reshape(3, 2)
    xa, xt = tb.from_dlpack(a), tb.from_dlpack(t)
    print(f"   numpy data {a.ctypes.data:#x} -> Array {xa.data_ptr:#x}   {xa}")
    print(f"   torch data {t.data_ptr():#x} -> Array {xt.data_ptr:#x}   {xt}")
    assert xa.data_ptr == a.ctypes.data and xt.data_ptr == t.data_ptr()
    mm = tb.call("aten::mm", xa, xt)
    np.testing.assert_allclose(mm.numpy(), a @ t.numpy(), rtol=1e-6)
    g = tb.call("aten::gelu", xt, approximate="tanh")
    torch.testing.assert_close(
        torch.from_dlpack(g), torch.nn.functional.gelu(t, approximate="tanh")
    )
    print("   aten::mm(numpy, torch) =", mm.numpy().round(3).tolist())
    print("   schema:", tb.schema("aten::gelu"))
    # A tensorbridge.Tensor's torch storage is the numpy memory itself: torch's own C++ code
    # (DLPack export, indices read by tensor_split) sees the numpy values, without a copy.
    w = tb.wrap(a)
    back = torch.from_dlpack(torch.utils.dlpack.to_dlpack(w.t())).numpy()
    assert back.ctypes.data == a.ctypes.data and np.array_equal(back, a.T)
    parts = torch.tensor_split(w.reshape(6), tb.wrap(np.array([1, 4])))
    print(
        f"   torch.utils.dlpack.to_dlpack(wrapped numpy).data == numpy's: "
        f"{back.ctypes.data == a.ctypes.data}; tensor_split by wrapped indices: "
        f"{[p.tolist() for p in parts]}"
    )


def step2_train_on_numpy() -> None:
    print("-- 2. training a torch model whose weights are numpy arrays")
    rng = np.random.default_rng(0)
    w1 = (rng.standard_normal((32, 8)) * 0.3).astype(np.float32)
    b1 = np.zeros(32, np.float32)
    w2 = (rng.standard_normal((3, 32)) * 0.3).astype(np.float32)
    b2 = np.zeros(3, np.float32)
    layers = [torch.nn.Linear(8, 32), torch.nn.Linear(32, 3)]
    ref_layers = [torch.nn.Linear(8, 32), torch.nn.Linear(32, 3)]
    model = torch.nn.Sequential(layers[0], torch.nn.GELU(), layers[1])
    ref = torch.nn.Sequential(ref_layers[0], torch.nn.GELU(), ref_layers[1])
    with torch.no_grad():
        for layer, ref_layer, w, b in zip(layers, ref_layers, (w1, w2), (b1, b2), strict=True):
            ref_layer.weight.copy_(torch.from_numpy(w))
            ref_layer.bias.copy_(torch.from_numpy(b))
            layer.weight = torch.nn.Parameter(tb.wrap(w))  # numpy memory, no copy
            layer.bias = torch.nn.Parameter(tb.wrap(b))
    x = rng.standard_normal((16, 8)).astype(np.float32)
    y = rng.integers(0, 3, 16)
    before = w1.copy()
    for m in (model, ref):
        opt = torch.optim.Adam(m.parameters(), lr=1e-2)
        inp = tb.wrap(x) if m is model else torch.from_numpy(x)
        for _ in range(10):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(m(inp), torch.from_numpy(y))
            loss.backward()
            opt.step()
        print(
            f"   {'tensorbridge' if m is model else 'plain torch '} loss after 10 Adam steps: {float(loss):.6f}"
        )
    torch.testing.assert_close(
        torch.from_numpy(w1), ref_layers[0].weight.detach(), rtol=1e-5, atol=1e-5
    )
    print(
        f"   numpy weights updated in place: max change {np.abs(w1 - before).max():.4f}, "
        f"same memory: {tb.to_torch(layers[0].weight).data_ptr() == w1.ctypes.data}"
    )
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)  # by value: the numpy weights' bytes
    buf.seek(0)
    resumed = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.GELU(), torch.nn.Linear(32, 3))
    tb.wrap_module(resumed)
    resumed.load_state_dict(torch.load(buf, weights_only=True))
    assert torch.equal(tb.to_torch(resumed(tb.wrap(x))), tb.to_torch(model(tb.wrap(x))))
    print("   checkpoint: torch.save, then torch.load(weights_only=True) into a new wrapped model")


def step3_compile() -> None:
    print("-- 3. torch.compile(backend='tensorbridge'): one C++ plan per graph")
    tb.diagnostics.reset_plan_metrics()
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)
    ).eval()
    compiled = torch.compile(model, backend="tensorbridge")
    x = torch.randn(8, 16)
    with torch.no_grad():
        for _ in range(20):
            out = compiled(x)
        torch.testing.assert_close(out, model(x), rtol=1e-4, atol=1e-5)
    print("  ", tb.diagnostics.plan_metrics())
    print("   " + tb._compile.state.plans[-1].dump().replace("\n", "\n   "))
    with torch.no_grad(), tb.diagnostics.profile(compiled) as prof:
        for _ in range(50):
            compiled(x)
    print("   where the plan's time goes (tb.diagnostics.profile):")
    print("   " + prof.table(top=4).replace("\n", "\n   "))
    print(
        "   buffers reused from tensorbridge's cache:", tb.diagnostics.memory_stats()["cache_hits"]
    )
    # New batch sizes: torch.compile retraces once with a symbolic batch size; each size then
    # gets a static plan of its own, built at its first call and reused after.
    with torch.no_grad():
        for n in (3, 5, 3, 5, 8):
            xn = torch.randn(n, 16)
            torch.testing.assert_close(compiled(xn), model(xn), rtol=1e-4, atol=1e-5)
    m = tb.diagnostics.plan_metrics(compiled)
    print(
        f"   batch sizes 8, 3, 5: {m['compilations']} compilations, {m['plans_built']} plans "
        f"({m['shape_plans']} for the symbolic graph's sizes), {m['plan_calls']} plan calls"
    )


def step4_transformers_model() -> None:
    print("-- 4. a transformers model (LLaMA: grouped-query attention, rotary embeddings)")
    try:
        from tensorbridge import zoo
    except ImportError:
        print("   (transformers not installed)")
        return
    for mode, what in (
        ("eager", "eager on wrapped weights"),
        ("train", "compiled training step (loss and every gradient)"),
        ("generate", "greedy generation, 8 tokens, eager and compiled"),
    ):
        torch._dynamo.reset()
        r = zoo.check("llama", mode)
        assert r.ok, (mode, r.max_error)
        print(
            f"   {what}: max difference from torch {r.max_error:.1e}, "
            f"ops on torch's fallback: {sum(r.fallbacks.values())}"
            + (f"; {r.detail}" if r.detail else "")
        )
    _compile_cache_in_new_processes()


_FRESH_PROCESS = """
import json, time, torch, tensorbridge as tb
from tensorbridge import zoo
model, inputs = zoo.build("llama", "small")
model.train()
fn = torch.compile(model, backend="tensorbridge")
t = time.perf_counter()
zoo.loss_of(fn(**inputs)).backward()
m = tb.diagnostics.plan_metrics()
print(json.dumps([time.perf_counter() - t, m["cache_saves"], m["cache_hits"]]))
"""


def _compile_cache_in_new_processes() -> None:
    # Each process compiles LLaMA's training step; the cache directory is a fresh one, so the
    # first process traces and stores the graphs and the second loads them.
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=d)
        for which in ("first", "second"):
            out = subprocess.run(
                [sys.executable, "-c", _FRESH_PROCESS],
                env=env,
                capture_output=True,
                text=True,
                check=True,
                timeout=600,
            ).stdout
            seconds, saves, hits = json.loads(out.strip().splitlines()[-1])
            print(
                f"   {which} new process: first training step (compile included) {seconds:.1f} s, "
                f"graphs stored in the compile cache {saves}, loaded from it {hits}"
            )


def step5_call_torch_from_jax() -> None:
    print("-- 5. a torch function inside jax.jit and jax.grad")
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        print("   (JAX not installed)")
        return

    def torch_fn(x, w):
        return torch.tanh(x @ w).sum(-1)

    x = jnp.asarray(np.random.default_rng(1).standard_normal((4, 5)).astype(np.float32))
    w = jnp.asarray(np.random.default_rng(2).standard_normal((5, 3)).astype(np.float32))
    out = jax.jit(lambda x, w: tb.call_torch(torch_fn, x, w))(x, w)
    np.testing.assert_allclose(out, jnp.tanh(x @ w).sum(-1), rtol=1e-5)
    g = jax.grad(lambda w: tb.call_torch(torch_fn, x, w).sum())(w)
    g_ref = jax.grad(lambda w: jnp.tanh(x @ w).sum())(w)
    np.testing.assert_allclose(g, g_ref, rtol=1e-4, atol=1e-5)
    print("   jit result", np.asarray(out).round(4).tolist(), "| grad matches JAX's own")
    m = tb.diagnostics.call_torch_metrics()
    print(f"   paths: {m['ffi_runs']} XLA FFI plan runs, {m['callback_runs']} host callbacks")


def step6_transformers_model_from_jax() -> None:
    print("-- 6. a transformers model under jax.jit and jax.grad")
    try:
        import jax
        import jax.numpy as jnp
        import transformers
    except ImportError:
        print("   (JAX or transformers not installed)")
        return
    torch.manual_seed(0)
    config = transformers.BertConfig(
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        vocab_size=100,
        max_position_embeddings=64,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        attn_implementation="eager",
    )
    model = transformers.BertModel(config).eval()
    ids = np.random.default_rng(3).integers(0, 100, (2, 16)).astype(np.int32)
    # The model inside jax.jit: captured once into a plan (its weights bound in place).
    out = jax.jit(lambda i: tb.call_torch(model, i))(jnp.asarray(ids))
    with torch.no_grad():
        want = model(torch.from_numpy(ids).long())
    torch.testing.assert_close(torch.from_numpy(np.array(out.last_hidden_state)), want[0])
    print(f"   jit: {type(out).__name__} of JAX arrays, keys {list(out.keys())}")
    # Its trainable parameters as a JAX pytree; buffers (position_ids, ...) stay in the module.
    params, apply = tb.functionalize(model)

    def loss(p, i):
        out = apply(p, i)
        return jnp.mean(out.last_hidden_state**2) + jnp.mean(out.pooler_output)

    value, grads = jax.jit(jax.value_and_grad(loss))(params, jnp.asarray(ids))
    want = model(torch.from_numpy(ids).long())
    ((want.last_hidden_state**2).mean() + want.pooler_output.mean()).backward()
    scale = max(float(p.grad.abs().max()) for p in model.parameters())
    err = max(
        float(np.abs(np.asarray(grads[n]) - p.grad.numpy()).max())
        for n, p in model.named_parameters()
    )
    assert err <= 1e-4 * scale, err
    print(
        f"   jit(value_and_grad): loss {float(value):.6f}, {len(grads)} parameter gradients, "
        f"largest difference from torch autograd {err / scale:.1e} of the largest gradient"
    )
    m = tb.diagnostics.call_torch_metrics()
    print(f"   paths: {m['ffi_runs']} XLA FFI plan runs, {m['callback_runs']} host callbacks")


def _ddp_rank(rank: int, init_file: str, results) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo",
        init_method=f"file://{init_file}",
        rank=rank,
        world_size=2,
        timeout=datetime.timedelta(seconds=60),
    )
    grads = np.full(4, rank + 1.0, np.float32)
    address = grads.ctypes.data
    dist.all_reduce(tb.wrap(grads))  # the sum is written into this numpy array
    torch.manual_seed(0)
    plain = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    model = DDP(tb.wrap_module(copy.deepcopy(plain)))
    x = torch.randn(16, 8, generator=torch.Generator().manual_seed(1))
    y = torch.randn(16, 1, generator=torch.Generator().manual_seed(2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(plain.parameters(), lr=0.1)
    half = slice(8 * rank, 8 * rank + 8)  # each rank trains on its half of the batch
    for _ in range(3):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(tb.wrap(x[half])), tb.wrap(y[half])).backward()
        opt.step()
        ref_opt.zero_grad()  # the reference: one process, plain torch, the whole batch
        torch.nn.functional.mse_loss(plain(x), y).backward()
        ref_opt.step()
    err = max(
        float((tb.to_torch(p.detach()) - q.detach()).abs().max())
        for p, q in zip(model.module.parameters(), plain.parameters(), strict=True)
    )
    results.put((rank, grads.tolist(), grads.ctypes.data == address, err))
    dist.destroy_process_group()


def step7_two_processes() -> None:
    print("-- 7. two processes: torch.distributed collectives and DDP on wrapped memory")
    import torch.distributed as dist
    import torch.multiprocessing as mp

    if not dist.is_available():
        print("   (torch.distributed is not built)")
        return
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    with tempfile.TemporaryDirectory() as d:
        init_file = os.path.join(d, "rendezvous")
        procs = [ctx.Process(target=_ddp_rank, args=(r, init_file, results)) for r in range(2)]
        for p in procs:
            p.start()
        out = sorted(results.get(timeout=120) for _ in procs)
        for p in procs:
            p.join(timeout=60)
    for rank, summed, same_memory, err in out:
        assert summed == [3.0] * 4 and same_memory, (summed, same_memory)
        assert err <= 1e-5, err
        print(
            f"   rank {rank}: all_reduce wrote {summed[0]:.0f} (= 1 + 2) into its numpy array in "
            f"place; DDP, 3 steps on half the batch each: largest difference from one plain "
            f"torch process over the whole batch {err:.1e}"
        )


def main() -> None:
    print(f"tensorbridge {tb.__version__}, oneDNN {tb.diagnostics.onednn_info()}\n")
    tb.diagnostics.reset_metrics()
    step1_wrap_and_call()
    step2_train_on_numpy()
    step3_compile()
    step4_transformers_model()
    step5_call_torch_from_jax()
    step6_transformers_model_from_jax()
    step7_two_processes()
    print("-- 8. how each op was served (top 15 by calls)")
    print("   " + "\n   ".join(tb.diagnostics.metrics_report().splitlines()[:16]))
    m = tb.diagnostics.metrics()
    total = {
        k: sum(v[k] for v in m.values())
        for k in ("kernel", "composite", "decomposition", "fallback")
    }
    print(f"   totals: {total}")
    print("\nAll results checked against numpy / torch / JAX.")


if __name__ == "__main__":
    main()
