"""How wide printed output may be, and text fitted to that width.

A report printed at a terminal fits the terminal: ``$COLUMNS`` when it is
set, else the width of the terminal that standard output is. Output that
goes to a file or a pipe (with no ``$COLUMNS`` set) has no width, so nothing is wrapped there: a
program reading it gets one row per line (and ``--json`` or the CSV file
always hold every field). Fitting wraps; it never cuts a name.
"""

from __future__ import annotations

import os
import sys
import textwrap


def terminal_width() -> int | None:
    """Return the width to fit printed output to: ``$COLUMNS``, the terminal's, or None (no limit).

    None when standard output is no terminal (a file, a pipe, a notebook, pytest's capture) and
    ``$COLUMNS`` is not set.
    """
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        if sys.stdout is not None and sys.stdout.isatty():
            return os.get_terminal_size(sys.stdout.fileno()).columns
    except (OSError, ValueError, AttributeError):  # no file descriptor behind stdout
        pass
    return None


def wrap_name(name: str, width: int) -> str:
    """Break a file or API name into lines of at most ``width``, after a ``_``, ``.`` or ``/`` where one is.

    ``3_grads_fc1.weight_0.npy`` at 14 becomes ``3_grads_fc1.`` and ``weight_0.npy``: every
    character stays, so names that differ only in their middle still differ on the screen.
    """
    width = max(1, width)
    lines = []
    while len(name) > width:
        cut = max(name.rfind(separator, 0, width) for separator in "_./") + 1
        lines.append(name[: cut or width])
        name = name[cut or width :]
    return "\n".join([*lines, name])


def wrap_text(line: str, width: int, indent: str = "") -> list[str]:
    """Wrap one line at its spaces; a word longer than a line (a path) breaks after a ``/``, ``_`` or ``.``.

    Lines after the first start with ``indent``.
    """
    out: list[str] = []
    for piece in textwrap.wrap(
        line, width, subsequent_indent=indent, break_on_hyphens=False, break_long_words=False
    ) or [""]:
        if len(piece) <= width:
            out.append(piece)
            continue
        lead = indent if out else ""
        parts = wrap_name(piece[len(lead) :], width - len(indent)).splitlines()
        out.extend([lead + parts[0], *(indent + part for part in parts[1:])])
    return out


def fit_lines(text: str, width: int | None) -> str:
    """Wrap each line of ``text`` longer than ``width`` (:func:`wrap_text`), the rest indented by four."""
    if width is None:
        return text
    width = max(1, width)
    indent = "    " if width > 8 else ""
    out = []
    for line in text.splitlines():
        out.extend([line] if len(line) <= width else wrap_text(line, width, indent))
    return "\n".join(out)


def two_line_header(header: str) -> str:
    """Split a header of several words into two lines at the space nearest its middle."""
    spaces = [i for i, char in enumerate(header) if char == " "]
    if not spaces:
        return header
    middle = min(spaces, key=lambda i: abs(len(header) - 2 * i))
    return header[:middle] + "\n" + header[middle + 1 :]
