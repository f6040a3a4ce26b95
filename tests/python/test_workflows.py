"""Training workflows end to end on wrapped models: checkpoint and resume in a fresh process,
an EMA of the weights through copy.deepcopy. (transformers checkpoints: test_serialization.)"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import textwrap

import torch

import tensorbridge as tb

# Run in this process and, for the resumed half, in a fresh one.
COMMON = textwrap.dedent(
    """
    import torch
    import tensorbridge as tb

    def make(seed):
        torch.manual_seed(seed)
        model = torch.nn.Sequential(
            torch.nn.Linear(6, 16), torch.nn.GELU(), torch.nn.LayerNorm(16), torch.nn.Linear(16, 2)
        )
        tb.wrap_module(model)
        opt = torch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=1e-3)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
        return model, opt, sched

    def batch(step):
        g = torch.Generator().manual_seed(1000 + step)
        return torch.randn(8, 6, generator=g), torch.randn(8, 2, generator=g)

    def train(model, opt, sched, steps):
        for step in steps:
            x, y = batch(step)
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            sched.step()
    """
)

RESUME = textwrap.dedent(
    """
    import sys
    ckpt, out = sys.argv[1], sys.argv[2]
    model, opt, sched = make(seed=123)  # other initial weights: the checkpoint must win
    state = torch.load(ckpt, weights_only=True)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    sched.load_state_dict(state["scheduler"])
    assert all(isinstance(p, tb.Tensor) for p in model.parameters())
    train(model, opt, sched, range(state["step"], state["step"] + 5))
    torch.save(model.state_dict(), out)
    """
)


def _namespace():
    ns: dict = {}
    exec(COMMON, ns)  # our own source, shared with the child process
    return ns


def test_checkpoint_and_resume_in_a_fresh_process_matches_an_uninterrupted_run(tmp_path):
    ns = _namespace()
    model, opt, sched = ns["make"](seed=0)
    ns["train"](model, opt, sched, range(10))
    want = {k: tb.to_torch(v).clone() for k, v in model.state_dict().items()}

    model, opt, sched = ns["make"](seed=0)
    ns["train"](model, opt, sched, range(5))
    ckpt = tmp_path / "ckpt.pt"
    torch.save(
        {
            "model": model.state_dict(),
            "optimizer": opt.state_dict(),
            "scheduler": sched.state_dict(),
            "step": 5,
        },
        ckpt,
    )
    out = tmp_path / "resumed.pt"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.run(
        [sys.executable, "-c", COMMON + RESUME, str(ckpt), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = torch.load(out, weights_only=True)
    assert set(got) == set(want)
    for k, v in got.items():
        assert type(v) is tb.Tensor
        torch.testing.assert_close(tb.to_torch(v), want[k], rtol=0, atol=0, msg=k)

    # and the wrapped run follows plain torch (other kernels: float32 tolerance)
    torch.manual_seed(0)
    plain = torch.nn.Sequential(
        torch.nn.Linear(6, 16), torch.nn.GELU(), torch.nn.LayerNorm(16), torch.nn.Linear(16, 2)
    )
    popt = torch.optim.Adam(plain.parameters(), lr=1e-2, weight_decay=1e-3)
    ns["train"](plain, popt, torch.optim.lr_scheduler.StepLR(popt, 3, 0.5), range(10))
    for k, v in plain.state_dict().items():
        torch.testing.assert_close(want[k], v, rtol=1e-4, atol=1e-5, msg=k)


def test_ema_of_weights_through_deepcopy():
    ns = _namespace()
    model, opt, sched = ns["make"](seed=0)
    ema = copy.deepcopy(model)
    for p in ema.parameters():
        p.requires_grad_(False)
    torch.manual_seed(0)
    ref = torch.nn.Sequential(
        torch.nn.Linear(6, 16), torch.nn.GELU(), torch.nn.LayerNorm(16), torch.nn.Linear(16, 2)
    )
    ref_ema = {k: v.detach().clone() for k, v in ref.named_parameters()}
    for (name, p), e in zip(model.named_parameters(), ema.parameters(), strict=True):
        assert type(e) is tb.Tensor and e.data_ptr() != p.data_ptr(), name
        torch.testing.assert_close(tb.to_torch(e), ref_ema[name], rtol=0, atol=0)
    ropt = torch.optim.Adam(ref.parameters(), lr=1e-2, weight_decay=1e-3)
    rsched = torch.optim.lr_scheduler.StepLR(ropt, 3, 0.5)
    for step in range(5):
        ns["train"](model, opt, sched, [step])
        ns["train"](ref, ropt, rsched, [step])
        with torch.no_grad():
            for e, p in zip(ema.parameters(), model.parameters(), strict=True):
                e.mul_(0.9).add_(p, alpha=0.1)
            for name, p in ref.named_parameters():
                ref_ema[name].mul_(0.9).add_(p, alpha=0.1)
    for (name, p), e in zip(model.named_parameters(), ema.parameters(), strict=True):
        torch.testing.assert_close(tb.to_torch(e), ref_ema[name], rtol=1e-4, atol=1e-5)
        assert not torch.equal(tb.to_torch(e), tb.to_torch(p.detach())), name  # it lags


def test_optimizer_state_deepcopies_and_loads_back():
    ns = _namespace()
    model, opt, sched = ns["make"](seed=0)
    ns["train"](model, opt, sched, range(3))
    saved = copy.deepcopy(opt.state_dict())
    first = next(iter(saved["state"].values()))
    assert type(first["exp_avg"]) is tb.Tensor
    live = opt.state_dict()["state"][0]["exp_avg"]
    assert first["exp_avg"].data_ptr() != live.data_ptr()
    ns["train"](model, opt, sched, range(3, 5))  # moves on; the copy stays
    assert not torch.equal(tb.to_torch(first["exp_avg"]), tb.to_torch(live))
    opt.load_state_dict(saved)
    torch.testing.assert_close(
        tb.to_torch(opt.state_dict()["state"][0]["exp_avg"]),
        tb.to_torch(first["exp_avg"]),
        rtol=0,
        atol=0,
    )
