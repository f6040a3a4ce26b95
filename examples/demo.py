"""tensorbridge demo: what a user can do today.

1. Wrap a numpy array and a torch tensor into tensorbridge's C++ tensor without copying
   (the data pointers printed are the same).
2. Run ATen ops from the C++ table on them (aten::add.Tensor on Eigen, aten::mm and
   aten::gelu on oneDNN), and hand the results to numpy and torch, again without copying.
3. See how each op was served (metrics, explain).
"""

import numpy as np
import torch

import tensorbridge as tb


def main() -> None:
    print(f"tensorbridge {tb.__version__}, oneDNN {tb.onednn_info()}")

    print("\n-- 1. wrap foreign memory, zero-copy")
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = torch.linspace(-1, 1, 6).reshape(3, 2)
    xa, xt = tb.from_dlpack(a), tb.from_dlpack(t)
    print(f"numpy  data {a.ctypes.data:#x} -> Array data {xa.data_ptr:#x}  {xa}")
    print(f"torch  data {t.data_ptr():#x} -> Array data {xt.data_ptr:#x}  {xt}")
    assert xa.data_ptr == a.ctypes.data and xt.data_ptr == t.data_ptr()

    print("\n-- 2. ATen ops through the C++ table")
    s = tb.call("aten::add.Tensor", xa, xa, 1)
    print("aten::add.Tensor(a, a)        =", s.numpy().tolist())
    mm = tb.call("aten::mm", xa, xt)
    print("aten::mm(numpy, torch)        =", mm.numpy().round(4).tolist())
    np.testing.assert_allclose(mm.numpy(), a @ t.numpy(), rtol=1e-6)
    g = tb.call("aten::gelu", xt, "tanh")
    back = torch.from_dlpack(g)
    print(f"aten::gelu(torch, 'tanh')     = {back.flatten().tolist()}")
    print(f"result handed to torch: Array {g.data_ptr:#x} -> torch {back.data_ptr():#x}")
    torch.testing.assert_close(back, torch.nn.functional.gelu(t, approximate="tanh"))

    view = xa.T  # a view: same memory, swapped strides
    print(f"transposed view: strides {view.strides}, data {view.data_ptr:#x}")

    print("\n-- 3. how each op was served")
    print(tb.metrics_report())
    print(tb.explain("aten::mm"))
    print("\nAll results checked against numpy / torch.")


if __name__ == "__main__":
    main()
