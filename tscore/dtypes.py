"""One neutral set of dtype names that every plugin maps its own spelling to.

Frameworks spell the same dtype differently (``torch.bfloat16``,
``BFloat16``, ``paddle.bfloat16``, numpy's ``float32``). Tensors cross the
hook boundary with the neutral name (:class:`tscore.contract.tensors.TensorMeta`'s
``dtype``) and keep the framework's own spelling beside it for people
(``native_dtype``). The neutral names are numpy's where numpy has the type
and ``ml_dtypes``' where it does not (``bfloat16``, ``float8_e4m3fn``).
"""

from __future__ import annotations

import re

NEUTRAL_DTYPES: tuple[str, ...] = (
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
)

# Spellings frameworks use for the same type, after lower-casing and removing
# the module prefix and underscores.
_ALIASES = {
    "half": "float16",
    "float": "float32",
    "double": "float64",
    "long": "int64",
    "int": "int32",
    "short": "int16",
    "bool_": "bool",
    "cfloat": "complex64",
    "cdouble": "complex128",
}
_SQUASHED = {name.replace("_", ""): name for name in NEUTRAL_DTYPES}
_PREFIX = re.compile(r"^[a-z_][a-z0-9_]*\.")


def neutral_dtype(name: object) -> str:
    """Return the neutral name of a dtype written in any framework's spelling.

    ``"torch.bfloat16"``, ``"BFloat16"``, ``"paddle.float32"``,
    ``np.dtype("float32")`` and ``"Float32"`` become ``"bfloat16"``,
    ``"float32"``; a name that is no known dtype comes back lower-cased, so
    two unknown spellings still compare equal when they are the same word.
    """
    text = str(name).strip().lower()
    text = _PREFIX.sub("", text)
    if text in NEUTRAL_DTYPES:
        return text
    if text in _ALIASES:
        return _ALIASES[text]
    return _SQUASHED.get(text.replace("_", ""), text)
