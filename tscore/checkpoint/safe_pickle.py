"""Reading a pickle that should hold only arrays and plain data, without running anything else.

Unpickling calls whatever the file names, so a checkpoint from elsewhere can
run code. :func:`restricted_unpickle` lets through only what rebuilds numpy
arrays, numpy scalars and Python containers, plus globals a caller names, and
refuses every other with an error naming it: the same promise as
``torch.load(weights_only=True)``, for frameworks whose files are plain
pickles (PaddlePaddle's ``.pdparams``).
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Callable, Iterable, Mapping
from typing import IO, Any

# (module, name) pairs that only rebuild data
SAFE_GLOBALS: frozenset[tuple[str, str]] = frozenset(
    {
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "scalar"),
        ("numpy.core.numeric", "_frombuffer"),
        ("numpy._core.numeric", "_frombuffer"),
        ("collections", "OrderedDict"),
        ("builtins", "bytearray"),
        ("builtins", "complex"),
        ("builtins", "set"),
        ("builtins", "frozenset"),
        ("builtins", "slice"),
        ("builtins", "range"),
        ("_codecs", "encode"),  # protocol 2 writes bytes through it
    }
)


class UnsafePickleError(pickle.UnpicklingError):
    """A pickle that names something other than array data; ``name`` is what it named."""

    def __init__(self, name: str) -> None:
        super().__init__(f"the pickle calls {name}, which is not array data")
        self.name = name


class _Restricted(pickle.Unpickler):
    def __init__(
        self,
        stream: IO[bytes],
        allowed: frozenset[tuple[str, str]],
        substitutes: Mapping[tuple[str, str], Callable[..., Any]],
    ) -> None:
        super().__init__(stream, encoding="latin1")
        self._allowed = allowed
        self._substitutes = substitutes

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self._substitutes:
            return self._substitutes[(module, name)]
        if (module, name) not in self._allowed:
            raise UnsafePickleError(f"{module}.{name}")
        return super().find_class(module, name)


def restricted_unpickle(
    source: bytes | IO[bytes],
    extra: Iterable[tuple[str, str]] = (),
    substitutes: Mapping[tuple[str, str], Callable[..., Any]] | None = None,
) -> Any:
    """Unpickle ``source`` allowing only numpy arrays, scalars, containers and the ``extra`` globals.

    :param source: the pickle's bytes or a binary stream.
    :param extra: more ``(module, name)`` globals that only rebuild data (``("builtins", "tuple")``).
    :param substitutes: globals to replace by a function of the caller's, which must accept only
        the data it expects and raise :class:`UnsafePickleError` for anything else (a framework
        that pickles an array as ``eval("data", {"data": array})``).
    :raises UnsafePickleError: naming the first global that is not allowed.
    """
    stream = io.BytesIO(source) if isinstance(source, (bytes, bytearray)) else source
    return _Restricted(stream, SAFE_GLOBALS | frozenset(extra), substitutes or {}).load()
