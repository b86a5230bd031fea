"""Which processes write into a folder, and what the ones that died left behind.

Every process that saves into a folder holds a lock file in its
``.tscore-writers/`` subfolder, ``{writer}.lock``, locked (``flock``) for as
long as it lives and removed when it exits; ``{writer}`` is
``{host}-{pid}``. The kernel drops the lock when the process dies, however
it dies, so a lock file that nobody holds belongs to a dead writer. The
locks sit in their own subfolder so that finding the live writers of a
folder of a million files lists a handful of names.

Temporary files are named ``.{final name}.{writer}-{n}.tmp``. A temporary
file whose writer is gone is *debris* of a save that never finished: it is
never read as data, the compare functions list it as skipped, and the next
save into the folder (or ``tscore clean FOLDER``) removes it.

A writer on this host is gone when its lock file is not held, or, where
the file system cannot lock (``flock`` unsupported) or there is no lock
file (a report written with :func:`tscore.npy_files.write_atomic`), when
no process of its id runs. A writer on another host is never declared
gone: a lock that looks free from here may be held there (node-local
locks on NFS or Lustre), so nothing of its is removed.
"""

from __future__ import annotations

import atexit
import errno
import hashlib
import logging
import os
import re
import socket
import threading
import time
from dataclasses import dataclass

try:
    import fcntl
except ImportError:  # not POSIX: liveness falls back to the process id
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

LOCKS_FOLDER = ".tscore-writers"
_WRITER = r"(?:(?P<host>[A-Za-z0-9_]+)-)?(?P<pid>\d+)"
TEMP_NAME = re.compile(rf"^\.(?P<final>.+)\.{_WRITER}-\d+\.tmp$")
LOCK_NAME = re.compile(rf"^{_WRITER}\.lock$")

_lock = threading.Lock()
_claims: dict[tuple[int, str], int] = {}  # (pid, folder) -> fd of the held lock file (-1: none)
_IMPORT_PID = os.getpid()
_IMPORTED = time.time()  # where the kernel cannot say when this process started: an upper bound
_started: dict[int, float] = {}  # pid -> the wall-clock time this process started


def _host_id(name: str) -> str:
    """Return the host name made safe for a file name; long names keep their start and a hash of the rest."""
    clean = re.sub(r"[^A-Za-z0-9_]", "_", name) or "host"
    if len(clean) <= 40:
        return clean
    return clean[:27] + "_" + hashlib.sha1(name.encode("utf-8", "replace")).hexdigest()[:12]


_host = _host_id(socket.gethostname())


def writer_id() -> str:
    """Return this process's writer id, ``{host}-{pid}`` (computed per call: a forked child has its own)."""
    return f"{_host}-{os.getpid()}"


def _start_from_proc() -> float | None:
    """Read when this process started from ``/proc`` (Linux), to a clock tick; None elsewhere.

    ``/proc/self/stat`` gives the start in clock ticks since boot and ``/proc/uptime`` the time since boot
    now; both count on the same clock, so the start is ``now - (uptime - start)``, good to a tick (10 ms),
    where ``/proc/stat``'s boot time alone would be good to a second.
    """
    try:
        with open("/proc/self/stat", "rb") as stream:
            stat = stream.read()
        with open("/proc/uptime", "rb") as stream:
            uptime = float(stream.read().split()[0])
        now = time.time()
        ticks = int(stat[stat.rindex(b")") + 2 :].split()[19])  # field 22, counted after the name
        return now - (uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


def process_started() -> float:
    """Return when this process started, as ``time.time()`` counts (a forked child: when it was forked).

    Where the kernel cannot say (not Linux), the time tscore was imported (in a forked child, the
    first call), which is later: files that another process wrote in between then count as older.
    """
    pid = os.getpid()
    started = _started.get(pid)
    if started is None:
        latest = _IMPORTED if pid == _IMPORT_PID else time.time()
        found = _start_from_proc()  # never later than what this process already saw (a container's /proc)
        started = _started[pid] = min(found, latest) if found is not None else latest
    return started


def start_new_run() -> None:
    """Count this process's run as starting now: files written before now are an earlier run's.

    For a process that outlives runs (a notebook kernel, a server): ``ts.reset_save_id()`` calls it.
    """
    _started[os.getpid()] = time.time()


def temp_name(final_name: str, serial: int) -> str:
    """Return the hidden temporary name under which this process writes ``final_name``."""
    return f".{final_name}.{writer_id()}-{serial}.tmp"


def _lock_path(folder: str, writer: str) -> str:
    return os.path.join(folder, LOCKS_FOLDER, f"{writer}.lock")


def _hold(folder: str) -> int:
    """Create and lock this process's lock file in ``folder``; return its fd (-1 when none could be made)."""
    path = _lock_path(folder, writer_id())
    fresh = path + ".new"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        # Locked before it gets its name, so that no one ever sees it unheld and takes it for debris.
        fd = os.open(fresh, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        logger.debug("cannot create a writer lock in %s: %s", folder, exc)
        return -1
    try:
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:  # no flock here: the file still names this writer (by process id)
                logger.debug("the file system of %s cannot lock files: %s", folder, exc)
        os.replace(fresh, path)
    except OSError as exc:
        logger.debug("cannot place a writer lock in %s: %s", folder, exc)
        os.close(fd)
        return -1
    return fd


def claim(folder: str) -> None:
    """Mark this process as a writer of ``folder`` (once per process and folder).

    The first claim of a folder also removes the debris that dead writers
    left there. Failing to create the lock file (a read-only folder) is
    logged, not raised, and tried again at the next save: the save itself
    reports real problems.
    """
    key = (os.getpid(), os.path.abspath(folder))
    if _claims.get(key, -1) >= 0:
        return
    with _lock:
        if _claims.get(key, -1) >= 0:
            return
        if not _claims:
            atexit.register(_release_all)
        _claims[key] = _hold(folder)
    removed = clean(folder)
    if removed:
        logger.warning(
            "removed %d temporary file(s) in %s left by saves that did not finish (their process is gone)",
            len(removed),
            folder,
        )


def release(folder: str) -> None:
    """Stop being a writer of ``folder`` now, not at exit: remove this process's lock file there.

    For a writer done with a folder it may not share (a dump's ``step{k}/rank{r}``), so that a
    later process is not kept out while this one lives on (an idle notebook kernel). A folder
    this process never claimed is left as it is.
    """
    key = (os.getpid(), os.path.abspath(folder))
    with _lock:
        fd = _claims.pop(key, None)
    if fd is not None:
        _drop_lock(key[1], fd)


def _drop_lock(folder: str, fd: int) -> None:
    if fd < 0:
        return
    try:
        os.unlink(_lock_path(folder, writer_id()))
    except OSError:
        pass
    os.close(fd)
    try:
        os.rmdir(os.path.join(folder, LOCKS_FOLDER))  # only when no other writer's lock is there
    except OSError:
        pass


def _release_all() -> None:
    """Remove this process's lock files (at exit; a forked child leaves its parent's alone)."""
    pid = os.getpid()
    for (owner, folder), fd in list(_claims.items()):
        if owner != pid:
            continue
        _drop_lock(folder, fd)
        del _claims[(owner, folder)]


def _lock_held(path: str) -> bool | None:
    """Say whether the lock file at ``path`` is held; None when there is none, or it cannot be locked."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError:
        return True  # cannot look: assume its writer lives
    try:
        if fcntl is None:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return True
            return None  # this file system cannot lock: ask about the process instead
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
    if host not in (None, _host):
        return True  # another machine: its lock may be node-local, so never declare it gone
    if pid == os.getpid():
        return True
    held = _lock_held(_lock_path(folder, f"{host}-{pid}" if host else str(pid)))
    if held is not None:
        return held
    return _pid_runs(pid)


def on_this_host(writer: str) -> bool:
    """Say whether the writer id ``writer`` (``{host}-{pid}``, or a bare pid) is a process of this machine."""
    match = re.fullmatch(_WRITER, writer)
    return match is not None and match["host"] in (None, _host)


def live_writers(folder: str) -> list[str]:
    """Return the ids of the other processes that may be writing ``folder`` now."""
    mine = writer_id()
    found = []
    try:
        names = os.listdir(os.path.join(folder, LOCKS_FOLDER))
    except OSError:
        return []
    for name in names:
        match = LOCK_NAME.match(name)
        if match is None or name == f"{mine}.lock":
            continue
        if writer_alive(folder, match["host"], int(match["pid"])):
            found.append(name.removesuffix(".lock"))
    return sorted(found)


@dataclass(frozen=True)
class Debris:
    """A file that a save which never finished left behind."""

    path: str
    writer: str
    reason: str


def debris_of(folder: str, name: str) -> Debris | None:
    """Say whether the temporary file ``name`` in ``folder`` is debris of a dead writer (None when not)."""
    match = TEMP_NAME.match(name)
    if match is None:
        return None
    host, pid = match["host"], int(match["pid"])
    if writer_alive(folder, host, pid):
        return None
    writer = f"{host}-{pid}" if host else str(pid)
    reason = f"unfinished write of {match['final']!r} by a process that is gone"
    return Debris(os.path.join(folder, name), writer, reason)


def _dead_locks(folder: str) -> list[Debris]:
    """List the lock files in ``folder`` whose writer on this host is gone."""
    locks = os.path.join(folder, LOCKS_FOLDER)
    try:
        names = sorted(os.listdir(locks))
    except OSError:
        return []
    found = []
    for name in names:
        match = LOCK_NAME.match(name.removesuffix(".new"))
        if match is None or name == f"{writer_id()}.lock":
            continue
        host, pid = match["host"], int(match["pid"])
        if name.endswith(".new"):  # a claim that never finished
            dead = host in (None, _host) and not _pid_runs(pid)
        else:
            dead = not writer_alive(folder, host, pid)
        if dead:
            found.append(
                Debris(os.path.join(locks, name), f"{host}-{pid}", "lock file of a writer that is gone")
            )
    return found


def find_debris(folder: str) -> list[Debris]:
    """List the temporary and lock files in ``folder`` (not its other subfolders) whose writer is gone."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    temps = [d for d in (debris_of(folder, n) for n in names if n.startswith(".")) if d is not None]
    return temps + _dead_locks(folder)


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
    if not dry_run and found:
        try:
            os.rmdir(os.path.join(folder, LOCKS_FOLDER))
        except OSError:
            pass
    return removed
