"""MindSpore's own dump in graph mode, armed by tscore and read back as kernel calls.

In graph mode the network is compiled: no Python wrapper sees its calls. MindSpore
writes every kernel's inputs and outputs itself when ``MINDSPORE_DUMP_CONFIG``
names a JSON configuration (FRAMEWORKS.md, "MindSpore capture and native dump"):
on CPU only ``"saved_data": "tensor"`` works, synchronously, one folder per graph
and iteration,
``{path}/rank_{r}/{net_name}/{graph}/{iteration}/{Op}.{scope}.{task}.{stream}.{time}.{input|output}.{i}.{format}.{Dtype}.npy``,
with each graph's kernel order in ``rank_{r}/execution_order/ms_execution_order_graph_{g}.csv``.

MindSpore reads the configuration once per process, when it compiles its first
graph, and then dumps every iteration (``_dump_start``/``_dump_stop`` have no
effect on CPU, checked with 2.10). So the dump is armed once per process, in
the first debugger's folder; a later debugger reads from that same folder; a
graph compiled before the dump was armed dumps nothing, and the step's record
says why. A configuration the user set (``MINDSPORE_DUMP_CONFIG`` already in
the environment) is read from where it writes, and its files are left there.
"""

from __future__ import annotations

import csv
import json
import logging
import os
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from tscore.plugin_api import KernelCall, KernelTensor, neutral_dtype

log = logging.getLogger(__name__)

ENV = "MINDSPORE_DUMP_CONFIG"
NET_NAME = "tscore"
CONFIG_FILE = "mindspore_dump_config.json"


@dataclass
class _Armed:
    """The one native dump of this process: where MindSpore writes, and what was read already."""

    path: str  # common_dump_settings.path
    net_name: str
    own: bool  # tscore wrote the configuration (else the user did: their files stay)
    read: set[str] = field(default_factory=set)  # iteration folders already collected


_ARMED: _Armed | None = None


def _config(path: str) -> dict[str, object]:
    return {
        "common_dump_settings": {
            "dump_mode": 0,
            "path": path,
            "net_name": NET_NAME,
            # every iteration: MindSpore numbers each graph's runs, not tscore's steps (a train and
            # an eval graph per step count apart); each start() sets aside what came between
            "iteration": "all",
            "saved_data": "tensor",  # "statistic" fails to compile on CPU
            "input_output": 0,
            "kernels": [],
            "support_device": [0, 1, 2, 3, 4, 5, 6, 7],
            "op_debug_mode": 0,
        },
        "e2e_dump_settings": {"enable": True, "trans_flag": True},
    }


def arm(folder: str) -> _Armed:
    """Arm MindSpore's dump for this process (once), writing into ``folder``; return where it writes."""
    global _ARMED
    if _ARMED is not None:
        return _ARMED
    given = os.environ.get(ENV)
    if given:
        try:
            with open(given, encoding="utf-8") as stream:
                settings = json.load(stream)["common_dump_settings"]
            _ARMED = _Armed(os.path.abspath(settings["path"]), str(settings["net_name"]), own=False)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ValueError(
                f"{ENV}={given!r} is set but cannot be read as MindSpore's dump configuration ({exc}): "
                "unset it and tscore writes its own"
            ) from exc
        log.info("dump: MindSpore's own dump configured by %s=%s is read from %s", ENV, given, _ARMED.path)
        return _ARMED
    path = os.path.abspath(folder)
    os.makedirs(path, exist_ok=True)
    config_file = os.path.join(path, CONFIG_FILE)
    with open(config_file, "w", encoding="utf-8") as stream:
        json.dump(_config(path), stream, indent=2)
    os.environ[ENV] = config_file
    _ARMED = _Armed(path, NET_NAME, own=True)
    log.warning(
        "dump: graph mode, so MindSpore dumps the kernels itself (%s=%s). It reads this once, at the "
        "first graph the process compiles, and then writes every tensor of every step until the "
        "process ends, dumped or not; tscore converts the steps it dumps and removes the rest at the "
        "next start() and at close()",
        ENV,
        config_file,
    )
    return _ARMED


@dataclass(frozen=True)
class _KernelFile:
    op: str
    scope: str  # the full name with "/" written as "_"
    time: int
    role: str
    slot: int
    dtype: str
    path: str


def _long_names(folder: str) -> dict[str, str]:
    """Return the real names of the files MindSpore wrote under a hash (``841308868.npy``)."""
    try:
        with open(os.path.join(folder, "mapping.csv"), encoding="utf-8", newline="") as stream:
            return {row[0]: row[1] for row in csv.reader(stream) if len(row) >= 2}
    except OSError:
        return {}


def _parse_file(folder: str, name: str, stored: str | None = None) -> _KernelFile | None:
    """Take ``MatMul.Default_fc-Dense_MatMul-op0.0.0.1795.input.1.DefaultFormat.Float32.npy`` apart.

    :param stored: the file's name on disk when MindSpore wrote it under a hash (``mapping.csv``).
    """
    if not name.endswith(".npy"):
        return None
    parts = name[: -len(".npy")].split(".")
    if len(parts) < 9 or parts[-4] not in ("input", "output") or not parts[-3].isdecimal():
        return None
    try:
        time = int(parts[-5])
    except ValueError:
        return None
    dtype = neutral_dtype(parts[-1])
    scope = ".".join(parts[1:-7])
    path = os.path.join(folder, stored or name)
    return _KernelFile(parts[0], scope, time, parts[-4], int(parts[-3]), dtype, path)


def _slot(slots: list[str | None] | None, file: _KernelFile) -> str | None:
    """Return the parameter an input file holds, if the graph says it is one."""
    if slots is None or file.role != "input" or file.slot >= len(slots):
        return None
    return slots[file.slot]


def _module_of(full_name: str) -> str:
    """``Default/layer1-SequentialCell/0-Conv2d/Conv2D-op0`` -> ``layer1.0``: the cells of its scope."""
    parts = full_name.split("/")[:-1]
    cells = [part.rpartition("-")[0] for part in parts if "-" in part]
    return ".".join(cell for cell in cells if cell)


def _execution_order(rank_folder: str, graph: int) -> dict[str, tuple[int, str]]:
    """Each kernel's place and full name by its file spelling (``/`` as ``_``), from the graph's order."""
    file = os.path.join(rank_folder, "execution_order", f"ms_execution_order_graph_{graph}.csv")
    names: dict[str, tuple[int, str]] = {}
    try:
        with open(file, encoding="utf-8", newline="") as stream:
            for row in csv.reader(stream):
                if row and "/" in row[0]:
                    names[row[0].replace("/", "_")] = (len(names), row[0])
    except OSError:
        log.info("no execution order for graph %d in %s: kernels ordered by their files' times", graph, file)
    return names


def _parameter_inputs(rank_folder: str, graph: int, names: set[str]) -> dict[str, list[str | None]]:
    """Each kernel's inputs that are network parameters, by its file spelling, from the graph MindSpore saved.

    The dump saves ``graphs/ms_output_trace_code_graph_{g}.pb``, the graph it ran: a kernel's
    input is a parameter when it is one of ``names`` or a ``Load`` of one.
    """
    from ts_mindspore.ir_graph import read_ir_graph

    nodes = read_ir_graph(os.path.join(rank_folder, "graphs", f"ms_output_trace_code_graph_{graph}.pb"))
    if not nodes:
        return {}
    loads = {n.name: n.inputs[0].source for n in nodes if n.op_type == "Load" and n.inputs}
    found: dict[str, list[str | None]] = {}
    for node in nodes:
        sources = [loads.get(i.source, i.source) for i in node.inputs]
        slots = [source if source in names else None for source in sources]
        if any(slots):
            found[node.full_name.replace("/", "_")] = slots
    return found


class MindSporeNativeDump:
    """``ts_native_dump`` for MindSpore graph mode: arm once, collect each step's new iteration folders."""

    framework = "mindspore"

    def __init__(
        self,
        folder: str,
        parameters: set[str] | None = None,
        rank: Callable[[], int] = lambda: 0,
    ) -> None:
        """Arm MindSpore's dump (once per process) in ``folder``.

        :param parameters: the network's parameter names (``Parameter.name``), to say which kernel
            inputs are parameters; None: none is said to be.
        :param rank: this process's rank: only its ``rank_{r}`` folder is read (ranks share the folder).
        """
        self._armed = arm(folder)
        self.folder = self._armed.path
        self.owned = self._armed.own
        self._rank = rank
        self._parameters = parameters or set()
        self._by_graph: dict[tuple[int, int], dict[str, list[str | None]]] = {}
        self._orders: dict[tuple[int, int], dict[str, tuple[int, str]]] = {}

    def _parameter_slots(self, rank: int, graph: int) -> dict[str, list[str | None]]:
        if not self._parameters:
            return {}
        key = (rank, graph)
        if key not in self._by_graph:
            folder = os.path.join(self.folder, f"rank_{rank}")
            try:
                self._by_graph[key] = _parameter_inputs(folder, graph, self._parameters)
            except Exception as exc:  # an unreadable graph: the records are written without it
                log.info("dump: graph %d's parameters not read from %s: %s", graph, folder, exc)
                self._by_graph[key] = {}
        return self._by_graph[key]

    def _iteration_folders(self) -> list[tuple[int, int, int, str]]:
        """Every ``(rank, graph, iteration, folder)`` MindSpore has written and tscore not yet read."""
        found: list[tuple[int, int, int, str]] = []
        rank = int(self._rank())
        net = os.path.join(self.folder, f"rank_{rank}", self._armed.net_name)
        if not os.path.isdir(net):
            return found
        for graph in sorted(g for g in os.listdir(net) if g.isdecimal()):
            for iteration in sorted(i for i in os.listdir(os.path.join(net, graph)) if i.isdecimal()):
                path = os.path.join(net, graph, iteration)
                if path not in self._armed.read:
                    found.append((rank, int(graph), int(iteration), path))
        if found and self._armed.own:  # MindSpore has read its configuration: child processes need not
            os.environ.pop(ENV, None)
        return found

    def begin_step(self) -> None:
        """Set aside the iteration folders written while no step was dumped (removed if tscore's own)."""
        skipped = self._iteration_folders()
        for _, _, _, path in skipped:
            self._armed.read.add(path)
            if self._armed.own:
                shutil.rmtree(path, ignore_errors=True)
        if skipped:
            log.info("dump: %d iteration(s) MindSpore wrote between dumped steps set aside", len(skipped))

    def collect(self) -> list[KernelCall]:
        """Return the kernels of every iteration folder written since :meth:`begin_step`, in run order."""
        calls: list[tuple[tuple[int, int, int, int], KernelCall]] = []
        for rank, graph, iteration, path in self._iteration_folders():
            self._armed.read.add(path)
            if not self._orders.get((rank, graph)):  # a graph's kernel order is the same at every step
                self._orders[rank, graph] = _execution_order(os.path.join(self.folder, f"rank_{rank}"), graph)
            names = self._orders[rank, graph]
            parameters = self._parameter_slots(rank, graph)
            by_kernel: dict[tuple[str, str], list[_KernelFile]] = {}
            long_names = _long_names(path)
            for entry in os.listdir(path):
                parsed = _parse_file(path, long_names.get(entry, entry), entry)
                if parsed is not None and parsed.op != "Parameter":  # the graph's inputs and weights
                    by_kernel.setdefault((parsed.op, parsed.scope), []).append(parsed)
            for (op, scope), files in by_kernel.items():
                place, full = names.get(scope, (len(names), scope))
                backward = full.startswith("Gradients")
                call = KernelCall(
                    op=op,
                    kernel=full,
                    module=_module_of(full) if full != scope else "",
                    direction="backward" if backward else "forward",
                    graph=graph,
                    iteration=iteration,
                    tensors=[
                        KernelTensor(f.role, f.slot, f.path, f.dtype, _slot(parameters.get(scope), f))
                        for f in files
                    ],
                )
                calls.append(((iteration, graph, place, min(f.time for f in files)), call))
        calls.sort(key=lambda item: item[0])
        return [call for _, call in calls]

    def discard(self, calls: Iterable[KernelCall]) -> None:
        """Remove the iteration folders read (tscore's own configuration only: a user's files stay)."""
        if not self._armed.own:
            return
        folders = {os.path.dirname(t.file) for call in calls for t in call.tensors}
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)

    def close(self) -> None:
        """Remove the iteration folders not read (tscore's own configuration); say that MindSpore goes on."""
        self.begin_step()
        if self._armed.own:
            log.warning(
                "dump closed: MindSpore goes on writing every tensor of every graph step into %s until the "
                "process ends (it cannot be switched off once armed); remove the folder afterwards",
                self.folder,
            )

    def why_empty(self) -> str:
        """Say why MindSpore wrote nothing for the step."""
        return (
            f"MindSpore wrote no kernel into {self.folder}. It reads {ENV} once, when the process "
            "compiles its first graph: start the debugger before the first graph-mode call (a graph "
            "compiled earlier is not dumped), and check that the step ran in GRAPH_MODE"
            + (
                ""
                if self._armed.own
                else f" and that the iteration setting of {os.environ.get(ENV)} names it"
            )
        )
