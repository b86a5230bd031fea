"""The GPU tests: collected only under ``nox -s gpu`` (TSCORE_GPU=1), which needs CUDA and a CUDA torch."""

from __future__ import annotations

import pytest
import torch

if not torch.cuda.is_available():
    raise pytest.UsageError(
        "tests/gpu needs a CUDA device and a CUDA build of torch: run `nox -s gpu` on such a machine"
    )
