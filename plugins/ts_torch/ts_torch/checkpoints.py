"""Reading and writing torch checkpoint files (``.pth``/``.pt``) as numpy arrays.

Files are loaded with ``torch.load(weights_only=True)`` unless the caller
trusts them, and memory-mapped when they are in torch's zip format, so the
arrays returned are views of the file rather than copies.
"""

from __future__ import annotations

import os
import pickle
import zipfile
from collections.abc import Mapping
from typing import Any, BinaryIO

import numpy as np

from tscore.plugin_api import CheckpointContents, CheckpointReadError, write_atomic

# Keys under which training scripts commonly nest the state dict.
STATE_DICT_KEYS = ("state_dict", "model_state_dict", "model", "net", "network", "module", "params")


def _zip_damage(path: str) -> tuple[str, int] | None:
    """Locate the damage in a torch zip file: what is wrong and at which byte."""
    size = os.path.getsize(path)
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                try:
                    with archive.open(info) as member:
                        while member.read(1 << 20):
                            pass
                except Exception as exc:
                    return f"archive member {info.filename!r} is damaged ({exc})", info.header_offset
    except Exception:
        return (
            f"no zip directory at the end of the file: the file is truncated or not a torch file "
            f"({size} bytes)",
            size,
        )
    return None


# What torch.save writes first in its pickle format (torch < 1.6, _use_new_zipfile_serialization=False):
# its magic number as a pickled long, after the protocol opcode (and, from protocol 4, a frame opcode).
_MAGIC = b"\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19"


def _kind(path: str) -> str:
    """Say what the file at ``path`` starts as: ``"zip"``, ``"legacy"`` (torch's old pickle), or why neither.

    torch.save writes a zip archive, or before torch 1.6 a pickle that starts with torch's magic
    number. Anything else is no torch checkpoint, whatever ``torch.load`` says about it.
    """
    with open(path, "rb") as stream:
        head = stream.read(32)
    if head.startswith(b"PK"):
        return "zip"
    if head[:1] == b"\x80" and _MAGIC in head:
        return "legacy"
    head = head[:16]
    if not head:
        return "the file is empty (0 bytes)"
    if head[:1] == b"\x80" and len(head) > 1 and 2 <= head[1] <= 5:
        return f"a pickle without torch's header (pickle.dump, not torch.save?), starting {head!r}"
    return f"it starts with {head!r}, neither a zip archive (torch.save) nor torch's pickle (before 1.6)"


def _not_torch(path: str, why: str) -> CheckpointReadError:
    return CheckpointReadError(
        f"{path}: not a torch checkpoint: {why}; pass a file that torch.save wrote", path=path, offset=0
    )


def _read_error(path: str, exc: BaseException, kind: str) -> CheckpointReadError:
    if isinstance(exc, pickle.UnpicklingError) and "weights only" in str(exc).lower():
        return CheckpointReadError(
            f"{path}: torch.load(weights_only=True) refused the file: it holds pickled Python objects "
            "(a whole model or custom classes), and unpickling runs code. If you trust the file, pass "
            "trust_pickle=True (command line: --trust-pickle), or load it yourself and pass the state dict "
            "(pth_para_dict=).",
            path=path,
        )
    damage = _zip_damage(path) if kind == "zip" else None
    if damage is not None:
        what, offset = damage
        return CheckpointReadError(f"{path}: {what}, at byte {offset}", path=path, offset=offset)
    why = f"{type(exc).__name__}: {str(exc).splitlines()[0]}" if str(exc) else type(exc).__name__
    return CheckpointReadError(
        f"{path}: a torch checkpoint that torch.load cannot read ({why}); "
        "it may be truncated or damaged, or written by a newer torch",
        path=path,
    )


def _load(path: str, trust: bool) -> Any:
    import torch

    try:
        return torch.load(path, map_location="cpu", weights_only=not trust, mmap=True)
    except RuntimeError as exc:
        if "mmap can only be used" not in str(exc):
            raise
    return torch.load(path, map_location="cpu", weights_only=not trust)


def _describe(value: object) -> str:
    if isinstance(value, Mapping):
        return f"a dict of {len(value)} entries, not a tensor (optimizer or scheduler state?)"
    if isinstance(value, (int, float, str, bool)):
        return f"{type(value).__name__} {value!r}, not a tensor"
    return f"{type(value).__name__}, not a tensor"


def _state_dict(path: str, loaded: object, skipped: dict[str, str]) -> Mapping[str, object]:
    """Find the state dict in what ``torch.load`` returned."""
    import torch

    if isinstance(loaded, torch.nn.Module):
        return loaded.state_dict()
    if isinstance(loaded, torch.Tensor):  # one tensor per file, as msprobe dumps them: named after the file
        return {os.path.splitext(os.path.basename(path))[0]: loaded}
    if not isinstance(loaded, Mapping):
        raise CheckpointReadError(
            f"{path}: holds a {type(loaded).__name__}, not a state dict; load it yourself and pass the "
            "state dict (pth_para_dict=)",
            path=path,
        )
    if any(isinstance(v, torch.Tensor) for v in loaded.values()):
        return loaded
    for key in STATE_DICT_KEYS:
        inner = loaded.get(key)
        if isinstance(inner, torch.nn.Module):
            inner = inner.state_dict()
        if isinstance(inner, Mapping) and any(isinstance(v, torch.Tensor) for v in inner.values()):
            skipped.update(
                {str(k): f"outside {key!r}: " + _describe(v) for k, v in loaded.items() if k != key}
            )
            return inner
    raise CheckpointReadError(
        f"{path}: no tensors found, at the top level or under any of {', '.join(STATE_DICT_KEYS)}; "
        f"its keys are {list(loaded)[:20]}. Load it yourself and pass the state dict (pth_para_dict=)",
        path=path,
    )


def read_pth(path: str, trust: bool, to_numpy: Any) -> CheckpointContents:
    """Read a torch file into numpy arrays, leaving out (and noting) every entry that is not a tensor."""
    import torch

    kind = _kind(path)  # before torch.load: what is no torch file at all gets no advice about pickles
    if kind not in ("zip", "legacy"):
        raise _not_torch(path, kind)
    try:
        loaded = _load(path, trust)
    except Exception as exc:
        raise _read_error(path, exc, kind) from exc
    out = CheckpointContents(path=path, format="pth")
    for name, value in _state_dict(path, loaded, out.skipped).items():
        if isinstance(value, torch.Tensor):
            out.params[str(name)] = to_numpy(value, copy=False)
            out.dtypes[str(name)] = str(value.dtype)
        else:
            out.skipped[str(name)] = _describe(value)
    return out


def write_pth(params: Mapping[str, np.ndarray], path: str, from_numpy: Any) -> None:
    """Write ``{name: array}`` as a plain torch state dict, atomically."""
    import torch

    state = {name: from_numpy(np.asarray(array), "torch", None) for name, array in params.items()}

    def write(stream: BinaryIO) -> None:
        torch.save(state, stream)

    write_atomic(path, write)
