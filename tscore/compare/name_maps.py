"""Pairing the ``.npy`` files of two folders: by name, by number, by shape edit distance, by saved key.

Each strategy returns ``[(orig_file, target_file), ...]`` with None on the
side where a file has no partner, ready for ``name_map_list``.

Files are ordered as ``ts.save`` numbers them: by the first number in the
name, then the last, then (for files of one ``save`` call, which share both)
by the order in which ``tscore_meta.jsonl`` recorded them, then by name.
Names without digits come after numbered ones; folders mixing both work.
"""

from __future__ import annotations

import logging
import os
import re
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from tscore import folder_writers
from tscore.compare import name_lists
from tscore.compare.name_lists import MetaIndex, NameList, PairIndex
from tscore.compare.npy_layout import NpyLayout, NpyReadError, read_npy_layout
from tscore.errors import TargetPathError
from tscore.npy_files import META_FILE_NAME

logger = logging.getLogger(__name__)

NameMap = list[tuple[str | None, str | None]]
MATCH_STRATEGIES = ("name", "number", "shape", "key")  # the strategies compare_npy_dir(match=...) names

_RANK_FOLDER = re.compile(r"^rank\d+$")


@dataclass(frozen=True)
class FolderListing:
    """The ``.npy`` files of one folder in compare order, the files it ignored or skipped, its meta records.

    Names and records are held compactly (:mod:`tscore.compare.name_lists`).
    Headers read through :meth:`layout` are kept, so that pairing by shape
    reads each file's header once.
    """

    folder: str
    npy: NameList
    ignored: list[str] = field(default_factory=list)
    meta: MetaIndex = field(default_factory=MetaIndex)
    debris: list[str] = field(default_factory=list)
    _layouts: dict[str, NpyLayout] = field(default_factory=dict, repr=False, compare=False)

    def layout(self, name: str) -> NpyLayout:
        """Return the header of the file ``name`` in this folder, read once.

        :raises NpyReadError: naming the file, when it cannot be compared.
        """
        if name not in self._layouts:
            self._layouts[name] = read_npy_layout(os.path.join(self.folder, name))
        return self._layouts[name]


def _is_bookkeeping(name: str) -> bool:
    """Say whether ``name`` is tscore's own side file."""
    return name == META_FILE_NAME


def _scan(
    path: str, prefix: str, found: dict[str, list[str]], npy: list[np.ndarray], meta: MetaIndex
) -> None:
    """Sort the entries of ``path`` into ``.npy`` files, debris, ignored files and rank folders."""

    def npy_names() -> Iterator[str]:
        for entry in os.scandir(path):
            name = entry.name
            if name.endswith(".npy") and not name.startswith("."):
                if entry.is_file():
                    yield prefix + name
                continue
            if not entry.is_file():
                if not prefix and _RANK_FOLDER.match(name) and entry.is_dir():
                    found["ranks"].append(name)
                continue
            if name.startswith(".") and folder_writers.TEMP_NAME.match(name):
                if folder_writers.debris_of(path, name) is not None:
                    found["debris"].append(prefix + name)
                # else a save in progress: not data yet
            elif _is_bookkeeping(name):
                continue
            elif name.endswith(".npy"):
                yield prefix + name
            else:
                found["ignored"].append(prefix + name)

    npy.append(name_lists.to_array(npy_names()))
    meta.read(path, prefix)


def list_folder(folder: str | os.PathLike[str], role: str = "folder") -> FolderListing:
    """List the ``.npy`` files of ``folder`` in compare order.

    Its ``rank{r}`` subfolders (what ``ts.save`` writes in a distributed
    job) are listed too: their files are named ``rank{r}/{file}``, so two
    such parents pair rank by rank. Other subfolders are not entered. Other
    files are returned as ``ignored`` (tscore's own ``tscore_meta.jsonl``
    is not counted); temporary files of saves that never finished, as
    ``debris``.

    :raises TargetPathError: naming the folder when it does not exist, is not
        a folder or holds no ``.npy`` file. ``role`` (``"orig_dir"``...) says
        which argument it came from.
    """
    path = os.fspath(folder)
    if not os.path.isdir(path):
        what = "does not exist" if not os.path.exists(path) else "is not a folder"
        raise TargetPathError(f"{role} {path!r} {what}; pass the folder that ts.save wrote")
    found: dict[str, list[str]] = {"ignored": [], "debris": [], "ranks": []}
    blocks: list[np.ndarray] = []
    meta = MetaIndex()
    try:
        _scan(path, "", found, blocks, meta)
        # rank folders are listed beside any top-level files (those saved before the job's init)
        for rank in sorted(found["ranks"], key=lambda n: int(n[4:])):
            _scan(os.path.join(path, rank), rank + "/", found, blocks, meta)
    except OSError as exc:
        raise TargetPathError(f"{role} {path!r} cannot be listed: {exc.strerror or exc}") from exc
    if found["debris"]:
        logger.warning(
            "%s %s holds %d temporary file(s) of saves that did not finish; they are skipped "
            "(`tscore clean %s` removes them)",
            role,
            path,
            len(found["debris"]),
            path,
        )
    names = np.concatenate(blocks) if len(blocks) > 1 else blocks[0]
    if not names.size:
        skipped = f" (only {len(found['debris'])} unfinished save(s))" if found["debris"] else ""
        raise TargetPathError(
            f"{role} {path!r} holds no .npy file{skipped}; pass the folder that ts.save wrote"
        )
    names = names[name_lists.compare_order(names, meta)]
    return FolderListing(path, NameList(names), sorted(found["ignored"]), meta, sorted(found["debris"]))


def list_folders(
    orig_dir: str | os.PathLike[str], target_dir: str | os.PathLike[str]
) -> tuple[FolderListing, FolderListing]:
    """List both folders (see :func:`list_folder`), naming the argument in any error."""
    return list_folder(orig_dir, "orig_dir"), list_folder(target_dir, "target_dir")


def _as_names(names: Sequence[str]) -> NameList:
    return names if isinstance(names, NameList) else NameList(name_lists.to_array(names))


def map_by_name(orig: Sequence[str], target: Sequence[str]) -> PairIndex:
    """Pair equal names, in ``orig``'s order; unpaired target files follow, in their order."""
    return name_lists.pair_by_name(_as_names(orig), _as_names(target))


def map_by_name_then_key(orig: Sequence[str], target: Sequence[str]) -> PairIndex:
    """Pair equal names, then what is left on both sides by what it saved; in ``orig``'s order.

    ``compare_npy_dir``'s default (TroubleShooter's ``get_name_map_list_by_name`` pairs names
    alone). A file with no namesake pairs with the file that saved the same name and key
    (:func:`saved_key`, the n-th with the n-th), so a folder that TroubleShooter 1.0.18 numbered
    (``1_l.0.npy``, ``2_l.1.npy``) pairs with one in spec 003's numbering (``0_l_0.npy``,
    ``0_l_1.npy``), and a save that only one run made shifts no other pair. ``by_key`` of the
    result counts those pairs. Unpaired target files follow, in their order.
    """
    index = map_by_name(orig, target)
    count = len(index.orig)
    lonely = np.flatnonzero(index.target_index[:count] < 0)
    rest = index.target_index[count:]
    if not lonely.size or not rest.size:
        return index
    where_orig = {index.orig[int(i)]: int(i) for i in lonely}
    where_target = {index.target[int(j)]: int(j) for j in rest}
    named = np.flatnonzero(index.target_index[:count] >= 0)  # orig positions paired by name, in order
    partners = index.target_index[named]
    keyed = [
        (where_orig[a], where_target[b])
        for a, b in map_by_key(list(where_orig), list(where_target))
        if a is not None and b is not None
    ]
    keyed = [(i, j) for i, j in keyed if _keeps_order(i, j, named, partners)]
    if not keyed:
        return index
    target_index = index.target_index[:count].copy()
    for i, j in keyed:
        target_index[i] = j
    taken = {j for _, j in keyed}
    left = np.array([j for j in rest.tolist() if j not in taken], dtype=np.int64)
    paired = PairIndex(
        index.orig,
        index.target,
        np.concatenate([np.arange(count, dtype=np.int64), np.full(left.size, -1, dtype=np.int64)]),
        np.concatenate([target_index, left]),
    )
    paired.by_key = len(keyed)
    return paired


def map_by_number(orig: Sequence[str], target: Sequence[str]) -> PairIndex:
    """Pair the i-th file of each ordered list; the longer list's extra files get None."""
    return name_lists.pair_by_number(_as_names(orig), _as_names(target))


_SAVE_ID = re.compile(r"^\d+_")


def saved_key(name: str) -> str:
    """Say what a file of ``ts.save`` holds, the same whichever layout named it: its name without the id.

    Spec 003 writes one id per call and joins keys with ``_`` (``3_d_x.npy``); TroubleShooter
    1.0.18 writes one id per element and joins keys with ``.`` (``4_d.x.npy``): both give ``d_x``.
    """
    folder, _, base = name.rpartition("/")  # "rank0/3_d_x.npy": the rank folder stays part of the key
    stem = base[: -len(".npy")] if base.endswith(".npy") else base
    key = _SAVE_ID.sub("", stem, count=1).replace(".", "_")
    return f"{folder}/{key}" if folder else key


def _keeps_order(i: int, j: int, named: np.ndarray, partners: np.ndarray) -> bool:
    """Say whether pairing orig ``i`` with target ``j`` keeps the order of the pairs made by name.

    The name pairs before ``i`` must end before ``j`` and those after it start after ``j``: a
    loop's ``0_x.npy`` never pairs with the target's ``3_x.npy`` across ``1_x`` and ``2_x``.
    """
    at = int(np.searchsorted(named, i))
    before_ok = at == 0 or int(partners[at - 1]) < j
    after_ok = at == named.size or int(partners[at]) > j
    return before_ok and after_ok


def map_by_key(orig: Sequence[str], target: Sequence[str]) -> NameMap:
    """Pair the files that saved the same name and key (:func:`saved_key`), the n-th with the n-th.

    In ``orig``'s order; target files left without a partner follow, in their order.
    """
    waiting: dict[str, deque[str]] = {}
    for name in target:
        waiting.setdefault(saved_key(name), deque()).append(name)
    taken: set[str] = set()
    pairs: NameMap = []
    for name in orig:
        queue = waiting.get(saved_key(name))
        partner = queue.popleft() if queue else None
        if partner is not None:
            taken.add(partner)
        pairs.append((name, partner))
    pairs += [(None, name) for name in target if name not in taken]
    return pairs


def align_by_edit_distance(
    orig: Sequence[object],
    target: Sequence[object],
    *,
    del_cost: float = 1,
    ins_cost: float = 1,
    rep_cost: float = 5,
) -> tuple[float, list[tuple[int | None, int | None]]]:
    """Align two sequences with the least total cost of deletions, insertions and replacements.

    Equal items pair for free; pairing unequal items costs ``rep_cost``.
    Returns the cost and the index pairs, with None for a deleted (orig
    only) or inserted (target only) item. Ties are resolved as
    TroubleShooter does: when several alignments cost the same, unpaired
    items are placed as late as possible.
    """
    for label, cost in (("del_cost", del_cost), ("ins_cost", ins_cost), ("rep_cost", rep_cost)):
        if cost < 0:
            raise ValueError(f"{label} must be >= 0, got {cost}")
    m, n = len(orig), len(target)
    dp = [[0.0] * (n + 1) for _ in range(m + 1)]
    for i in range(1, m + 1):
        dp[i][0] = dp[i - 1][0] + del_cost
    for j in range(1, n + 1):
        dp[0][j] = dp[0][j - 1] + ins_cost
    for i in range(1, m + 1):
        for j in range(1, n + 1):
            diagonal = dp[i - 1][j - 1] + (0 if orig[i - 1] == target[j - 1] else rep_cost)
            dp[i][j] = min(diagonal, dp[i - 1][j] + del_cost, dp[i][j - 1] + ins_cost)
    pairs: list[tuple[int | None, int | None]] = []
    i, j = m, n
    while i > 0 or j > 0:
        equal = i > 0 and j > 0 and orig[i - 1] == target[j - 1]
        steps = ("delete", "pair", "insert") if equal else ("delete", "insert", "pair")
        for step in steps:
            if step == "delete" and i > 0 and dp[i][j] == dp[i - 1][j] + del_cost:
                pairs.append((i - 1, None))
                i -= 1
                break
            if step == "insert" and j > 0 and dp[i][j] == dp[i][j - 1] + ins_cost:
                pairs.append((None, j - 1))
                j -= 1
                break
            if step == "pair" and i > 0 and j > 0:
                if dp[i][j] == dp[i - 1][j - 1] + (0 if equal else rep_cost):
                    pairs.append((i - 1, j - 1))
                    i, j = i - 1, j - 1
                    break
    pairs.reverse()
    return dp[m][n], pairs


class _NeverEqual:
    """Stand-in for an unreadable file's shape: equal to nothing, itself included."""

    def __eq__(self, other: object) -> bool:
        return False

    __hash__ = None  # type: ignore[assignment]


def _shape_key(listing: FolderListing, name: str) -> object:
    """Return the shape in ``name``'s header, or a value equal to no shape when the file is unreadable."""
    try:
        return listing.layout(name).shape
    except NpyReadError as exc:
        logger.warning("%s; it pairs with no file by shape", exc)
        return _NeverEqual()


def map_by_shape(
    orig: FolderListing,
    target: FolderListing,
    *,
    del_cost: float = 1,
    ins_cost: float = 1,
    rep_cost: float = 5,
) -> NameMap:
    """Pair the ordered files of two folders by the edit distance of their shape sequences."""
    orig_shapes = [_shape_key(orig, n) for n in orig.npy]
    target_shapes = [_shape_key(target, n) for n in target.npy]
    cost, pairs = align_by_edit_distance(
        orig_shapes, target_shapes, del_cost=del_cost, ins_cost=ins_cost, rep_cost=rep_cost
    )
    if cost:
        logger.warning(
            "the files of %s and %s differ in number or shape (edit cost %g): some may be paired wrongly",
            orig.folder,
            target.folder,
            cost,
        )
    return [
        (orig.npy[a] if a is not None else None, target.npy[b] if b is not None else None) for a, b in pairs
    ]


def _warn_unpaired(pairs: NameMap, orig: FolderListing, target: FolderListing) -> NameMap:
    unpaired = sum(1 for a, b in pairs if a is None or b is None)
    if unpaired:
        logger.warning("%d file(s) of %s and %s have no partner", unpaired, orig.folder, target.folder)
    return pairs


def get_name_map_list_by_name(
    orig_dir: str | os.PathLike[str], target_dir: str | os.PathLike[str]
) -> NameMap:
    """Pair files of the same name; files found on one side only get None on the other.

    :raises TargetPathError: when a folder is missing or holds no ``.npy`` file.
    """
    orig, target = list_folders(orig_dir, target_dir)
    return _warn_unpaired(list(map_by_name(orig.npy, target.npy)), orig, target)


def get_name_map_list_by_number(
    orig_dir: str | os.PathLike[str], target_dir: str | os.PathLike[str]
) -> NameMap:
    """Order each folder's files by the numbers in their names and pair them in that order.

    :raises TargetPathError: when a folder is missing or holds no ``.npy`` file.
    """
    orig, target = list_folders(orig_dir, target_dir)
    return _warn_unpaired(list(map_by_number(orig.npy, target.npy)), orig, target)


def get_name_map_list_by_shape_edit_distance(
    orig_dir: str | os.PathLike[str],
    target_dir: str | os.PathLike[str],
    *,
    del_cost: float = 1,
    ins_cost: float = 1,
    rep_cost: float = 5,
) -> NameMap:
    """Order both folders by number, then pair them by the least edit distance of their shapes.

    Suits gradients, whose MindSpore files carry no parameter names: a
    parameter missing on one side costs ``del_cost`` or ``ins_cost``, pairing
    files of different shapes costs ``rep_cost``. Only the ``.npy`` headers
    are read, never the data.

    :raises TargetPathError: when a folder is missing or holds no ``.npy`` file.
    """
    orig, target = list_folders(orig_dir, target_dir)
    return map_by_shape(orig, target, del_cost=del_cost, ins_cost=ins_cost, rep_cost=rep_cost)
