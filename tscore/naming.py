"""File names for saved tensors: one scheme for every framework.

``{id}_{name}[_{idx|key}...][_{suffix}].npy``, as TroubleShooter's ``save``
prints them (``0_input.npy``, ``2_dense_backward.npy``, ``3_ms_tensor_x1.npy``,
``2_tensor_(2,)_x1_torch.npy``), so that two runs of one network in two
frameworks pair file by file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from tscore.errors import InvalidNameError

NPY_SUFFIX = ".npy"

# Path separators, NUL and other control characters never reach a file name.
_UNSAFE = re.compile(r"[\x00-\x1f\x7f/\\]")


def split_target(file: str | os.PathLike[str] | None) -> tuple[str, str]:
    """Split the ``file`` argument of ``save`` into ``(folder, name)``.

    ``None`` or ``""`` means the current folder and no name (the caller then
    names each tensor ``tensor_(shape)``). A trailing separator means a
    folder with no name. A trailing ``.npy`` is dropped, so ``save("x.npy")``
    does not write ``0_x.npy.npy``.
    """
    if file is None:
        return os.curdir, ""
    text = os.fspath(file)
    if not isinstance(text, str):
        raise InvalidNameError(f"save: file must be a str or path, got bytes {text!r}")
    if text == "":
        return os.curdir, ""
    folder, name = os.path.split(text)
    if name.endswith(NPY_SUFFIX):
        name = name[: -len(NPY_SUFFIX)]
    return folder or os.curdir, name


def clean_part(part: object, what: str) -> str:
    """Turn a dict key, index or suffix into a piece of a file name.

    Separators and control characters become ``_``, so a key such as
    ``"../etc"`` or ``"a/b"`` can never leave the target folder.

    :raises InvalidNameError: for an empty piece.
    """
    text = str(part)
    if text == "":
        raise InvalidNameError(f"save: {what} is empty; use a non-empty string")
    return _UNSAFE.sub("_", text)


def shape_name(shape: Sequence[int]) -> str:
    """Name a tensor saved without a file name: ``tensor_(2,)``, ``tensor_(2, 1)``."""
    return f"tensor_{tuple(int(d) for d in shape)}"


SPEC_003 = "spec003"  # one id per call, keys joined with "_": 2_l_0.npy, 2_l_1.npy
TROUBLESHOOTER_1_0_18 = "1.0.18"  # one id per element, keys joined with ".": 1_l.0.npy, 2_l.1.npy
LAYOUTS = (SPEC_003, TROUBLESHOOTER_1_0_18)


def file_name(
    save_id: int | None,
    name: str,
    path: Sequence[str],
    suffix: str | None,
    layout: str = SPEC_003,
) -> str:
    """Build ``{id}_{name}[_{path...}][_{suffix}].npy`` from already cleaned parts.

    :param layout: :data:`TROUBLESHOOTER_1_0_18` joins the path to the name with dots
        (``{id}_{name}.{path...}[_{suffix}].npy``), as TroubleShooter 1.0.18 writes.
    """
    parts: list[str] = []
    if save_id is not None:
        parts.append(str(save_id))
    if layout == TROUBLESHOOTER_1_0_18:
        parts.append(".".join([name, *path]))
    else:
        parts.append(name)
        parts.extend(path)
    if suffix:
        parts.append(suffix)
    return "_".join(parts) + NPY_SUFFIX
