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

    Frames of installed packages (``site-packages``: the framework, the dump tool) are passed over;
    where such a package made the call for the user's code (HF's ``modeling_gpt2.py`` under the
    user's training step), its innermost frame is named too: ``train.py:9 in step (in
    transformers/models/gpt2/modeling_gpt2.py:190 in forward)``. None when no frame is the user's.
    """
    library = None
    for line in reversed(stack):
        found = _USER_FRAME.search(line)
        if not found:
            continue
        part = next((p for p in _LIBRARY_PARTS if p in found["file"]), None)
        if part is None:
            user = f"{found['file']}:{found['line']} in {_function(found['func'])}"
            return f"{user} (in {library})" if library else user
        if library is None:
            inside = found["file"].split(part, 1)[1].lstrip("/\\")
            library = f"{inside}:{found['line']} in {_function(found['func'])}"
    return None


def _function(text: str) -> str:
    return text.strip().rstrip(",")
