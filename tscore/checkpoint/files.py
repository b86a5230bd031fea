"""Loading and saving checkpoint files of any framework through the plugins.

The kind of a file is told by its suffix, or by its first bytes when the
suffix says nothing, and the plugin that reads that kind answers:
``.ckpt`` and ``.safetensors`` are read by tscore itself, ``.pth``/``.pt`` by
the torch plugin.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

import numpy as np

from tscore.contract.checkpoints import CheckpointContents, CheckpointReadError
from tscore.errors import TargetPathError, UnsupportedObjectError
from tscore.npy_files import writable_target
from tscore.plugins import hook

log = logging.getLogger(__name__)

PathLike = str | os.PathLike[str]

SUFFIX_KINDS = {
    ".ckpt": "ckpt",
    ".safetensors": "safetensors",
    ".pth": "pth",
    ".pt": "pth",
    ".bin": "pth",
    ".tar": "pth",
    ".pdparams": "pdparams",  # a pickle too: known here so that it is never handed to torch.load
}
# The framework whose checkpoints each kind usually holds ("" for either), and its plugin, for hints.
KIND_FRAMEWORK = {"ckpt": "mindspore", "safetensors": "", "pth": "torch", "pdparams": "paddle"}
_PLUGIN_PACKAGE = {
    "torch": "ts_torch (pip install tscore[torch])",
    "paddle": "ts_paddle (pip install tscore[paddle])",
}


def suffix_kinds() -> dict[str, str]:
    """Return ``{suffix: kind}``: tscore's own, and those the loaded plugins declare."""
    kinds = dict(SUFFIX_KINDS)
    for answer in hook().ts_checkpoint_suffixes():
        kinds.update({str(k).lower(): str(v) for k, v in (answer or {}).items()})
    return kinds


def sniff_kind(path: str) -> str:
    """Tell a checkpoint's kind from its suffix, else from its first bytes; ``""`` when unknown."""
    suffix = os.path.splitext(path)[1].lower()
    kinds = suffix_kinds()
    if suffix in kinds:
        return kinds[suffix]
    with open(path, "rb") as stream:
        head = stream.read(9)
    if head[:2] == b"PK" or head[:1] == b"\x80":  # torch zip archive / legacy pickle
        return "pth"
    if len(head) == 9 and head[8:9] == b"{":
        return "safetensors"
    if head[:1] == b"\x0a":  # protobuf field 1, length-delimited
        return "ckpt"
    return ""


def load_checkpoint(path: PathLike, *, trust_pickle: bool = False) -> CheckpointContents:
    """Read a checkpoint file (``.ckpt``, ``.safetensors``, ``.pth``/``.pt``) into numpy arrays.

    :param trust_pickle: allow a torch file to unpickle arbitrary objects (a
        whole pickled model). Only for files you trust: unpickling runs code.
    :raises CheckpointReadError: for a missing, damaged or unknown file, naming it.
    """
    name = os.fspath(path)
    if not os.path.isfile(name):
        what = "is a folder" if os.path.isdir(name) else "does not exist"
        raise CheckpointReadError(
            f"checkpoint {name!r} {what}; pass the path of a checkpoint file", path=name
        )
    try:
        kind = sniff_kind(name)
    except OSError as exc:
        raise CheckpointReadError(
            f"cannot read checkpoint {name!r}: {exc.strerror or exc}", path=name
        ) from exc
    contents = hook().ts_load_checkpoint(path=name, kind=kind, trust=trust_pickle)
    if contents is None:
        framework = KIND_FRAMEWORK.get(kind, "")
        if framework in _PLUGIN_PACKAGE:
            hint = f"install the {framework} plugin, {_PLUGIN_PACKAGE[framework]}, and {framework} itself"
        else:
            hint = "tscore reads .ckpt and .safetensors, and other kinds through their framework's plugin"
        raise CheckpointReadError(
            f"no installed plugin reads {name!r} (kind {kind or 'unknown'}): {hint}", path=name
        )
    for entry, reason in contents.skipped.items():
        log.info("%s: %r skipped: %s", name, entry, reason)
    return contents


def format_of(path: str, format: str | None) -> str:
    """Return the checkpoint format to write: ``format`` if given, else the one the suffix names."""
    if format:
        return format
    kinds = suffix_kinds()
    kind = kinds.get(os.path.splitext(path)[1].lower())
    if kind is None:
        raise TargetPathError(
            f"cannot tell which checkpoint format to write to {path!r}: end the name in "
            f"{', '.join(sorted(kinds))}, or pass format="
        )
    return kind


def save_checkpoint(
    params: Mapping[str, np.ndarray], path: PathLike, *, format: str | None = None, framework: str = ""
) -> str:
    """Write ``{name: array}`` as a checkpoint, atomically; return the path.

    :param format: ``"ckpt"``, ``"safetensors"``, ``"pth"``; by default from the suffix.
    :param framework: the framework that will read it (safetensors records it).
    :raises TargetPathError: when the folder does not exist or the format is unknown.
    """
    name = writable_target(path, "checkpoint")
    chosen = format_of(name, format)
    written = hook().ts_save_checkpoint(params=params, path=name, format=chosen, framework=framework)
    if not written:
        framework = KIND_FRAMEWORK.get(chosen, "")
        hint = f"; install {_PLUGIN_PACKAGE[framework]}" if framework in _PLUGIN_PACKAGE else ""
        raise UnsupportedObjectError(f"no installed plugin writes {chosen!r} checkpoints ({name!r}){hint}")
    return name
