"""MkDocs hook: show the docstrings' Sphinx roles (``:class:`~a.B```) as the code they name.

The core's docstrings are written for Python's ``help()`` and Sphinx alike; mkdocstrings renders
their Markdown, where a role would show as ``:class:`` before the code, and ``::`` before a
literal block as two colons.
"""

from __future__ import annotations

import re
from typing import Any

ROLE = re.compile(r":(?:mod|class|func|meth|attr|data|exc|obj):(<code>)~?([\w.]+\.)?")
LITERAL = re.compile(r"::(</p>)")


def _code(match: re.Match[str]) -> str:
    """Keep the code span alone, with its module path unless the role said ``~`` (the last name)."""
    return match.group(1) + ("" if "~" in match.group(0) else match.group(2) or "")


def on_page_content(html: str, **kwargs: Any) -> str:
    """Drop the role before each code span (and a ``~``'s module path); ``::`` before a block is ``:``."""
    html = ROLE.sub(_code, html)
    return LITERAL.sub(r":\1", html)
