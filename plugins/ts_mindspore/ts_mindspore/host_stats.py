"""Statistics of CPU tensors read at the dump's next hand-over, not at every call: PyNative keeps running.

MindSpore's PyNative mode runs its kernels in a pipeline behind the Python
that issues them. Reading a tensor (``asnumpy``) waits for that pipeline to
drain, so a dump that read each call's tensors at once made the front end
and the kernels take turns: a dumped step of a small ResNet took 1.85 times
a plain one. While the API capture is installed, a CPU tensor's statistics
are therefore a :class:`PendingStats` that holds the tensor, and all of them
are read together when the dump hands a batch of records to its writer
(``ts_stats_to_host``, on the training thread): one wait per batch.

A value read later must still be the value the call saw. Three rules keep it so:

* ``Parameter`` objects are read at once: MindSpore writes into them outside
  any Python call the capture sees (an optimizer's update, BatchNorm's moving
  statistics inside its kernel);
* before any captured call that writes into an argument (``add_``,
  ``__setitem__``, ``assign``, an ``Inplace*`` or ``side_effect_mem``
  Primitive), every pending tensor is read (:meth:`PendingReads.read_all`);
* when the capture is removed, everything still pending is read.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from tscore.plugin_api import array_stats

log = logging.getLogger(__name__)

Row = tuple[float | None, float | None, float | None, float | None]
_NO_ROW: Row = (None, None, None, None)


class PendingStats:
    """One tensor's statistics, to be read from host memory at the next hand-over."""

    __slots__ = ("row", "tensor")

    def __init__(self, tensor: Any) -> None:
        """Hold ``tensor`` (strongly: until read, the dump needs its values) with no row yet."""
        self.tensor: Any = tensor
        self.row: Row | Exception | None = None

    def read(self, to_numpy: Callable[[Any], Any]) -> Row | Exception:
        """Read the statistics once (waiting for the kernel that makes the tensor) and drop the tensor.

        A tensor that cannot be read gives its exception as the row: that entry's record says
        so (``error``), and the training goes on.
        """
        if self.row is None:
            tensor, self.tensor = self.tensor, None
            try:
                found = array_stats(to_numpy(tensor))
            except Exception as exc:
                log.debug("dump: statistics of a %s tensor not read: %s", type(tensor).__name__, exc)
                self.row = exc
                return exc
            self.row = _NO_ROW if found is None else found
        return self.row


class PendingReads:
    """The tensors whose statistics wait to be read, while an API capture allows waiting."""

    def __init__(self, to_numpy: Callable[[Any], Any]) -> None:
        """Read tensors with ``to_numpy`` (the backend's, without a copy); nothing deferred yet."""
        self._to_numpy = to_numpy
        self._unread: list[PendingStats] = []
        self.captures = 0  # API captures installed: reads are deferred only while one can see writes

    @property
    def deferring(self) -> bool:
        """Whether statistics may be left for the hand-over (an API capture is installed)."""
        return self.captures > 0

    @property
    def waiting(self) -> bool:
        """Whether any statistic waits to be read."""
        return bool(self._unread)

    def defer(self, tensor: Any) -> PendingStats:
        """Return the pending statistics of ``tensor``, read at the next :meth:`read_all`."""
        pending = PendingStats(tensor)
        self._unread.append(pending)
        return pending

    def read_all(self) -> None:
        """Read every pending tensor now: one wait for the pipeline, then host memory only."""
        unread, self._unread = self._unread, []
        for pending in unread:
            pending.read(self._to_numpy)

    def to_host(self, stats: Sequence[Any]) -> Callable[[], list[Row | Exception]] | None:
        """Answer ``ts_stats_to_host`` for a batch of :class:`PendingStats`; None for anything else."""
        if not stats or any(type(item) is not PendingStats for item in stats):
            return None
        self.read_all()
        rows = [item.read(self._to_numpy) for item in stats]
        return lambda: rows
