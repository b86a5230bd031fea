"""Small helpers that TroubleShooter users know from ``ts.widget``."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from tscore.errors import ObjectFileError, UnsupportedObjectError
from tscore.plugins import hook
from tscore.tensors import type_name

if TYPE_CHECKING:
    from tscore.loss_compare import LossCompareReport
    from tscore.netdiff.weights import LoadResult
    from tscore.printed_tensors import ConvertedTensor

__all__ = [
    "ObjectFileError",
    "fix_random",
    "get_grads",
    "get_ms_grads",
    "get_pt_grads",
    "load_ms_weight2net",
    "loss_compare",
    "object_dump",
    "object_load",
    "precision_tracker",
    "save_convert",
]


def get_grads(model: object, grads: object | None = None) -> dict[str, object]:
    """Name the gradients of ``model``'s trainable parameters, for any framework.

    Keys are ``{parameter name}_{index}``, the index being the parameter's
    position among the trainable ones, so that files saved from two
    frameworks sort in parameter order (``fc.weight_0``, ``fc.bias_1``).

    :param model: a ``torch.nn.Module`` (gradients read from ``.grad``) or a
        ``mindspore.nn.Cell``.
    :param grads: for MindSpore, the gradients returned by ``grad`` or
        ``value_and_grad`` for ``model.trainable_params()`` (with or without
        ``return_ids=True``).
    :raises UnsupportedObjectError: when no loaded plugin knows ``model``.
    """
    named = hook().ts_model_grads(model=model, grads=grads)
    if named is None:
        raise UnsupportedObjectError(
            f"get_grads: no loaded tscore plugin knows models of type {type_name(model)}"
        )
    return named


def get_pt_grads(model: object) -> dict[str, object]:
    """Return ``{name_index: grad}`` for a torch model after ``loss.backward()`` (spec 000)."""
    return get_grads(model)


def get_ms_grads(net: object, grads: object) -> dict[str, object]:
    """Return ``{name_index: grad}`` for a MindSpore ``Cell`` and the gradients of its trainable params."""
    return get_grads(net, grads)


def fix_random(seed: int = 16) -> list[str]:
    """Seed Python, numpy and every installed framework: TroubleShooter's name for :func:`tscore.seed_all`.

    TroubleShooter also switches cuDNN off; tscore leaves it on (the numbers of the run stay those
    of the user's setup): ``ts.seed_all(seed, mode=True)`` asks for deterministic algorithms.

    :return: the frameworks seeded.
    """
    from tscore.seeding import seed_all

    return seed_all(seed)


def load_ms_weight2net(model: object, file: str | os.PathLike[str]) -> LoadResult:
    """Load a checkpoint file into a network (TroubleShooter's name; any framework a plugin knows).

    :return: what was loaded and the names that did not fit.
    :raises CheckpointReadError: naming ``file`` when it cannot be read.
    """
    from tscore.checkpoint.net_weights import load_weights_into

    return load_weights_into(model, file)


def object_dump(obj: Any, file: str | os.PathLike[str]) -> None:
    """Write ``obj`` (dicts, lists, strings, numbers) to ``file`` as JSON, atomically.

    :raises TypeError: when ``obj`` holds what JSON cannot (an array, an object).
    :raises TargetPathError: naming ``file`` when it cannot be written.
    """
    from tscore.npy_files import write_atomic

    text = json.dumps(obj).encode("utf-8")  # a TypeError here leaves no file
    write_atomic(os.fspath(file), lambda stream: stream.write(text))


def object_load(file: str | os.PathLike[str]) -> Any:
    """Read back what :func:`object_dump` wrote: JSON only, never a pickle (which could run code).

    :raises ObjectFileError: naming ``file`` when it is missing or not JSON.
    """
    from tscore.json_files import read_json

    return read_json(file, "object file", ObjectFileError, "write one with object_dump")


def loss_compare(
    left_file: Any, right_file: Any, title: str = "Loss Compare", **kwargs: Any
) -> LossCompareReport:
    """Compare the loss curves of two training logs: :func:`tscore.loss_compare.loss_compare`.

    :param left_file: ``{"path": log, "loss_tag": "lm loss:", "label": "torch"}``, as in TroubleShooter.
    """
    from tscore.loss_compare import loss_compare as compare

    return compare(left_file, right_file, title, **kwargs)


def save_convert(file: str | os.PathLike[str], output_path: str | os.PathLike[str]) -> list[ConvertedTensor]:
    """Turn the text a run printed with ``ts.save(..., output_mode="print")`` into ``.npy`` files.

    Reads tscore's prints, MindSpore's own ``ops.print_`` screen output, and MindSpore's binary
    print files (``print_file_path`` on Ascend, through the MindSpore plugin), after
    TroubleShooter's marker; each tensor becomes ``{n}_{name}.npy`` (n counting from 0), as TroubleShooter's
    ``save_convert`` names them. A tensor cut short or summarised by the print is a row with
    its error; the others are written.

    :return: one row per tensor printed: its name, file, shape and dtype, or its error.
    """
    from tscore.printed_tensors import convert_printed

    return convert_printed(file, output_path)


def precision_tracker(
    pb_file: str | os.PathLike[str], precision_flags: Any = ("normal", "raise", "reduce"), **kwargs: Any
) -> list[dict[str, Any]]:
    """List a saved graph's operators by precision flag in a CSV (:mod:`tscore.precision_tracker`).

    :param kwargs: ``output_path`` and ``output_filename``, as in TroubleShooter.
    """
    from tscore.precision_tracker import precision_tracker as track

    return track(pb_file, precision_flags, **kwargs)
