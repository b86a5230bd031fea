"""The built-in plugin that reads and writes MindSpore ``.ckpt`` and safetensors with numpy alone.

It is always registered, so checkpoints can be compared and converted where
only torch (or no framework at all) is installed.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from tscore.checkpoint.ckpt_format import read_ckpt, write_ckpt
from tscore.checkpoint.safetensors_format import read_safetensors, write_safetensors
from tscore.contract.checkpoints import CheckpointContents
from tscore.hookspecs import hookimpl

# safetensors metadata "format" value per framework, as each framework writes it
SAFETENSORS_FORMAT = {"mindspore": "ms", "torch": "pt", "numpy": "np"}


@hookimpl(trylast=True)
def ts_load_checkpoint(path: str, kind: str) -> CheckpointContents | None:
    """Read ``.ckpt`` and safetensors files."""
    if kind == "ckpt":
        return read_ckpt(path)
    if kind == "safetensors":
        return read_safetensors(path)
    return None


@hookimpl(trylast=True)
def ts_save_checkpoint(
    params: Mapping[str, np.ndarray], path: str, format: str, framework: str
) -> bool | None:
    """Write ``.ckpt`` and safetensors files."""
    if format == "ckpt":
        write_ckpt(params, path)
        return True
    if format == "safetensors":
        tag = SAFETENSORS_FORMAT.get(framework)
        write_safetensors(params, path, metadata={"format": tag} if tag else None)
        return True
    return None
