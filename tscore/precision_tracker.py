"""``precision_tracker``: the operators of a compiled graph whose precision the backend raised or reduced.

TroubleShooter 1.0.18's call and CSV. MindSpore's Ascend backend marks an
operator it runs in another precision than asked with the attribute
``precision_flag`` (``raise`` or ``reduce``); every other operator is
``normal``. The graph file is read by the plugin of its framework
(``ts_read_graph_file``: the MindSpore plugin reads ANF IR ``.pb`` files),
and each chosen operator gives one row per input (the operator or
parameter it comes from) and one per output (each operator it feeds).
"""

from __future__ import annotations

import csv
import io
import logging
import os
from collections import Counter
from collections.abc import Sequence
from typing import Any

from tscore.contract.graph import GraphNode
from tscore.errors import TargetPathError, TscoreError
from tscore.npy_files import write_atomic
from tscore.plugins import hook

log = logging.getLogger(__name__)

COLUMNS = (
    "op_name",
    "op_full_name",
    "op_type",
    "precision_flag",
    "input or output",
    "index",
    "input from op or output to op",
    "shape",
    "dtype",
)
FLAGS = ("normal", "raise", "reduce")


class GraphFileError(TscoreError, ValueError):
    """A graph file that is missing, or that no installed plugin reads as a graph."""


def read_graph_file(path: str | os.PathLike[str]) -> list[GraphNode]:
    """Read a framework's saved graph through the plugin that knows its format.

    :raises GraphFileError: naming the file when it is missing or no plugin reads it.
    """
    name = os.fspath(path)
    if not os.path.isfile(name):
        raise GraphFileError(f"the graph file {name!r} does not exist; pass a saved graph (.pb)")
    nodes = hook().ts_read_graph_file(path=name)
    if not nodes:
        raise GraphFileError(
            f"{name!r} is not a graph any installed plugin reads (the MindSpore plugin reads ANF IR .pb "
            "files, saved with MS_DEV_SAVE_GRAPHS=2); install ts_mindspore and MindSpore, or check the file"
        )
    return list(nodes)


def precision_flag(node: GraphNode) -> str:
    """Return the node's precision flag: ``raise``, ``reduce``, or ``normal`` when it has none."""
    flag = node.attrs.get("precision_flag", "normal").strip().strip('"').strip()
    return flag.rsplit(":", 1)[-1].strip().strip('"') or "normal"


def tracked_rows(nodes: Sequence[GraphNode], precision_flags: Sequence[str]) -> list[dict[str, Any]]:
    """Give TroubleShooter's rows for the nodes whose flag is one of ``precision_flags``.

    Each source and each consumer of a node is one row, however often it is used (as 1.0.18
    lists them); a neighbour is named by its op name, or by its full name when another node
    of the graph has the same op name.
    """
    by_name = {node.name: node for node in nodes}
    consumers: dict[str, dict[str, None]] = {}  # each consumer once, in graph order
    for node in nodes:
        for value in node.inputs:
            consumers.setdefault(value.source, {})[node.name] = None
    short = Counter(node.full_name.rsplit("/", 1)[-1] for node in nodes)

    def label(node: GraphNode) -> str:
        op_name = node.full_name.rsplit("/", 1)[-1]
        return op_name if short[op_name] == 1 else node.full_name

    rows: list[dict[str, Any]] = []
    for node in nodes:
        flag = precision_flag(node)
        if flag not in precision_flags:
            continue
        base = {
            "op_name": node.full_name.rsplit("/", 1)[-1],
            "op_full_name": node.full_name,
            "op_type": node.op_type,
            "precision_flag": flag,
        }
        inputs = list({value.source: value for value in node.inputs}.values())  # each source once
        for index, value in enumerate(inputs):
            source = by_name.get(value.source)
            rows.append(
                {
                    **base,
                    "input or output": "input",
                    "index": index,
                    "input from op or output to op": label(source) if source else value.source,
                    "shape": _shape(value.shape),
                    "dtype": value.dtype or "-",
                }
            )
        for index, target in enumerate(consumers.get(node.name, {})):
            rows.append(
                {
                    **base,
                    "input or output": "output",
                    "index": index,
                    "input from op or output to op": label(by_name[target]),
                    "shape": _shape(node.output_shape),
                    "dtype": node.output_dtype or "-",
                }
            )
    return rows


def _shape(shape: list[int] | None) -> str:
    return "-" if shape is None else str(shape)


def precision_tracker(
    pb_file: str | os.PathLike[str],
    precision_flags: Sequence[str] = FLAGS,
    *,
    output_path: str | os.PathLike[str] | None = None,
    output_filename: str | None = None,
) -> list[dict[str, Any]]:
    """Write the operators of a saved graph whose precision flag is one of ``precision_flags`` to a CSV.

    :param pb_file: the graph file (MindSpore's ANF IR ``.pb``).
    :param precision_flags: which operators to list: any of ``normal``, ``raise``, ``reduce``.
    :param output_path: the folder of the CSV (default: the graph file's).
    :param output_filename: the CSV's name (default: the graph file's, ending in ``.csv``).
    :return: the rows written, one per input and output of each operator listed.
    :raises GraphFileError: naming the file when it is missing or not a graph.
    """
    if isinstance(precision_flags, str) or not isinstance(precision_flags, Sequence):
        raise TypeError(f"precision_flags must be a list or tuple of {FLAGS}, got {precision_flags!r}")
    unknown = [f for f in precision_flags if f not in FLAGS]
    if unknown:
        raise ValueError(f"precision_flags: {unknown} are not among {FLAGS}")
    source = os.path.abspath(os.fspath(pb_file))
    nodes = read_graph_file(source)
    rows = tracked_rows(nodes, precision_flags)
    folder = os.fspath(output_path) if output_path is not None else os.path.dirname(source)
    if not os.path.isdir(folder):
        raise TargetPathError(f"precision_tracker: output_path {folder!r} is not an existing folder")
    name = (output_filename or os.path.basename(source)).split(".")[0] + ".csv"
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    data = out.getvalue().encode("utf-8")
    target = write_atomic(os.path.join(folder, name), lambda stream: stream.write(data))
    log.info("precision_tracker: %d operators read, %d rows written to %s", len(nodes), len(rows), target)
    return rows
