"""What to dump: one config model with msprobe's vocabulary, loadable from msprobe's ``config.json``.

A user who has an msprobe config keeps it::

    {"task": "statistics", "dump_path": "./dump", "rank": [], "step": [0],
     "level": "L1", "statistics": {"scope": [], "list": [], "data_mode": ["all"],
                                   "summary_mode": "statistics"}}

and passes it to ``ts.dump.Debugger("config.json")``, or gives the same
values as keywords. Everything is checked before the first step runs: an
unknown task, level, mode or key is an error naming the value and the
accepted ones.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, field_validator

from tscore.errors import TscoreError
from tscore.json_files import read_json

TASKS = ("statistics", "tensor", "overflow_check")
# msprobe keys a config may carry that tscore reads but that change nothing here
_IGNORED_KEYS = ("is_deterministic", "enable_dataloader", "seed", "framework")


class DumpConfigError(TscoreError, ValueError):
    """A dump configuration that names an unknown task, level, mode or key, or cannot be read."""


class DumpConfig(BaseModel):
    """What to dump, where, and when.

    :ivar task: ``statistics`` (max, min, mean, L2 norm of every tensor), ``tensor``
        (statistics and every tensor as ``.npy``) or ``overflow_check``.
    :ivar level: ``L1`` every API call, ``L0`` every module call, ``mix`` both.
    :ivar scope: two names, the first and last call to dump (``Functional_conv2d_0_forward``,
        ``Module.layer1``), or, with ``list``, nothing.
    :ivar api_list: (``list`` in msprobe's file) names or name fragments to dump: a full name
        (``Tensor_permute_1_forward``) matches that call, anything else every call whose name
        contains it (``relu``, ``Tensor_flatten``), as msprobe's ``list`` does.
    :ivar apis: API names to dump every call of, exactly (``relu``: ``Torch_relu``,
        ``Functional_relu``, ``Tensor_relu``), as ptdbg's ``api_list`` mode does.
    :ivar data_mode: ``all``, or any of ``forward``, ``backward``, ``input``, ``output``.
    :ivar summary_mode: ``statistics``, or ``md5`` (a CRC32 of the bytes, as msprobe writes).
    :ivar step: the steps to dump (empty: all); ``rank`` the ranks (empty: all).
    :ivar stack: record each call's Python stack (stored once per distinct stack).
    :ivar stack_only: record names and stacks only, no statistics or tensors (ptdbg's ``stack`` mode).
    :ivar filter_int: leave out bool and integer tensors (ptdbg's ``filter_switch="ON"``).
    :ivar overflow_nums: with ``overflow_check``, stop the step at this many own overflows
        (``-1``: never), as ptdbg does.
    :ivar overflow_factor: with ``overflow_check``, list float16/bfloat16 outputs whose largest
        magnitude comes within this factor of their dtype's largest value.
    :ivar acl_config: ptdbg's ``dump.json``: run each dumped call under the device's kernel-level
        dump (torch_npu's ACL dump; ptdbg's ``mode="acl"``); needs a plugin answering ``ts_kernel_dump``.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True, populate_by_name=True)

    task: Literal["statistics", "tensor", "overflow_check"] = "statistics"
    dump_path: str = "./tscore_dump"
    level: Literal["L0", "L1", "mix"] = "L1"
    scope: list[str] = Field(default_factory=list)
    api_list: list[str] = Field(default_factory=list, alias="list")
    apis: list[str] = Field(default_factory=list)
    data_mode: list[Literal["all", "forward", "backward", "input", "output"]] = Field(
        default_factory=lambda: ["all"]  # type: ignore[arg-type]
    )
    summary_mode: Literal["statistics", "md5"] = "statistics"
    step: list[int] = Field(default_factory=list)
    rank: list[int] = Field(default_factory=list)
    stack: bool = True
    stack_only: bool = False
    filter_int: bool = True
    overflow_nums: StrictInt = 1
    overflow_factor: float = 2.0
    acl_config: str | None = None

    @field_validator("scope")
    @classmethod
    def _two_ends(cls, value: list[str]) -> list[str]:
        if value and len(value) != 2:
            raise ValueError(
                f"scope takes two names, the first and the last call to dump; got {len(value)}: {value}"
            )
        return value

    @field_validator("overflow_nums")
    @classmethod
    def _a_count(cls, value: int) -> int:
        if value == 0 or value < -1:
            raise ValueError(
                f"overflow_nums is how many overflows stop the step: 1 or more, or -1 for never; got {value}"
            )
        return value

    @field_validator("overflow_factor")
    @classmethod
    def _above_one(cls, value: float) -> float:
        if not value >= 1:
            raise ValueError(
                f"overflow_factor is a factor of 1 or more (2: within half the largest); got {value}"
            )
        return value

    @field_validator("step", "rank")
    @classmethod
    def _non_negative(cls, value: list[int]) -> list[int]:
        if any(v < 0 for v in value):
            raise ValueError(f"steps and ranks count from 0; got {value}")
        return sorted(set(value))

    def wants(self, direction: str, side: str) -> bool:
        """Say whether ``data_mode`` keeps the ``side`` (input/output) of a ``direction`` call."""
        modes = set(self.data_mode)
        if "all" in modes:
            return True
        directions = modes & {"forward", "backward"}
        sides = modes & {"input", "output"}
        return (not directions or direction in directions) and (not sides or side in sides)


def _friendly(exc: ValidationError, source: str) -> DumpConfigError:
    problems = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"]) or "config"
        value = error.get("input")
        if error["type"] == "extra_forbidden":
            accepted = ", ".join(sorted(f.alias or n for n, f in DumpConfig.model_fields.items()))
            problems.append(f"unknown key {where!r}; the keys are {accepted}")
        elif error["type"] == "literal_error":
            expected = error.get("ctx", {}).get("expected", "")
            problems.append(f"{where}={value!r} is not one of {expected}")
        else:
            problems.append(f"{where}: {error['msg']}")
    return DumpConfigError(f"{source}: " + "; ".join(problems))


def make_config(values: Mapping[str, Any], source: str = "dump config") -> DumpConfig:
    """Build a :class:`DumpConfig` from keywords, naming every bad value and what is accepted.

    :raises DumpConfigError: for an unknown key, task, level or mode, or a malformed value.
    """
    try:
        return DumpConfig(**dict(values))
    except ValidationError as exc:
        raise _friendly(exc, source) from None


def from_msprobe(document: Mapping[str, Any], source: str) -> DumpConfig:
    """Read msprobe's ``config.json`` layout: top-level keys plus a section named after the task."""
    if not isinstance(document, Mapping):
        raise DumpConfigError(f"{source}: a dump config is a JSON object, not a {type(document).__name__}")
    values: dict[str, Any] = {}
    task = document.get("task", "statistics")
    for key, value in document.items():
        if key in TASKS:
            continue
        if key in _IGNORED_KEYS:
            continue
        values[key] = value
    section = document.get(task)
    if section is not None:
        if not isinstance(section, Mapping):
            raise DumpConfigError(f"{source}: the {task!r} section must be an object")
        for key, value in section.items():
            if key in ("file_format", "check_mode", "backward_input"):
                continue  # msprobe options with one meaning here (npy files, every check)
            values[key] = value
    return make_config(values, source)


def load_config(path: str | os.PathLike[str]) -> DumpConfig:
    """Load a dump config file: msprobe's ``config.json``, or tscore's own keys at the top level.

    :raises DumpConfigError: naming the file when it is missing, not JSON, or has unknown values.
    """
    name = os.fspath(path)
    return from_msprobe(read_json(name, "dump config", DumpConfigError), name)
