"""Writing ``.npy`` files that every numpy user can read back, atomically.

Two rules from the design:

* A crash, ``kill`` or Ctrl-C never leaves a truncated ``.npy``: each file is
  written to a temporary name in the target folder and renamed into place.
* ``.npy`` cannot name bfloat16 or float8 (``np.save`` of an ``ml_dtypes``
  array writes raw ``'<V2'`` that nothing can read back), so such arrays are
  widened to float32 (exact for these formats), and the source dtype is kept
  in a JSON-lines side file, ``tscore_meta.jsonl``, in the same folder.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, BinaryIO

import numpy as np

from tscore import folder_writers, json_lines
from tscore.errors import TargetPathError, UnsupportedObjectError

META_FILE_NAME = "tscore_meta.jsonl"

_temp_ids = itertools.count()

# ml_dtypes float formats that float32 holds exactly; its sub-byte integers fit int8/uint8.
_WIDEN_PREFIXES = (("bfloat", "float32"), ("float", "float32"), ("uint", "uint8"), ("int", "int8"))


@functools.cache
def _loads_back(dtype: np.dtype) -> bool:
    """Say whether ``np.load`` reads an array of ``dtype`` back with the same dtype."""
    descr = np.lib.format.dtype_to_descr(dtype)
    try:
        return bool(np.lib.format.descr_to_dtype(descr) == dtype)
    except (TypeError, ValueError):
        return False


def storable(array: np.ndarray) -> np.ndarray:
    """Return ``array`` in a dtype that ``np.load`` reads back as numbers.

    Plain numpy dtypes pass through unchanged; ``ml_dtypes`` types
    (``bfloat16``, ``float8_*``, ``int4``), which ``.npy`` cannot name, are
    widened without loss to float32, int8 or uint8.

    :raises UnsupportedObjectError: for object arrays and structured dtypes.
    """
    dtype = array.dtype
    if dtype.kind == "O":
        raise UnsupportedObjectError("cannot save an object array: .npy files hold numbers only")
    if dtype.fields is None:
        if _loads_back(dtype):
            return array
        for prefix, wide in _WIDEN_PREFIXES:
            if dtype.name.startswith(prefix):
                return array.astype(wide)
    raise UnsupportedObjectError(f"cannot save an array of dtype {dtype!r} as .npy")


def ensure_folder(folder: str) -> None:
    """Create ``folder`` (and its parents) if needed.

    :raises TargetPathError: naming the folder, when it cannot be created.
    """
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise TargetPathError(
            f"cannot create the folder {folder!r}: {exc.strerror or exc}; pass a path in a writable location"
        ) from exc


def writable_target(path: str | os.PathLike[str], argument: str) -> str:
    """Check that the file ``path`` can be created: its folder exists and it is not a folder.

    Call it before any work, so that bad output paths fail at once.

    :param argument: the argument or option that named the path, for the message.
    :raises TargetPathError: naming the argument, the path and what to do.
    """
    name = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(name))
    if not os.path.isdir(folder):
        raise TargetPathError(f"{argument} {name!r}: the folder {folder!r} does not exist; create it first")
    if os.path.isdir(name):
        raise TargetPathError(f"{argument} {name!r} is a folder; pass a file name")
    return name


@contextlib.contextmanager
def atomic_stream(path: str, place: Callable[[str, str], str] | None = None) -> Iterator[BinaryIO]:
    """Open a hidden temporary file beside ``path``; on a clean exit give it the name ``path``.

    The temporary file is named for this process
    (:func:`tscore.folder_writers.temp_name`) and renamed over ``path``
    (``os.replace`` is atomic on one file system), or handed to
    ``place(temp, path)``, which moves it itself (``save`` never replaces
    another process's file). An exception or ``KeyboardInterrupt`` inside
    the block removes the temporary file and leaves any old ``path`` as it
    was; a ``kill -9`` leaves the temporary file, which the next save into
    the folder or ``tscore clean`` removes.

    :raises TargetPathError: naming the path, when it cannot be written.
    """
    folder, base = os.path.split(path)
    temp = os.path.join(folder, folder_writers.temp_name(base, next(_temp_ids)))
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        raise TargetPathError(
            f"cannot write {path!r}: {exc.strerror or exc}; check that the folder exists and is writable"
        ) from exc
    try:
        with os.fdopen(fd, "wb") as stream:
            yield stream
        (place or _replace)(temp, path)
    except BaseException as exc:
        try:
            os.unlink(temp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError):
            raise TargetPathError(f"cannot write {path!r}: {exc.strerror or exc}") from exc
        raise


class AtomicFile:
    """A file written piece by piece as results come, named only once complete (:func:`atomic_stream`).

    For a report written while its comparison runs: :meth:`finish` gives it its name;
    :meth:`abort` removes it and leaves an old file of that name as it was.

    :raises TargetPathError: naming the path, when it cannot be created.
    """

    def __init__(self, path: str) -> None:
        """Open the hidden temporary file beside ``path``."""
        self.path = path
        self._context: Any = atomic_stream(path)
        self.stream: BinaryIO = self._context.__enter__()

    def write(self, data: bytes) -> None:
        """Append ``data``."""
        self.stream.write(data)

    def finish(self) -> None:
        """Give the complete file its name (once; later calls do nothing)."""
        context, self._context = self._context, None
        if context is not None:
            context.__exit__(None, None, None)

    def abort(self, error: BaseException) -> None:
        """Remove the unfinished file (``error`` stopped the work); once, like :meth:`finish`.

        :raises TargetPathError: naming the path, when ``error`` is the disk failing to take it.
        """
        context, self._context = self._context, None
        if context is not None:
            context.__exit__(type(error), error, error.__traceback__)


def write_atomic(
    path: str, write: Callable[[BinaryIO], object], place: Callable[[str, str], str] | None = None
) -> str:
    """Create or replace the file at ``path`` so that it is complete or absent; return where it went.

    ``write`` fills the stream of :func:`atomic_stream`; ``place`` as there
    (it returns the final path).

    :raises TargetPathError: naming the path, when it cannot be written.
    """
    final = path

    def placed(temp: str, target: str) -> str:
        nonlocal final
        final = (place or _replace)(temp, target)
        return final

    with atomic_stream(path, placed) as stream:
        write(stream)
    return final


def _replace(temp: str, path: str) -> str:
    """Rename ``temp`` over ``path`` (atomic on one file system) and return ``path``."""
    os.replace(temp, path)
    return path


@functools.lru_cache(maxsize=1024)
def _npy_header(descr: str, shape: tuple[int, ...]) -> bytes:
    """Return the ``.npy`` header (format 1.0, padded to 64 bytes) of a C-ordered array."""
    text = f"{{'descr': {descr!r}, 'fortran_order': False, 'shape': {shape!r}, }}"
    total = 10 + len(text) + 1  # magic and version, header length, text, newline
    text += " " * (-total % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text.encode("latin1")


def write_npy_fast(path: str, array: np.ndarray) -> None:
    """Write a C-contiguous ``array`` of a plain numpy dtype to ``path`` as ``.npy``, not atomically.

    The header is cached by dtype and shape and the data written straight from the
    array's memory, so a thread writing many small tensors holds the interpreter lock
    for little time. For the dump's writer, which names a file only once it is complete.
    """
    if not array.flags.c_contiguous:
        array = np.array(array, order="C")  # not ascontiguousarray: it makes a 0-d array 1-d
    descr = np.lib.format.dtype_to_descr(array.dtype)
    header = _npy_header(descr if isinstance(descr, str) else str(descr), tuple(array.shape))
    with open(path, "wb", buffering=0) as stream:
        stream.write(header)
        if array.nbytes:
            view = memoryview(array.reshape(-1).view(np.uint8))  # type: ignore[arg-type]
            while view:
                view = view[stream.write(view) :]


def write_npy(path: str, array: np.ndarray, place: Callable[[str, str], str] | None = None) -> str:
    """Write ``array`` to ``path`` as ``.npy``, complete or not at all (see :func:`write_atomic`).

    :return: the path written (``place`` may choose another).
    :raises TargetPathError: naming the path, when it cannot be written.
    """
    return write_atomic(
        path, lambda stream: np.lib.format.write_array(stream, array, allow_pickle=False), place
    )


def append_meta(folder: str, records: Iterable[Mapping[str, Any]]) -> None:
    """Append one JSON line per record to the folder's ``tscore_meta.jsonl``.

    All lines of one call go out in a single ``write`` on a file opened for
    appending, so lines from several threads or processes never interleave
    (:func:`tscore.json_lines.append_lines`).

    :raises TargetPathError: naming the file, when it cannot be written.
    """
    json_lines.append_lines(os.path.join(folder, META_FILE_NAME), records)


def read_meta(folder: str) -> dict[str, dict[str, Any]]:
    """Read ``tscore_meta.jsonl`` into ``{file name: record}``; the last record of a name wins.

    A missing side file gives ``{}``; a damaged line (a crash mid-write) is
    skipped with a note.
    """
    records: dict[str, dict[str, Any]] = {}
    for record in json_lines.read_lines(os.path.join(folder, META_FILE_NAME)):
        if isinstance(record, dict) and isinstance(record.get("file"), str):
            records[record["file"]] = record
    return records
