"""A comparison's rows beyond what a report keeps in memory: one temporary file, appended and read back.

A comparison of hundreds of thousands of values keeps only its failing rows
in memory; every row also goes, block by block, to a :class:`Spool` that the
report reads back when asked for all of them (``iter_pairs``, ``iter_rows``).
The folder compare spools CSV text (:meth:`Spool.write`, :meth:`Spool.path`);
the dump compare pickled blocks (:meth:`Spool.add`, :meth:`Spool.blocks`).
"""

from __future__ import annotations

import pickle
import tempfile
from collections.abc import Iterator
from typing import IO, Any


class Spool:
    """A temporary file of rows, removed when closed or collected; local to this process.

    A report that is copied keeps the same spool; one that is pickled (sent to
    another process) arrives without it, and says so when asked for every row.
    """

    def __init__(self, prefix: str = "tscore-rows-") -> None:
        """Open the file (in the system's temporary folder, named from ``prefix``)."""
        self.file: IO[bytes] = tempfile.NamedTemporaryFile(prefix=prefix)

    def write(self, data: bytes) -> None:
        """Append bytes as they are (rows already rendered, or a block another process pickled)."""
        self.file.write(data)

    def add(self, block: Any) -> None:
        """Append one block, pickled (bytes are taken as a block already pickled)."""
        if isinstance(block, bytes):
            self.file.write(block)
        else:
            pickle.dump(block, self.file, protocol=pickle.HIGHEST_PROTOCOL)

    def path(self) -> str:
        """Return the file's path, all written so far flushed to it: read it with a handle of your own."""
        self.file.flush()
        return self.file.name

    def blocks(self) -> Iterator[Any]:
        """Yield the blocks added, in order (each iteration reads with its own handle)."""
        with open(self.path(), "rb") as stream:
            while True:
                try:
                    yield pickle.load(stream)  # our own temporary file
                except EOFError:
                    return

    def close(self) -> None:
        """Remove the file."""
        self.file.close()

    def __deepcopy__(self, memo: dict[int, Any]) -> Spool:
        """Stay one spool: a copied report reads the same rows."""
        return self

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        """Arrive as None in another process: the file is this process's."""
        return _no_spool, ()


def _no_spool() -> None:
    return None
