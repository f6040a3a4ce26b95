"""torch.distributed on tensorbridge.Tensor, with 2 real processes on this machine.

Two worker processes are spawned once per module (gloo, a ``file://`` rendezvous in a temporary
directory, 30 s collective timeouts) and run one scenario per test; a scenario that does not
answer in time fails its test, the workers are killed and the next test starts new ones. Each
scenario asserts on every rank; trained parameters come back to the parent, which compares
them with plain torch's run and with one process over the concatenated batch.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import queue
import tempfile
import traceback

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import tensorbridge as tb

WORLD = 2
pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not built")


# ---- the harness ------------------------------------------------------------------------------


def _serve(rank, init_file, tasks, results):
    dist.init_process_group(
        "gloo",
        init_method=f"file://{init_file}",
        rank=rank,
        world_size=WORLD,
        timeout=datetime.timedelta(seconds=30),
    )
    torch.set_num_threads(1)
    while True:
        name = tasks.get()
        if name is None:
            break
        try:
            results.put((rank, "ok", globals()[name](rank)))
        except BaseException:  # the parent shows it in the failing test
            results.put((rank, "error", traceback.format_exc()))
    dist.destroy_process_group()


class _Workers:
    def __init__(self):
        ctx = mp.get_context("spawn")
        self.dir = tempfile.TemporaryDirectory()
        init_file = os.path.join(self.dir.name, "rendezvous")
        self.results = ctx.Queue()
        self.tasks = [ctx.Queue() for _ in range(WORLD)]
        self.procs = [
            ctx.Process(
                target=_serve, args=(r, init_file, self.tasks[r], self.results), daemon=True
            )
            for r in range(WORLD)
        ]
        for p in self.procs:
            p.start()

    def run(self, name, timeout=60.0):
        for q in self.tasks:
            q.put(name)
        out = {}
        try:
            for _ in range(WORLD):
                rank, status, value = self.results.get(timeout=timeout)
                out[rank] = (status, value)
        except queue.Empty:
            self.close(kill=True)
            pytest.fail(f"scenario {name} did not finish within {timeout} s (workers killed)")
        errors = [f"rank {r}:\n{v}" for r, (s, v) in sorted(out.items()) if s != "ok"]
        if errors:
            self.close(kill=True)
            pytest.fail(f"scenario {name} failed\n" + "\n".join(errors))
        return [out[r][1] for r in range(WORLD)]

    @property
    def alive(self):
        return all(p.is_alive() for p in self.procs)

    def close(self, kill=False):
        if not kill:
            for q in self.tasks:
                q.put(None)
            for p in self.procs:
                p.join(timeout=10)
        for p in self.procs:
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
        self.dir.cleanup()


_POOL: list[_Workers] = []


@pytest.fixture
def workers():
    if not _POOL or not _POOL[0].alive:
        if _POOL:
            _POOL.pop().close(kill=True)
        _POOL.append(_Workers())
    yield _POOL[0]


@pytest.fixture(scope="module", autouse=True)
def _stop_workers():
    yield
    while _POOL:
        _POOL.pop().close()


def _ptr(t) -> int:
    return tb.to_torch(t).data_ptr()


# ---- collectives ------------------------------------------------------------------------------


def _collectives_inplace(rank):
    group = dist.group.WORLD
    # allreduce_ into numpy memory and into torch memory
    a = np.full(5, rank + 1.0, np.float32)
    t = tb.wrap(a)
    work = dist.all_reduce(t, async_op=True)  # the Work handle passes through
    work.wait()
    assert np.array_equal(a, np.full(5, 3.0, np.float32)) and _ptr(t) == a.ctypes.data
    owner = torch.full((2, 3), float(rank), dtype=torch.float64)
    dist.all_reduce(tb.wrap(owner), op=dist.ReduceOp.MAX)
    assert torch.equal(owner, torch.ones(2, 3, dtype=torch.float64))
    # broadcast_
    b = np.arange(4, dtype=np.int64) * (rank + 1)
    dist.broadcast(tb.wrap(b), src=1)
    assert np.array_equal(b, np.arange(4) * 2)
    # allgather_ into wrapped outputs, _allgather_base_ into one wrapped buffer
    outs = [np.zeros(3, np.float32) for _ in range(WORLD)]
    dist.all_gather([tb.wrap(o) for o in outs], tb.wrap(np.full(3, rank, np.float32)))
    assert [o.tolist() for o in outs] == [[0.0] * 3, [1.0] * 3]
    flat = np.zeros(6, np.float32)
    dist.all_gather_into_tensor(tb.wrap(flat), tb.wrap(np.full(3, rank + 5.0, np.float32)))
    assert flat.tolist() == [5.0] * 3 + [6.0] * 3
    # reduce_scatter_ (list) and _reduce_scatter_base_ (one tensor)
    got = np.zeros(2, np.float32)
    ins = [tb.wrap(np.full(2, 10.0 * j + rank, np.float32)) for j in range(WORLD)]
    dist.reduce_scatter(tb.wrap(got), ins)
    assert got.tolist() == [20.0 * rank + 1] * 2
    got2 = np.zeros(2, np.float32)
    dist.reduce_scatter_tensor(tb.wrap(got2), tb.wrap(np.arange(4, dtype=np.float32)))
    assert got2.tolist() == [2.0 * (2 * rank), 2.0 * (2 * rank + 1)]
    # reduce_ to rank 0, gather_, scatter_
    r = np.full(2, rank + 1.0, np.float32)
    dist.reduce(tb.wrap(r), dst=0)
    assert r.tolist() == ([3.0, 3.0] if rank == 0 else [2.0, 2.0])
    g_out = [np.zeros(2, np.float32) for _ in range(WORLD)] if rank == 0 else None
    dist.gather(
        tb.wrap(np.full(2, rank + 7.0, np.float32)),
        [tb.wrap(x) for x in g_out] if g_out else None,
        dst=0,
    )
    if rank == 0:
        assert [x.tolist() for x in g_out] == [[7.0, 7.0], [8.0, 8.0]]
    s_in = [tb.wrap(np.full(2, 40.0 + j, np.float32)) for j in range(WORLD)] if rank == 1 else None
    s_out = np.zeros(2, np.float32)
    dist.scatter(tb.wrap(s_out), s_in, src=1)
    assert s_out.tolist() == [40.0 + rank] * 2
    # alltoall_base_ (all_to_all_single)
    a2a = np.zeros(4, np.float32)
    dist.all_to_all_single(tb.wrap(a2a), tb.wrap(np.arange(4, dtype=np.float32) + 10 * rank))
    assert a2a.tolist() == ([0.0, 1.0, 10.0, 11.0] if rank == 0 else [2.0, 3.0, 12.0, 13.0])
    # send / recv, isend / irecv (Work handles), barrier
    buf = np.zeros(3, np.float32)
    if rank == 0:
        dist.send(tb.wrap(np.array([1.0, 2.0, 3.0], np.float32)), dst=1)
        dist.irecv(tb.wrap(buf), src=1).wait()
        assert buf.tolist() == [4.0, 5.0, 6.0]
    else:
        dist.recv(tb.wrap(buf), src=0)
        assert buf.tolist() == [1.0, 2.0, 3.0]
        dist.isend(tb.wrap(np.array([4.0, 5.0, 6.0], np.float32)), dst=0).wait()
    dist.barrier()
    # the coalesced ops (gloo's allreduce_coalesced_ through torch's coalescing manager)
    c1, c2 = np.full(2, rank + 1.0, np.float32), np.full(3, rank + 2.0, np.float32)
    with dist._coalescing_manager(group=group):
        dist.all_reduce(tb.wrap(c1))
        dist.all_reduce(tb.wrap(c2))
    assert c1.tolist() == [3.0] * 2 and c2.tolist() == [5.0] * 3
    # allreduce_ and broadcast_ (DDP's buffer broadcast before each forward) run from torch's
    # dispatcher in C++ where the build has the Python-key kernels: no __torch_dispatch__ trip.
    from tensorbridge import _C, _tensor

    if _tensor._python_key_ops():
        d = np.full(3, rank + 1.0, np.float32)
        e = torch.full((2,), float(rank))
        wd, we = tb.wrap(d), tb.wrap(e)
        seen = []
        original = tb.Tensor.__dict__["__torch_dispatch__"]

        def spy(func, types, args=(), kwargs=None):
            seen.append(str(func))
            return _C._torch_dispatch(func, types, args, kwargs)

        tb.Tensor.__torch_dispatch__ = staticmethod(spy)
        try:
            dist.all_reduce(wd, async_op=True).wait()
            dist.broadcast(we, src=1)
        finally:
            tb.Tensor.__torch_dispatch__ = original
        assert seen == [] and _ptr(wd) == d.ctypes.data
        assert d.tolist() == [3.0] * 3 and e.tolist() == [1.0, 1.0]
        # DDP's buffer broadcast: wrapped and plain tensors flattened into one
        f_np = np.full(2, rank + 0.5, np.float32)
        p = torch.full((1,), float(rank))
        dist._broadcast_coalesced(group, [tb.wrap(f_np), p], 1 << 20, 1)
        assert f_np.tolist() == [1.5, 1.5] and p.tolist() == [1.0]
    return True


def _collectives_functional(rank):
    import torch.distributed._functional_collectives as fc

    f = torch.ops._c10d_functional
    name = dist.group.WORLD.group_name
    x = tb.wrap(np.full(3, rank + 1.0, np.float32))
    out = f.wait_tensor(f.all_reduce(x, "sum", name))
    assert isinstance(out, tb.Tensor) and tb.to_numpy(out).tolist() == [3.0] * 3
    assert tb.to_numpy(x).tolist() == [rank + 1.0] * 3  # the input is left alone
    ag = f.wait_tensor(f.all_gather_into_tensor(x, WORLD, name))
    assert tb.to_numpy(ag).tolist() == [1.0] * 3 + [2.0] * 3
    rs = f.wait_tensor(f.reduce_scatter_tensor(tb.wrap(np.arange(4.0)), "sum", WORLD, name))
    assert tb.to_numpy(rs).tolist() == [4.0 * rank, 4.0 * rank + 2]
    bc = f.wait_tensor(f.broadcast(x, 1, name))
    assert tb.to_numpy(bc).tolist() == [2.0] * 3
    a2a = f.wait_tensor(
        f.all_to_all_single(tb.wrap(np.arange(2.0) + 10 * rank), [1, 1], [1, 1], name)
    )
    assert tb.to_numpy(a2a).tolist() == [float(rank), 10.0 + rank]
    # the in-place functional all_reduce_ writes into numpy memory
    a = np.full(2, rank + 1.0, np.float32)
    t = tb.wrap(a)
    assert f.wait_tensor(f.all_reduce_(t, "sum", name)) is t and a.tolist() == [3.0, 3.0]
    coal = f.all_reduce_coalesced([x, tb.wrap(np.ones(2, np.float32))], "avg", name)
    coal = [f.wait_tensor(c) for c in coal]
    assert tb.to_numpy(coal[0]).tolist() == [1.5] * 3 and tb.to_numpy(coal[1]).tolist() == [1.0] * 2
    # the Python API: its AsyncCollectiveTensor waits when its value is read
    ar = fc.all_reduce(x, "sum", dist.group.WORLD)
    assert torch.equal(tb.to_torch(ar.wait()), torch.full((3,), 3.0))
    gathered = fc.all_gather_single(x, 0, dist.group.WORLD)
    assert tb.to_numpy(gathered * 1).tolist() == [1.0] * 3 + [2.0] * 3
    # in a plan of our torch.compile backend: the collective is a node that runs torch's op
    # and waits for it before the next node reads its result
    torch._dynamo.reset()
    compiled = torch.compile(
        lambda t: fc.all_reduce(t * 2, "sum", dist.group.WORLD) + 1, backend="tensorbridge"
    )
    from torch._C._distributed_c10d import _get_work_registry_size

    for _ in range(3):
        assert tb.to_numpy(compiled(x)).tolist() == [7.0] * 3
        assert _get_work_registry_size() == 0  # every collective of the plan was waited for
    assert tb.diagnostics.plan_metrics()["plan_calls"] >= 3
    # autograd through the functional all-gather: the gradient is reduce-scattered back
    w = tb.wrap(np.full(2, rank + 1.0, np.float32), requires_grad=True)
    full = fc.all_gather_tensor_autograd(w, 0, dist.group.WORLD)
    (full * torch.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
    assert tb.to_numpy(w.grad).tolist() == ([2.0, 4.0] if rank == 0 else [6.0, 8.0])
    return True


def _collectives_read_only(rank):
    import jax.numpy as jnp

    x = tb.wrap(jnp.full((3,), rank + 1.0, jnp.float32))
    assert x.array.read_only
    with pytest.raises(BufferError, match=r"c10d::allreduce_ writes into its argument 'tensors'"):
        dist.all_reduce(x)
    outs = [tb.wrap(jnp.zeros(3, jnp.float32)) for _ in range(WORLD)]
    with pytest.raises(BufferError, match=r"allgather_ writes into .*'output_tensors'"):
        dist.all_gather(outs, x)
    # reading read-only memory is fine: a functional collective allocates its result, and an
    # all-gather's input is only read
    f = torch.ops._c10d_functional
    out = f.wait_tensor(f.all_reduce(x, "sum", dist.group.WORLD.group_name))
    assert tb.to_numpy(out).tolist() == [3.0] * 3
    flat = np.zeros(6, np.float32)
    dist.all_gather_into_tensor(tb.wrap(flat), x)
    assert flat.tolist() == [1.0] * 3 + [2.0] * 3
    dist.all_reduce(tb.wrap(x, copy=True))  # the documented way out: a writable copy
    return True


def test_collectives_in_place_write_user_memory(workers):
    assert workers.run("_collectives_inplace") == [True, True]


def test_functional_collectives(workers):
    assert workers.run("_collectives_functional") == [True, True]


def test_collectives_refuse_read_only_memory(workers):
    pytest.importorskip("jax", reason="JAX is not installed (extra 'jax')")
    assert workers.run("_collectives_read_only") == [True, True]


# ---- training: DDP and FSDP2 over wrapped parameters ------------------------------------------
# Every run trains for 3 SGD steps (momentum 0.9) on a global batch split between the ranks;
# step 1 accumulates two micro-batches. float64, so that the comparisons judge the distributed
# machinery (buckets, hooks, all-gathers, reduce-scatters), not the rounding of two kernels.

STEPS = 3
LR = 0.05


def _mlp():
    torch.manual_seed(100)
    return torch.nn.Sequential(
        torch.nn.Linear(16, 32),
        torch.nn.GELU(),
        torch.nn.Linear(32, 32),
        torch.nn.Tanh(),
        torch.nn.Linear(32, 4),
    ).double()


def _llama():
    from tensorbridge import zoo

    model, _ = zoo.build("llama", "tiny", seed=100)
    return model.double().train()


def _batches(kind):
    """[step][micro-batch] -> (input, target) of the global batch (4 rows)."""
    gen = torch.Generator().manual_seed(7)
    out = []
    for step in range(STEPS):
        micro = []
        for _ in range(2 if step == 1 else 1):
            if kind == "mlp":
                x = torch.randn(4, 16, generator=gen, dtype=torch.float64)
                y = torch.randn(4, 4, generator=gen, dtype=torch.float64)
            else:
                x = torch.randint(0, 100, (4, 12), generator=gen)
                y = torch.randn(4, 12, 100, generator=gen, dtype=torch.float64)
            micro.append((x, y))
        out.append(micro)
    return out


def _loss(model, kind, x, y):
    out = model(x) if kind == "mlp" else model(input_ids=x).logits
    return ((out - y) ** 2).mean()


def _local(batches, rank, wrap):
    half = slice(2 * rank, 2 * rank + 2)
    conv = tb.wrap if wrap else (lambda t: t)
    return [
        [(conv(x[half].contiguous()), conv(y[half].contiguous())) for x, y in s] for s in batches
    ]


def _train(model, kind, batches, no_sync=None):
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    for micro in batches:
        for i, (x, y) in enumerate(micro):
            last = i == len(micro) - 1
            ctx = no_sync() if no_sync is not None and not last else contextlib.nullcontext()
            with ctx:
                _loss(model, kind, x, y).backward()
        opt.step()
        opt.zero_grad()


def _state(model):
    """The parameters as numpy arrays (full tensors of FSDP's DTensors)."""
    out = {}
    for name, p in model.named_parameters():
        p = p.detach()
        if hasattr(p, "full_tensor"):
            p = p.full_tensor()
        out[name] = (tb.to_torch(p) if isinstance(p, tb.Tensor) else p).numpy().copy()
    return out


def _reference(kind):
    """One process over the concatenated batch, plain torch."""
    model = _mlp() if kind == "mlp" else _llama()
    _train(model, kind, _batches(kind))
    return _state(model)


def _ddp(kind, rank):
    from torch.nn.parallel import DistributedDataParallel as DDP

    batches = _batches(kind)
    runs = {}
    for wrap, as_view in ((True, False), (True, True), (False, False)):
        torch.manual_seed(rank)  # different weights on each rank: DDP broadcasts rank 0's
        model = _mlp() if kind == "mlp" else _llama()
        if rank == 1:
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(1.0)
        owners = [p.data for p in model.parameters()]  # the memory the user owns
        if wrap:
            tb.wrap_module(model)
        # several buckets; with gradient_as_bucket_view the gradients are views of them
        cap = 0.002 if kind == "mlp" else 0.05
        ddp = DDP(model, bucket_cap_mb=cap, gradient_as_bucket_view=as_view)
        if wrap:
            ref = (_mlp() if kind == "mlp" else _llama()).parameters()
            for p, want, owner in zip(model.parameters(), ref, owners, strict=True):
                assert isinstance(p, tb.Tensor)
                assert _ptr(p) == owner.data_ptr()  # still the user's memory, now rank 0's values
                assert torch.equal(owner, want.detach())
        _train(ddp, kind, _local(batches, rank, wrap), no_sync=ddp.no_sync)
        if wrap:
            # after the first step DDP rebuilt its buckets at bucket_cap_mb: several of them
            assert len(ddp.reducer._get_zeros_like_grad_buckets()) > 1
            for p, owner in zip(model.parameters(), owners, strict=True):
                assert _ptr(p) == owner.data_ptr()  # trained in place
        runs["plain" if not wrap else "bucket_view" if as_view else "wrapped"] = _state(model)
    return runs


def _ddp_mlp(rank):
    return _ddp("mlp", rank)


def _ddp_llama(rank):
    return _ddp("llama", rank)


def _ddp_no_sync(rank):
    # Inside no_sync the gradients stay local (they differ between the ranks); the next
    # backward outside it all-reduces the accumulated sum.
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = tb.wrap_module(_mlp())
    ddp = DDP(model)
    x = tb.wrap(torch.full((2, 16), rank + 1.0, dtype=torch.float64))
    with ddp.no_sync():
        ddp(x).sum().backward()
    local = tb.to_torch(model[0].bias.grad).clone()
    gathered = [torch.zeros_like(local) for _ in range(WORLD)]
    dist.all_gather(gathered, local)
    assert not torch.equal(gathered[0], gathered[1])
    ddp(x).sum().backward()
    synced = tb.to_torch(model[0].bias.grad).clone()
    dist.all_gather(gathered, synced)
    assert torch.equal(gathered[0], gathered[1])
    return True


def _ddp_compiled(rank):
    # DDP over a module compiled with our backend: dynamo's DDPOptimizer splits the graph at
    # DDP's bucket boundaries, each piece becomes a plan, and the reducer's hooks fire between
    # the pieces' backward plans.
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch._dynamo.reset()
    tb.diagnostics.reset_plan_metrics()
    batches = _batches("mlp")
    runs = {}
    for wrap in (True, False):
        model = torch.nn.Sequential(
            *[torch.nn.Linear(16 if i == 0 else 256, 256) for i in range(3)],
            torch.nn.Linear(256, 4),
        ).double()
        torch.manual_seed(5)
        for p in model.parameters():
            torch.nn.init.normal_(p, std=0.05)
        if wrap:
            tb.wrap_module(model)
            ddp = DDP(torch.compile(model, backend="tensorbridge"), bucket_cap_mb=1)
        else:
            ddp = DDP(model, bucket_cap_mb=1)
        _train(ddp, "mlp", _local(batches, rank, wrap))
        runs["wrapped" if wrap else "plain"] = _state(model)
    runs["graphs"] = tb.diagnostics.plan_metrics()["graphs"]
    return runs


def _check_close(got, want, what):
    assert got.keys() == want.keys()
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-6, atol=1e-9, err_msg=f"{what}: {k}")


@pytest.mark.parametrize("kind", ["mlp", "llama"])
def test_ddp_training_matches_plain_torch_and_one_process(workers, kind):
    if kind == "llama":
        pytest.importorskip("transformers", reason="transformers is not installed")
    runs = workers.run(f"_ddp_{kind}", timeout=120)
    reference = _reference(kind)
    for rank, r in enumerate(runs):
        _check_close(r["wrapped"], r["plain"], f"rank {rank}, wrapped vs plain DDP")
        _check_close(r["wrapped"], reference, f"rank {rank}, wrapped DDP vs one process")
        _check_close(r["bucket_view"], r["plain"], f"rank {rank}, gradient_as_bucket_view")
    initial = _state(_mlp() if kind == "mlp" else _llama())
    assert all(not np.allclose(reference[k], initial[k]) for k in reference)  # training moved them


def test_ddp_no_sync_keeps_gradients_local(workers):
    assert workers.run("_ddp_no_sync") == [True, True]


def test_ddp_over_compiled_module(workers):
    runs = workers.run("_ddp_compiled", timeout=180)
    for rank, r in enumerate(runs):
        _check_close(r["wrapped"], r["plain"], f"rank {rank}, compiled wrapped vs plain DDP")
        assert r["graphs"] >= 2, "DDPOptimizer did not split the graph at bucket boundaries"


def _fsdp(kind, rank):
    from torch.distributed.fsdp import fully_shard

    batches = _batches(kind)
    runs = {}
    for wrap in (True, False):
        model = _mlp() if kind == "mlp" else _llama()
        if wrap:
            tb.wrap_module(model)
        blocks = [model[0], model[2], model[4]] if kind == "mlp" else list(model.model.layers)
        for block in blocks:
            fully_shard(block)
        fully_shard(model)
        seen = []  # the type of a parameter while its block runs (after FSDP's all-gather)
        probe = blocks[0] if kind == "mlp" else blocks[0].self_attn.q_proj
        probe.register_forward_pre_hook(lambda m, args, seen=seen: seen.append(type(m.weight)))

        @contextlib.contextmanager
        def no_sync(model=model):
            model.set_requires_gradient_sync(False)
            yield
            model.set_requires_gradient_sync(True)

        _train(model, kind, _local(batches, rank, wrap), no_sync=no_sync)
        if wrap:
            for p in model.parameters():
                assert isinstance(p._local_tensor, tb.Tensor)  # the shard lives in our memory
            # unsharded parameters were tensorbridge.Tensors in every forward, over buffers
            # that later all-gathers refilled after FSDP freed its own (resize_ to 0)
            assert len(seen) == STEPS + 1 and all(t is tb.Tensor for t in seen), seen
            group = blocks[0]._get_fsdp_state()._fsdp_param_group
            assert all(
                fp.all_gather_outputs[0].untyped_storage().size() == 0 for fp in group.fsdp_params
            )
        runs["wrapped" if wrap else "plain"] = _state(model)
    return runs


def _fsdp_mlp(rank):
    return _fsdp("mlp", rank)


def _fsdp_llama(rank):
    return _fsdp("llama", rank)


@pytest.mark.parametrize("kind", ["mlp", "llama"])
def test_fsdp2_training_matches_plain_torch_and_one_process(workers, kind):
    if kind == "llama":
        pytest.importorskip("transformers", reason="transformers is not installed")
    runs = workers.run(f"_fsdp_{kind}", timeout=120)
    reference = _reference(kind)
    for rank, r in enumerate(runs):
        _check_close(r["wrapped"], r["plain"], f"rank {rank}, wrapped vs plain FSDP2")
        _check_close(r["wrapped"], reference, f"rank {rank}, wrapped FSDP2 vs one process")


# ---- JAX: call_torch inside shard_map over 2 processes ----------------------------------------

_JAX_SCRIPT = """
import sys

rank, port = int(sys.argv[1]), int(sys.argv[2])
import jax

jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(
    coordinator_address=f"127.0.0.1:{port}", num_processes=2, process_id=rank,
    initialization_timeout=60,
)
import jax.numpy as jnp
import numpy as np
import torch
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import tensorbridge as tb

assert jax.process_count() == 2 and len(jax.devices()) == 2 and len(jax.local_devices()) == 1
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
params, apply = tb.functionalize(model)


def loss(p, x, y):
    return jnp.mean((apply(p, x) - y) ** 2)


def step(p, x, y):
    # each process: the gradient of its shard of the batch, on the FFI path; then the mean
    # over the processes (a psum over gloo)
    g = jax.lax.psum(jax.grad(loss)(p, x, y), "b")
    return jax.tree.map(lambda a, b: a - 0.1 * b / 2, p, g)


def step_summed(p, x, y):
    # JAX's default (check_vma): the gradient of the replicated params comes back summed over
    # the processes, as it does for JAX's own ops
    return jax.tree.map(lambda a, b: a - 0.1 * b / 2, p, jax.grad(loss)(p, x, y))


mesh = Mesh(np.array(jax.devices()), ("b",))
specs = dict(mesh=mesh, in_specs=(P(), P("b"), P("b")), out_specs=P())
trains = [
    jax.jit(jax.shard_map(step, **specs, check_vma=False)),
    jax.jit(jax.shard_map(step_summed, **specs)),
]
rng = np.random.default_rng(0)
X = rng.standard_normal((3, 4, 8)).astype(np.float32)
Y = rng.standard_normal((3, 4, 2)).astype(np.float32)
replicated, split = NamedSharding(mesh, P()), NamedSharding(mesh, P("b"))
runs = []
for train in trains:
    p = {k: jax.make_array_from_process_local_data(replicated, np.asarray(v)) for k, v in params.items()}
    for s in range(3):
        mine = slice(2 * rank, 2 * rank + 2)
        p = train(
            p,
            jax.make_array_from_process_local_data(split, X[s, mine]),
            jax.make_array_from_process_local_data(split, Y[s, mine]),
        )
    runs.append({k: np.asarray(v.addressable_data(0)) for k, v in p.items()})


def pure_loss(q, x, y):  # the same MLP in JAX, one process, the whole batch
    h = jnp.tanh(x @ q["0.weight"].T + q["0.bias"])
    return jnp.mean((h @ q["2.weight"].T + q["2.bias"] - y) ** 2)


q = {k: jnp.asarray(np.asarray(v)) for k, v in params.items()}
for s in range(3):
    q = jax.tree.map(lambda a, b: a - 0.1 * b, q, jax.grad(pure_loss)(q, X[s], Y[s]))
for got in runs:
    for k in got:
        np.testing.assert_allclose(got[k], np.asarray(q[k]), rtol=1e-5, atol=1e-6, err_msg=k)
        assert not np.allclose(got[k], np.asarray(params[k]))  # training moved it
m = tb.diagnostics.call_torch_metrics()
assert m["ffi_runs"] >= 12 and m["callback_runs"] == 0, m  # forward + backward plans, no callback
jax.distributed.shutdown()
print("ok")
"""


def test_jax_shard_map_over_two_processes(tmp_path):
    pytest.importorskip("jax", reason="JAX is not installed (extra 'jax')")
    import socket
    import subprocess
    import sys

    script = tmp_path / "jax_two_processes.py"
    script.write_text(_JAX_SCRIPT)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(rank), str(port)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(WORLD)
    ]
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=120)
            results.append((p.returncode, out, err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=5)
    for rank, (code, out, err) in enumerate(results):
        assert code == 0 and out.split()[-1:] == ["ok"], f"rank {rank}:\n{err[-3000:]}"
