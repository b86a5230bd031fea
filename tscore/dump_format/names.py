"""Dump names, as ptdbg_ascend writes them and as msprobe writes them.

An API call is named ``{Prefix}_{api}_{n}_{forward|backward}``
(``Functional_conv2d_0_forward``, ``Tensor___add___1_backward``): ``n``
counts the calls of that API in the process, from 0, forward and backward
sharing the number of the call they belong to. Its tensors add
``_input.{i}`` (``_input.{i}.{j}`` inside a list argument), ``_input.{key}``
for keyword arguments, and ``_output`` (``_output.{i}`` for several). msprobe
spells the same call ``Functional.conv2d.0.forward``; wherever a user gives a
name, either spelling is accepted. A module call is named as msprobe names
it: ``Module.{path}.{Class}.forward.{n}``.
"""

from __future__ import annotations

import re
from typing import NamedTuple

API_PREFIXES = (
    "Tensor",
    "Torch",
    "Functional",
    "VF",
    "NPU",
    "Distributed",
    "Aten",
    "MintFunctional",
    "Mint",
    "Primitive",
    "Jit",
    "Kernel",  # a kernel of a compiled graph, from the framework's own dump (tscore.dump.native)
)
MODULE_PREFIX = "Module"
_PREFIX_SET = frozenset(API_PREFIXES)
_DIRECTIONS = frozenset({"forward", "backward"})

_PTDBG = re.compile(
    rf"^(?P<prefix>{'|'.join(API_PREFIXES)})_(?P<api>.+)_(?P<index>\d+)_(?P<direction>forward|backward)$"
)
_MSPROBE = re.compile(
    rf"^(?P<prefix>{'|'.join(API_PREFIXES)})\.(?P<api>.+)\.(?P<index>\d+)\.(?P<direction>forward|backward)$"
)
_MODULE = re.compile(
    r"^Module\.(?:(?P<path>.*)\.)?(?P<cls>[^.]+)\.(?P<direction>forward|backward|parameters_grad)"
    r"(?:\.(?P<index>\d+))?$"  # msprobe writes parameters_grad without a number
)


class CallName(NamedTuple):
    """A call's name, taken apart: ``Functional_conv2d_0_forward``, ``("Functional", "conv2d", 0, ...)``.

    For a module call, ``prefix`` is ``"Module"`` and ``api`` is ``"{path}.{Class}"``. A named
    tuple: made for every call a dump sees, several times faster than a frozen dataclass.
    """

    prefix: str
    api: str
    index: int  # type: ignore[assignment]  # the call's number; hides tuple.index, which no caller uses
    direction: str

    @property
    def ptdbg(self) -> str:
        """``Functional_conv2d_0_forward`` (a module call keeps msprobe's spelling)."""
        if self.prefix == MODULE_PREFIX:
            return self.msprobe
        return f"{self.prefix}_{self.api}_{self.index}_{self.direction}"

    @property
    def msprobe(self) -> str:
        """``Functional.conv2d.0.forward``; ``Module.layer1.Conv2d.forward.0``."""
        if self.prefix == MODULE_PREFIX:
            return f"{MODULE_PREFIX}.{self.api}.{self.direction}.{self.index}"
        return f"{self.prefix}.{self.api}.{self.index}.{self.direction}"

    @property
    def base(self) -> str:
        """The call without its direction and number: ``Functional_conv2d``."""
        return f"{self.prefix}_{self.api}"


def parse_name(text: str) -> CallName | None:
    """Take a call name apart, in ptdbg's or msprobe's spelling; None when it is neither.

    A tensor suffix (``_input.0``, ``.input.0``, ``_output``) is dropped first.
    """
    head, _, direction = text.rpartition(".")  # the common case, msprobe's call name: no regex
    if direction in _DIRECTIONS:
        rest, _, index = head.rpartition(".")
        prefix, _, api = rest.partition(".")
        if prefix in _PREFIX_SET and api and index.isdecimal():
            return CallName(prefix, api, int(index), direction)
    name = re.sub(r"[._](input|output|kwargs)(\.[^.]+)*$", "", text.strip())
    for pattern in (_PTDBG, _MSPROBE):
        found = pattern.match(name)
        if found:
            return CallName(found["prefix"], found["api"], int(found["index"]), found["direction"])
    found = _MODULE.match(name)
    if found:
        api = f"{found['path']}.{found['cls']}" if found["path"] else found["cls"]
        return CallName(MODULE_PREFIX, api, int(found["index"] or 0), found["direction"])
    return None


def canonical(text: str) -> str:
    """Return the ptdbg spelling of a call name given in either spelling, else the text as it is."""
    parsed = parse_name(text)
    return parsed.ptdbg if parsed is not None else text.strip()


def tensor_name(call: str, side: str, path: tuple[str, ...]) -> str:
    """Name one tensor of a call: ``Functional_conv2d_0_forward_input.0``, ``..._output``."""
    if not path:
        return f"{call}_{side}"
    if len(path) == 1:
        return f"{call}_{side}.{path[0]}"
    return f"{call}_{side}." + ".".join(path)
