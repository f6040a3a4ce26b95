"""tensorbridge tensors across processes: DataLoader workers over datasets of wrapped arrays,
torch.multiprocessing queues. Tensors travel by value (pickle); DataLoader batches, which the
workers' collate makes in shared memory, arrive as torch does it."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp
from torch.utils.data import DataLoader, Dataset

import tensorbridge as tb


class WrappedRows(Dataset):
    """Rows of a wrapped numpy array (features) and a numpy label array."""

    def __init__(self):
        self.x = tb.wrap(np.arange(40, dtype=np.float32).reshape(10, 4))
        self.y = np.arange(10)

    def __len__(self):
        return 10

    def __getitem__(self, i):
        return self.x[i] * 2, self.y[i]


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_dataloader_workers_over_wrapped_arrays(context):
    ds = WrappedRows()
    want = [(tb.to_torch(x), y) for x, y in DataLoader(ds, batch_size=4)]
    assert isinstance(next(iter(DataLoader(ds, batch_size=4)))[0], tb.Tensor)  # in process
    loader = DataLoader(
        ds, batch_size=4, num_workers=2, multiprocessing_context=context, timeout=120
    )
    got = list(loader)
    assert len(got) == len(want) == 3
    for (x, y), (wx, wy) in zip(got, want, strict=True):
        # The batch a worker's collate stacked into shared memory: a torch tensor, handed over
        # by its shared-memory handle; tb.wrap(x) wraps it without a copy.
        assert type(x) is torch.Tensor and x.is_shared()
        assert tb.wrap(x).data_ptr() == x.data_ptr()
        assert torch.equal(x, wx) and torch.equal(y, wy)


def _double(inbox, outbox):
    t = inbox.get(timeout=60)
    outbox.put((isinstance(t, tb.Tensor), t * 2))


def test_multiprocessing_queue_passes_tensors_by_value():
    ctx = mp.get_context("spawn")
    inbox, outbox = ctx.Queue(), ctx.Queue()
    proc = ctx.Process(target=_double, args=(inbox, outbox))
    proc.start()
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = tb.wrap(a)
    inbox.put(t)
    wrapped, back = outbox.get(timeout=120)
    proc.join(timeout=60)
    assert proc.exitcode == 0
    assert wrapped and type(back) is tb.Tensor
    np.testing.assert_array_equal(tb.to_numpy(back), a * 2)
    assert back.data_ptr() != a.ctypes.data  # a value came back, not the parent's memory


def test_share_memory_is_refused_with_the_reason():
    t = tb.wrap(np.zeros(3, np.float32))
    with pytest.raises(NotImplementedError, match="pass between processes by value"):
        t.share_memory_()
    assert not t.is_shared()
