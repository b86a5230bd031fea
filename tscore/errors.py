"""The one exception family that tscore raises.

Every error says what was wrong and what to do about it. Catch
:class:`TscoreError` to handle all of them; the subclasses also derive from the
built-in exception a Python user would expect (``TypeError`` for an object of
the wrong kind, ``OSError`` for a path problem), so existing ``except`` clauses
keep working.
"""

from __future__ import annotations


class TscoreError(Exception):
    """Base class of every error raised by tscore."""


class UnsupportedObjectError(TscoreError, TypeError):
    """An object that no loaded plugin knows how to handle."""


class InvalidNameError(TscoreError, ValueError):
    """A file name, dict key or suffix that cannot become a safe file name."""


class TargetPathError(TscoreError, OSError):
    """A folder or file that cannot be written or read."""


class PluginError(TscoreError, RuntimeError):
    """A plugin that failed to load or broke the hook contract."""


class ObjectFileError(TscoreError, ValueError):
    """A file given to ``object_load`` that is missing or not JSON (a pickle, which could run code)."""


class StepStopped(TscoreError):
    """A dump stopped the user's step on purpose (ptdbg's overflow limit), from inside an API call.

    The exception leaves the framework's call in the middle: a backend whose framework keeps
    state across a call (MindSpore's stack of mixed-precision types, pushed by each
    ``to_float`` cell) catches it in its API wrapper, sets that state back as it was before
    the step, and raises it on, so that the run goes on unchanged if the user catches it.
    """
