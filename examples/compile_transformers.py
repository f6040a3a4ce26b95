"""Compile a transformers model with ``torch.compile(backend="tensorbridge")`` and show its plan.

A small GPT-2 (random weights, no download) is compiled; the captured graph becomes one C++
plan, built once. ``tb.diagnostics.explain(compiled)`` prints every plan built for it (nodes, the kernel
serving each, fused nodes, fallbacks), ``tb.diagnostics.plan_metrics(compiled)`` counts compilations and
calls, and ``tb.diagnostics.profile`` shows where the plan's time goes. The output matches torch eager.

    python examples/compile_transformers.py [--quick]
"""

from __future__ import annotations

import argparse

import torch
import transformers

import tensorbridge as tb


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer profiled calls")
    calls = 3 if parser.parse_args().quick else 50

    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_embd=64,
        n_layer=2,
        n_head=4,
        vocab_size=256,
        n_positions=64,
        use_cache=False,
        bos_token_id=0,
        eos_token_id=0,
    )
    model = transformers.GPT2Model(config).eval()
    ids = torch.randint(0, 256, (2, 16))
    compiled = torch.compile(model, backend="tensorbridge")
    with torch.no_grad():
        want = model(ids).last_hidden_state
        got = compiled(ids).last_hidden_state
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
        with tb.diagnostics.profile(compiled) as prof:
            for _ in range(calls):
                compiled(ids)

    # Every plan built for the model: its nodes, the kernel serving each, fused nodes, the
    # slots its values share, fallbacks. (The plan's input lines are left out here.)
    lines = [
        ln
        for ln in tb.diagnostics.explain(compiled).splitlines()
        if not ln.lstrip().startswith("input ")
    ]
    print("\n".join(lines[:40]))
    if len(lines) > 40:
        print(f"... ({len(lines) - 40} more lines)")
    print("\nplan metrics:", tb.diagnostics.plan_metrics(compiled))
    print("\nwhere the time goes:\n" + prof.table(top=8))
    assert tb.diagnostics.plan_metrics(compiled)["plans_built"] >= 1


if __name__ == "__main__":
    main()
