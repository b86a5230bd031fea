"""A helper process that renders the CSV lines of a big dump comparison while the comparison reads on.

Rendering ptdbg's CSV (every number spelled) is a third of the time of a
statistics comparison of 100,000 calls, and it needs nothing but the block
of rows compared. Once a comparison is big (past the rows a report keeps
whole), :class:`CsvHelper` starts a Python running :func:`main`,
hands it the CSV file's descriptor, and sends it each block, pickled, in
order, through a pipe: the helper renders it and writes it at the file's
current offset, on the machine's other core. A fresh interpreter (not a fork,
not ``multiprocessing``): nothing of the caller's process is copied or
imported again, whatever the caller's script does at import.

The pipe's buffer is the only queue: when the helper lags, sending waits.
The helper writes nothing but the CSV; when it fails, :meth:`CsvHelper.close`
raises with its exit code, and the comparison drops the half-written CSV as
on any error.

Messages: one byte of kind (``B`` a pickled block with a ``csv(stack_mode)``
method, ``R`` bytes to write as they are), eight of length (little-endian),
then the payload. The end of the pipe is the end of the work.
"""

from __future__ import annotations

import logging
import os
import pickle
import subprocess
import sys
from typing import IO

log = logging.getLogger(__name__)

_BLOCK, _RAW = b"B", b"R"
_COMMAND = "from tscore.dump_compare.csv_helper import main; main()"


class CsvHelperError(RuntimeError):
    """The helper process stopped before it had written every block."""


class CsvHelper:
    """The comparison's side of the helper: start it, send it blocks in order, wait for it at the end."""

    def __init__(self, fd: int, stack_mode: bool) -> None:
        """Start the helper, writing at descriptor ``fd`` (flushed: the helper writes at its offset).

        :raises OSError: when the process cannot start (the caller renders the CSV itself).
        """
        here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        path = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)  # this tscore
        self._process = subprocess.Popen(
            [sys.executable, "-c", _COMMAND, str(fd), "1" if stack_mode else "0"],
            stdin=subprocess.PIPE,
            pass_fds=(fd,),
            env={**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1"},
        )
        assert self._process.stdin is not None
        self._pipe: IO[bytes] = self._process.stdin
        log.debug("CSV helper process %d started", self._process.pid)

    def block(self, payload: bytes) -> None:
        """Send a pickled block for the helper to render and write."""
        self._send(_BLOCK, payload)

    def raw(self, data: bytes) -> None:
        """Send bytes for the helper to write as they are (lines rendered here)."""
        self._send(_RAW, data)

    def _send(self, kind: bytes, payload: bytes) -> None:
        try:
            self._pipe.write(kind + len(payload).to_bytes(8, "little"))
            self._pipe.write(payload)
        except BrokenPipeError:
            raise CsvHelperError(self._failure()) from None

    def close(self) -> None:
        """Wait for the helper to write what it was sent.

        :raises CsvHelperError: when it stopped with an error (what it wrote is incomplete).
        """
        try:
            self._pipe.close()
        except BrokenPipeError:
            pass
        if self._process.wait() != 0:
            raise CsvHelperError(self._failure())

    def kill(self) -> None:
        """Stop the helper at once (the comparison was stopped)."""
        self._process.kill()
        try:
            self._pipe.close()
        except OSError:
            pass
        self._process.wait()

    def _failure(self) -> str:
        code = self._process.wait()
        return (
            f"the CSV helper process ({sys.executable}, {__name__}) stopped with exit code {code} "
            "before it had written every block; its error is above in the standard error"
        )


def _read(stream: IO[bytes], size: int) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise EOFError(f"the message stops after {len(data)} of {size} bytes")
    return data


def serve(fd: int, stack_mode: bool, source: IO[bytes]) -> None:
    """Render and write every message of ``source`` at descriptor ``fd``, until the end of ``source``."""
    with open(fd, "wb", closefd=False) as out:
        while True:
            head = source.read(9)
            if not head:
                return
            if len(head) != 9:
                raise EOFError(f"a message's head stops after {len(head)} of 9 bytes")
            kind, size = head[:1], int.from_bytes(head[1:], "little")
            payload = _read(source, size)
            if kind == _BLOCK:
                out.write(pickle.loads(payload).csv(stack_mode))  # from the comparison that started us
            elif kind == _RAW:
                out.write(payload)
            else:
                raise ValueError(f"unknown message kind {kind!r}")


def main() -> None:
    """Serve the comparison that started this process: ``-c ... FD STACK_MODE``, blocks on standard input."""
    serve(int(sys.argv[1]), sys.argv[2] == "1", sys.stdin.buffer)
