"""The compile backend's on-disk cache (``config.compile_cache``, ``_compile_cache``): a graph
compiled in one process is loaded in the next, which builds its plans without tracing, and
runs them to the same results; entries are tensorbridge's own (never inductor's, never those
of another configuration).

Each case runs in fresh Python processes over a cache directory of its own
(``TORCHINDUCTOR_CACHE_DIR``), as a user's second run would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

_SCRIPT = textwrap.dedent(
    """
    import json, re, sys
    import torch
    import tensorbridge as tb

    args = json.loads(sys.argv[1])
    tb.config.fallback = "error"
    for name, value in args.get("config", {}).items():
        setattr(tb.config, name, value)
    if args.get("decompose"):
        tb.config.decompose(*args["decompose"])
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16), torch.nn.Linear(16, 4)
    )
    x = torch.randn(5, 8)
    backend = args.get("backend", "tensorbridge")
    fn = torch.compile(model, backend=backend, dynamic=args.get("dynamic", False))
    out = {}
    if args.get("train", True):
        loss = fn(x).square().sum()
        loss.backward()
        got = [p.grad.clone() for p in model.parameters()]
        for p in model.parameters():
            p.grad = None
        model(x).square().sum().backward()
        want = [p.grad for p in model.parameters()]
        scale = max(w.abs().max().item() for w in want)
        out["grad_err"] = max((g - w).abs().max().item() for g, w in zip(got, want)) / scale
        out["loss"] = loss.item()
    else:
        with torch.no_grad():
            y = fn(x)
            out["err"] = (y - model(x)).abs().max().item()
    if backend == "tensorbridge":
        m = tb.diagnostics.plan_metrics()
        out.update(hits=m["cache_hits"], saves=m["cache_saves"], built=m["plans_built"])
        dumps = [p.dump() for p in tb._compile.state.plans]
        # gelu whole is one step of a fused pointwise program; decomposed, its steps are erf...
        out["gelu_whole"] = any(re.search(r"[;']gelu r", d) for d in dumps)
    print("RESULT " + json.dumps(out))
    """
)


def _run(cache_dir, **args) -> dict:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(cache_dir))
    env.pop("TORCHINDUCTOR_FORCE_DISABLE_CACHES", None)
    p = subprocess.run(
        [sys.executable, "-c", _SCRIPT, json.dumps(args)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-4000:]
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT ") :])


def test_a_second_process_loads_the_plans_graphs(tmp_path):
    first = _run(tmp_path)
    assert (first["saves"], first["hits"], first["built"]) == (2, 0, 2)
    second = _run(tmp_path)
    assert (second["saves"], second["hits"], second["built"]) == (0, 2, 2)
    # the loaded graphs' plans give what tracing gave, and what torch gives
    assert second["loss"] == first["loss"]
    assert second["grad_err"] < 1e-6 and first["grad_err"] < 1e-6
    assert second["gelu_whole"] and first["gelu_whole"]


def test_inference_graphs_are_kept_too(tmp_path):
    first = _run(tmp_path, train=False)
    assert (first["saves"], first["hits"], first["built"]) == (1, 0, 1)
    second = _run(tmp_path, train=False)
    assert (second["saves"], second["hits"], second["built"]) == (0, 1, 1)
    assert second["err"] < 1e-6


def test_entries_are_not_shared_with_inductor(tmp_path):
    # inductor's entry for the same graph and inputs is under another key: tensorbridge traces
    # its own, and inductor then finds its own
    pytest.importorskip(
        "torch._inductor", reason="this torch build has no inductor to share the cache with"
    )
    _run(tmp_path, backend="inductor")
    ours = _run(tmp_path)
    assert (ours["saves"], ours["hits"]) == (2, 0)
    assert ours["grad_err"] < 1e-6
    again = _run(tmp_path)
    assert again["hits"] == 2


def test_a_change_of_configuration_is_a_new_entry(tmp_path):
    _run(tmp_path)
    # gelu decomposed: the graphs differ, so the entry kept with gelu whole must not serve
    decomposed = _run(tmp_path, decompose=["aten::gelu"])
    assert (decomposed["saves"], decomposed["hits"]) == (2, 0)
    assert not decomposed["gelu_whole"]
    assert decomposed["grad_err"] < 1e-6
    no_recompute = _run(tmp_path, config={"recompute": False})
    assert (no_recompute["saves"], no_recompute["hits"]) == (2, 0)
    assert _run(tmp_path)["hits"] == 2  # the first entry is still there


def test_the_cache_can_be_turned_off(tmp_path):
    _run(tmp_path)
    off = _run(tmp_path, config={"compile_cache": False})
    assert (off["saves"], off["hits"], off["built"]) == (0, 0, 2)
    assert off["grad_err"] < 1e-6


def test_graphs_with_symbolic_sizes_are_not_kept(tmp_path):
    first = _run(tmp_path, dynamic=True)
    second = _run(tmp_path, dynamic=True)
    assert first["saves"] == 0 and second["hits"] == 0
    assert second["grad_err"] < 1e-6
