"""Aligning the weight-owning layers of two networks whose layer names differ.

A port rarely keeps every module name (``features`` for ``layers``,
``down_sample`` for ``downsample``). :func:`align_layers` pairs the layers
that own weights in three passes, and says for each pair how it was found:

1. ``names``: the same path on both sides, with the same neutral kind.
2. ``structure``: the rest, in order between those anchors, by *signature*
   (neutral kind plus every parameter's name and shape, the source's already
   carried into the target's convention): the longest run of equal
   signatures, found by dynamic programming. A pair that every longest run
   contains is certain; where several runs are equally long (a repeated
   block with one block missing on one side), the pair is ``ambiguous`` and
   its note names the other candidates, unless the last parts of the two
   paths are the same word (``conv1``, not a position such as ``0``) and no
   rival's is, which decides it and is said in the note. Anchors that cross
   (layers defined in another order) cut nothing: the longest run of
   anchors in order does.
3. ``structure`` again for what is left out of order: a signature that
   occurs once among the leftovers of each side (two layers defined in
   swapped order).

What still has no twin is ``unmatched``, on one side only. Nothing here
knows a framework: the caller computes the signatures.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

from tabulate import tabulate

NAMES = "names"
STRUCTURE = "structure"
AMBIGUOUS = "ambiguous"
UNMATCHED = "unmatched"


@dataclass(frozen=True)
class AlignedLayer:
    """One weight-owning layer as the alignment sees it.

    :ivar path: its dotted path in its network.
    :ivar kind: its neutral kind (``conv2d``), ``""`` when unknown.
    :ivar signature: what must be equal for two layers to be twins; the
        caller builds it so that a source layer's equals its target twin's.
    """

    path: str
    kind: str
    signature: Hashable


@dataclass(frozen=True)
class LayerMatch:
    """A pair of layers (or a layer with no twin: the other side ``None``) and how it was found."""

    source: str | None
    target: str | None
    kind: str
    how: str
    note: str = ""

    def to_dict(self) -> dict[str, str | None]:
        """Render as JSON-ready data, the note only when there is one."""
        out: dict[str, str | None] = {
            "source": self.source,
            "target": self.target,
            "kind": self.kind,
            "how": self.how,
        }
        if self.note:
            out["note"] = self.note
        return out


def _leaf(path: str) -> str:
    """Give the last part of a path, lower-case and without separators: ``down_sample`` -> ``downsample``."""
    return re.sub(r"[^0-9a-z]", "", path.rpartition(".")[2].lower())


def _named_alike(a: AlignedLayer, b: AlignedLayer) -> bool:
    """Say whether two paths end in the same word (not a mere position such as ``0``)."""
    leaf = _leaf(a.path)
    return bool(leaf) and not leaf.isdigit() and leaf == _leaf(b.path)


def base_kind(kind: str) -> str:
    """Drop a kind's rank: ``batchnorm2d`` -> ``batchnorm`` (torch's SyncBatchNorm is ``batchnorm``)."""
    return re.sub(r"[123]d$", "", kind)


def kinds_agree(first: str, second: str) -> bool:
    """Say whether two neutral kinds may be one layer: equal, unknown, or one of them without a rank."""
    if not first or not second or first == second:
        return True
    return first == base_kind(second) or second == base_kind(first)


def _anchors(source: Sequence[AlignedLayer], target: Sequence[AlignedLayer]) -> dict[int, int]:
    """Source index -> target index for layers at the same path whose kinds do not contradict."""
    by_path = {layer.path: j for j, layer in enumerate(target)}
    found = {}
    for i, layer in enumerate(source):
        j = by_path.get(layer.path)
        if j is None:
            continue
        if kinds_agree(layer.kind, target[j].kind):
            found[i] = j
    return found


def _tables(a: Sequence[AlignedLayer], b: Sequence[AlignedLayer]) -> tuple[list[list[int]], list[list[int]]]:
    """Longest common runs of signatures: of every pair of prefixes, and of every pair of suffixes."""
    n, m = len(a), len(b)
    fwd = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n):
        row, nxt, sig = fwd[i], fwd[i + 1], a[i].signature
        for j in range(m):
            nxt[j + 1] = row[j] + 1 if sig == b[j].signature else max(row[j + 1], nxt[j])
    back = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        row, nxt, sig = back[i], back[i + 1], a[i].signature
        for j in range(m - 1, -1, -1):
            row[j] = nxt[j + 1] + 1 if sig == b[j].signature else max(nxt[j], row[j + 1])
    return fwd, back


def _weighted_path(a: Sequence[AlignedLayer], b: Sequence[AlignedLayer]) -> list[tuple[int, int]]:
    """Find the longest common run, ties broken towards pairs whose paths end alike."""
    n, m = len(a), len(b)
    unit = min(n, m) + 1  # one more pair always outweighs every name hint together
    best = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            skip = max(best[i + 1][j], best[i][j + 1])
            if a[i].signature == b[j].signature:
                hint = 1 if _named_alike(a[i], b[j]) else 0
                skip = max(skip, best[i + 1][j + 1] + unit + hint)
            best[i][j] = skip
    pairs = []
    i = j = 0
    while i < n and j < m:
        if a[i].signature == b[j].signature:
            hint = 1 if _named_alike(a[i], b[j]) else 0
            if best[i][j] == best[i + 1][j + 1] + unit + hint:
                pairs.append((i, j))
                i, j = i + 1, j + 1
                continue
        if best[i][j] == best[i + 1][j]:
            i += 1
        else:
            j += 1
    return pairs


def _optimal_options(
    a: Sequence[AlignedLayer], b: Sequence[AlignedLayer], fwd: list[list[int]], back: list[list[int]]
) -> tuple[dict[int, set[int]], set[int], dict[int, set[int]], set[int]]:
    """Which pairs some longest run contains, and which layers some longest run leaves out, per side."""
    n, m = len(a), len(b)
    total = fwd[n][m]
    options_a: dict[int, set[int]] = {}
    options_b: dict[int, set[int]] = {}
    skip_a: set[int] = set()
    skip_b: set[int] = set()
    for i in range(n):
        for j in range(m + 1):
            if j < m and a[i].signature == b[j].signature and fwd[i][j] + 1 + back[i + 1][j + 1] == total:
                options_a.setdefault(i, set()).add(j)
                options_b.setdefault(j, set()).add(i)
            if fwd[i][j] + back[i + 1][j] == total:
                skip_a.add(i)
    for j in range(m):
        if any(fwd[i][j] + back[i][j + 1] == total for i in range(n + 1)):
            skip_b.add(j)
    return options_a, skip_a, options_b, skip_b


def _segment(a: Sequence[AlignedLayer], b: Sequence[AlignedLayer]) -> list[tuple[int, int, str, str]]:
    """Align one stretch between anchors: ``(i, j, how, note)`` for each pair found."""
    if not a or not b:
        return []
    fwd, back = _tables(a, b)
    options_a, skip_a, options_b, skip_b = _optimal_options(a, b, fwd, back)
    count_a = Counter(layer.signature for layer in a)
    count_b = Counter(layer.signature for layer in b)
    out = []
    for i, j in _weighted_path(a, b):
        rivals_b = sorted(options_a.get(i, set()) - {j})
        rivals_a = sorted(options_b.get(j, set()) - {i})
        only_pair = count_a[a[i].signature] == 1 and count_b[b[j].signature] == 1
        if not (rivals_a or rivals_b) and (only_pair or not (i in skip_a or j in skip_b)):
            out.append((i, j, STRUCTURE, ""))  # no other layer alike could take either place
            continue
        parts = [
            f"{mine} could also pair with {_few([x.path for x in rivals])}"
            for mine, rivals in (
                (a[i].path, [b[k] for k in rivals_b]),
                (b[j].path, [a[k] for k in rivals_a]),
            )
            if rivals
        ]
        alike = "; ".join(parts) or "a layer alike is missing on one side, and which one is unclear"
        rivals_named_alike = any(_named_alike(a[i], b[k]) for k in rivals_b) or any(
            _named_alike(a[k], b[j]) for k in rivals_a
        )
        if _named_alike(a[i], b[j]) and not rivals_named_alike:
            out.append((i, j, STRUCTURE, f"{alike}; chosen because only their names end alike"))
        else:
            out.append((i, j, AMBIGUOUS, f"{alike}; chosen by order, pass weight_map= to decide"))
    return out


def _few(paths: list[str]) -> str:
    """Join up to four paths, ``...`` for more."""
    return ", ".join(paths[:4]) + (", ..." if len(paths) > 4 else "")


def longest_increasing(pairs: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Keep the longest run of ``pairs`` (sorted by their first number) whose second numbers increase.

    Where two anchors cross (layers defined in another order on one side), the others still
    cut the networks into stretches that correspond.
    """
    tails: list[int] = []  # tails[k]: index in pairs of the smallest end of an increasing run of length k + 1
    ends: list[int] = []  # the second numbers of those ends, for bisection
    before = [-1] * len(pairs)
    for index, (_, second) in enumerate(pairs):
        k = bisect.bisect_left(ends, second)
        before[index] = tails[k - 1] if k else -1
        if k == len(tails):
            tails.append(index)
            ends.append(second)
        else:
            tails[k], ends[k] = index, second
    kept = []
    index = tails[-1] if tails else -1
    while index >= 0:
        kept.append(pairs[index])
        index = before[index]
    return kept[::-1]


def align_layers(source: Sequence[AlignedLayer], target: Sequence[AlignedLayer]) -> list[LayerMatch]:
    """Pair the weight-owning layers of two networks; every layer of either side appears once.

    :param source: the source network's weight-owning layers, in its state-dict order.
    :param target: the target network's, in its order.
    :return: the pairs in the source's order, then the target layers with no twin.
    """
    anchors = _anchors(source, target)
    found: dict[int, tuple[int, str, str]] = {}
    for i, j in anchors.items():
        same = source[i].signature == target[j].signature
        found[i] = (j, NAMES, "" if same else "same path, but the parameters' names or shapes differ")
    cuts = longest_increasing(sorted(anchors.items()))
    bounds = [(-1, -1), *cuts, (len(source), len(target))]
    taken = set(anchors.values())
    for (i0, j0), (i1, j1) in pairwise(bounds):
        a_idx = [i for i in range(i0 + 1, i1) if i not in found]
        b_idx = [j for j in range(j0 + 1, j1) if j not in taken]
        segment = _segment([source[i] for i in a_idx], [target[j] for j in b_idx])
        for x, y, how, note in segment:
            found[a_idx[x]] = (b_idx[y], how, note)
            taken.add(b_idx[y])
    _out_of_order(source, target, found, taken)
    matches = []
    for i, layer in enumerate(source):
        if i in found:
            j, how, note = found[i]
            matches.append(LayerMatch(layer.path, target[j].path, layer.kind, how, note))
        else:
            matches.append(LayerMatch(layer.path, None, layer.kind, UNMATCHED))
    matches += [LayerMatch(None, t.path, t.kind, UNMATCHED) for j, t in enumerate(target) if j not in taken]
    return matches


def _out_of_order(
    source: Sequence[AlignedLayer],
    target: Sequence[AlignedLayer],
    found: dict[int, tuple[int, str, str]],
    taken: set[int],
) -> None:
    """Pair leftovers whose signature occurs exactly once among the leftovers of each side."""
    left_a = [i for i in range(len(source)) if i not in found]
    left_b = [j for j in range(len(target)) if j not in taken]
    count_a = Counter(source[i].signature for i in left_a)
    count_b = Counter(target[j].signature for j in left_b)
    by_sig = {target[j].signature: j for j in left_b if count_b[target[j].signature] == 1}
    for i in left_a:
        sig = source[i].signature
        if count_a[sig] == 1 and sig in by_sig:
            j = by_sig[sig]
            found[i] = (j, STRUCTURE, "out of order: the only layer alike on each side")
            taken.add(j)


def alignment_table(matches: Sequence[LayerMatch | Mapping[str, str | None]], labels: tuple[str, str]) -> str:
    """Render the matches (or their ``to_dict`` forms) as a table, with a count of each way of pairing.

    :param labels: how the two sides are named in the headers (``"torch"``, ``"mindspore"``).
    """
    as_dicts = [m.to_dict() if isinstance(m, LayerMatch) else dict(m) for m in matches]
    rows = [
        [
            m.get("source") or "-",
            m.get("target") or "-",
            m.get("kind") or "",
            m.get("how"),
            m.get("note") or "",
        ]
        for m in as_dicts
    ]
    counts = Counter(str(m.get("how")) for m in as_dicts)
    headers = [f"{labels[0]} layer", f"{labels[1]} layer", "kind", "paired by", "note"]
    table = tabulate(rows, headers=headers, tablefmt="pretty", colalign=("left", "left"))
    return table + "\nweight-owning layers: " + ", ".join(f"{n} {how}" for how, n in counts.most_common())
