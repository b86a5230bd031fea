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

import itertools
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
# "iteration 10/ 500", "step: 10", "[step 10]"; not "time/step: 0.15s", "tokens per step 4096"
_STEP = re.compile(
    r"(?<![/\w])(?<!per )(?:iteration|iter|step)\b\s*[:=]?\s*\[?\s*(\d+)(?![\d.]|\s*m?s\b)", re.IGNORECASE
)


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

    The losses align by step when the lines that hold one number their steps and the numbers
    only grow; when they go back (a counter that restarts each epoch) or most lines have none,
    by order, as TroubleShooter aligns them.

    :raises LossLogError: naming the file when it cannot be read or holds no loss under ``tag``.
    """
    found = LossLog(path, tag, label or os.path.basename(path))
    entries: list[tuple[int | None, float]] = []
    try:
        with open(path, encoding="utf-8", errors="replace") as stream:
            for number, line in enumerate(stream, 1):
                at = line.find(tag)
                if at < 0:
                    continue
                words = line[at + len(tag) :].split()
                value = _NUMBER.search(words[0]) if words else None  # "2.3", "tensor(2.3,", "[2.3]", "=2.3"
                if value is None:
                    found.unreadable.append(number)
                    continue
                step = _STEP.search(line[:at]) or _STEP.search(line)
                entries.append((int(step.group(1)) if step else None, float(value.group(0))))
    except OSError as exc:
        raise LossLogError(f"the log {path!r} cannot be read: {exc.strerror or exc}") from None
    if not entries:
        hint = f" ({len(found.unreadable)} lines hold it with no number after it)" if found.unreadable else ""
        raise LossLogError(f"the log {path!r} holds no loss after {tag!r}{hint}; check loss_tag")
    stepped = [(s, v) for s, v in entries if s is not None]
    growing = all(a[0] < b[0] for a, b in itertools.pairwise(stepped))  # type: ignore[operator]
    if stepped and growing and 2 * len(stepped) >= len(entries):
        found.by_step = True
        found.steps = [s for s, _ in stepped]  # type: ignore[misc]
        found.losses = [v for _, v in stepped]
        if len(stepped) < len(entries):
            log.warning(
                "%s: %d lines hold %r but no step number; left out", path, len(entries) - len(stepped), tag
            )
    else:
        found.steps = list(range(len(entries)))
        found.losses = [v for _, v in entries]
        if stepped and not growing:
            log.warning("%s: the step numbers go back (a counter per epoch?): losses aligned by order", path)
    if found.unreadable:
        log.warning(
            "%s: %d lines hold %r but no number after it (first: line %d)",
            path,
            len(found.unreadable),
            tag,
            found.unreadable[0],
        )
    nonfinite = sum(not math.isfinite(v) for v in found.losses)
    if nonfinite:
        log.warning("%s: %d losses are NaN or inf", path, nonfinite)
    return found
