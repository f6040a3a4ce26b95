"""Train a torch model whose weights are numpy arrays.

The model's parameters are ``tensorbridge.Tensor``s over numpy memory (``tb.wrap``, no copy):
torch.optim updates them in place, so the numpy arrays hold the trained weights, and every op
runs in tensorbridge's C++ table. The same steps in plain torch, from the same start, give the
same weights.

    python examples/train_numpy_weights.py [--quick]
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

import tensorbridge as tb


def make_model(weights: list[np.ndarray]) -> torch.nn.Sequential:
    """A two-layer MLP whose parameters are the given numpy arrays (wrapped, not copied)."""
    first, second = torch.nn.Linear(4, 32), torch.nn.Linear(32, 3)
    for layer, w, b in ((first, weights[0], weights[1]), (second, weights[2], weights[3])):
        layer.weight = torch.nn.Parameter(tb.wrap(w))
        layer.bias = torch.nn.Parameter(tb.wrap(b))
    return torch.nn.Sequential(first, torch.nn.Tanh(), second)


def train(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, steps: int) -> float:
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    loss = torch.zeros(())
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    return float(loss.detach())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few steps only")
    steps = 5 if parser.parse_args().quick else 200

    rng = np.random.default_rng(0)
    shapes = [(32, 4), (32,), (3, 32), (3,)]
    weights = [(rng.standard_normal(s) * 0.3).astype(np.float32) for s in shapes]
    start = [w.copy() for w in weights]
    # Three classes of points around three centres.
    centres = rng.standard_normal((3, 4)).astype(np.float32) * 2
    labels = rng.integers(0, 3, 256)
    points = centres[labels] + rng.standard_normal((256, 4)).astype(np.float32) * 0.5

    model = make_model(weights)
    loss = train(model, tb.wrap(points), torch.from_numpy(labels), steps)
    first = next(model.parameters())
    assert tb.to_torch(first).data_ptr() == weights[0].ctypes.data  # no copy

    reference = make_model([w.copy() for w in start])  # the same steps on torch's kernels
    for p in reference.parameters():
        p.data = tb.to_torch(p).clone()
    ref_loss = train(reference, torch.from_numpy(points), torch.from_numpy(labels), steps)
    for w, p in zip(weights, reference.parameters(), strict=True):
        np.testing.assert_allclose(w, p.detach().numpy(), rtol=1e-4, atol=1e-5)

    accuracy = float((model(tb.wrap(points)).argmax(1) == torch.from_numpy(labels)).float().mean())
    print(
        f"{steps} Adam steps: loss {loss:.4f} (plain torch {ref_loss:.4f}), accuracy {accuracy:.2f}"
    )
    print(f"numpy weights changed in place by up to {np.abs(weights[0] - start[0]).max():.3f}")


if __name__ == "__main__":
    main()
