"""Fuzzing a file reader: damaged copies of a valid file, run where a crash cannot take the test run down.

Used by tscore's own Hypothesis suites and open to plugin authors, whose
readers owe the same promise: every input ends in the reader's result or
its own clear error, never a crash of the interpreter, a hang, or an
allocation the file's bytes do not justify.

* :func:`damaged` is a Hypothesis strategy of byte strings made from a
  valid file: cut short, bits flipped, bytes inserted, overwritten or
  removed, a little-endian size field made huge, or random bytes.
* :func:`run_isolated` runs a check in a forked child process under a
  memory limit (``RLIMIT_AS``) and a time limit, and reports a signal
  (a segfault), a timeout (a hang) or the child's exception as a test
  failure with the child's output.
* :func:`fuzz_file` puts the two together for a reader of one file;
  :func:`fuzz_settings` are the Hypothesis settings every suite uses.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

try:
    import resource
except ImportError:  # not POSIX
    resource = None  # type: ignore[assignment]

EXAMPLES_ENV = "TSCORE_FUZZ_EXAMPLES"
DEFAULT_EXAMPLES = 60  # per reader in CI; `nox -s fuzz` runs thousands


def examples() -> int:
    """Return how many examples each fuzzed reader gets (``TSCORE_FUZZ_EXAMPLES``, default 60)."""
    return int(os.environ.get(EXAMPLES_ENV, DEFAULT_EXAMPLES))


def fuzz_settings() -> Any:
    """Return Hypothesis settings for a fuzz suite: :func:`examples` examples, no deadline, no database.

    The examples are derandomised (the same ones every run, so a test session fails only on a
    change) unless ``TSCORE_FUZZ_EXAMPLES`` asks for a number of them, as ``nox -s fuzz`` does,
    and ``CI`` is not set: that run explores new ones.
    """
    from hypothesis import HealthCheck, settings

    return settings(
        max_examples=examples(),
        deadline=None,
        database=None,
        derandomize=EXAMPLES_ENV not in os.environ or os.environ.get("CI") is not None,
        suppress_health_check=list(HealthCheck),
    )


def fuzz_file(seed: bytes, target: str | os.PathLike[str], read: Callable[[Any], object], error: Any) -> None:
    """Feed ``read(target)`` damaged copies of ``seed`` written to ``target``; only ``error`` may come out.

    :param error: the reader's own exception class (or a tuple of them; ``()`` when nothing may come out).
    :raises AssertionError: from :func:`run_isolated`, with the failing example.
    """
    from hypothesis import given

    def check() -> None:
        @fuzz_settings()
        @given(damaged(seed))
        def one(data: bytes) -> None:
            with open(target, "wb") as stream:
                stream.write(data)
            try:
                read(target)
            except error:
                pass

        one()

    run_isolated(check)


def damaged(seed: bytes) -> Any:
    """Return a Hypothesis strategy of damaged versions of the valid file ``seed``."""
    from hypothesis import strategies as st

    size = max(len(seed), 1)
    position = st.integers(0, size - 1)
    huge = st.sampled_from([2**31 - 1, 2**32 - 1, 2**40, 2**62, 2**63 - 1, 2**64 - 1, 10**12])

    def cut(at: int) -> bytes:
        return seed[:at]

    def flip(where: list[tuple[int, int]]) -> bytes:
        data = bytearray(seed)
        for at, bit in where:
            data[at % size] ^= 1 << bit
        return bytes(data)

    def insert(at: int, extra: bytes) -> bytes:
        return seed[:at] + extra + seed[at:]

    def overwrite(at: int, extra: bytes) -> bytes:
        return seed[:at] + extra + seed[at + len(extra) :]

    def remove(at: int, count: int) -> bytes:
        return seed[:at] + seed[at + count :]

    def enlarge(at: int, value: int, width: int) -> bytes:
        return overwrite(at, (value % (1 << (8 * width))).to_bytes(width, "little"))

    return st.one_of(
        st.builds(cut, position),
        st.builds(flip, st.lists(st.tuples(position, st.integers(0, 7)), min_size=1, max_size=8)),
        st.builds(insert, position, st.binary(min_size=1, max_size=64)),
        st.builds(overwrite, position, st.binary(min_size=1, max_size=16)),
        st.builds(remove, position, st.integers(1, 64)),
        st.builds(enlarge, position, huge, st.sampled_from([2, 4, 8])),
        st.binary(max_size=256),
    )


def _set_memory_limit(extra_bytes: int) -> None:
    """Cap this process's address space at what it uses now plus ``extra_bytes``."""
    if resource is None:
        return
    with open("/proc/self/statm") as stream:
        pages = int(stream.read().split()[0])
    limit = pages * os.sysconf("SC_PAGE_SIZE") + extra_bytes
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def run_isolated(check: Callable[[], None], *, seconds: float = 300, memory: int = 2 << 30) -> None:
    """Run ``check`` in a forked child with ``memory`` bytes of address space and ``seconds`` of time.

    :raises AssertionError: with the child's traceback when ``check`` raised, or saying that
        the child was killed by a signal (a crash) or ran out of time (a hang).
    """
    if not hasattr(os, "fork"):
        check()
        return
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: run, report, exit without running the parent's cleanup
        os.close(read_end)
        status = 0
        try:
            _set_memory_limit(memory)
            check()
        except BaseException:
            os.write(write_end, traceback.format_exc().encode("utf-8", "replace")[-20000:])
            status = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)
    os.close(write_end)
    output = bytearray()
    deadline = time.monotonic() + seconds
    exited = None
    while exited is None:
        ready, _, _ = select.select([read_end], [], [], 0.2)
        if ready:
            output += os.read(read_end, 65536)
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            exited = status
        elif time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(read_end)
            raise AssertionError(f"the fuzzed reader ran past {seconds:.0f} s (a hang?)\n{output.decode()}")
    while True:
        chunk = os.read(read_end, 65536)
        if not chunk:
            break
        output += chunk
    os.close(read_end)
    if os.WIFSIGNALED(exited):
        name = signal.Signals(os.WTERMSIG(exited)).name
        raise AssertionError(f"the fuzzed reader crashed the interpreter ({name})\n{output.decode()}")
    if os.WEXITSTATUS(exited) != 0:
        raise AssertionError(output.decode())
