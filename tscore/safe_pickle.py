"""Reading a pickle that should hold only arrays and plain data, without running anything else.

Unpickling calls whatever the file names, so a checkpoint from elsewhere can
run code. :func:`restricted_unpickle` lets through only what rebuilds numpy
arrays, numpy scalars and Python containers, plus globals a caller names, and
refuses every other with an error naming it: the same promise as
``torch.load(weights_only=True)``, for frameworks whose files are plain
pickles (PaddlePaddle's ``.pdparams``). Arrays are only ever built the way
numpy's own pickles build them, empty and then filled from the file's bytes,
so a crafted file cannot hand out uninitialised memory either.
"""

from __future__ import annotations

import io
import pickle
import pickletools
from collections.abc import Callable, Iterable, Mapping
from typing import IO, Any

import numpy as np

# (module, name) pairs that only rebuild data
SAFE_GLOBALS: frozenset[tuple[str, str]] = frozenset(
    {
        ("numpy", "dtype"),
        ("numpy.core.multiarray", "scalar"),
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


def _numpy_reconstruct() -> Callable[..., Any]:
    try:
        from numpy._core.multiarray import _reconstruct  # type: ignore[attr-defined]
    except ImportError:  # numpy 1.x
        from numpy.core.multiarray import _reconstruct  # type: ignore[attr-defined,no-redef]
    return _reconstruct  # type: ignore[no-any-return]


class _ArrayType:
    """Stands for ``numpy.ndarray`` in a pickle: an argument of ``_reconstruct``, never to be called.

    Called, ``ndarray(shape)`` would hand out uninitialised memory (whatever the
    process held there before), which a converted checkpoint would then write out.
    """

    def __new__(cls, *args: object, **kwargs: object) -> _ArrayType:
        raise UnsafePickleError("numpy.ndarray() (an array of uninitialised memory)")


def _empty_array(subtype: object, shape: Any, dtype: object) -> np.ndarray:
    """Begin an array as numpy's own pickles do: empty, to be filled from the file's bytes (BUILD)."""
    if subtype not in (_ArrayType, np.ndarray) or tuple(shape) != (0,):
        raise UnsafePickleError(f"numpy _reconstruct of shape {shape!r} (uninitialised memory)")
    if isinstance(dtype, np.dtype) and dtype.hasobject:
        raise UnsafePickleError("numpy _reconstruct of an object array (pickled Python objects)")
    return _numpy_reconstruct()(np.ndarray, (0,), dtype)  # type: ignore[no-any-return]


_MAX_RANGE = 10_000_000  # a range this long in a checkpoint is an attempt to fill memory


def _bytearray(*args: Any) -> bytearray:
    """``bytearray`` of the bytes a pickle holds, never of a size it names (``bytearray(10**10)``)."""
    if args and isinstance(args[0], int):
        raise UnsafePickleError(f"builtins.bytearray({args[0]}) (memory the file does not hold)")
    return bytearray(*args)


def _range(*args: Any) -> range:
    built = range(*args)
    if len(built) > _MAX_RANGE:
        raise UnsafePickleError(f"builtins.range of {len(built)} numbers (memory the file does not hold)")
    return built


def memo_problem(data: bytes | IO[bytes]) -> str | None:
    """Say why a pickle would make the unpickler allocate what the file does not hold, or None.

    CPython's unpickler sizes its memo table by the largest index a ``PUT``
    names, so 17 bytes can ask for gigabytes. A real pickle never names an
    index beyond its own length (each ``PUT`` takes bytes). The opcodes are
    read (``pickletools``) without building anything; a stream is rewound.
    """
    source: bytes | IO[bytes] = data
    start = 0
    if isinstance(data, (bytes, bytearray)):
        length = len(data)
    else:
        start = data.tell()
        length = data.seek(0, io.SEEK_END) - start
        data.seek(start)
    try:
        for opcode, argument, _ in pickletools.genops(source):
            if opcode.name in _MEMO_OPS and isinstance(argument, int) and argument > length:
                return f"it names memo slot {argument} in a pickle of {length} bytes"
    except Exception as exc:
        return f"it is damaged ({type(exc).__name__}: {exc})"
    finally:
        if not isinstance(data, (bytes, bytearray)):
            data.seek(start)
    return None


_MEMO_OPS = frozenset({"PUT", "BINPUT", "LONG_BINPUT", "GET", "BINGET", "LONG_BINGET"})


# numpy's array pickles call these; the stand-ins build only what the file's bytes fill
ARRAY_SUBSTITUTES: dict[tuple[str, str], Callable[..., Any]] = {
    ("builtins", "bytearray"): _bytearray,
    ("builtins", "range"): _range,
    ("numpy", "ndarray"): _ArrayType,
    ("numpy.core.multiarray", "_reconstruct"): _empty_array,
    ("numpy._core.multiarray", "_reconstruct"): _empty_array,
}


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
    :raises UnsafePickleError: naming the first global that is not allowed, or a pickle that
        would allocate memory its bytes do not hold.
    """
    stream = io.BytesIO(source) if isinstance(source, (bytes, bytearray)) else source
    problem = memo_problem(stream)
    if problem:
        raise pickle.UnpicklingError(f"refused to unpickle: {problem}")
    allowed = SAFE_GLOBALS | frozenset(extra)
    try:
        return _Restricted(stream, allowed, {**ARRAY_SUBSTITUTES, **(substitutes or {})}).load()
    except pickle.UnpicklingError:
        raise
    except Exception as exc:
        raise pickle.UnpicklingError(f"damaged pickle ({type(exc).__name__}: {str(exc)[:200]})") from None
