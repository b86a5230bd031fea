"""Tensors printed under a name marker, and read back from the printed text: ``save(output_mode="print")``.

Where a run cannot write files (a graph on a device with no file system
access from the graph, a read-only container), ``ts.save(...,
output_mode="print")`` prints each tensor after the marker line
``_TS_SAVE_NAME:{name}``, TroubleShooter's, in MindSpore's print format::

    _TS_SAVE_NAME:feat_0
    Tensor(shape=[2, 3], dtype=Float32, value=
    [[ 0.00000000e+00  1.00000000e+00  2.00000000e+00]
     [ 3.00000000e+00  4.00000000e+00  5.00000000e+00]])

:func:`read_printed` reads such text back, from tscore's prints and from
MindSpore's own ``ops.print_`` (both of its layouts: values separated by
blanks, or by commas), so that ``save_convert`` writes the ``.npy`` files the
run would have written. tscore prints every element, with as many digits as
read back exactly; MindSpore's print summarises a big tensor (``...``),
which is then an error row naming the tensor, not an array of the wrong size.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TextIO

import numpy as np
from pydantic import BaseModel, Field

from tscore.dtypes import neutral_dtype
from tscore.errors import InvalidNameError, TargetPathError
from tscore.naming import NPY_SUFFIX, clean_part
from tscore.npy_files import append_meta, storable, write_npy
from tscore.plugins import hook

log = logging.getLogger(__name__)

MARK = "_TS_SAVE_NAME:"  # TroubleShooter's marker, printed before each tensor's value

# MindSpore's spelling of each neutral dtype in a printed tensor
_PRINTED = {
    "bool": "Bool",
    "float16": "Float16",
    "bfloat16": "BFloat16",
    "float32": "Float32",
    "float64": "Float64",
    **{f"{k}{n}": f"{k.capitalize()}{n}" for k in ("int", "uint") for n in (8, 16, 32, 64)},
}
_BARE = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]?(?:nan|inf)", re.IGNORECASE)
_TENSOR = re.compile(r"Tensor\(shape=\[([^\]]*)\],\s*dtype=(\w+),\s*value=(.*)\)\s*$", re.DOTALL)


def write_printed(label: str, array: np.ndarray, stream: TextIO | None = None) -> None:
    """Write one tensor after its marker line to ``stream`` (standard output when None), flushed at once.

    What ``save(output_mode="print")`` asks for: the text :func:`read_printed` reads back.
    """
    out = sys.stdout if stream is None else stream
    out.write(f"{MARK}{label}\n{format_tensor(array)}\n")
    out.flush()


def format_tensor(array: np.ndarray) -> str:
    """Print ``array`` as MindSpore prints a tensor, each element in the digits that read it back."""
    dtype = neutral_dtype(array.dtype)
    values = np.asarray(array)
    if dtype == "bfloat16" or dtype.startswith("float8"):
        values = values.astype(np.float32)  # exact; float32's repr reads back to the same value
    shape = ", ".join(str(n) for n in array.shape)
    return f"Tensor(shape=[{shape}], dtype={_PRINTED.get(dtype, dtype)}, value=\n{_nested(values)})"


def _nested(values: np.ndarray) -> str:
    """Write an array's elements in nested brackets, one innermost row per line (repr: exact)."""
    if values.ndim == 0:
        return repr(values.item())
    if values.ndim == 1:
        return "[" + " ".join(map(repr, values.tolist())) + "]"
    return "[" + "\n ".join(_nested(row) for row in values) + "]"


@dataclass
class PrintedTensor:
    """One tensor read from printed text: its name and array, or why it could not be read."""

    name: str
    array: np.ndarray | None = None
    error: str | None = None
    line: int = 0  # the line of its marker


def read_printed(lines: Iterable[str]) -> Iterator[PrintedTensor]:
    """Read every tensor printed after a marker line; other lines (the run's own output) are skipped.

    After a marker comes a tensor's text (``Tensor(shape=...)``, over as many lines as it
    takes) or a scalar printed bare, alone on its line; a line of the run's own output in
    between is skipped. A tensor cut short (the print stopped), summarised by MindSpore
    (``...``) or with a dtype or shape that does not fit its values comes back with ``error``.
    """
    name: str | None = None
    start = 0
    body: list[str] = []
    depth = 0  # open parentheses of the tensor text being read
    for number, raw in enumerate(lines, 1):
        line = raw.rstrip("\n")
        if line.startswith(MARK):
            if name is not None:
                yield _parse(name, body, start)
            name, start, body, depth = line[len(MARK) :].strip(), number, [], 0
            continue
        if name is None:
            continue
        if not body:
            stripped = line.strip()
            if _BARE.fullmatch(stripped):  # a scalar printed bare (MindSpore)
                yield _parse(name, [stripped], start)
                name = None
                continue
            if not stripped.startswith("Tensor("):
                continue  # the run's own output between the marker and the value
        body.append(line)
        depth += line.count("(") - line.count(")")
        if depth <= 0:  # the tensor's text is complete
            yield _parse(name, body, start)
            name = None
    if name is not None:
        yield _parse(name, body, start)


def _parse(name: str, body: list[str], line: int) -> PrintedTensor:
    text = "\n".join(body).strip()
    found = PrintedTensor(name, line=line)
    if not text:
        found.error = "nothing printed after the marker (the output was cut short)"
        return found
    if not text.startswith("Tensor("):  # a bare scalar (read_printed gives nothing else)
        found.array = np.asarray(float(text))
        return found
    match = _TENSOR.match(text)
    if match is None:
        found.error = "the tensor's text is cut short or damaged"
        return found
    shape_text, dtype_text, values = match.groups()
    if "..." in values:
        found.error = "the print summarised it ('...'): only some elements are known"
        return found
    try:
        shape = tuple(int(n) for n in shape_text.replace(",", " ").split())
        dtype = neutral_dtype(dtype_text)
        words = values.replace("[", " ").replace("]", " ").replace(",", " ").split()
        if dtype == "bool":
            if not set(words) <= {"True", "False"}:
                raise ValueError(f"a Bool tensor holds {sorted(set(words) - {'True', 'False'})[:3]}")
            flat = np.array([w == "True" for w in words], dtype=bool)
        elif dtype.startswith(("int", "uint")):  # read as integers: int64 beyond 2**53 stays exact
            ints = [int(w) for w in words]
            bounds = np.iinfo(np.dtype(dtype))
            wrong = [n for n in ints if not bounds.min <= n <= bounds.max]  # numpy 1 would wrap them
            if wrong:
                raise ValueError(f"{wrong[0]} does not fit {dtype}")
            flat = np.array(ints, dtype=np.dtype(dtype))
        else:
            numbers = np.array([float(w) for w in words], dtype=np.float64)
            flat = _as_dtype(numbers, dtype)
    except (ValueError, TypeError) as exc:
        found.error = f"its values cannot be read: {exc}"
        return found
    if flat.size != math.prod(shape):
        found.error = f"{flat.size} values printed for the shape {list(shape)}"
        return found
    found.array = flat.reshape(shape)
    return found


def _as_dtype(numbers: np.ndarray, dtype: str) -> np.ndarray:
    """Cast the printed numbers to the printed dtype (``ml_dtypes``' for bfloat16).

    :raises ValueError: when a finite number does not fit the dtype (it would become inf).
    """
    if dtype == "bfloat16" or dtype.startswith("float8"):
        import ml_dtypes

        cast = numbers.astype(np.float32).astype(getattr(ml_dtypes, dtype))
    else:
        with np.errstate(over="ignore"):
            cast = numbers.astype(np.dtype(dtype))
    overflow = np.isfinite(numbers) & ~np.isfinite(cast.astype(np.float64))
    if overflow.any():
        raise ValueError(f"{float(numbers[overflow][0])!r} does not fit {dtype}")
    return cast


class ConvertedTensor(BaseModel):
    """One tensor of a print converted to a ``.npy`` file, or why it was not."""

    name: str
    line: int = Field(description="the line of its marker in the printed text")
    file: str | None = None
    shape: list[int] | None = None
    dtype: str | None = None
    error: str | None = None


def convert_printed(
    file: str | os.PathLike[str], output_path: str | os.PathLike[str]
) -> list[ConvertedTensor]:
    """Write every tensor printed in ``file`` as ``{n}_{name}.npy`` in ``output_path``, n counting from 0.

    ``file`` is printed text, or a framework's own print file that its plugin reads
    (``ts_read_print_file``: MindSpore's binary file of ``print_file_path``, on Ascend).
    Tensors are numbered in print order, as TroubleShooter's ``save_convert`` numbers them:
    the names are those ``ts.save(..., layout="1.0.18")`` writes when the printing run's
    first save was its first; with spec 003's layout the names and keys are the same and
    ``compare_dict_dir`` pairs the two folders, but a list's elements take one id each. A tensor
    that cannot be read is a row with its error (logged), and the rest are written.

    :raises TargetPathError: naming ``file`` when it cannot be read, or the folder when it
        cannot be created.
    """
    source = os.fspath(file)
    folder = os.fspath(output_path)
    if not os.path.isfile(source):
        raise TargetPathError(f"save_convert: {source!r} is not a file; pass the text the run printed")
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise TargetPathError(f"save_convert: cannot create {folder!r}: {exc}") from exc
    rows: list[ConvertedTensor] = []
    records: list[dict[str, object]] = []
    items = hook().ts_read_print_file(path=source)  # a framework's own print file (MindSpore's binary one)
    try:
        with contextlib.ExitStack() as opened:
            if items is None:  # printed text: tscore's prints, a screen log
                lines: Iterable[str] = opened.enter_context(open(source, encoding="utf-8", errors="replace"))
            else:
                lines = _item_lines(items)
            for index, printed in enumerate(read_printed(lines)):
                rows.append(_converted(index, printed, folder, source, records))
    except OSError as exc:
        raise TargetPathError(f"save_convert: cannot read {source!r}: {exc.strerror or exc}") from exc
    finally:
        append_meta(folder, records)  # each file's dtype as printed (bfloat16 is stored as float32)
    if not rows:
        log.warning("save_convert: %s holds no %r marker: nothing printed by ts.save", source, MARK)
    return rows


def _item_lines(items: Iterable[str | np.ndarray]) -> Iterator[str]:
    """Give the items of a print file as the lines they print (a tensor as tscore prints it: exactly)."""
    for item in items:
        yield from (item if isinstance(item, str) else format_tensor(np.asarray(item))).splitlines()


def _converted(
    index: int, printed: PrintedTensor, folder: str, source: str, records: list[dict[str, object]]
) -> ConvertedTensor:
    row = ConvertedTensor(name=printed.name, line=printed.line, error=printed.error)
    if printed.array is None:
        log.warning("save_convert: %s line %d, %r: %s", source, printed.line, printed.name, printed.error)
        return row
    try:
        name = clean_part(printed.name, "printed name")
    except InvalidNameError:
        row.error = "its marker names nothing: no file name for it"
        log.warning("save_convert: %s line %d: %s", source, printed.line, row.error)
        return row
    path = os.path.join(folder, f"{index}_{name}{NPY_SUFFIX}")
    stored = storable(printed.array)
    row.file = write_npy(path, stored)
    row.shape = list(printed.array.shape)
    row.dtype = neutral_dtype(printed.array.dtype)
    records.append(
        {
            "file": os.path.basename(row.file),
            "framework": "print",
            "dtype": row.dtype,
            "shape": row.shape,
            "stored_dtype": str(stored.dtype),
        }
    )
    return row
