"""A network and its weights on disk, for a network of any framework whose plugin is installed.

TroubleShooter's ``load_ms_weight2net``, ``convert_weight_and_load`` and
``save_net_and_weight_params``. Weights go in and out through the plugins (``ts_model_state``,
``ts_load_model_state``, the checkpoint hooks), so nothing here imports a
framework. Loading returns what fit and what did not
(:class:`tscore.netdiff.weights.LoadResult`) instead of failing on the first
name: a network that got only part of its weights says which part.
"""

from __future__ import annotations

import logging
import os

from tscore.checkpoint.convert import convert_params
from tscore.checkpoint.files import KIND_FRAMEWORK, load_checkpoint, save_checkpoint, suffix_kinds
from tscore.checkpoint.migration import TROUBLESHOOTER_TARGET, PathLike, _weight_map, get_weight_map
from tscore.errors import TargetPathError, TscoreError
from tscore.models import model_info
from tscore.netdiff.weights import LoadResult, load_into, model_state
from tscore.npy_files import write_atomic

log = logging.getLogger(__name__)


def load_weights_into(model: object, file: PathLike, *, trust_pickle: bool = False) -> LoadResult:
    """Load a checkpoint file of any format a plugin reads into ``model``, name by name.

    TroubleShooter's ``load_ms_weight2net(model, file)``, for any framework's network.

    :param trust_pickle: let a torch file unpickle arbitrary objects; only for trusted files.
    :return: what was loaded, and the names that did not fit (logged too).
    :raises CheckpointReadError: naming ``file`` when it cannot be read.
    :raises UnsupportedObjectError: when no plugin knows ``model``.
    """
    label = model_info(model, "model").label()
    contents = load_checkpoint(file, trust_pickle=trust_pickle)
    return load_into(model, contents.params, label, os.fspath(file))


def convert_weight_and_load(
    weight_map_path: PathLike | None,
    pt_file_path: PathLike,
    net: object,
    *,
    weight_map: object = None,
    trust_pickle: bool = False,
) -> LoadResult:
    """Convert a checkpoint through a weight map and load it into ``net``, with no file in between.

    TroubleShooter writes a temporary ``.ckpt`` and loads it; the converted arrays go straight
    into the network here.

    :param weight_map_path: the JSON map of :func:`get_weight_map` (or ``weight_map=``).
    :param pt_file_path: the source checkpoint (``.pth``, ``.ckpt``, ``.safetensors``, ...).
    :param net: the network to load, of the map's target framework.
    :return: what was loaded and what did not fit.
    :raises WeightMapError: when the map does not name exactly the file's entries.
    """
    mapping = _weight_map(weight_map_path, weight_map, "convert_weight_and_load")
    contents = load_checkpoint(pt_file_path, trust_pickle=trust_pickle)
    params, _ = convert_params(contents, mapping)
    label = model_info(net, "net").label()
    return load_into(net, params, label, os.fspath(pt_file_path), keep=mapping.target_only)


def save_net_and_weight_params(
    net: object, path: PathLike | None = None, weight_params_filename: str | None = None
) -> dict[str, str]:
    """Save a network's weights, its printed structure and (for a source network) its weight map.

    TroubleShooter's files, for a network of framework ``fw``: ``{fw}_troubleshooter_create``
    with the framework's checkpoint suffix (``.pth``, ``.ckpt``, else ``.safetensors``; or
    ``weight_params_filename``, written in that format whatever its suffix),
    ``{fw}_net_architecture.txt``, and, for a network of another framework than MindSpore
    (TroubleShooter's target), ``{fw}_net_map.json`` from :func:`get_weight_map` when the
    MindSpore plugin is installed (a warning says why not otherwise).

    :param path: the folder, created if missing (default: the current folder).
    :return: ``{"weights": file, "architecture": file[, "weight_map": file]}``.
    :raises UnsupportedObjectError: naming ``net`` when no plugin knows it.
    """
    framework = model_info(net, "net").framework
    folder = os.fspath(path) if path is not None else os.getcwd()
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
    except OSError as exc:
        raise TargetPathError(f"save_net_and_weight_params: cannot create {folder!r}: {exc}") from exc
    kind, suffix = _own_format(framework)
    name = weight_params_filename or f"{framework}_troubleshooter_create{suffix}"
    path = os.path.join(folder, name)
    weights = save_checkpoint(model_state(net, "net"), path, format=kind, framework=framework)
    written = {"weights": weights}
    text = str(net).encode("utf-8")
    architecture = os.path.join(folder, f"{framework}_net_architecture.txt")
    written["architecture"] = write_atomic(architecture, lambda stream: stream.write(text))
    if framework != TROUBLESHOOTER_TARGET:
        weight_map = os.path.join(folder, f"{framework}_net_map.json")
        try:
            get_weight_map(net, weight_map_save_path=weight_map)
            written["weight_map"] = weight_map
        except TscoreError as exc:  # the target's plugin is not installed: the rest is still saved
            log.warning("save_net_and_weight_params: no weight map written: %s", exc)
    log.info("saved the %s network's weights and structure in %s", framework, folder)
    return written


def _own_format(framework: str) -> tuple[str, str]:
    """Return the kind and suffix of ``framework``'s own checkpoints (``pth``, ``ckpt``); else safetensors.

    The weights are written in it whatever name the user gives them, as TroubleShooter does.
    """
    for suffix, kind in suffix_kinds().items():
        if KIND_FRAMEWORK.get(kind) == framework:
            return kind, suffix
    return "safetensors", ".safetensors"  # written by tscore itself, read by every framework
