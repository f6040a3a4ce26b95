"""Eager PyTorch on wrapped arrays: modules, autograd, optimizers (docs/guide/eager.rst)."""

import numpy as np
import torch

import tensorbridge as tb

# [tensor]
a = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
t = tb.wrap(a)  # a torch.Tensor subclass over a's memory
assert isinstance(t, torch.Tensor) and isinstance(t, tb.Tensor)
u = torch.nn.functional.gelu(t) * 2 + 1  # every ATen op runs in the C++ table
assert isinstance(u, tb.Tensor)
t.mul_(10)  # in-place ops write into the numpy array
assert a[0, 0] == -10.0
print(tb.to_numpy(u).round(3))
# [tensor end]

# [module]
torch.manual_seed(0)
w = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
with torch.no_grad():
    model[0].weight.copy_(torch.from_numpy(w))
tb.wrap_module(model)  # parameters and buffers become tb.Tensors, in place, zero-copy
assert isinstance(model[0].weight, tb.Tensor)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = tb.wrap(np.random.default_rng(1).standard_normal((16, 3)).astype(np.float32))
target = tb.wrap(np.zeros((16, 1), np.float32))
losses = []
for _ in range(20):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), target)
    loss.backward()  # autograd: backward ops come through the table too
    opt.step()  # the optimizer's updates are table ops on the wrapped weights
    losses.append(loss.item())
assert losses[-1] < losses[0]
print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f}")
# [module end]

# [numpy-weights]
weights = np.ones((2, 3), np.float32)  # weights owned by numpy
layer = torch.nn.Linear(3, 2, bias=False)
layer.weight = torch.nn.Parameter(tb.wrap(weights))
opt = torch.optim.SGD(layer.parameters(), lr=0.5)
out = layer(tb.wrap(np.ones((1, 3), np.float32))).sum()
out.backward()
opt.step()  # SGD writes into the numpy array: weights -= 0.5 * grad
assert np.allclose(weights, 0.5)
# [numpy-weights end]

# [metrics]
tb.diagnostics.reset_metrics()
torch.relu(tb.wrap(np.ones(3, np.float32)))
print(tb.diagnostics.metrics()["aten::relu"])  # {'calls': 1, 'kernel': 1, ...}
# [metrics end]
