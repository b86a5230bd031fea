"""Writing a dump: JSON lines appended and flushed as they come, tensors once each, from one thread.

The folder of one step and rank holds:

* ``dump.jsonl``: one record per call and direction, appended and flushed in
  batches of 128 and at ``stop()``; a run killed in the middle leaves every
  line written before it complete (the last may be cut short: readers skip it).
* ``stack.jsonl``: each distinct call stack once, ``{"id": 3, "stack": [...]}``;
  records refer to it by id.
* ``construct.jsonl``: the module tree, ``{"module": path, "type": ..., "parent": ...}``.
* numbers JSON cannot hold are written as the strings ``"inf"``, ``"-inf"`` and
  ``"nan"`` (:func:`tscore.dump_format.reading.read_lines` gives them back as floats).
* ``tensors/``: with ``task="tensor"``, one ``.npy`` per tensor, written before
  any record that names it; bfloat16 and float8 as float32, exact, as ``ts.save`` stores them.

Everything goes through a queue bounded by bytes, so a slow disk slows the
training instead of filling memory. A disk that fails (full, unwritable) turns
the dump off with one warning; the training goes on.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import orjson

from tscore import folder_writers
from tscore.contract.transfers import PendingArray
from tscore.dump_format.files import CONSTRUCT_FILE, INFO_FILE, RECORDS_FILE, STACKS_FILE, TENSORS_FOLDER
from tscore.errors import TargetPathError
from tscore.json_lines import json_line
from tscore.npy_files import ensure_folder, storable, write_atomic, write_npy_fast

log = logging.getLogger(__name__)

DEFAULT_QUEUE_BYTES = 256 * 1024 * 1024
BATCH_LINES = 128
HAND_OVER_SECONDS = 0.05  # and at least this often, so a crash loses at most this much
_RECORD_BYTES = 1024  # what a record is counted as in the queue
_STOP = ("stop", None, 0)


class WriterThread:
    """One thread that runs writers one after another, kept for a debugger's life.

    Each step writes its own folder; running every step's writer on the same
    thread (instead of a new thread a step) keeps the C allocator from growing
    one arena per thread, so memory stays flat over many steps.
    """

    def __init__(self) -> None:
        """Start the thread; it waits for work."""
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name="tscore-dump-writer", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                break
            job()

    def run(self, job: Callable[[], None]) -> None:
        """Run ``job`` on the thread after the jobs before it."""
        self._jobs.put(job)

    @property
    def alive(self) -> bool:
        """True until :meth:`shutdown` has been processed."""
        return self._thread.is_alive()

    def shutdown(self) -> None:
        """End the thread once its jobs are done (waiting for it, unless called from the thread itself).

        A debugger that was never closed ends its thread when the collector finds it, and the
        collector may run on any thread: this one included.
        """
        if self._thread.is_alive():
            self._jobs.put(None)
            if threading.current_thread() is not self._thread:
                self._thread.join()


def claim_dump_folder(folder: str) -> None:
    """Take ``folder`` as this process's, as ``ts.save`` takes a folder (:func:`tscore.folder_writers.claim`).

    The lock is taken first and the other writers looked for after, so two processes that start
    together both see each other and neither destroys the other's dump. :meth:`DumpWriter.close`
    gives the lock back: a process that has stopped dumping keeps no later run out. A lock of
    another machine cannot be told from one its killed run left (a node-local lock on a shared
    file system), so it is named in a warning and the dump goes on, as before there were locks.

    :raises TargetPathError: naming the folder and the other live process of this machine that writes it.
    """
    folder_writers.claim(folder)
    others = folder_writers.live_writers(folder)
    here = [w for w in others if folder_writers.on_this_host(w)]
    if here:
        folder_writers.release(folder)
        raise TargetPathError(
            f"{folder!r} is being written by another process ({', '.join(here)}), and a dump replaces "
            "the folder it writes: give this run a dump_path (or rank) of its own"
        )
    if others:
        log.warning(
            "dump: %s holds the lock of %s on another machine; if that run is still writing, this dump "
            "replaces its files: give each run a dump_path of its own (tscore clean removes a dead "
            "machine's lock only from that machine)",
            folder,
            ", ".join(others),
        )


class DumpWriter:
    """Append the records, stacks, module tree and tensors of one dump folder from a background thread.

    :param folder: ``{dump_path}/step{k}/rank{r}``; created here.
    :param finish: turns values the recorder left lazy (statistics still on a device) into JSON.
    :param stage: called on the caller's thread with each batch of lines as it is handed to the
        thread: starts the copies that ``finish`` will wait for (one per batch, not one per value).
    :param max_queue_bytes: how much may wait for the disk before :meth:`submit_record` and
        :meth:`submit_tensor` block.
    :param thread: the :class:`WriterThread` to write on (a debugger keeps one for all its
        steps); without it the writer starts a thread of its own and ends it at :meth:`close`.
    """

    def __init__(
        self,
        folder: str,
        finish: Callable[[Any], Any] = lambda record: record,
        *,
        stage: Callable[[list[tuple[str, Mapping[str, Any]]]], None] | None = None,
        max_queue_bytes: int = DEFAULT_QUEUE_BYTES,
        thread: WriterThread | None = None,
    ) -> None:
        """Create the folder, take it as this process's and start the thread.

        :raises TargetPathError: when the folder cannot be made, or when another live process
            writes it (a dump replaces its folder, so this one would destroy that one's).
        """
        ensure_folder(folder)
        claim_dump_folder(folder)
        self.folder = folder
        self.failed: str | None = None
        self._finish = finish
        self._stage = stage
        self._queue: queue.SimpleQueue[tuple[str, Any, int]] = queue.SimpleQueue()
        self._room = threading.Condition()
        self._waiting = 0
        self._limit = max_queue_bytes
        self._warned_slow = False
        self._streams: dict[str, Any] = {}
        self._pending: list[tuple[str, Mapping[str, Any]]] = []
        self._handed = time.monotonic()
        try:
            self._clear_previous()
        except BaseException:
            folder_writers.release(folder)  # nothing of this dump was written: the folder is not ours
            raise
        self.bytes_written = 0
        self.tensors_written = 0
        self.tensor_bytes = 0
        self.tensor_seconds = 0.0  # spent writing tensor files: the writer's throughput
        self.cpu_seconds = 0.0  # the writer thread's CPU time for this folder, once closed
        self._folders: set[str] = set()
        self.lines_lost = 0
        self.tensors_lost = 0  # device copies that failed: their records name files that are not there
        self._own_thread = thread is None
        self._thread = WriterThread() if thread is None else thread
        self._done = threading.Event()
        self._thread.run(self._run)

    # ------------------------------------------------------------ called by the recorder

    def _put(self, kind: str, payload: Any, size: int) -> bool:
        """Queue one item, waiting while the queue is full; False when it was dropped (the dump failed)."""
        if self.failed is not None:
            return False
        with self._room:
            if self._waiting + size > self._limit and self._waiting > 0 and not self._warned_slow:
                self._warned_slow = True
                log.warning(
                    "dump to %s: the disk cannot keep up with the training, which now waits for it "
                    "(%d MB queued); dump less (scope, list, data_mode) or use a faster disk",
                    self.folder,
                    self._waiting >> 20,
                )
            while self._waiting + size > self._limit and self._waiting > 0 and self.failed is None:
                if not self._thread.alive or self._done.is_set():
                    return False
                self._room.wait(0.5)
            self._waiting += size
        self._queue.put((kind, payload, size))
        return True

    def submit_record(self, record: Mapping[str, Any], file: str = RECORDS_FILE) -> None:
        """Queue one JSON line for ``file`` (records, stacks or the module tree).

        Lines go to the thread in batches of :data:`BATCH_LINES` (each hand-over
        wakes the thread, which costs the training more than the line itself),
        and all at :meth:`close`.
        """
        self._pending.append((file, record))
        if len(self._pending) >= BATCH_LINES or time.monotonic() - self._handed > HAND_OVER_SECONDS:
            self._hand_over()

    def _hand_over(self) -> None:
        self._handed = time.monotonic()
        batch, self._pending = self._pending, []
        if batch:
            if self._stage is not None and self.failed is None:
                self._stage(batch)
            self._put("lines", batch, _RECORD_BYTES * len(batch))

    def submit_tensor(self, relative: str, array: np.ndarray | PendingArray) -> None:
        """Queue one array for ``tensors/``: the caller's own copy, or one still coming from a device.

        A :class:`PendingArray` counts its bytes against the queue from now: its host memory
        (pinned, on a GPU) is in use until the file is written.
        """
        self._hand_over()
        queued = self._put("tensor", (relative, array), int(array.nbytes) + _RECORD_BYTES)
        if not queued and isinstance(array, PendingArray):
            array.release()  # its host memory goes back at once: the dump has stopped writing

    def write_info(self, info: Mapping[str, Any]) -> None:
        """Have ``dump_info.json`` (what was dumped, how) replaced atomically, by the thread.

        Written twice a step (at start and stop): opening, writing and renaming a file cost the
        training thread about 0.4 ms each time, the thread's now; :meth:`close` waits for it.
        Once the dump has failed (a tensor that could not be written, say) it is written here,
        at once: what the step recorded and the run's settings still reach the folder.
        """
        # orjson: the json module took 0.3 ms each time
        options = orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE
        text = orjson.dumps(info, default=str, option=options)
        if self._put("info", text, _RECORD_BYTES):
            return
        try:
            self._write_info(text)
        except Exception as exc:  # a dump must never stop the training
            self._fail(exc)

    def _write_info(self, text: bytes) -> None:
        write_atomic(os.path.join(self.folder, INFO_FILE), lambda stream: stream.write(text))

    def close(self) -> None:
        """Write what is queued, close the files, give the folder's lock back and stop the thread."""
        self._hand_over()
        if not self._done.is_set():
            self._queue.put(_STOP)
            if self._thread.alive:
                self._done.wait()
        folder_writers.release(self.folder)
        if self._own_thread:
            self._thread.shutdown()

    # ------------------------------------------------------------ the thread

    def _clear_previous(self) -> None:
        """Remove what an earlier run left in this folder: a dump is replaced, never appended to."""
        import shutil

        removed = False
        try:
            for name in (RECORDS_FILE, STACKS_FILE, CONSTRUCT_FILE, INFO_FILE):
                path = os.path.join(self.folder, name)
                if os.path.exists(path):
                    os.unlink(path)
                    removed = True
            tensors = os.path.join(self.folder, TENSORS_FOLDER)
            if os.path.isdir(tensors):
                shutil.rmtree(tensors)
                removed = True
        except OSError as exc:
            raise TargetPathError(f"cannot replace the earlier dump in {self.folder!r}: {exc}") from exc
        if removed:
            log.info("dump: %s held an earlier dump, which this one replaces", self.folder)

    def _stream(self, file: str) -> Any:
        stream = self._streams.get(file)
        if stream is None:
            stream = open(os.path.join(self.folder, file), "ab")
            self._streams[file] = stream
        return stream

    def _write_line(self, file: str, record: Mapping[str, Any]) -> None:
        line = json_line(self._finish(record))
        self._stream(file).write(line)
        self.bytes_written += len(line)

    def _write_one(self, file: str, record: Mapping[str, Any]) -> None:
        """Write one line; a value that cannot be written loses that line, not the dump."""
        try:
            self._write_line(file, record)
        except OSError:
            raise
        except Exception as exc:
            self.lines_lost += 1
            if self.lines_lost == 1:
                log.warning("dump to %s: a record could not be written and is left out: %s", self.folder, exc)

    def _write_tensor(self, relative: str, array: np.ndarray | PendingArray) -> None:
        """Write one ``.npy`` straight to its place.

        No temporary file and rename: a record naming a file is queued after the file, so a
        run killed while the file is being written has written no record that names it.
        """
        if isinstance(array, PendingArray):
            pending = array
            try:
                try:
                    values = pending.result()  # waited for here, never while training
                except OSError:
                    raise
                except Exception as exc:  # this tensor's copy failed: its record names a missing file
                    self.tensors_lost += 1
                    if self.tensors_lost == 1:
                        log.warning(
                            "dump to %s: a tensor could not be copied and is left out: %s", self.folder, exc
                        )
                    return
                self._write_array(relative, values)
            finally:
                pending.release()
            return
        self._write_array(relative, array)

    def _write_array(self, relative: str, array: np.ndarray) -> None:
        began = time.perf_counter()
        path = os.path.join(self.folder, relative)
        folder = os.path.dirname(path)
        if folder not in self._folders:
            ensure_folder(folder)
            self._folders.add(folder)
        stored = storable(array)
        write_npy_fast(path, stored)
        self.bytes_written += int(stored.nbytes)
        self.tensor_bytes += int(stored.nbytes)
        self.tensors_written += 1
        self.tensor_seconds += time.perf_counter() - began

    def _fail(self, exc: BaseException) -> None:
        if self.failed is None:
            self.failed = f"{type(exc).__name__}: {exc}"
            log.warning("dump to %s turned off, the training goes on: %s", self.folder, self.failed)

    def _flush(self) -> None:
        for stream in self._streams.values():
            stream.flush()

    def _run(self) -> None:
        began = time.thread_time()
        try:
            self._serve_queue()
        finally:
            # the thread's own CPU time: under the GIL, every second of it is one the training can lose
            self.cpu_seconds = time.thread_time() - began
            self._done.set()

    def _serve_queue(self) -> None:
        while True:
            kind, payload, size = self._queue.get()
            if kind == "stop":
                break
            try:
                if kind == "info":  # written after a failure too: it says what the step recorded
                    self._write_info(payload)
                elif self.failed is None:
                    if kind == "lines":
                        for file, record in payload:
                            self._write_one(file, record)
                    else:
                        self._write_tensor(*payload)
                elif kind == "tensor" and isinstance(payload[1], PendingArray):
                    payload[1].release()  # not written: its host memory goes back all the same
                if self._queue.empty():
                    self._flush()
            except Exception as exc:  # a full disk, an unwritable folder, no memory: the dump ends here
                self._fail(exc)
            finally:
                with self._room:
                    self._waiting -= size
                    self._room.notify_all()
        try:
            self._flush()
        except Exception as exc:
            self._fail(exc)
        for stream in self._streams.values():
            try:
                stream.close()
            except Exception as exc:
                self._fail(exc)
