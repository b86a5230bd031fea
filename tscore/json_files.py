"""Reading JSON: a file a user wrote (weight map, dump config), with errors naming it; a dump's lines."""

from __future__ import annotations

import json
import logging
import os
from typing import Any

import orjson

from tscore.errors import TscoreError

log = logging.getLogger(__name__)


def read_json(
    path: str | os.PathLike[str], what: str, error: type[TscoreError], missing_hint: str = ""
) -> Any:
    """Parse the JSON file at ``path``.

    :param what: what the file is, for messages (``"weight map"``, ``"dump config"``).
    :param error: the exception to raise, naming the file.
    :param missing_hint: what to do when the file does not exist (``"write one with get_weight_map"``).
    :raises error: when the file is missing, unreadable or not JSON.
    """
    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8") as stream:
            return json.load(stream)
    except FileNotFoundError:
        hint = f"; {missing_hint}" if missing_hint else ""
        raise error(f"{what} {name!r} does not exist{hint}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise error(f"{what} {name!r} cannot be read as JSON: {exc}") from None
    except (RecursionError, ValueError) as exc:  # nested too deep, an integer of 5,000 digits
        raise error(f"{what} {name!r} cannot be read as JSON: {type(exc).__name__}: {exc}") from None


def parse_json(data: bytes) -> Any:
    """Parse JSON bytes fast (orjson); bare ``NaN`` and ``Infinity``, which Python's json writes, too.

    :raises json.JSONDecodeError: when the bytes are not JSON (a line cut short by a crash, nesting
        too deep, an integer too long, bytes that are not UTF-8): no other error.
    """
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(data)
    except json.JSONDecodeError:
        raise
    except (RecursionError, ValueError) as exc:  # UnicodeDecodeError is a ValueError too
        raise json.JSONDecodeError(f"{type(exc).__name__}: {str(exc)[:200]}", "", 0) from None


def read_side_json(path: str) -> Any:
    """Parse an optional JSON file that a reader can do without; None when it is missing or damaged.

    A damaged file (not JSON, nested too deep, unreadable) is logged and
    read as absent: the caller goes on without it.
    """
    try:
        with open(path, "rb") as stream:
            return parse_json(stream.read())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("%s cannot be read (%s); going on without it", path, exc)
        return None


def read_package_json(package: str, name: str) -> Any:
    """Parse a JSON data file shipped inside an installed package (a plugin's table of names).

    :raises TscoreError: naming the package and file when it is missing or not JSON.
    """
    from importlib import resources

    try:
        return json.loads(resources.files(package).joinpath(name).read_text(encoding="utf-8"))
    except (OSError, ValueError, ModuleNotFoundError) as exc:
        raise TscoreError(f"{package}'s data file {name!r} cannot be read: {exc}") from exc
