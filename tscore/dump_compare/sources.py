"""Reading a dump of any of three formats into one model: tscore's, msprobe's and ptdbg_ascend's.

* tscore: ``dump.jsonl`` + ``stack.jsonl`` + ``tensors/*.npy`` (:mod:`tscore.dump.writer`).
* msprobe: ``dump.json`` (``{"task", "level", "data": {call: {...}}}``), ``stack.json``,
  tensors in ``dump_tensor_data/`` as ``.pt`` (read through the torch plugin, weights only)
  or ``.npy``.
* ptdbg_ascend: a ``.pkl`` of JSON lines ``[name, step, [], dtype, shape, [max, min, mean]]``
  and a folder named after it holding one ``{name}.npy`` per tensor.

Each becomes a :class:`~tscore.dump_compare.calls.DumpSource`: calls in
execution order, each with its input and output
:class:`~tscore.dump_compare.calls.Item` (a tensor's dtype, shape, statistics
and file; a plain argument's value). A line that cannot be read is logged and
skipped: one bad record never ends the reading of the rest. This module finds
the format and reads it with that format's reader
(:mod:`~tscore.dump_compare.tscore_format`, :mod:`~tscore.dump_compare.msprobe_format`,
:mod:`~tscore.dump_compare.ptdbg_format`).
"""

from __future__ import annotations

import logging
import os
from typing import Any

from tscore.dump_compare.calls import DumpReadError, DumpSource
from tscore.dump_compare.msprobe_format import MSPROBE_FILE, read_msprobe
from tscore.dump_compare.ptdbg_format import read_ptdbg
from tscore.dump_compare.tscore_format import read_tscore
from tscore.dump_format.files import RECORDS_FILE

log = logging.getLogger(__name__)


def detect(path: str) -> tuple[str, str]:
    """Say which format the dump at ``path`` is and which file holds its records.

    :param path: a dump folder (one step of one rank), or its records file
        (``dump.jsonl``, ``dump.json``, a ptdbg ``.pkl``).
    :raises DumpReadError: naming the path when it holds none of the three formats.
    """
    if os.path.isfile(path):
        base = os.path.basename(path)
        if base == RECORDS_FILE:
            return "tscore", path
        if base == MSPROBE_FILE:
            return "msprobe", path
        if base.endswith(".pkl"):
            return "ptdbg", path
        raise DumpReadError(
            f"{path!r} is not a dump's records file: pass a dump folder, a {RECORDS_FILE} (tscore), "
            f"a {MSPROBE_FILE} (msprobe) or a .pkl (ptdbg_ascend)"
        )
    if not os.path.isdir(path):
        raise DumpReadError(f"no dump at {path!r}: no such file or folder")
    for name, kind in ((RECORDS_FILE, "tscore"), (MSPROBE_FILE, "msprobe")):
        if os.path.isfile(os.path.join(path, name)):
            return kind, os.path.join(path, name)
    pkls = sorted(f for f in os.listdir(path) if f.endswith(".pkl"))
    if len(pkls) == 1:
        return "ptdbg", os.path.join(path, pkls[0])
    if len(pkls) > 1:
        raise DumpReadError(f"{path!r} holds several .pkl files ({', '.join(pkls)}): pass the one to compare")
    raise DumpReadError(
        f"no dump in {path!r}: it holds no {RECORDS_FILE} (tscore), {MSPROBE_FILE} (msprobe) or .pkl "
        "(ptdbg_ascend); pass one step's rank folder, such as dump/step0/rank0"
    )


def read_dump(path: str | os.PathLike[str], data_dir: str | None = None, *, lazy: bool = False) -> DumpSource:
    """Read the dump at ``path`` (a folder of one step and rank, or its records file), any format.

    :param data_dir: for a ptdbg ``.pkl``, the folder of its ``.npy`` files when it is not the
        folder beside the ``.pkl`` named after it (ptdbg's ``npu_dump_data_dir``).
    :param lazy: read a tscore or msprobe dump's values only when asked (``source.load(calls)``), so that
        memory holds the calls' names, not their values; ``source.close()`` at the end.
    :raises DumpReadError: naming the path when no dump is there or its records cannot be read.
    """
    kind, records = detect(os.fspath(path))
    try:
        if kind == "ptdbg":
            source = read_ptdbg(records, data_dir)
        else:
            source = read_tscore(records, lazy) if kind == "tscore" else read_msprobe(records, lazy)
    except DumpReadError:
        raise
    except Exception as exc:
        raise DumpReadError(f"{records}: cannot be read ({type(exc).__name__}: {str(exc)[:200]})") from exc
    log.info("%s: %s dump, %d calls, %s", records, kind, len(source.calls), source.task)
    return source


def as_records(source: DumpSource) -> list[dict[str, Any]]:
    """Give a dump's calls as tscore's records (``name``, ``inputs``, ``outputs``, ``stack_lines``).

    For ``parse`` and any reader of tscore's records, whichever tool wrote the dump.
    """
    out = []
    for call in source.calls:
        record: dict[str, Any] = {"name": call.label, "stack_lines": call.stack, "folder": source.path}
        for side, items in (("inputs", call.inputs), ("outputs", call.outputs)):
            entries = []
            for item in items:
                if not item.is_tensor:
                    entries.append({"name": item.name, "type": item.dtype, "value": item.value})
                    continue
                stats = item.stats or (None, None, None, None)
                entries.append(
                    {
                        "name": item.name,
                        "type": "tensor",
                        "dtype": item.dtype,
                        "shape": list(item.shape or ()),
                        **dict(zip(("max", "min", "mean", "norm"), stats, strict=False)),
                    }
                )
            record[side] = entries
        out.append(record)
    return out
