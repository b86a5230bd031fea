"""Which processes write into a folder, and what the ones that died left behind.

Every process that saves into a folder holds a lock file there,
``.tscore-{writer}.lock``, locked (``flock``) for as long as it lives and
removed when it exits; ``{writer}`` is ``{host}-{pid}``. The kernel drops
the lock when the process dies, however it dies, so a lock file that
nobody holds belongs to a dead writer.

Temporary files are named ``.{final name}.{writer}-{n}.tmp``. A temporary
file whose writer is gone is *debris* of a save that never finished: it is
never read as data, the compare functions list it as skipped, and the next
save into the folder (or ``tscore clean FOLDER``) removes it. A writer is
alive when its lock file is held; a writer without a lock file (a report
written with :func:`tscore.npy_files.write_atomic`) is alive while a
process of that id runs on this host. Writers on other hosts without a lock
file are taken as alive: nothing of theirs is removed.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import socket
import threading
from dataclasses import dataclass

try:
    import fcntl
except ImportError:  # not POSIX: liveness falls back to the process id
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

_WRITER = r"(?:(?P<host>[A-Za-z0-9_]+)-)?(?P<pid>\d+)"
TEMP_NAME = re.compile(rf"^\.(?P<final>.+)\.{_WRITER}-\d+\.tmp$")
LOCK_NAME = re.compile(rf"^\.tscore-{_WRITER}\.lock$")

_lock = threading.Lock()
_claims: dict[tuple[int, str], int] = {}  # (pid, folder) -> fd of the held lock file
_host = re.sub(r"[^A-Za-z0-9_]", "_", socket.gethostname() or "host")[:40] or "host"


def writer_id() -> str:
    """Return this process's writer id, ``{host}-{pid}`` (computed per call: a forked child has its own)."""
    return f"{_host}-{os.getpid()}"


def temp_name(final_name: str, serial: int) -> str:
    """Return the hidden temporary name under which this process writes ``final_name``."""
    return f".{final_name}.{writer_id()}-{serial}.tmp"


def _lock_path(folder: str, writer: str) -> str:
    return os.path.join(folder, f".tscore-{writer}.lock")


def claim(folder: str) -> None:
    """Mark this process as a writer of ``folder`` (once per process and folder).

    The first claim of a folder also removes the debris that dead writers
    left there. Failing to create the lock file (a read-only or odd file
    system) is logged, not raised: the save itself reports real problems.
    """
    key = (os.getpid(), os.path.abspath(folder))
    if key in _claims:
        return
    with _lock:
        if key in _claims:
            return
        path = _lock_path(folder, writer_id())
        fresh = path + ".new"
        try:
            # Locked before it gets its name, so that no one ever sees it unheld and takes it for debris.
            fd = os.open(fresh, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.replace(fresh, path)
        except OSError as exc:
            logger.debug("cannot hold a writer lock in %s: %s", folder, exc)
            fd = -1
        if not _claims:
            atexit.register(_release_all)
        _claims[key] = fd
    removed = clean(folder)
    if removed:
        logger.warning(
            "removed %d temporary file(s) in %s left by saves that did not finish (their process is gone)",
            len(removed),
            folder,
        )


def _release_all() -> None:
    """Remove this process's lock files (at exit; a forked child leaves its parent's alone)."""
    pid = os.getpid()
    for (owner, folder), fd in list(_claims.items()):
        if owner != pid:
            continue
        try:
            os.unlink(_lock_path(folder, writer_id()))
        except OSError:
            pass
        if fd >= 0:
            os.close(fd)
        del _claims[(owner, folder)]


def _lock_held(path: str) -> bool | None:
    """Say whether the lock file at ``path`` is held by some process; None when there is no such file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError:
        return True  # cannot look: assume its writer lives
    try:
        if fcntl is None:
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:  # EWOULDBLOCK: held; anything else: cannot tell, so keep its files
            return True
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def _pid_runs(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: it runs under another user
        return True
    return True


def writer_alive(folder: str, host: str | None, pid: int) -> bool:
    """Say whether the writer ``{host}-{pid}`` of ``folder`` may still be writing there."""
    writer = f"{host}-{pid}" if host else str(pid)
    if host == _host and pid == os.getpid():
        return True
    held = _lock_held(_lock_path(folder, writer))
    if held is not None:
        return held
    if host in (None, _host):
        return _pid_runs(pid)
    return True  # another machine, no lock file: cannot tell, keep its files


def live_writers(folder: str) -> list[str]:
    """Return the ids of the other processes that hold a writer lock in ``folder`` now."""
    mine = writer_id()
    found = []
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    for name in names:
        match = LOCK_NAME.match(name)
        if match and name != f".tscore-{mine}.lock" and _lock_held(os.path.join(folder, name)):
            found.append(f"{match['host']}-{match['pid']}" if match["host"] else match["pid"])
    return sorted(found)


@dataclass(frozen=True)
class Debris:
    """A file that a save which never finished left behind."""

    path: str
    writer: str
    reason: str


def debris_of(folder: str, name: str) -> Debris | None:
    """Say whether the file ``name`` in ``folder`` is debris of a dead writer (None when it is not)."""
    temp = TEMP_NAME.match(name)
    lock = None if temp else LOCK_NAME.match(name)
    match = temp or lock
    if match is None:
        return None
    host, pid = match["host"], int(match["pid"])
    writer = f"{host}-{pid}" if host else str(pid)
    path = os.path.join(folder, name)
    if lock is not None:
        if _lock_held(path) is False:
            return Debris(path, writer, "lock file of a writer that is gone")
    elif not writer_alive(folder, host, pid):
        return Debris(path, writer, f"unfinished write of {match['final']!r} by a process that is gone")
    return None


def find_debris(folder: str) -> list[Debris]:
    """List the temporary and lock files in ``folder`` (not its subfolders) whose writer is gone."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    return [d for d in (debris_of(folder, n) for n in names if n.startswith(".")) if d is not None]


def clean(folder: str, *, dry_run: bool = False) -> list[Debris]:
    """Remove the debris of dead writers in ``folder`` and return what was (or, dry, would be) removed."""
    found = find_debris(folder)
    removed = []
    for item in found:
        if dry_run:
            removed.append(item)
            continue
        try:
            os.unlink(item.path)
        except FileNotFoundError:
            continue
        except OSError as exc:
            logger.warning("cannot remove %s: %s", item.path, exc)
            continue
        removed.append(item)
    return removed
