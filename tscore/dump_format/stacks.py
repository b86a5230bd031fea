"""The stacks a dump records, read back: where in the user's code a call was made.

Shared by the dump (the overflow check names where an overflow started) and
the dump comparison (each call's verdict says where it was made).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_LIBRARY_PARTS = ("site-packages", "dist-packages")
_USER_FRAME = re.compile(r"^File (?P<file>.+?), line (?P<line>\d+), in (?P<func>.+)$", re.MULTILINE)


def where_in_user_code(stack: Sequence[str]) -> str | None:
    """Return the innermost frame of the user's code in a stack (outermost first): ``file:line in func``.

    Frames of installed packages (``site-packages``: the framework, the dump tool) are passed over.
    """
    for line in reversed(stack):
        found = _USER_FRAME.search(line)
        if found and not any(part in found["file"] for part in _LIBRARY_PARTS):
            return f"{found['file']}:{found['line']} in {found['func'].strip().rstrip(',')}"
    return None
