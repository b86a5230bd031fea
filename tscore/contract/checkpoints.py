"""What reading a checkpoint gives back, and the error when it cannot be read."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tscore.errors import TscoreError


class CheckpointReadError(TscoreError, ValueError):
    """A checkpoint file that is missing, damaged, truncated or of an unknown kind.

    ``path`` names the file and ``offset`` the byte where reading failed, when known.
    """

    def __init__(self, message: str, *, path: str | None = None, offset: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.offset = offset


@dataclass
class CheckpointContents:
    """The tensors of one checkpoint file, and what was left out of them.

    :ivar path: the file read (empty for an in-memory dict).
    :ivar format: ``"ckpt"``, ``"safetensors"``, ``"pth"``...
    :ivar params: ``{name: array}`` in file order; bfloat16 as ``ml_dtypes.bfloat16``.
    :ivar dtypes: the dtype of each tensor as its framework spells it, where
        that says more than the numpy dtype.
    :ivar metadata: string pairs the file carries (safetensors ``__metadata__``).
    :ivar skipped: entries that are not tensors (an epoch counter, optimizer
        state, a string), with the reason each was left out.
    """

    path: str
    format: str
    params: dict[str, np.ndarray] = field(default_factory=dict)
    dtypes: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    metadata: dict[str, str] = field(default_factory=dict)

    @property
    def nbytes(self) -> int:
        """Bytes of tensor data held."""
        return sum(a.nbytes for a in self.params.values())
