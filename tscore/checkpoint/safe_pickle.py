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
from collections.abc import Iterable
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
        ("_codecs", "encode"),
    }
)


class UnsafePickleError(pickle.UnpicklingError):
    """A pickle that names something other than array data; ``name`` is what it named."""

    def __init__(self, name: str) -> None:
        super().__init__(f"the pickle calls {name}, which is not array data")
        self.name = name


class _Restricted(pickle.Unpickler):
    def __init__(self, stream: IO[bytes], allowed: frozenset[tuple[str, str]]) -> None:
        super().__init__(stream)
        self._allowed = allowed

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self._allowed:
            raise UnsafePickleError(f"{module}.{name}")
        return super().find_class(module, name)


def restricted_unpickle(source: bytes | IO[bytes], extra: Iterable[tuple[str, str]] = ()) -> Any:
    """Unpickle ``source`` allowing only numpy arrays, scalars, containers and the ``extra`` globals.

    :param source: the pickle's bytes or a binary stream.
    :param extra: more ``(module, name)`` globals that only rebuild data.
    :raises UnsafePickleError: naming the first global that is not allowed.
    """
    stream = io.BytesIO(source) if isinstance(source, (bytes, bytearray)) else source
    return _Restricted(stream, SAFE_GLOBALS | frozenset(extra)).load()
