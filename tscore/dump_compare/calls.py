"""What a dump holds, whatever its format: calls in execution order, and the values each one saw.

:class:`DumpSource` is one dump folder (one step of one rank), :class:`Call`
one call of one direction, :class:`Item` one value it received or returned.
The readers of each format (:mod:`~tscore.dump_compare.tscore_format`,
:mod:`~tscore.dump_compare.msprobe_format`, :mod:`~tscore.dump_compare.ptdbg_format`)
make them with the helpers below.
"""

from __future__ import annotations

import functools
import logging
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tscore.dtypes import neutral_dtype
from tscore.dump_format.names import CallName
from tscore.errors import TscoreError

log = logging.getLogger(__name__)


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
    arguments: tuple[Any, ...] | None = None  # its plain arguments (argument_key), kept with shapes

    def argument_key(self) -> tuple[Any, ...]:
        """Return its plain arguments as ``((path, value), ...)`` to compare and hash (lists as text)."""
        if self.arguments is not None and not self.inputs:
            return self.arguments
        return tuple((i.path, _hashable(i.value)) for i in self.inputs if not i.is_tensor)

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
                call.arguments = call.argument_key()
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


def _hashable(value: Any) -> Any:
    """Return a plain argument as something to compare and hash (a list as its text)."""
    return value if isinstance(value, (int, float, str, bool, type(None))) else repr(value)


def split_entry_name(call: str, name: str) -> tuple[str, str]:
    """Split a tensor's name into side and path: ``..._forward_input.0.1`` gives ``("input", "0.1")``."""
    rest = name[len(call) + 1 :] if name.startswith(call) else name.rpartition("_")[2]
    side, _, path = rest.partition(".")
    return side, path


_SHAPES: dict[tuple[Any, ...], tuple[int, ...]] = {}


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


def file_inside(folder: str, name: Any) -> tuple[str | None, str | None]:
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


def number_of(value: Any) -> float | None:
    """Return a number a dump wrote as a float (a bool as 0 or 1); None for none or what is not one."""
    if value.__class__ is float:
        return value  # type: ignore[no-any-return]
    if value is None or isinstance(value, bool):
        return None if value is None else float(value)
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return None


def flag_of(value: Any) -> bool | None:
    """Return a flag a dump wrote (``requires_grad``), None unless it is a bool."""
    return value if value.__class__ is bool else None


neutral_dtype_of = functools.lru_cache(maxsize=256)(neutral_dtype)  # a dump spells a few dtypes many times


def rank_of(folder: str) -> int | None:
    """Return the rank a folder named ``rank{r}`` holds, None for any other name."""
    found = re.fullmatch(r"rank(\d+)", os.path.basename(os.path.normpath(folder)))
    return int(found.group(1)) if found else None


READ_AT_ONCE = 32  # a dump read on demand still reads its first calls' values: what its summaries hold
