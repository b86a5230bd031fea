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

A thread of the comparison feeds the pipe from a queue of a few blocks: when the
helper lags that far, sending waits.
At the end the helper says how many messages it wrote, on a pipe of its own; when that is not every
one sent (it stopped, or failed to write), :meth:`CsvHelper.close` raises
with what it said, and the comparison drops the half-written CSV as on any
error. A helper that cannot start leaves the rendering to the comparison's
own process. The helper runs in its own session (a Ctrl-C at the terminal is
the comparison's to handle; it stops the helper) and imports what the
comparison's process imports (its ``sys.path``, not the working folder).

Messages: one byte of kind (``B`` a pickled block with a ``csv(stack_mode)``
method, ``R`` bytes to write as they are), eight of length (little-endian),
then the payload. The end of the pipe is the end of the work.
"""

from __future__ import annotations

import logging
import os
import pickle
import queue
import subprocess
import sys
import threading
from typing import IO

from tscore.errors import TscoreError

log = logging.getLogger(__name__)

_BLOCK, _RAW = b"B", b"R"
_QUEUED = 4  # blocks waiting for the pipe, at most: a few megabytes
# with -c the working folder comes first on the path: a ./numpy.py there must not be imported
_COMMAND = (
    "import sys\n"
    "if sys.path and sys.path[0] == '':\n"
    "    del sys.path[0]\n"
    "from tscore.dump_compare.csv_helper import main\n"
    "main()"
)


class CsvHelperError(TscoreError, RuntimeError):
    """The helper process stopped before it had written every block (what it wrote is incomplete)."""


class CsvHelper:
    """The comparison's side of the helper: start it, send it blocks in order, check it wrote them all."""

    def __init__(self, fd: int, stack_mode: bool, path: str) -> None:
        """Start the helper, writing at descriptor ``fd`` (flushed: the helper writes at its offset).

        :param path: the CSV's name, for messages.
        :raises OSError: when the process cannot start (the caller renders the CSV itself).
        """
        if not sys.executable:
            raise OSError("no Python interpreter to start (sys.executable is empty)")
        self.path = path
        search = os.pathsep.join(p for p in sys.path if p)  # this process's packages, in its order
        said, says = os.pipe()  # the helper's report at its end: a pipe of its own, not its stdout
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-c", _COMMAND, str(fd), "1" if stack_mode else "0", str(says)],
                stdin=subprocess.PIPE,
                pass_fds=(fd, says),
                env={**os.environ, "PYTHONPATH": search, "OMP_NUM_THREADS": "1"},
                start_new_session=True,  # a Ctrl-C at the terminal is this process's to handle
            )
        except BaseException:
            os.close(said)
            raise
        finally:
            os.close(says)
        self._said_pipe: IO[bytes] = os.fdopen(said, "rb")
        assert self._process.stdin is not None
        self._pipe: IO[bytes] = self._process.stdin
        self._sent = 0
        self._said: str | None = None
        # a thread feeds the pipe, so that the comparison does not wait while the helper renders a block
        self._queue: queue.Queue[tuple[bytes, bytes] | None] = queue.Queue(maxsize=_QUEUED)
        self._broken: BaseException | None = None
        self._pump = threading.Thread(target=self._feed, name="tscore-csv-helper", daemon=True)
        self._pump.start()
        log.debug("CSV helper process %d started for %s", self._process.pid, path)

    def _feed(self) -> None:
        """Write each queued message to the pipe; once it breaks, take the rest without writing them."""
        while (message := self._queue.get()) is not None:
            if self._broken is None:
                try:
                    self._pipe.write(message[0])
                    self._pipe.write(message[1])
                except BaseException as exc:  # the helper stopped: close() or the next send says so
                    self._broken = exc
        try:
            self._pipe.close()
        except OSError:
            pass

    def block(self, payload: bytes) -> None:
        """Send a pickled block for the helper to render and write."""
        self._send(_BLOCK, payload)

    def raw(self, data: bytes) -> None:
        """Send bytes for the helper to write as they are (lines rendered here)."""
        self._send(_RAW, data)

    def _send(self, kind: bytes, payload: bytes) -> None:
        if self._broken is not None:
            raise CsvHelperError(self._failure())
        self._queue.put((kind + len(payload).to_bytes(8, "little"), payload))
        self._sent += 1

    def _stop_feeding(self) -> None:
        self._queue.put(None)
        self._pump.join()

    def close(self) -> None:
        """Wait for the helper to write what it was sent, and check that it wrote every message.

        :raises CsvHelperError: when it stopped early or with an error (what it wrote is incomplete).
        """
        self._stop_feeding()
        report = self._report()
        if self._broken is not None or self._process.returncode != 0 or report != f"wrote {self._sent}":
            raise CsvHelperError(self._failure(report))

    def kill(self) -> None:
        """Stop the helper at once (the comparison was stopped)."""
        self._process.kill()
        self._stop_feeding()  # the pipe breaks: the thread takes what is left without writing it
        self._report()

    def _report(self) -> str:
        """Read what the helper said at its end and wait for it (once: later calls give the same)."""
        if self._said is None:
            self._said = self._said_pipe.read().decode("utf-8", "replace").strip()
            self._said_pipe.close()
            self._process.wait()
        return self._said

    def _failure(self, report: str | None = None) -> str:
        if report is None:
            report = self._report()
        code = self._process.returncode
        said = report or "nothing"
        return (
            f"the process writing {self.path} ({sys.executable}, {__name__}) stopped with exit code {code} "
            f"after {said!r} of {self._sent} blocks sent; the CSV is incomplete and was not kept"
        )


def _read(stream: IO[bytes], size: int) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise EOFError(f"the message stops after {len(data)} of {size} bytes")
    return data


def serve(fd: int, stack_mode: bool, source: IO[bytes]) -> int:
    """Render and write every message of ``source`` at descriptor ``fd``; return how many there were."""
    count = 0
    with open(fd, "wb", closefd=False) as out:
        while True:
            head = source.read(9)
            if not head:
                return count
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
            count += 1


def main() -> None:
    """Serve the comparison that started this process: ``-c ... FD STACK_MODE REPORT_FD``, blocks on stdin.

    Writes ``wrote N`` at descriptor REPORT_FD when every message was written, ``error: ...`` otherwise.
    """
    with open(int(sys.argv[3]), "w", encoding="utf-8") as report:  # read by the comparison alone
        try:
            count = serve(int(sys.argv[1]), sys.argv[2] == "1", sys.stdin.buffer)
        except BaseException as exc:  # the comparison reads this and stops with it
            report.write(f"error: {exc!r}")
            report.close()
            sys.exit(1)
        report.write(f"wrote {count}")
