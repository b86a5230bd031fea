"""The bytes of an array as a checkpoint file stores them."""

from __future__ import annotations

import numpy as np


def byte_view(array: np.ndarray) -> memoryview:
    """Return the bytes of ``array`` in C order without copying when it is already contiguous.

    Works for every dtype, ``ml_dtypes`` ones included, and for 0-d arrays.
    """
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8).data
