"""How an op is served: lookup order, legal ops, decompositions, fallback, metrics
(docs/serving.rst)."""

import numpy as np
import torch

import tensorbridge as tb

x = np.linspace(-2, 2, 8, dtype=np.float32)

# [explain]
print(tb.diagnostics.explain("aten::gelu"))
# aten::gelu on cpu: kernel, kernel for this device (registered at kernels/activation.cc:...)
print(tb.schema("aten::gelu"))
# aten::gelu(Tensor self, *, str approximate="none") -> Tensor
served = {o["op"]: o["served_by"] for o in tb.ops()}
assert served["aten::gelu"] == "kernel"
# [explain end]

# [legal]
assert "aten::gelu" in tb.config.legal_ops
tb.config.decompose("aten::gelu")  # from its next call on, gelu runs as simpler table ops
print(tb.diagnostics.explain("aten::gelu"))
# aten::gelu on cpu: decomposition, decomposition (op is not in the backend-legal set) ...
tb.diagnostics.reset_metrics()
out = tb.call("aten::gelu", x)
assert tb.diagnostics.metrics()["aten::gelu"]["decomposition"] == 1
np.testing.assert_allclose(out.numpy(), torch.nn.functional.gelu(torch.from_numpy(x)), atol=1e-6)
tb.config.reset_legal_ops()  # every composite with a kernel runs whole again
# [legal end]

# [fallback]
print(tb.diagnostics.explain("aten::special_airy_ai"))
# aten::special_airy_ai: not registered; a call would take the fallback
tb.diagnostics.reset_metrics()
ai = tb.call("aten::special_airy_ai", x)  # torch's own kernel on zero-copy views
assert tb.diagnostics.metrics()["aten::special_airy_ai"]["fallback"] == 1
tb.config.fallback = "error"
try:
    tb.call("aten::special_airy_ai", x)
except NotImplementedError as e:
    print(e)  # names the op and the setting
finally:
    tb.config.fallback = "allow"
# [fallback end]

# [metrics]
tb.diagnostics.reset_metrics()
tb.config.profiling = True  # time every table call
for _ in range(3):
    tb.call("aten::mm", np.ones((64, 64), np.float32), np.ones((64, 64), np.float32))
tb.config.profiling = False
print(tb.diagnostics.metrics_report())  # one op a line, busiest first: calls, how served, time_ns
assert tb.diagnostics.metrics()["aten::mm"]["kernel"] == 3
# [metrics end]


# [register]
@tb.register_kernel("aten::relu")
def clamp_relu(a):  # takes and returns tensorbridge.Arrays
    return tb.from_dlpack(np.maximum(a.numpy(), 0.0))


try:
    assert "python:" in tb.diagnostics.explain("aten::relu")
    print(torch.relu(tb.wrap(x)))  # eager ops on wrapped tensors reach the Python kernel
finally:
    clamp_relu.remove()  # the built-in kernel serves aten::relu again
assert "kernels/" in tb.diagnostics.explain("aten::relu")
# [register end]
