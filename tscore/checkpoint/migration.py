"""TroubleShooter's weight-migration functions, with their names and arguments.

``get_weight_map``, ``convert_weight``, ``compare_ms_ckpt`` and
``compare_pth_and_ckpt``, plus ``convert_weight_to_pt`` for the way back.

They return data (a :class:`WeightMap`, a :class:`ConversionReport`, a
:class:`CheckpointDiff`) and print only as ``print_map``, ``print_conv_info``
or ``print_level`` ask.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

from tscore.checkpoint.ckpt_diff import CheckpointDiff, diff_checkpoints, diff_through_map, print_diff
from tscore.checkpoint.convert import ConversionReport, convert_checkpoint
from tscore.checkpoint.files import load_checkpoint, suffix_kinds
from tscore.checkpoint.weight_map import (
    WeightMap,
    build_weight_map,
    customise,
    load_weight_map,
    save_weight_map,
)
from tscore.compare.report import print_report
from tscore.contract.checkpoints import CheckpointContents
from tscore.errors import UnsupportedObjectError
from tscore.npy_files import writable_target
from tscore.tensors import to_numpy

log = logging.getLogger(__name__)

PathLike = str | os.PathLike[str]
# What TroubleShooter's get_weight_map(pt_net) maps to when no target is named.
TROUBLESHOOTER_TARGET = "mindspore"


def get_weight_map(
    pt_net: object = None,
    weight_map_save_path: PathLike | None = None,
    weight_name_prefix: str | None = None,
    custom_name_func: Callable[[dict[str, str]], Mapping[str, str]] | None = None,
    print_map: bool = False,
    *,
    pt_model: object = None,
    ms_net: object = None,
    target: str | None = None,
) -> WeightMap:
    """Map every state-dict entry of a network to its name and layout in another framework.

    TroubleShooter's call, ``get_weight_map(pt_net=torch_net)``, maps a torch
    network to MindSpore's names. Any installed backend works on either side:
    the source is ``pt_net``'s framework, the target ``ms_net``'s (or
    ``target=``, a framework name); two networks of one framework map every
    name to itself.

    :param pt_net: the source network (``pt_model=`` is accepted too, as spec 003 writes it).
    :param weight_map_save_path: write the map there as JSON (its folder must exist).
    :param weight_name_prefix: put ``prefix.`` in front of every target name.
    :param custom_name_func: receives ``{source name: target name}`` and returns the dict to use.
    :param print_map: print the map as a table.
    :param ms_net: the target network, whose framework the map is for. Its layers are aligned
        with ``pt_net``'s: where their names differ, by structure (kind, parameter shapes, order),
        each pair saying how it was found (``WeightMap.alignment``); ambiguous pairs are marked.
    :param target: the target framework's name (``"mindspore"`` when neither this nor ``ms_net``
        is given, as in TroubleShooter).
    :return: the map; ``name_map, value_map = get_weight_map(...)`` works as in TroubleShooter.
    :raises TypeError: when no network is given.
    :raises UnsupportedObjectError: when no installed plugin claims a network.
    """
    net = pt_net if pt_net is not None else pt_model
    if net is None:
        raise TypeError("get_weight_map: pass the source network as pt_net= (or pt_model=)")
    if weight_name_prefix is not None and not isinstance(weight_name_prefix, str):
        raise TypeError(
            f"get_weight_map: weight_name_prefix must be a str, not {type(weight_name_prefix).__name__}"
        )
    if custom_name_func is not None and not callable(custom_name_func):
        raise TypeError("get_weight_map: custom_name_func must be a function")
    if target is None and ms_net is None:
        target = TROUBLESHOOTER_TARGET
    argument = "pt_net" if pt_net is not None else "pt_model"
    built = build_weight_map(net, target=target, target_model=ms_net, arguments=(argument, "ms_net"))
    weight_map = customise(built, weight_name_prefix, custom_name_func)
    if weight_map_save_path is not None:
        save_weight_map(weight_map, weight_map_save_path)
    if print_map:
        print_report(weight_map.table())
        if any(match.how != "names" for match in weight_map.alignment):
            print_report(weight_map.alignment_table())
    return weight_map


def _weight_map(weight_map_path: PathLike | None, weight_map: object, caller: str) -> WeightMap:
    if weight_map is not None:
        if isinstance(weight_map, WeightMap):
            return weight_map
        if isinstance(weight_map, (list, tuple)) and len(weight_map) == 2:
            return WeightMap(dict(weight_map[0]), dict(weight_map[1] or {}))
        raise TypeError(f"{caller}: weight_map must be what get_weight_map returned")
    if weight_map_path is None:
        raise TypeError(f"{caller}: pass weight_map_path, the JSON file written by get_weight_map")
    return load_weight_map(weight_map_path)


def _params_of(given: Mapping[str, Any], label: str) -> CheckpointContents:
    """Turn a user's loaded ``{name: tensor}`` into contents, skipping (and noting) what is not a tensor."""
    if not isinstance(given, Mapping):
        raise TypeError(f"{label} must be a dict of {{name: tensor}}, not {type(given).__name__}")
    out = CheckpointContents(path=label, format="dict")
    for name, value in given.items():
        try:
            out.params[str(name)] = to_numpy(value, copy=False)
        except UnsupportedObjectError:
            out.skipped[str(name)] = f"a {type(value).__name__}, not a tensor"
    return out


def _output_format(target: str, format: str | None, default: str, caller: str) -> str:
    """Pick the format to write: the one asked for, else the suffix's, else ``default``."""
    kinds = suffix_kinds()
    known = sorted(set(kinds.values()))
    if format is None:
        return kinds.get(os.path.splitext(target)[1].lower(), default)
    if format not in known:
        raise ValueError(f"{caller}: format must be one of {', '.join(known)}, not {format!r}")
    return format


def _check_output(path: PathLike | None, argument: str) -> str:
    if path is None:
        raise TypeError(f"pass {argument}, the file to write")
    return writable_target(path, argument)


def convert_weight(
    weight_map_path: PathLike | None = None,
    pt_file_path: PathLike | None = None,
    ms_file_save_path: PathLike | None = None,
    *,
    pth_para_dict: Mapping[str, Any] | None = None,
    print_conv_info: bool = True,
    format: str | None = None,
    weight_map: object = None,
    trust_pickle: bool = False,
    pt_param_dict: Mapping[str, Any] | None = None,
    print_save_path: bool = True,
    print_level: int | None = None,
) -> ConversionReport:
    """Convert a checkpoint through a weight map (TroubleShooter: torch to MindSpore; any pair the map names).

    :param weight_map_path: the JSON map from :func:`get_weight_map` (or pass ``weight_map=``).
    :param pt_file_path: the ``.pth``/``.pt`` file: a state dict, a dict holding
        one (``{"state_dict": ..., "epoch": 3}``), or with ``trust_pickle`` a
        whole pickled model. Non-tensor entries are skipped and listed.
    :param ms_file_save_path: the MindSpore file to write.
    :param pth_para_dict: an already loaded ``{name: tensor}`` instead of
        ``pt_file_path`` (``pt_param_dict=``, TroubleShooter's spelling, works too).
    :param print_conv_info: print the conversion table.
    :param format: the file format to write: ``"ckpt"``, ``"safetensors"``, or one a plugin
        writes (``"pdparams"``); by default the one ``ms_file_save_path``'s suffix names, else ``"ckpt"``.
    :param trust_pickle: let ``torch.load`` unpickle arbitrary objects; only for trusted files.
    :param print_level: as the compare functions take it: 0 prints no table, 1 or 2 the table
        (overrides ``print_conv_info``).
    :return: the conversion table as data.
    :raises WeightMapError: when the map does not name exactly the file's
        tensors (the first twenty of each kind are listed); nothing is written then.
    """
    if print_level is not None:
        if print_level not in (0, 1, 2):
            raise ValueError(f"convert_weight: print_level must be 0, 1 or 2, got {print_level!r}")
        print_conv_info = bool(print_level)
    given = pth_para_dict if pth_para_dict is not None else pt_param_dict
    target = _check_output(ms_file_save_path, "ms_file_save_path")
    format = _output_format(target, format, "ckpt", "convert_weight")
    mapping = _weight_map(weight_map_path, weight_map, "convert_weight")
    if given is not None:
        contents = _params_of(given, "pth_para_dict")
    elif pt_file_path is not None:
        contents = load_checkpoint(pt_file_path, trust_pickle=trust_pickle)
    else:
        raise TypeError("convert_weight: pass pt_file_path, or the loaded parameters as pth_para_dict=")
    report = convert_checkpoint(contents, target, mapping, format=format)
    if print_conv_info:
        print_report(report.table())
    if print_save_path:
        log.info(
            "the %s weights were converted for %s and saved to %s", mapping.source, mapping.target, target
        )
    return report


def convert_weight_to_pt(
    weight_map_path: PathLike | None = None,
    ms_file_path: PathLike | None = None,
    pt_file_save_path: PathLike | None = None,
    *,
    ms_para_dict: Mapping[str, Any] | None = None,
    print_conv_info: bool = True,
    format: str | None = None,
    weight_map: object = None,
    strict: bool = True,
) -> ConversionReport:
    """Convert a checkpoint back the other way through the same weight map (TroubleShooter: to torch).

    Entries the map dropped (BatchNorm's ``num_batches_tracked``) are not in
    the result; ``torch.nn.Module.load_state_dict`` fills them itself.

    :param format: ``"pth"`` (a state dict for ``torch.load``), ``"safetensors"``, or one a plugin
        writes; by default the one ``pt_file_save_path``'s suffix names, else ``"pth"``.
    :param strict: with ``False``, MindSpore entries the map does not name
        (optimizer moments, ``global_step``) are skipped instead of an error.
    """
    target = _check_output(pt_file_save_path, "pt_file_save_path")
    format = _output_format(target, format, "pth", "convert_weight_to_pt")
    mapping = _weight_map(weight_map_path, weight_map, "convert_weight_to_pt").inverse()
    if ms_para_dict is not None:
        contents = _params_of(ms_para_dict, "ms_para_dict")
    elif ms_file_path is not None:
        contents = load_checkpoint(ms_file_path)
    else:
        raise TypeError("convert_weight_to_pt: pass ms_file_path, or the loaded parameters as ms_para_dict=")
    report = convert_checkpoint(contents, target, mapping, format=format, strict=strict)
    if print_conv_info:
        print_report(report.table())
    return report


def _check_compare_args(print_level: int, rtol: float, atol: float) -> None:
    if print_level not in (0, 1, 2):
        raise ValueError(
            f"print_level must be 0 (print nothing), 1 (everything) or 2 (differences), not {print_level!r}"
        )
    if not (rtol >= 0 and atol >= 0):
        raise ValueError(f"rtol and atol must be >= 0, got rtol={rtol}, atol={atol}")


def compare_ms_ckpt(
    orig_file_path: PathLike | None,
    target_file_path: PathLike | None,
    *,
    compare_value: bool = True,
    print_level: int = 1,
    rtol: float = 1e-4,
    atol: float = 1e-4,
    equal_nan: bool = False,
    orig_ckpt_dict: Mapping[str, Any] | None = None,
    target_ckpt_dict: Mapping[str, Any] | None = None,
    weight_map_path: PathLike | None = None,
    weight_map: object = None,
) -> CheckpointDiff:
    """Compare two MindSpore checkpoints: a shape table, and a value table with ``compare_value``.

    Needs no MindSpore: ``.ckpt`` files are read with numpy. ``.safetensors``
    files work too.

    :param print_level: 0 prints nothing, 1 everything, 2 only the differences.
    :param orig_ckpt_dict: loaded parameters instead of ``orig_file_path`` (likewise ``target_ckpt_dict``).
    :param weight_map_path: the map of :func:`get_weight_map` (or ``weight_map=``): the orig
        checkpoint's entries are then shown under their source names (the torch names of a
        converted checkpoint), as TroubleShooter shows them.
    :return: both tables as data; ``.passed`` says whether everything agrees.
    """
    _check_compare_args(print_level, rtol, atol)
    sides = []
    for path, given, label in (
        (orig_file_path, orig_ckpt_dict, "orig_file_path"),
        (target_file_path, target_ckpt_dict, "target_file_path"),
    ):
        if given is not None:
            sides.append(_params_of(given, label.replace("file_path", "ckpt_dict")))
        elif path is not None:
            sides.append(load_checkpoint(path))
        else:
            raise TypeError(f"compare_ms_ckpt: pass {label}")
    shown = None
    if weight_map_path is not None or weight_map is not None:
        mapping = _weight_map(weight_map_path, weight_map, "compare_ms_ckpt")
        shown = {target: source for source, target in mapping.name_map.items() if target}
    diff = diff_checkpoints(
        sides[0],
        sides[1],
        orig_names=shown,
        compare_value=compare_value,
        rtol=rtol,
        atol=atol,
        equal_nan=equal_nan,
        progress=print_level > 0,
    )
    print_diff(diff, print_level)
    return diff


def compare_pth_and_ckpt(
    weight_map_path: PathLike | None,
    pt_file_path: PathLike,
    ms_file_path: PathLike,
    *,
    compare_value: bool = True,
    print_level: int = 1,
    rtol: float = 1e-4,
    atol: float = 1e-4,
    equal_nan: bool = False,
    weight_map: object = None,
    trust_pickle: bool = False,
) -> CheckpointDiff:
    """Compare a torch checkpoint with a MindSpore one through the weight map.

    The torch entries are renamed and reshaped in memory (no temporary file);
    the tables show the torch name next to the MindSpore name.

    :param print_level: 0 prints nothing, 1 everything, 2 only the differences.
    """
    _check_compare_args(print_level, rtol, atol)
    mapping = _weight_map(weight_map_path, weight_map, "compare_pth_and_ckpt")
    torch_side = load_checkpoint(pt_file_path, trust_pickle=trust_pickle)
    ms_side = load_checkpoint(ms_file_path)
    diff = diff_through_map(
        torch_side,
        ms_side,
        mapping,
        compare_value=compare_value,
        rtol=rtol,
        atol=atol,
        equal_nan=equal_nan,
        progress=print_level > 0,
    )
    print_diff(diff, print_level)
    return diff
