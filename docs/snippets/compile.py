"""torch.compile and torch.export on tensorbridge plans (docs/guide/compile.rst)."""

import torch

import tensorbridge as tb

torch.manual_seed(0)

# [compile]
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)).eval()
compiled = torch.compile(model, backend="tensorbridge")
x = torch.randn(8, 16)
with torch.no_grad():
    out = compiled(x)  # first call: dynamo captures, the backend builds one plan
    out = compiled(x)  # later calls: the plan runs in C++, no Python between ops
    torch.testing.assert_close(out, model(x))
print(tb.diagnostics.plan_metrics(compiled))
# [compile end]

# [explain]
text = tb.diagnostics.explain(compiled)  # every plan: nodes, kernels, fused nodes, slots, fallbacks
print(text)
assert "tensorbridge::matmul_epilogue" in text  # the gelu was fused into the first addmm
# [explain end]

# [profile]
with tb.diagnostics.profile(compiled) as prof, torch.no_grad():
    for _ in range(20):
        compiled(x)
print(prof)  # per plan: the costliest nodes; then per op over all plans
slowest = max(prof.nodes, key=lambda n: n["total_us"])
print(slowest["op"], slowest["calls"], "calls")
# [profile end]

# [dynamic]
mlp = torch.compile(torch.nn.Linear(16, 4), backend="tensorbridge", dynamic=True)
with torch.no_grad():
    for batch in (2, 3, 5, 3):
        mlp(torch.randn(batch, 16))
m = tb.diagnostics.plan_metrics(mlp)
print(m)  # one shape plan per distinct input shape, reused after
assert m["compilations"] == 1 and m["shape_plans"] == 3
# [dynamic end]

# [train]
net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
step = torch.compile(lambda x, y: torch.nn.functional.mse_loss(net(x), y), backend="tensorbridge")
opt = torch.optim.SGD(net.parameters(), lr=0.05)
y = torch.zeros(8, 1)
for _ in range(5):
    opt.zero_grad()
    loss = step(x, y)  # a forward plan; backward() runs the backward plan
    loss.backward()
    opt.step()
print(f"loss after 5 steps: {loss.item():.4f}")
# [train end]

# [export]
ep = torch.export.export(model, (x,))
run = tb.load_exported(ep)  # one plan, built once, bound to the program's weights
with torch.no_grad():
    torch.testing.assert_close(run(x), model(x))
# [export end]

# [nofusion]
tb.config.fusion = False  # plans built from now on keep addmm and gelu apart


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(16, 32)

    def forward(self, v):
        return torch.nn.functional.gelu(self.fc(v))


plain = torch.compile(Block().eval(), backend="tensorbridge")
with torch.no_grad():
    plain(x)
assert "matmul_epilogue" not in tb.diagnostics.explain(plain)
tb.config.fusion = True
# [nofusion end]
