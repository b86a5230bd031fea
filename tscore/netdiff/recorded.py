"""A network recorded in one process, standing in for it in another: the finder across processes.

Two frameworks that cannot share a process (real torch and a torch-API layer
on MindSpore that takes torch's name) are compared in two steps::

    # process 1, real torch
    ts.migrator.record_network(torch_net, "torch_side", auto_inputs=(((2, 3, 8, 8), np.float32),))
    # process 2, the other framework
    side = ts.migrator.load_recorded_network("torch_side")
    ts.migrator.NetDifferenceFinder(side, other_net, auto_conv_ckpt=2).compare(
        auto_inputs=(((2, 3, 8, 8), np.float32),))

:func:`record_network` writes, per input case, the network's output and every
layer call's inputs and output, and once its state, its layers (kinds,
settings, entries) and its framework and device: ``recording.json`` and
``arrays.npz``. :class:`RecordedNetwork` answers the hooks the finder asks
(the built-in plugin :mod:`tscore.netdiff.recorded_plugin`): a forward on the
recorded inputs returns the recorded output, module hooks replay the recorded
calls, the state is the recorded one. A forward on other inputs is an error
that says which inputs were recorded. The same inputs come out of the same
``auto_inputs`` and seed on both sides, so the report and its verdicts are the
in-process finder's.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import json
import logging
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tscore.contract.layers import LayerInfo, ModuleRecorder
from tscore.errors import TscoreError
from tscore.models import model_info
from tscore.netdiff.inputs import input_cases
from tscore.netdiff.recording import LayerCall, record_run
from tscore.npy_files import write_atomic
from tscore.plugins import hook
from tscore.seeding import seed_all
from tscore.structures import as_arrays

log = logging.getLogger(__name__)

FORMAT = "tscore_recorded_network"
VERSION = 1
JSON_NAME = "recording.json"
ARRAYS_NAME = "arrays.npz"


class RecordingError(TscoreError, ValueError):
    """A recording that cannot be read, or a run it cannot stand in for."""


@dataclass
class RecordedCase:
    """One input case: the inputs, the network's output, and every layer call with its values."""

    inputs: tuple[np.ndarray, ...]
    output: Any
    calls: list[LayerCall]


@dataclass
class RecordedNetwork:
    """A network as :func:`record_network` wrote it; the finder takes it as either side.

    :ivar framework: the framework it ran on (``"torch"``).
    :ivar device: where it ran (``"cpu"``).
    :ivar layers: its layers, as its plugin listed them (no layer objects).
    :ivar layer_params: its weight-owning layers, as ``ts_layer_params`` gave them.
    :ivar state: its parameters and buffers by its own names.
    :ivar cases: the recorded runs, one per input case.
    """

    framework: str
    device: str
    layers: list[LayerInfo]
    layer_params: list[tuple[str, str, tuple[str, ...]]]
    state: dict[str, np.ndarray]
    cases: list[RecordedCase]
    source: str = ""
    replaying: list[ModuleRecorder] = field(default_factory=list, repr=False)

    def case_for(self, args: tuple[Any, ...]) -> RecordedCase:
        """Find the recorded case run on these inputs.

        :raises RecordingError: naming the recorded inputs when none matches.
        """
        arrays = tuple(np.asarray(a) for a in args)
        for case in self.cases:
            if len(case.inputs) == len(arrays) and all(
                x.shape == y.shape and x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True)
                for x, y in zip(case.inputs, arrays, strict=True)
            ):
                return case
        recorded = "; ".join(", ".join(f"{a.dtype}{list(a.shape)}" for a in c.inputs) for c in self.cases)
        raise RecordingError(
            f"{self.source or 'the recorded network'} was recorded on other inputs ({recorded}); record it "
            "again with the inputs of this run, or give this run the same inputs, auto_inputs and fix_seed"
        )

    def replay(self, case: RecordedCase) -> None:
        """Report the case's layer calls, in their recorded order, to the recorders now attached."""
        for recorder in self.replaying:
            _replay_calls(case.calls, recorder)


class _Recorded:
    """Stands in for a recorded layer object: its class name is the recorded one."""


@functools.lru_cache(maxsize=512)
def _stand_in(type_name: str) -> object:
    """One stand-in object per recorded class name, made once (replay reports every call with one)."""
    return type(type_name, (_Recorded,), {})()


def _replay_calls(calls: list[LayerCall], recorder: ModuleRecorder) -> None:
    """Report each call's beginning and return, nested as they ran."""
    by_start = {call.start: call for call in calls}

    def replay(call: LayerCall) -> None:
        recorder.enter(call.path, _stand_in(call.type_name), tuple(call.args or ()), dict(call.kwargs or {}))
        for child in call.children:
            replay(by_start[child])
        if call.end is not None:
            recorder.leave(call.path, _stand_in(call.type_name), call.output)

    for call in calls:
        if call.parent is None:
            replay(call)


# ------------------------------------------------------------------ writing


class _Arrays:
    """The arrays of a recording, each under a fresh numbered name, with the dtypes ``.npz`` cannot name."""

    def __init__(self) -> None:
        self.stored: dict[str, np.ndarray] = {}

    def add(self, array: np.ndarray) -> dict[str, str]:
        """Store ``array`` and return its JSON reference; bfloat16 and float8 kept as their bits."""
        key = f"a{len(self.stored)}"
        reference = {"__array__": key}
        if array.dtype.kind == "V" and array.dtype.fields is None:  # ml_dtypes: np.load reads them as void
            reference["dtype"] = array.dtype.name
            array = array.view(np.dtype(f"u{array.dtype.itemsize}"))
        self.stored[key] = np.asarray(array, order="C")  # not ascontiguousarray: it makes 0-d arrays 1-d
        return reference


def _restored(reference: Mapping[str, str], arrays: Mapping[str, np.ndarray]) -> np.ndarray:
    array = arrays[reference["__array__"]]
    if "dtype" in reference:
        import ml_dtypes

        array = array.view(np.dtype(getattr(ml_dtypes, reference["dtype"])))
    return array


def _pack(value: Any, arrays: _Arrays) -> Any:
    """Turn a structure of arrays into JSON, the arrays kept in ``arrays``; named tuples keep their fields."""
    if isinstance(value, np.ndarray):
        return arrays.add(value)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return {
            "__namedtuple__": type(value).__name__,
            "fields": list(value._fields),
            "items": [_pack(v, arrays) for v in value],
        }
    if isinstance(value, tuple):
        return {"__tuple__": [_pack(v, arrays) for v in value]}
    if isinstance(value, list):
        return [_pack(v, arrays) for v in value]
    if isinstance(value, dict):
        return {"__dict__": [[str(k), _pack(v, arrays)] for k, v in value.items()]}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return {"__dict__": [[k, _pack(as_arrays(v), arrays)] for k, v in fields.items()]}
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return {"__object__": type(value).__name__}


def _unpack(value: Any, arrays: Mapping[str, np.ndarray]) -> Any:
    if isinstance(value, list):
        return [_unpack(v, arrays) for v in value]
    if isinstance(value, dict):
        if "__array__" in value:
            return _restored(value, arrays)
        if "__tuple__" in value:
            return tuple(_unpack(v, arrays) for v in value["__tuple__"])
        if "__namedtuple__" in value:
            cls = collections.namedtuple(value["__namedtuple__"], value["fields"])  # type: ignore[misc]
            return cls(*(_unpack(v, arrays) for v in value["items"]))
        if "__dict__" in value:
            return {k: _unpack(v, arrays) for k, v in value["__dict__"]}
        if "__object__" in value:
            return None
    return value


def record_network(
    net: object,
    path: str | os.PathLike[str],
    inputs: object = None,
    auto_inputs: object = None,
    fix_seed: int | None = 16,
) -> str:
    """Run ``net`` on every input case, recording what the finder needs of it; write it to folder ``path``.

    Load the weights the comparison should use before recording: a recorded network keeps them.

    :param net: a network of any framework whose plugin can list and hook its layers.
    :param path: the folder to write ``recording.json`` and ``arrays.npz`` into (made if missing).
    :param inputs: the cases, as :meth:`~tscore.netdiff.finder.NetDifferenceFinder.compare` takes them.
    :param auto_inputs: random cases, drawn exactly as the finder draws them (same ``fix_seed``).
    :param fix_seed: the seed set before each run and used to draw ``auto_inputs``, as the finder's.
    :return: the folder.
    :raises NetRunError: when the network raises, naming its framework and layer; nothing is written.
    """
    info = model_info(net, "net")
    layers = list(hook().ts_named_layers(model=net) or [])
    params = hook().ts_layer_params(model=net) or []
    state = hook().ts_model_state(model=net) or {}
    arrays = _Arrays()
    state_refs = {name: arrays.add(np.asarray(a)) for name, a in state.items()}
    cases = []
    for case in input_cases(inputs, auto_inputs, fix_seed or 0):
        if fix_seed is not None:
            seed_all(fix_seed)
        output, recorder = record_run(net, case, info.label())
        calls = [
            {
                "path": c.path,
                "type_name": c.type_name,
                "index": c.index,
                "start": c.start,
                "parent": c.parent,
                "end": c.end,
                "children": c.children,
                "args": _pack(c.args, arrays),
                "kwargs": _pack(c.kwargs, arrays),
                "output": _pack(c.output, arrays),
            }
            for c in recorder.calls
        ]
        cases.append(
            {"inputs": _pack(tuple(case), arrays), "output": _pack(as_arrays(output), arrays), "calls": calls}
        )
    identity = uuid.uuid4().hex
    document = {
        FORMAT: VERSION,
        "id": identity,
        "framework": info.framework,
        "device": info.device,
        "layers": [
            {
                "path": layer.path,
                "type_name": layer.type_name,
                "kind": layer.kind,
                "params": list(layer.params),
                "config": dict(layer.config),
            }
            for layer in layers
        ],
        "layer_params": [[p, k, list(names)] for p, k, names in params],
        "state": state_refs,
        "cases": cases,
    }
    text = json.dumps(document, indent=1, default=str).encode("utf-8")  # before anything is written
    arrays.stored["__id__"] = np.frombuffer(identity.encode("ascii"), np.uint8)
    folder = os.fspath(path)
    os.makedirs(folder, exist_ok=True)
    stored = arrays.stored
    write_atomic(os.path.join(folder, ARRAYS_NAME), lambda stream: np.savez(stream, **stored))  # type: ignore[arg-type]
    write_atomic(os.path.join(folder, JSON_NAME), lambda stream: stream.write(text))
    log.info("recorded %s: %d case(s), %d layers, in %s", info.label(), len(cases), len(layers), folder)
    return folder


# ------------------------------------------------------------------ reading


def load_recorded_network(path: str | os.PathLike[str]) -> RecordedNetwork:
    """Read a folder written by :func:`record_network`.

    :raises RecordingError: naming the folder when it is missing, incomplete or of another format.
    """
    folder = os.fspath(path)
    json_path, arrays_path = os.path.join(folder, JSON_NAME), os.path.join(folder, ARRAYS_NAME)
    try:
        with open(json_path, encoding="utf-8") as stream:
            document = json.load(stream)
        with np.load(arrays_path, allow_pickle=False) as stored:
            arrays = {name: stored[name] for name in stored.files}
    except FileNotFoundError as exc:
        raise RecordingError(
            f"{folder!r} is not a recorded network: {exc.filename} is missing; write it with record_network"
        ) from None
    except (OSError, ValueError) as exc:
        raise RecordingError(
            f"{folder!r}: the recording cannot be read ({exc}); record the network again"
        ) from None
    if not isinstance(document, dict) or document.get(FORMAT) != VERSION:
        raise RecordingError(f"{json_path!r} is not a tscore recorded network (version {VERSION})")
    stored_id = bytes(arrays.pop("__id__", np.zeros(0, np.uint8))).decode("ascii", "replace")
    if stored_id != document.get("id"):
        raise RecordingError(
            f"{folder!r}: {JSON_NAME} and {ARRAYS_NAME} come from two different recordings (one was cut "
            "short); record the network again"
        )
    try:
        return _network(document, arrays, folder)
    except (KeyError, TypeError, ValueError) as exc:
        raise RecordingError(
            f"{json_path!r} is damaged ({type(exc).__name__}: {exc}); record again"
        ) from None


def _network(document: dict[str, Any], arrays: Mapping[str, np.ndarray], folder: str) -> RecordedNetwork:
    cases = [
        RecordedCase(
            inputs=_unpack(case["inputs"], arrays),
            output=_unpack(case["output"], arrays),
            calls=[
                LayerCall(
                    path=c["path"],
                    type_name=c["type_name"],
                    index=c["index"],
                    start=c["start"],
                    parent=c["parent"],
                    args=_unpack(c["args"], arrays),
                    kwargs=_unpack(c["kwargs"], arrays),
                    output=_unpack(c["output"], arrays),
                    end=c["end"],
                    children=list(c["children"]),
                )
                for c in case["calls"]
            ],
        )
        for case in document["cases"]
    ]
    return RecordedNetwork(
        framework=document["framework"],
        device=document["device"],
        layers=[LayerInfo(**layer) for layer in document["layers"]],
        layer_params=[(p, k, tuple(names)) for p, k, names in document["layer_params"]],
        state={name: _restored(ref, arrays) for name, ref in document["state"].items()},
        cases=cases,
        source=folder,
    )
