"""Reading a dump of any of three formats into one model: tscore's, msprobe's and ptdbg_ascend's.

* tscore: ``dump.jsonl`` + ``stack.jsonl`` + ``tensors/*.npy`` (:mod:`tscore.dump.writer`).
* msprobe: ``dump.json`` (``{"task", "level", "data": {call: {...}}}``), ``stack.json``,
  tensors in ``dump_tensor_data/`` as ``.pt`` (read through the torch plugin, weights only)
  or ``.npy``.
* ptdbg_ascend: a ``.pkl`` of JSON lines ``[name, step, [], dtype, shape, [max, min, mean]]``
  and a folder named after it holding one ``{name}.npy`` per tensor.

Each becomes a :class:`DumpSource`: calls in execution order, each with its
input and output :class:`Item` (a tensor's dtype, shape, statistics and file;
a plain argument's value). A line that cannot be read is logged and skipped:
one bad record never ends the reading of the rest.
"""

from __future__ import annotations

import functools
import logging
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tscore.dtypes import neutral_dtype
from tscore.dump.names import MODULE_PREFIX, CallName, parse_name
from tscore.dump.reading import parse_line, read_info, read_lines, read_lines_at, read_stacks, stack_of
from tscore.dump.writer import RECORDS_FILE, TENSORS_FOLDER
from tscore.errors import TscoreError
from tscore.json_files import read_side_json
from tscore.json_members import DAMAGED, FileText, Members, NotAnObjectDocument, read_members

log = logging.getLogger(__name__)

MSPROBE_FILE = "dump.json"
MSPROBE_STACKS = "stack.json"
MSPROBE_TENSORS = "dump_tensor_data"
FORMATS = ("tscore", "msprobe", "ptdbg")


class DumpReadError(TscoreError, ValueError):
    """A path that holds no dump of a known format, or one whose main file cannot be read."""


@dataclass(slots=True)
class Item:
    """One value a call received or returned: a tensor, or a plain argument."""

    role: str  # "input" or "output" (of the forward or backward call)
    path: str  # where it sat: "0", "0.1", "bias"; "" for a single output
    name: str  # its full name as the dump spells it
    is_tensor: bool = True
    dtype: str | None = None  # neutral (``float32``), or the Python type of a plain value
    shape: tuple[int, ...] | None = None
    stats: tuple[float | None, float | None, float | None, float | None] | None = None  # max min mean norm
    md5: str | None = None
    file: str | None = None  # the tensor's file, when the dump holds tensors
    value: Any = None  # a plain argument's value
    error: str | None = None  # why the dump could not describe it
    requires_grad: bool | None = None  # whether the tensor took part in autograd, when the dump says

    @property
    def slot(self) -> tuple[str, str]:
        """Where the value sat in its call: the key that pairs it with the other run's."""
        return self.role, self.path


@dataclass(slots=True)
class Call:
    """One call of one direction (an API's or a module's forward or backward) with its values."""

    name: CallName
    order: int  # position in the dump, in execution order as written
    inputs: list[Item] = field(default_factory=list)
    outputs: list[Item] = field(default_factory=list)
    module: str | None = None  # the enclosing module's path, when the dump records it
    key: str | None = None  # tscore's provenance key
    stack: list[str] = field(default_factory=list)
    label: str = ""  # the call's name in ptdbg's spelling (msprobe's for module calls), set from name
    span: tuple[int, int] | None = None  # where its record is, when its values are read on demand
    shapes: tuple[Any, ...] | None = None  # its tensor inputs' shapes, kept when its values are not
    record: str | None = None  # the record's own name, when its values are read on demand
    op: str | None = None  # its neutral operation, when its framework's plugin names it (api_names)

    def __post_init__(self) -> None:
        """Spell the name once: pairing reads it for every call."""
        self.label = self.name.ptdbg

    @property
    def items(self) -> list[Item]:
        """Inputs, then outputs."""
        return [*self.inputs, *self.outputs]

    def settle(self) -> Call:
        """Give a sole output the path ``""``, however its format numbered it (msprobe lists it as ``0``)."""
        if len(self.outputs) == 1:
            self.outputs[0].path = ""
        return self


@dataclass
class DumpSource:
    """One dump folder (one step of one rank), whatever wrote it."""

    path: str
    format: str
    calls: list[Call]
    task: str  # "tensor" when tensor files are present for its records, else "statistics" or "md5"
    rank: int | None = None
    framework: str | None = None
    # fills the values of calls read on demand (their ``span`` set); None when every call holds them
    loader: Callable[[Sequence[Call]], None] | None = None
    closer: Callable[[], None] | None = None
    devices: Sequence[str] = ()  # where its tensors lived (cuda:0, cpu), when the dump says

    def load(self, calls: Sequence[Call]) -> None:
        """Read the values of ``calls`` (of this dump) that are read on demand."""
        if self.loader is not None:
            self.loader([c for c in calls if c.span is not None])

    def release(self, calls: Sequence[Call]) -> None:
        """Drop the values of ``calls`` read on demand, keeping their input shapes for pairing."""
        if self.loader is None:
            return
        for call in calls:
            if call.span is not None:
                call.shapes = tuple(item.shape for item in call.inputs if item.is_tensor)
                call.inputs, call.outputs = [], []

    def close(self) -> None:
        """Close the records file a dump read on demand keeps open."""
        if self.closer is not None:
            self.closer()
            self.closer = None

    @property
    def label(self) -> str:
        """Say what made the dump, for people: ``msprobe dump, pytorch``, ``tscore dump, torch``."""
        label = f"{self.format} dump" + (f", {self.framework}" if self.framework else "")
        return label + (f" on {', '.join(self.devices)}" if self.devices else "")

    @property
    def framework_name(self) -> str | None:
        """The framework as tscore's plugins name it (msprobe writes ``pytorch`` for torch)."""
        if self.format == "msprobe" and self.framework == "pytorch":
            return "torch"
        return self.framework

    @property
    def has_tensors(self) -> bool:
        """True when the dump holds tensor files, so values can be compared element by element."""
        return self.task == "tensor"


# ---------------------------------------------------------------- finding the format


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
            source = _read_ptdbg(records, data_dir)
        else:
            source = _read_tscore(records, lazy) if kind == "tscore" else _read_msprobe(records, lazy)
    except DumpReadError:
        raise
    except Exception as exc:
        raise DumpReadError(f"{records}: cannot be read ({type(exc).__name__}: {str(exc)[:200]})") from exc
    log.info("%s: %s dump, %d calls, %s", records, kind, len(source.calls), source.task)
    return source


def _rank_of(folder: str) -> int | None:
    found = re.fullmatch(r"rank(\d+)", os.path.basename(os.path.normpath(folder)))
    return int(found.group(1)) if found else None


# ---------------------------------------------------------------- tscore


def split_entry_name(call: str, name: str) -> tuple[str, str]:
    """Split a tensor's name into side and path: ``..._forward_input.0.1`` gives ``("input", "0.1")``."""
    rest = name[len(call) + 1 :] if name.startswith(call) else name.rpartition("_")[2]
    side, _, path = rest.partition(".")
    return side, path


def _tscore_item(call: str, entry: Mapping[str, Any], folder: str) -> Item:
    name = str(entry.get("name", ""))
    role, path = split_entry_name(call, name)
    if entry.get("parameter") and role == "input":  # a kernel's weight (tscore.dump.native): judged as one
        path = f"parameters.{path}"
    if entry.get("type") != "tensor":
        return Item(role, path, name, is_tensor=False, dtype=str(entry.get("type")), value=entry.get("value"))
    stats = tuple(_number(entry.get(key)) for key in ("max", "min", "mean", "norm"))
    file, error = _inside(folder, entry.get("file"))
    return Item(
        role,
        path,
        name,
        True,
        str(entry["dtype"]) if entry.get("dtype") is not None else None,
        shape_of(entry.get("shape")),
        stats if stats != (None, None, None, None) else None,  # type: ignore[arg-type]
        entry.get("md5") if isinstance(entry.get("md5"), str) else None,
        file,
        None,
        error or (str(entry["error"]) if entry.get("error") is not None else None),
        _flag(entry.get("requires_grad")),
    )


def shape_of(value: Any) -> tuple[int, ...] | None:
    """Return a shape from a record: a list of whole numbers; None when the record holds anything else."""
    if value.__class__ is not list:
        return None
    shape = tuple(value)
    try:
        known = _SHAPES.get(shape)  # a dump repeats a few shapes many times: checked once, shared
    except TypeError:  # holding a list or dict
        return None
    if known is not None and sum(shape).__class__ is int:  # not [1.0, 2.0] for (1, 2)
        return known
    if not all(n.__class__ is int and n >= 0 for n in shape):
        return None
    if len(_SHAPES) < 4096:
        _SHAPES[shape] = shape
    return shape


_SHAPES: dict[tuple[Any, ...], tuple[int, ...]] = {}


def _inside(folder: str, name: Any) -> tuple[str | None, str | None]:
    """Return ``(path, None)`` for a tensor file named inside ``folder``, or ``(None, why not)``."""
    if not name:
        return None, None
    relative = str(name)
    path = os.path.normpath(os.path.join(folder, relative))
    root = os.path.abspath(folder)
    inside = not os.path.isabs(relative) and os.path.commonpath([root, os.path.abspath(path)]) == root
    if not inside or os.path.abspath(path) == root:
        return None, f"the record names a file outside the dump folder ({relative!r}); not read"
    return path, None


def _read_tscore(records_file: str, lazy: bool = False) -> DumpSource:
    folder = os.path.dirname(records_file)
    stacks = read_stacks(folder)
    calls: list[Call] = []
    for record, span in read_lines_at(records_file):
        try:
            call = tscore_call(record, len(calls), stacks)
            if lazy and len(calls) >= _READ_AT_ONCE:
                call.span, call.record = span, str(record["name"])  # its values are read when compared
            else:
                _fill_tscore_call(call, str(record["name"]), record, folder)
        except Exception as exc:
            log.warning("%s: a record could not be read and is left out: %r", records_file, exc)
            continue
        calls.append(call)
    source = tscore_source(folder, calls)
    if any(c.record is not None for c in calls):
        text = FileText(records_file)
        source.loader = functools.partial(_load_tscore, text, folder, records_file)
        source.closer = text.close
    return source


def tscore_call(record: dict[str, Any], order: int, stacks: dict[int, list[str]]) -> Call:
    """Make the call of one tscore record, without its values (``_fill_tscore_call`` reads them).

    :raises KeyError, TypeError, ValueError: when the record lacks what names a call.
    """
    return Call(
        tscore_name(record),
        order,
        module=record.get("module"),
        key=record.get("key"),
        stack=stack_of(record, stacks),
    )


def tscore_name(record: dict[str, Any]) -> CallName:
    """Return the call a tscore record names.

    :raises KeyError, TypeError, ValueError: when the record lacks what names a call.
    """
    name = CallName(record["prefix"], record["api"], int(record["index"]), record["direction"])
    str(record["name"])  # every record names itself; one that does not is left out
    return name


def tscore_source(folder: str, calls: list[Call]) -> DumpSource:
    """Describe a tscore dump folder (task, rank, frameworks, from ``dump_info.json``) holding ``calls``."""
    info = read_info(folder)
    found = info.get("config")
    config: dict[str, Any] = found if isinstance(found, dict) else {}
    task = str(config.get("task", "statistics"))
    if task != "tensor" and config.get("summary_mode") == "md5":
        task = "md5"
    if task == "tensor" and not os.path.isdir(os.path.join(folder, TENSORS_FOLDER)):
        task = "statistics"
    recorded = info.get("recorded_frameworks") or list(info.get("frameworks") or {})[:1]
    rank = info.get("rank", _rank_of(folder))
    return DumpSource(
        folder,
        "tscore",
        calls,
        task,
        rank=rank if isinstance(rank, int) else _rank_of(folder),
        framework=" + ".join(str(f) for f in recorded) if isinstance(recorded, list) and recorded else None,
        devices=[str(d) for d in devices] if isinstance(devices := info.get("devices"), list) else (),
    )


def _fill_tscore_call(call: Call, label: str, record: Mapping[str, Any], folder: str) -> None:
    """Read the values of one record of a tscore dump."""
    call.inputs = [_tscore_item(label, e, folder) for e in record.get("inputs", ())]
    call.outputs = [_tscore_item(label, e, folder) for e in record.get("outputs", ())]
    call.settle()


def _load_tscore(text: FileText, folder: str, records_file: str, calls: Sequence[Call]) -> None:
    """Read again the lines of ``calls`` (read on demand) and give them their values."""
    wanted = sorted((c for c in calls if c.record is not None and not c.inputs and not c.outputs), key=_at)
    start = 0
    while start < len(wanted):  # lines that follow each other are read in one go
        end = start + 1
        while end < len(wanted) and _at(wanted[end]) == sum(wanted[end - 1].span or (0, 0)):
            end += 1
        begin, last = _at(wanted[start]), wanted[end - 1].span
        assert last is not None
        run = text[begin : last[0] + last[1]]
        for call in wanted[start:end]:
            at, length = call.span or (0, 0)
            try:
                _fill_tscore_call(
                    call, call.record or "", parse_line(run[at - begin : at - begin + length]), folder
                )
            except Exception as exc:  # the file changed since it was read
                log.warning("%s: the record of %s cannot be read again: %r", records_file, call.record, exc)
        start = end


def _at(call: Call) -> int:
    return call.span[0] if call.span is not None else -1


# ---------------------------------------------------------------- msprobe


def _msprobe_items(
    role: str, path: tuple[str, ...], value: Any, call: str, tensors: str, out: list[Item]
) -> None:
    """Flatten one msprobe value (a tensor dict, a plain value dict, None, or a list of them)."""
    if value.__class__ is list:
        for index, inner in enumerate(value):
            _msprobe_items(role, (*path, str(index)), inner, call, tensors, out)
        return
    joined = _joined_path(path)
    name = f"{call}.{role}.{joined}" if joined else f"{call}.{role}"
    if value.__class__ is dict and "Max" in value and "dtype" in value and "shape" in value:
        out.append(_msprobe_tensor(role, joined, name, value, tensors))  # the bulk of every dump
        return
    if value is None:
        out.append(Item(role, joined, name, is_tensor=False, dtype="None"))
        return
    if not isinstance(value, dict):  # JSON gives dicts: no abstract Mapping check per value
        out.append(Item(role, joined, name, is_tensor=False, dtype=type(value).__name__, value=value))
        return
    kind = str(value.get("type", ""))
    if "dtype" in value and "shape" in value and ("Tensor" in kind or "ndarray" in kind):
        out.append(_msprobe_tensor(role, joined, name, value, tensors))
        return
    if "value" in value or kind:
        out.append(Item(role, joined, name, is_tensor=False, dtype=kind or None, value=value.get("value")))
        return
    for key, inner in value.items():  # a dict argument: one item per key
        _msprobe_items(role, (*path, str(key)), inner, call, tensors, out)


def _msprobe_tensor(role: str, path: str, name: str, value: dict[str, Any], tensors: str) -> Item:
    """Read one tensor of an msprobe record: dtype, shape, statistics, md5 and file."""
    get = value.get
    high, low, mean, norm = get("Max"), get("Min"), get("Mean"), get("Norm")
    stats: tuple[float | None, ...] | None
    if high.__class__ is low.__class__ is mean.__class__ is norm.__class__ is float:
        stats = (high, low, mean, norm)  # the bulk of a dump: four floats as JSON gave them
    else:
        stats = (_number(high), _number(low), _number(mean), _number(norm))
        if stats == _NO_STATS:
            stats = None
    data_name = get("data_name")
    file, error = _inside(tensors, data_name) if data_name and data_name != "-1" else (None, None)
    md5 = get("md5")
    return Item(
        role,
        path,
        name,
        True,
        neutral_dtype_of(str(get("dtype"))),
        shape_of(get("shape") or []),
        stats,  # type: ignore[arg-type]
        md5 if md5.__class__ is str else None,
        file,
        None,
        error,
        _flag(get("requires_grad")),
    )


def _flag(value: Any) -> bool | None:
    return value if value.__class__ is bool else None


_NO_STATS = (None, None, None, None)
_PATHS: dict[tuple[str, ...], str] = {}


def _joined_path(path: tuple[str, ...]) -> str:
    """Join a value's path (``("0", "1")`` gives ``"0.1"``), one string for each path a dump repeats."""
    joined = _PATHS.get(path)
    if joined is None:
        joined = ".".join(path)
        if len(_PATHS) < 4096:
            _PATHS[path] = joined
    return joined


neutral_dtype_of = functools.lru_cache(maxsize=256)(neutral_dtype)  # a dump spells a few dtypes many times


def _number(value: Any) -> float | None:
    if value.__class__ is float:
        return value  # type: ignore[no-any-return]
    if value is None or isinstance(value, bool):
        return None if value is None else float(value)
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return None


def _msprobe_stacks(folder: str) -> dict[str, list[str]]:
    """``{call name: stack lines}`` from msprobe's ``stack.json`` (26.x: numbered groups; older: by name)."""
    raw = read_side_json(os.path.join(folder, MSPROBE_STACKS)) or {}
    stacks: dict[str, list[str]] = {}
    for key, value in raw.items() if isinstance(raw, Mapping) else ():
        if isinstance(value, list) and len(value) == 2 and isinstance(value[0], list):
            names, lines = value
            ordered = [str(line) for line in reversed(lines)]  # msprobe: innermost first; tscore's order
            for name in names:
                stacks[str(name)] = ordered
        elif isinstance(value, list):
            stacks[str(key)] = [str(line) for line in value]
    return stacks


def _msprobe_document(records_file: str) -> tuple[Mapping[str, Any], Iterable[tuple[str, Any]], Any]:
    """Open an msprobe ``dump.json``: its small members, its calls as they are read, what to close.

    The calls are parsed a few megabytes at a time (:mod:`tscore.json_members`); a document that
    is not laid out as msprobe's is parsed whole, for a clear error.
    """
    try:
        members = read_members(records_file, "data")
        return members.head, members, members
    except NotAnObjectDocument:
        pass
    except OSError as exc:
        raise DumpReadError(f"{records_file}: cannot be read ({exc})") from None
    document = read_side_json(records_file)
    if not isinstance(document, Mapping) or not isinstance(document.get("data"), Mapping):
        raise DumpReadError(
            f"{records_file}: not an msprobe dump.json (no 'data' object); the file may be cut short"
        )
    return document, document["data"].items(), None


def _read_msprobe(records_file: str, lazy: bool = False) -> DumpSource:
    folder = os.path.dirname(records_file)
    head, records, opened = _msprobe_document(records_file)
    calls: list[Call] = []
    md5 = False
    try:
        tensors = msprobe_tensors(folder, head)
        stacks = _msprobe_stacks(folder)
        # a record that is not JSON comes under its key, as the in-step reading gives it (streams.py)
        spans = (
            opened.with_spans(keep_damaged=True) if opened is not None else ((k, v, None) for k, v in records)
        )
        for label, body, span in spans:
            name = parse_name(str(label))
            if name is None:
                log.warning("%s: %r is not a call msprobe names; left out", records_file, label)
                continue
            call = msprobe_call(name, str(label), len(calls), stacks)
            calls.append(call)
            if lazy and span is not None and len(calls) > _READ_AT_ONCE and isinstance(body, Mapping):
                call.span, call.record = span, str(label)  # its values are read when compared
            elif fill_msprobe_record(call, str(label), body, tensors, records_file):  # False: logged
                md5 = md5 or any(item.md5 for item in call.items)  # md5 summaries: the first calls say
    except BaseException:
        if opened is not None:
            opened.close()
        raise
    source = msprobe_source(folder, head, calls, md5)
    if opened is not None and any(c.span is not None for c in calls):
        source.loader = functools.partial(_load_msprobe, opened, tensors, records_file)
        source.closer = opened.close
    elif opened is not None:
        opened.close()
    return source


def msprobe_source(folder: str, head: Mapping[str, Any], calls: list[Call], md5: bool) -> DumpSource:
    """Describe an msprobe dump folder (task, rank, framework, from ``dump.json``'s head) holding ``calls``.

    :param md5: its first calls hold md5 (CRC32) summaries instead of statistics.
    """
    task = str(head.get("task", "statistics"))
    if task != "tensor" and md5:
        task = "md5"
    framework = head.get("framework")
    return DumpSource(
        folder,
        "msprobe",
        calls,
        task,
        rank=_rank_of(folder),
        framework=framework if isinstance(framework, str) else None,
    )


def msprobe_call(name: CallName, label: str, order: int, stacks: Mapping[str, list[str]]) -> Call:
    """Make the call of one msprobe record, without its values (``_fill_msprobe_call`` reads them)."""
    call = Call(name, order, stack=stacks.get(label, _NO_STACK))
    if name.prefix == MODULE_PREFIX:
        call.module = name.api.rpartition(".")[0]
    return call


def msprobe_tensors(folder: str, head: Mapping[str, Any]) -> str:
    """Return the folder of an msprobe dump's tensor files: beside ``dump.json``, where msprobe looks."""
    tensors = os.path.join(folder, MSPROBE_TENSORS)
    if not os.path.isdir(tensors) and isinstance(head.get("dump_data_dir"), str):
        tensors = str(head["dump_data_dir"])
    return tensors


_NO_STACK: list[str] = []  # shared by every call with no stack: never changed
_READ_AT_ONCE = 32  # a dump read on demand still reads its first calls' values: what its summaries hold


def _load_msprobe(members: Members, tensors: str, records_file: str, calls: Sequence[Call]) -> None:
    """Read again the records of ``calls`` (read on demand) and give them their values."""
    wanted = [c for c in calls if not c.inputs and not c.outputs and c.record is not None]
    if not wanted:
        return
    try:
        bodies = members.values_at([c.span for c in wanted])  # type: ignore[misc]
    except ValueError as exc:  # the file changed since it was read
        raise DumpReadError(f"{records_file}: changed while it was compared ({exc})") from None
    for call, body in zip(wanted, bodies, strict=True):
        if isinstance(body, Mapping):
            _fill_msprobe_call(call, call.record or "", body, tensors, records_file)


def fill_msprobe_record(call: Call, label: str, body: Any, tensors: str, records_file: str) -> bool:
    """Give ``call`` the values of its record; False (logged) leaves it a call with no values.

    A record that is not JSON (:data:`DAMAGED`, already warned of) or not an object is such a
    call, in the whole reading and the in-step one alike.
    """
    if isinstance(body, Mapping):
        return _fill_msprobe_call(call, label, body, tensors, records_file)
    if body is not DAMAGED:
        log.warning("%s: the record of %r is not an object; read with no values", records_file, label)
    return False


def _fill_msprobe_call(
    call: Call, label: str, body: Mapping[str, Any], tensors: str, records_file: str
) -> bool:
    """Read the values of one call of an msprobe ``dump.json``; False (logged) when its record is bad."""
    inputs: list[Item] = []
    outputs: list[Item] = []
    try:
        for key, value in body.items():
            if key in ("input_args", "input"):
                _msprobe_items("input", (), value, label, tensors, inputs)
            elif key == "input_kwargs" and isinstance(value, Mapping):
                for kwarg, inner in value.items():
                    _msprobe_items("input", (str(kwarg),), inner, label, tensors, inputs)
            elif key == "output":
                _msprobe_items("output", (), value, label, tensors, outputs)
            elif key == "parameters" and isinstance(value, Mapping):  # a module's own (L0, mix)
                for param, inner in value.items():
                    _msprobe_items("input", ("parameters", str(param)), inner, label, tensors, inputs)
            elif call.name.direction == "parameters_grad":  # {"weight": [grad], "bias": [grad]}
                _msprobe_items("output", (str(key),), value, label, tensors, outputs)
    except Exception as exc:
        log.warning("%s: the record of %r could not be read and is left out: %r", records_file, label, exc)
        return False
    call.inputs, call.outputs = inputs, outputs
    call.settle()
    return True


# ---------------------------------------------------------------- ptdbg_ascend

_PTDBG_TENSOR = re.compile(
    r"^(?P<call>.+?_(?:forward|backward))_(?P<role>input|output)(?P<path>(?:\.[^.]+)*)$"
)


def _ptdbg_lines(pkl: str) -> Iterator[list[Any]]:
    """Yield the lists of a ptdbg ``.pkl`` (JSON lines; a line cut short by a crash is skipped)."""
    for value in read_lines(pkl):
        if isinstance(value, list) and value:
            yield value


def _ptdbg_stack(lines: Iterable[Any]) -> list[str]:
    out = []
    for frame in lines:
        if isinstance(frame, list) and len(frame) >= 4:
            out.append(f"File {frame[0]}, line {frame[1]}, in {frame[2]}\n  {frame[3]}")
        else:
            out.append(str(frame))
    return out


def _read_ptdbg(pkl: str, data_dir: str | None = None) -> DumpSource:
    folder = os.path.dirname(pkl)
    data_folder = data_dir or os.path.join(folder, os.path.splitext(os.path.basename(pkl))[0])
    by_call: dict[str, Call] = {}
    stacks: dict[str, list[str]] = {}
    for line in _ptdbg_lines(pkl):
        try:
            _ptdbg_line(pkl, line, data_folder, by_call, stacks)
        except Exception as exc:
            log.warning("%s: a line could not be read and is left out: %r", pkl, exc)
    for label, call in by_call.items():
        call.stack = stacks.get(label, [])
        call.settle()
    calls = sorted(by_call.values(), key=lambda c: c.order)
    has_files = os.path.isdir(data_folder) and any(i.file for c in calls for i in c.items)
    rank_folder = _rank_of(folder)
    return DumpSource(folder, "ptdbg", calls, "tensor" if has_files else "statistics", rank=rank_folder)


def _ptdbg_line(
    pkl: str, line: list[Any], data_folder: str, by_call: dict[str, Call], stacks: dict[str, list[str]]
) -> None:
    """Read one line of a ptdbg ``.pkl`` into ``by_call`` (a tensor) or ``stacks`` (a stack)."""
    if len(line) == 2 and str(line[0]).endswith("stack_info"):
        frames = line[1] if isinstance(line[1], list) else []
        stacks[str(line[0]).removesuffix("_stack_info")] = _ptdbg_stack(reversed(frames))  # innermost first
        return
    if len(line) < 6:
        log.warning("%s: a line of %d fields is not a ptdbg record; skipped", pkl, len(line))
        return
    tensor_name = str(line[0])
    found = _PTDBG_TENSOR.match(tensor_name)
    parsed = parse_name(found["call"]) if found else None
    if found is None or parsed is None:
        log.warning("%s: %r is not a tensor name ptdbg writes; skipped", pkl, tensor_name)
        return
    call = by_call.get(found["call"])
    if call is None:
        call = by_call[found["call"]] = Call(parsed, len(by_call))
    summary = line[5] if isinstance(line[5], list) else []
    stats = tuple((_number(v) if not isinstance(v, list) else None) for v in [*summary, None, None][:4])
    dtype = str(line[3])
    file, _ = _inside(data_folder, f"{tensor_name}.npy")
    item = Item(
        found["role"],
        found["path"].lstrip("."),
        tensor_name,
        is_tensor=not dtype.startswith("<class"),
        dtype=neutral_dtype(dtype),
        shape=shape_of(line[4]),
        stats=stats if any(v is not None for v in stats) else None,  # type: ignore[arg-type]
        file=file if file and os.path.exists(file) else None,
    )
    if not item.is_tensor:
        item.value = stats[0]
    (call.inputs if item.role == "input" else call.outputs).append(item)


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
