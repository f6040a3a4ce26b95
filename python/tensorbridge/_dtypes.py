"""The one dtype table: tensorbridge's dtype names (``Array.dtype``, numpy's and JAX's names)
and the torch dtypes they are."""

from __future__ import annotations

import numpy as np
import torch

TORCH_DTYPES: dict[str, torch.dtype] = {
    "bool": torch.bool,
    "uint8": torch.uint8,
    "int8": torch.int8,
    "int16": torch.int16,
    "int32": torch.int32,
    "int64": torch.int64,
    "uint16": torch.uint16,
    "uint32": torch.uint32,
    "uint64": torch.uint64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
    "complex64": torch.complex64,
    "complex128": torch.complex128,
}

_NAMES: dict[torch.dtype, str] = {v: k for k, v in TORCH_DTYPES.items()}


def torch_dtype(dtype, who: str) -> torch.dtype:
    """The torch dtype of a numpy dtype (or anything ``np.dtype`` takes: JAX's bfloat16 is
    ml_dtypes'); ``TypeError`` naming `who` when torch has none."""
    name = str(np.dtype(dtype))
    if name in TORCH_DTYPES:
        return TORCH_DTYPES[name]
    raise TypeError(f"{who}: dtype {name} has no torch equivalent")


def numpy_dtype(dtype: torch.dtype) -> np.dtype:
    """The numpy dtype of a torch dtype of the table (bfloat16: ml_dtypes')."""
    name = _NAMES[dtype]
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)
