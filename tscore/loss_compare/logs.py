"""Reading the loss of every step from a training log, by the tag that precedes it (``"lm loss:"``).

A line holding the tag gives one loss: the first word after the tag, read
as a number (``1.082E+01``, ``0.5,``, ``nan``, ``inf``: a loss that became
NaN is what a person is looking for, so it is kept). The step is the number
after ``iteration``, ``step`` or ``iter`` on the same line when there is one
(``iteration 10/ 500``, ``step: 10``, ``[step 10]``), so that two logs of
different lengths, or one that skips steps, align by step; a log without
step numbers counts its losses from 0, as TroubleShooter does.
"""

from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tscore.errors import TscoreError

log = logging.getLogger(__name__)

_NUMBER = re.compile(
    r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]?(?:nan|inf(?:inity)?)", re.IGNORECASE
)
_STEP = re.compile(r"\b(?:iteration|iter|step)\b\s*[:=]?\s*\[?\s*(\d+)", re.IGNORECASE)


class LossLogError(TscoreError, ValueError):
    """A training log that cannot be read, or holds no loss under the tag asked for."""


@dataclass
class LossLog:
    """The losses of one log, by step, and what could not be read."""

    path: str
    tag: str
    label: str
    steps: list[int] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    by_step: bool = False  # True when the steps come from the log's own step numbers
    unreadable: list[int] = field(default_factory=list)  # line numbers holding the tag but no number
    repeated: int = 0  # steps logged again later (a resumed run): the last value is kept


def describe(spec: Any, argument: str) -> tuple[str, str, str]:
    """Turn TroubleShooter's ``{"path", "loss_tag", "label"}`` (or a path) into ``(path, tag, label)``.

    :raises LossLogError: naming ``argument`` when the path or the tag is missing.
    """
    if isinstance(spec, (str, os.PathLike)):
        path, tag, label = os.fspath(spec), "loss:", ""
    elif isinstance(spec, Mapping):
        if not spec.get("path"):
            raise LossLogError(
                f"{argument} names no log: give {{'path': ..., 'loss_tag': ..., 'label': ...}}"
            )
        path = os.fspath(spec["path"])
        tag = str(spec.get("loss_tag") or "")
        label = str(spec.get("label") or "")
        if not tag:
            raise LossLogError(
                f"{argument}: give the text before each loss as 'loss_tag', such as 'lm loss:'"
            )
    else:
        raise LossLogError(f"{argument} must be a dict with 'path', 'loss_tag' and 'label', or a path")
    return path, tag, label or os.path.basename(path)


def read_losses(path: str, tag: str, label: str = "") -> LossLog:
    """Read every loss that follows ``tag`` in the log at ``path``, with its step.

    :raises LossLogError: naming the file when it cannot be read or holds no loss under ``tag``.
    """
    found = LossLog(path, tag, label or os.path.basename(path))
    values: dict[int, float] = {}
    counted: list[float] = []
    steps_seen = True
    try:
        with open(path, encoding="utf-8", errors="replace") as stream:
            for number, line in enumerate(stream, 1):
                at = line.find(tag)
                if at < 0:
                    continue
                words = line[at + len(tag) :].split()
                value = _NUMBER.match(words[0]) if words else None
                if value is None:
                    found.unreadable.append(number)
                    continue
                loss = float(value.group(0))
                counted.append(loss)
                step = _STEP.search(line)
                if step is None:
                    steps_seen = False
                    continue
                key = int(step.group(1))
                found.repeated += key in values
                values[key] = loss
    except OSError as exc:
        raise LossLogError(f"the log {path!r} cannot be read: {exc.strerror or exc}") from None
    if not counted:
        hint = f" ({len(found.unreadable)} lines hold it with no number after it)" if found.unreadable else ""
        raise LossLogError(f"the log {path!r} holds no loss after {tag!r}{hint}; check loss_tag")
    if steps_seen and values:
        found.by_step = True
        found.steps = sorted(values)
        found.losses = [values[s] for s in found.steps]
    else:
        found.steps = list(range(len(counted)))
        found.losses = counted
    if found.unreadable:
        log.warning(
            "%s: %d lines hold %r but no number after it (first: line %d)",
            path,
            len(found.unreadable),
            tag,
            found.unreadable[0],
        )
    if found.repeated:
        log.warning(
            "%s: %d steps are logged more than once; the last value of each is kept", path, found.repeated
        )
    nonfinite = sum(not math.isfinite(v) for v in found.losses)
    if nonfinite:
        log.warning("%s: %d losses are NaN or inf", path, nonfinite)
    return found
