"""``save`` and ``save_grad``: tensors and gradients to ``.npy`` under one naming.

Both work the same for numpy, PyTorch, MindSpore (PyNative and graph mode)
and any framework whose plugin is loaded. Names follow
:mod:`tscore.naming`; every call takes the next id from one counter per
process, shared by ``save`` and ``save_grad`` and safe across threads.

Compiled code (MindSpore graph mode): the plugins are told, when they are
registered, that tscore's functions run at run time and that ``save_grad``
is to be translated (:mod:`tscore.contract.runtime`), so ``save`` called inside
``construct`` or an ``@ms.jit`` function runs on the real values, and
``save_grad`` asks for a gradient hook while the graph is built and inserts
it; the hook writes the file each time backward runs. Under compilation the
id of a gradient file is taken when backward reaches it, not when forward
passes.
"""

from __future__ import annotations

import functools
import itertools
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from tscore import folder_writers, naming, npy_files
from tscore.errors import InvalidNameError, UnsupportedObjectError
from tscore.json_files import parse_json
from tscore.plugins import hook
from tscore.tensors import is_tensor, tensor_meta, to_numpy, type_name

logger = logging.getLogger(__name__)

_id_lock = threading.Lock()
_ids: Iterator[int] = itertools.count()


def next_save_id() -> int:
    """Take the next id from the process-wide counter (0, 1, 2 ...)."""
    with _id_lock:
        return next(_ids)


def reset_save_id(start: int = 0) -> None:
    """Restart the id counter of ``save``/``save_grad`` at ``start`` (for a new run in one process).

    Files that other processes wrote into a folder before this call then count as an earlier run's,
    which a save replaces (a notebook kernel that outlives runs of a script beside it).
    """
    global _ids
    with _id_lock:
        _ids = itertools.count(start)
    folder_writers.start_new_run()  # what other processes wrote before now is an earlier run's


def _leaves(data: object, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], object]]:
    """Yield ``(name path, tensor)`` for every tensor in nested lists, tuples and dicts."""
    if data is None:
        return
    if isinstance(data, Mapping):
        for key, value in data.items():
            yield from _leaves(value, (*path, naming.clean_part(key, "a dict key")))
    elif isinstance(data, (list, tuple)):
        for index, value in enumerate(data):
            yield from _leaves(value, (*path, str(index)))
    elif is_tensor(data):
        yield path, data
    else:
        where = f" at {'/'.join(path)}" if path else ""
        raise UnsupportedObjectError(
            f"save: cannot save an object of type {type_name(data)}{where}; pass a tensor "
            "or a list, tuple or dict of tensors"
        )


@dataclass(frozen=True)
class _Converted:
    path: tuple[str, ...]
    array: np.ndarray
    meta: dict[str, Any]


def _convert(path: tuple[str, ...], tensor: object) -> _Converted:
    meta = tensor_meta(tensor)
    # No defensive copy: the array is written to disk before save returns.
    return _Converted(path, to_numpy(tensor, copy=False), meta.model_dump(mode="json"))


def _write(
    folder: str,
    name: str,
    ids: list[int | None],
    suffix: str | None,
    items: list[_Converted],
    layout: str = naming.SPEC_003,
) -> list[str]:
    """Name (``ids``: each item's id), write and record converted tensors; return the paths written."""
    plan: dict[str, _Converted] = {}
    for item_id, item in zip(ids, items, strict=True):
        base = name or naming.shape_name(item.array.shape)
        file = naming.file_name(item_id, base, item.path, suffix, layout)
        if file in plan:
            raise InvalidNameError(
                f"save: two tensors would both be written to {file!r}; "
                "rename the dict keys that differ only in '/' or control characters"
            )
        plan[file] = item
    if not plan:
        return []
    folder = rank_folder(folder)
    npy_files.ensure_folder(folder)
    folder_writers.claim(folder)
    written: list[str] = []
    records: list[dict[str, Any]] = []
    writer = folder_writers.writer_id()
    for file, item in plan.items():
        stored = npy_files.storable(item.array)
        path = npy_files.write_npy(os.path.join(folder, file), stored, place=_place)
        written.append(path)
        records.append(
            {"file": os.path.basename(path), **item.meta, "stored_dtype": str(stored.dtype), "writer": writer}
        )
    npy_files.append_meta(folder, records)
    _placed.difference_update(written)  # recorded now: the side file says whose they are
    return written


def rank_folder(folder: str) -> str:
    """Return ``folder/rank{r}`` when a loaded framework's distributed layer gives this process a rank.

    Every rank of a distributed job then writes its own folder, as spec 004
    lays dumps out; without one, ``folder`` itself.
    """
    rank = hook().ts_current_rank()
    return os.path.join(folder, f"rank{rank}") if rank is not None else folder


_warned: set[str] = set()  # folders where a collision with another process was reported
_placed: set[str] = set()  # files this process placed whose record is not written yet (any thread)
_placed_pid = [os.getpid()]
_owners: dict[str, tuple[int, dict[str, str]]] = {}  # folder -> (bytes of meta read, {file: writer})
_owners_lock = threading.Lock()


def _recorded_writer(folder: str, file: str) -> str | None:
    """Return the writer that the side file last recorded for ``file`` (read on from where it stopped)."""
    path = os.path.join(folder, npy_files.META_FILE_NAME)
    with _owners_lock:
        offset, owners = _owners.get(folder, (0, {}))
        try:
            with open(path, "rb") as stream:
                stream.seek(offset)
                data = stream.read()
        except OSError:
            return None
        complete = data.rfind(b"\n") + 1  # a line still being appended is read next time
        for line in data[:complete].splitlines():
            try:
                record = parse_json(line)
            except ValueError:  # a damaged line (parse_json raises nothing else)
                continue
            if isinstance(record, dict) and isinstance(record.get("file"), str):
                writer = record.get("writer")
                owners[record["file"]] = writer if isinstance(writer, str) else ""
        _owners[folder] = (offset + complete, owners)
        return owners.get(file) or None


_START_TICK = 0.01  # how finely the kernel says when a process started (one clock tick)


def _written_since_start(path: str) -> bool:
    """Say whether the file at ``path`` was last written after this process started.

    The start is known to a clock tick; a file written within that tick counts as older.
    """
    try:
        written = os.stat(path).st_mtime
    except OSError:
        return False
    return written > folder_writers.process_started() + _START_TICK


def _taken_by_another(folder: str, file: str) -> list[str]:
    """Return the other processes whose file ``folder/file`` is, or [] when this process may replace it.

    A file is replaced when the side file says this process wrote it, or when it is an earlier
    run's: written before this process started, by a process that is gone. A file that a process
    started beside this one wrote is kept, even when that process has ended since (it finished
    its saves first): it was not an earlier run. A file no record names, in a folder another
    live process writes, may be that process's, written a moment ago: it is kept.
    """
    path = os.path.join(folder, file)
    if path in _placed:  # this process's (another thread's, its record not yet written)
        return []
    owner = _recorded_writer(folder, file)
    if owner == folder_writers.writer_id():
        return []
    if owner is None:
        others = folder_writers.live_writers(folder)
        if others:
            return others
        return ["a process that has ended"] if _written_since_start(path) else []
    host, _, pid = owner.rpartition("-")
    if not pid.isdigit():
        return []
    if folder_writers.writer_alive(folder, host or None, int(pid)):
        return [owner]
    return [f"{owner} (ended)"] if _written_since_start(path) else []


def _place(temp: str, path: str) -> str:
    """Give the complete file ``temp`` its final name ``path``, never replacing another live process's file.

    The name is created exclusively (a hard link). When ``path`` exists it is
    replaced unless another process that ran beside this one wrote it (:func:`_taken_by_another`);
    then the file is saved as ``{stem}.{writer}.npy`` instead, and one
    warning per folder names both writers.
    """
    try:
        _link_new(temp, path)
    except FileExistsError:
        folder = os.path.dirname(path)
        owners = _taken_by_another(folder, os.path.basename(path))
        if not owners:
            os.replace(temp, path)
        else:
            stem, ext = os.path.splitext(path)
            path = f"{stem}.{folder_writers.writer_id()}{ext}"
            os.replace(temp, path)
            if folder not in _warned:
                _warned.add(folder)
                logger.warning(
                    "save: %s is also written by process(es) %s, running beside this one; this process (%s) "
                    "saves files whose names they already took as {name}.%s.npy. Give each process its own "
                    "folder.",
                    folder,
                    ", ".join(owners),
                    folder_writers.writer_id(),
                    folder_writers.writer_id(),
                )
    if _placed_pid[0] != os.getpid():  # a forked child: its parent's files are not its own
        _placed.clear()
        _placed_pid[0] = os.getpid()
    _placed.add(path)
    return path


def _link_new(temp: str, path: str) -> None:
    """Move ``temp`` to ``path`` only if ``path`` does not exist (``FileExistsError`` otherwise)."""
    try:
        os.link(temp, path)
    except FileExistsError:
        raise
    except OSError:  # a file system without hard links: check, then rename (not atomic)
        if os.path.lexists(path):
            raise FileExistsError(path) from None
        os.replace(temp, path)
        return
    os.unlink(temp)


def save(
    file: str | os.PathLike[str] | None,
    data: object,
    auto_id: bool = True,
    suffix: str | None = None,
    *,
    layout: str = naming.SPEC_003,
    output_mode: str = "npy",
) -> list[str]:
    """Save a tensor, or a nested list/tuple/dict of tensors, as ``.npy`` files.

    Names are ``{id}_{name}[_{idx|key}][_{suffix}].npy``: ``save("out/dense",
    x)`` writes ``out/0_dense.npy``, a list adds each item's index
    (``2_dense_0.npy``), a dict each key (``3_dense_x1.npy``). ``None`` items
    are skipped. With ``file`` ``None`` or ``""`` each tensor is named
    ``tensor_(shape)`` in the current folder. Folders are created.

    :param file: folder and name prefix, e.g. ``"./dump/input"``.
    :param data: a tensor of any loaded framework (numpy, torch, MindSpore),
        or lists, tuples and dicts of them.
    :param auto_id: prefix the names with this call's id from the
        process-wide counter (shared with :func:`save_grad`).
    :param suffix: appended to every name, e.g. ``"torch"``.
    :param layout: ``"spec003"`` (the default, above) or ``"1.0.18"``, the names TroubleShooter
        1.0.18 writes: one id per tensor and the index or key after a dot (``1_l.0.npy``,
        ``2_l.1.npy``, ``3_d.x_torch.npy``). The compare functions read either.
    :param output_mode: ``"npy"`` writes files; ``"print"`` prints each tensor in full to
        stdout after the marker ``_TS_SAVE_NAME:{name}`` (TroubleShooter's), for a run that
        cannot write files; ``ts.widget.save_convert`` turns the printed text into the files.
    :return: the paths written (none when printing).
    :raises UnsupportedObjectError: (a ``TypeError``) naming the type of an
        object that is not a tensor.
    :raises TargetPathError: (an ``OSError``) naming a folder or file that
        cannot be written.
    """
    if layout not in naming.LAYOUTS:
        raise ValueError(f"save: layout must be one of {', '.join(naming.LAYOUTS)}, not {layout!r}")
    if output_mode not in ("npy", "print"):
        raise ValueError(f"save: output_mode must be 'npy' or 'print', not {output_mode!r}")
    folder, name = naming.split_target(file)
    suffix = naming.clean_part(suffix, "suffix") if suffix else None
    ids: list[int | None]
    if layout == naming.TROUBLESHOOTER_1_0_18:  # one id per tensor written, as 1.0.18 counts
        items = [_convert(path, tensor) for path, tensor in _leaves(data, ())]
        ids = [next_save_id() if auto_id else None for _ in items]
    else:  # one id per call
        save_id = next_save_id() if auto_id else None
        items = [_convert(path, tensor) for path, tensor in _leaves(data, ())]
        ids = [save_id] * len(items)
    if output_mode == "print":
        _print(name, suffix, items, layout)
        return []
    return _write(folder, name, ids, suffix, items, layout)


def _print(name: str, suffix: str | None, items: list[_Converted], layout: str) -> None:
    """Print each tensor after its marker, named as its file less the id (save_convert numbers them)."""
    from tscore.printed_tensors import write_printed

    for item in items:
        file = naming.file_name(None, name or naming.shape_name(item.array.shape), item.path, suffix, layout)
        write_printed(file[: -len(naming.NPY_SUFFIX)], item.array)


@dataclass(frozen=True)
class _GradTarget:
    """Where the gradient of one ``save_grad`` call goes."""

    folder: str
    name: str
    suffix: str | None

    def write(self, save_id: int | None, grad: object) -> None:
        _write(self.folder, self.name, [save_id], self.suffix, [_convert((), grad)])

    def write_next(self, grad: object) -> None:
        """Write ``grad`` under an id taken now (compiled graphs, where forward has no Python)."""
        self.write(next_save_id(), grad)

    def attach(self, tensor: object) -> object:
        """Take an id now and hook ``tensor`` so that its gradient is written when backward runs."""
        save_id = next_save_id()
        hooked = hook().ts_attach_grad_hook(tensor=tensor, callback=functools.partial(self.write, save_id))
        if hooked is None:
            raise UnsupportedObjectError(
                f"save_grad: no loaded tscore plugin can hook the gradient of {type_name(tensor)}; "
                "pass a tensor of a loaded framework that takes part in a differentiated graph"
            )
        return hooked


def grad_saver(file: str | os.PathLike[str] | None, suffix: str | None = "backward") -> Callable[[Any], Any]:
    """Return the function that :func:`save_grad` applies to its tensor.

    Outside a compile this hooks the tensor through ``ts_attach_grad_hook``.
    While a framework compiles a graph (MindSpore calls this with constant
    arguments as it builds the graph), it is what that framework's
    ``ts_compiled_grad_hook`` returns.
    """
    folder, name = naming.split_target(file)
    target = _GradTarget(folder, name, naming.clean_part(suffix, "suffix") if suffix else None)
    compiled = hook().ts_compiled_grad_hook(callback=target.write_next)
    return compiled if compiled is not None else target.attach


def save_grad(file: str | os.PathLike[str] | None, data: Any, suffix: str = "backward") -> Any:
    """Save the gradient that flows back into ``data``; use the returned tensor downstream.

    ``x = save_grad("out/dense", x)`` in forward writes ``out/{id}_dense_backward.npy``
    when backward runs. The id is taken at this call, from the counter that
    :func:`save` uses, so the files sort in forward order.

    :param file: folder and name prefix, as for :func:`save`.
    :param data: a tensor of any loaded framework that tracks gradients (MindSpore: PyNative or graph mode).
    :param suffix: appended to the name; ``"backward"`` by default.
    :return: a tensor equal to ``data`` that carries the hook: pass it to the
        next operation, or nothing is saved.
    """
    return grad_saver(file, suffix)(data)
