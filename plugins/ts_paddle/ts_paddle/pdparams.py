"""``.pdparams`` files read without running their pickle, and written as ``paddle.load`` reads them.

``paddle.save`` writes a plain pickle (protocol 4). A state dict of tensors
becomes ``{name: ndarray, "StructuredToParameterName@@": {...}}``; any other
object is pickled as it is, each tensor as a ``(name, ndarray)`` tuple. bfloat16
is stored as its uint16 bits (Paddle has no uint16 dtype: uint16 means
bfloat16). The reader lets through only what rebuilds arrays and containers,
as ``torch.load(weights_only=True)`` does; a file that calls anything else is
refused unless the caller trusts it.
"""

from __future__ import annotations

import pickle
import re
from collections.abc import Mapping
from typing import Any, BinaryIO

import ml_dtypes
import numpy as np

from tscore.plugin_api import (
    CheckpointContents,
    CheckpointReadError,
    UnsafePickleError,
    UnsupportedObjectError,
    restricted_unpickle,
    write_atomic,
)

NAMES_KEY = "StructuredToParameterName@@"
SPLIT_KEY = "UnpackBigParamInfor@@"
STATE_DICT_KEYS = ("state_dict", "model_state_dict", "model", "net", "network", "params")
_BFLOAT16 = np.dtype(ml_dtypes.bfloat16)


_MALFORMED = (ValueError, TypeError, AttributeError, IndexError, KeyError)
# Paddle's LSTM/GRU/SimpleRNN state lists each weight twice: "lstm.weight_ih_l0" and "lstm.0.cell.weight_ih"
# (bidirectional: "lstm.0.cell_fw.weight_ih" for "weight_ih_l0", "cell_bw" for "weight_ih_l0_reverse").
_RNN_ALIAS = re.compile(
    r"^(?P<layer>(?:.+\.)?)(?P<index>\d+)\.(?P<cell>cell|cell_fw|cell_bw)\.(?P<name>(?:weight|bias)_(?:ih|hh))$"
)


def _alias_of(name: str, state: Mapping[str, object]) -> str | None:
    """Return the flat name a recurrent layer's per-cell alias stands for, when the state has it."""
    found = _RNN_ALIAS.match(name)
    if found is None:
        return None
    suffix = "_reverse" if found["cell"] == "cell_bw" else ""
    flat = f"{found['layer']}{found['name']}_l{found['index']}{suffix}"
    return flat if flat in state else None


def _unreadable(path: str, exc: BaseException) -> CheckpointReadError:
    return CheckpointReadError(
        f"{path}: not a readable .pdparams file ({type(exc).__name__}: {exc})", path=path
    )


def _eval_data(source: object, scope: object = None, _locals: object = None) -> np.ndarray:
    """Stand in for ``eval`` in a pickled DenseTensor, ``eval("data", {"data": array})``, and only that."""
    if source == "data" and isinstance(scope, dict) and set(scope) == {"data"}:
        data = scope["data"]
        if isinstance(data, np.ndarray):
            return data
    raise UnsafePickleError("builtins.eval")


def _load(path: str, trust: bool) -> Any:
    try:
        with open(path, "rb") as stream:
            return restricted_unpickle(
                stream, extra=[("builtins", "tuple")], substitutes={("builtins", "eval"): _eval_data}
            )
    except UnsafePickleError as exc:
        if not trust:
            raise CheckpointReadError(
                f"{path}: the file's pickle calls {exc.name}, which is not tensor data, and unpickling it "
                "would run that code; if you trust the file, pass trust_pickle=True (command line: "
                "--trust-pickle), or load it with paddle.load and pass the state dict",
                path=path,
            ) from None
    except (pickle.UnpicklingError, EOFError, MemoryError, *_MALFORMED) as exc:
        raise _unreadable(path, exc) from exc
    import paddle

    return paddle.load(path, return_numpy=True)


def _array(value: object) -> np.ndarray | None:
    """Return the array a value holds: an ndarray, or Paddle's ``(name, ndarray)`` tuple for a tensor."""
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
        value = value[1]
    if isinstance(value, np.ndarray) and value.dtype.kind in "biufc":
        return value.view(_BFLOAT16) if value.dtype == np.uint16 else value
    return None


def _describe(value: object) -> str:
    if isinstance(value, Mapping):
        return f"a dict of {len(value)} entries, not a tensor"
    return f"a {type(value).__name__}, not a tensor"


def _state(path: str, loaded: object, skipped: dict[str, str]) -> Mapping[str, object]:
    if not isinstance(loaded, Mapping):
        raise CheckpointReadError(f"{path}: holds a {type(loaded).__name__}, not a state dict", path=path)
    loaded = dict(loaded)
    loaded.pop(NAMES_KEY, None)
    for name, info in (loaded.pop(SPLIT_KEY, None) or {}).items():
        parts = [loaded.pop(part) for part in info["slices"]]
        loaded[name] = np.concatenate([np.ravel(p) for p in parts]).reshape(info["OriginShape"])
    if any(_array(v) is not None for v in loaded.values()):
        return loaded
    for key in STATE_DICT_KEYS:
        inner = loaded.get(key)
        if isinstance(inner, Mapping) and any(_array(v) is not None for v in inner.values()):
            skipped.update(
                {str(k): f"outside {key!r}: " + _describe(v) for k, v in loaded.items() if k != key}
            )
            return _state(path, inner, skipped)
    raise CheckpointReadError(
        f"{path}: no tensors found, at the top level or under any of {', '.join(STATE_DICT_KEYS)}; "
        f"its keys are {list(loaded)[:20]}",
        path=path,
    )


def read_pdparams(path: str, trust: bool) -> CheckpointContents:
    """Read a ``.pdparams`` file into numpy arrays, noting every entry that is not a tensor."""
    out = CheckpointContents(path=path, format="pdparams")
    loaded = _load(path, trust)
    try:
        state = _state(path, loaded, out.skipped)
    except _MALFORMED as exc:
        raise _unreadable(path, exc) from exc
    for name, value in state.items():
        alias = _alias_of(str(name), state)
        if alias is not None:
            out.skipped[str(name)] = f"the same tensor as {alias} (Paddle's recurrent layers list each twice)"
            continue
        array = _array(value)
        if array is None:
            out.skipped[str(name)] = _describe(value)
        else:
            out.params[str(name)] = array
    return out


def write_pdparams(params: Mapping[str, np.ndarray], path: str) -> None:
    """Write ``{name: array}`` as ``paddle.save`` writes a state dict (bfloat16 as its uint16 bits)."""
    state: dict[str, object] = {}
    for name, array in params.items():
        if array.dtype == _BFLOAT16:
            array = array.view(np.uint16)
        elif array.dtype.kind not in "biufc":
            raise UnsupportedObjectError(
                f"{name}: a .pdparams file cannot hold {array.dtype} (Paddle stores float8 as int8 and "
                "forgets the type); write a .safetensors file instead"
            )
        state[name] = np.ascontiguousarray(array) if array.ndim else np.asarray(array)
    state[NAMES_KEY] = {name: name for name in params}

    def write(stream: BinaryIO) -> None:
        pickle.dump(state, stream, protocol=4)

    write_atomic(path, write)
