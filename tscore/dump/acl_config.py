"""ptdbg's ``dump.json`` for a kernel-level (ACL) dump: read and checked before any step runs.

Spec 004's shape::

    {"dump": {"dump_list": [], "dump_path": "/home/user/dump/output",
              "dump_mode": "all", "dump_op_switch": "on"}}

``dump_mode`` is ``output`` (the default), ``input`` or ``all``;
``dump_op_switch`` ``on`` or ``off``. The device's plugin hands the file to its
runtime as it is (``ts_kernel_dump``); tscore checks it so that a wrong file
is an error naming it before training starts, not a failure deep in the
device's runtime.
"""

from __future__ import annotations

import os
from typing import Any

from tscore.dump.config import DumpConfigError
from tscore.json_files import read_json

DUMP_MODES = ("output", "input", "all")
SWITCHES = ("on", "off")


def check_acl_config(path: str | os.PathLike[str] | None, caller: str) -> str:
    """Check that ``path`` is spec 004's ``dump.json``; return it.

    :param caller: the function or argument that named it, for the message.
    :raises DumpConfigError: naming the file and what is wrong: missing, not JSON, or another shape.
    """
    if path is None or not os.fspath(path):
        raise DumpConfigError(
            f"{caller}: dump_mode='acl' needs dump_config, the path of ptdbg's dump.json "
            '({"dump": {"dump_list": [], "dump_path": "...", "dump_mode": "all", "dump_op_switch": "on"}})'
        )
    name = os.fspath(path)
    document: Any = read_json(name, "ACL dump config", DumpConfigError)
    section = document.get("dump") if isinstance(document, dict) else None
    if not isinstance(section, dict):
        raise DumpConfigError(
            f"{caller}: {name!r} must hold an object under the key 'dump' (spec 004's dump.json)"
        )
    problems = []
    if not isinstance(section.get("dump_path"), str) or not section["dump_path"]:
        problems.append("'dump_path' must name the folder the device writes to")
    if not isinstance(section.get("dump_list", []), list):
        problems.append("'dump_list' must be a list (empty: every operator)")
    if section.get("dump_mode", "output") not in DUMP_MODES:
        problems.append(f"'dump_mode' is one of {', '.join(DUMP_MODES)}, not {section.get('dump_mode')!r}")
    if section.get("dump_op_switch", "off") not in SWITCHES:
        problems.append(f"'dump_op_switch' is 'on' or 'off', not {section.get('dump_op_switch')!r}")
    unknown = sorted(set(section) - {"dump_list", "dump_path", "dump_mode", "dump_op_switch"})
    if unknown:
        problems.append(f"unknown key(s) {', '.join(map(repr, unknown))}")
    if problems:
        raise DumpConfigError(f"{caller}: {name!r}: " + "; ".join(problems))
    return name
