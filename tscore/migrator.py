"""``ts.migrator``: the functions TroubleShooter users call to migrate and compare a network.

Comparing saved tensors and gradients folder by folder (``compare_npy_dir``,
``compare_grads_dir``, ``compare_list_dir``, ``compare_dict_dir``; ``cal_algorithm``
and ``cal_cosine_sim`` for two arrays) and pairing their files (``get_name_map_list_by_*``);
mapping, converting and comparing checkpoints (``get_weight_map``,
``convert_weight``, ``compare_ms_ckpt``, ``compare_pth_and_ckpt``,
``convert_weight_and_load``, ``save_net_and_weight_params``); running a
torch network and its MindSpore twin side by side and finding the first layer
that differs (``NetDifferenceFinder``; ``record_network`` and
``load_recorded_network`` when the two cannot share a process); TroubleShooter's ``api_dump_*``, deprecated
entries into :mod:`tscore.dump`.
"""

from __future__ import annotations

from tscore.checkpoint.ckpt_diff import CheckpointDiff
from tscore.checkpoint.convert import ConversionReport
from tscore.checkpoint.migration import (
    compare_ms_ckpt,
    compare_pth_and_ckpt,
    convert_weight,
    convert_weight_to_pt,
    get_weight_map,
)
from tscore.checkpoint.net_weights import convert_weight_and_load, save_net_and_weight_params
from tscore.checkpoint.weight_map import WeightMap, load_weight_map
from tscore.compare import (
    CompareReport,
    PairResult,
    PairStatus,
    compare_arrays,
    compare_dict_dir,
    compare_grads_dir,
    compare_list_dir,
    compare_npy_dir,
    get_name_map_list_by_name,
    get_name_map_list_by_number,
    get_name_map_list_by_shape_edit_distance,
)
from tscore.compare.algorithms import cal_algorithm, cal_cosine_sim
from tscore.dump.api_dump import api_dump_compare, api_dump_init, api_dump_start, api_dump_stop
from tscore.netdiff.finder import NetDifferenceFinder
from tscore.netdiff.recorded import RecordedNetwork, load_recorded_network, record_network
from tscore.netdiff.report import NetDiffReport

__all__ = [
    "CheckpointDiff",
    "CompareReport",
    "ConversionReport",
    "NetDiffReport",
    "NetDifferenceFinder",
    "RecordedNetwork",
    "PairResult",
    "PairStatus",
    "WeightMap",
    "api_dump_compare",
    "api_dump_init",
    "api_dump_start",
    "api_dump_stop",
    "cal_algorithm",
    "cal_cosine_sim",
    "compare_arrays",
    "compare_dict_dir",
    "compare_grads_dir",
    "compare_list_dir",
    "compare_ms_ckpt",
    "compare_npy_dir",
    "compare_pth_and_ckpt",
    "convert_weight",
    "convert_weight_and_load",
    "convert_weight_to_pt",
    "get_name_map_list_by_name",
    "get_name_map_list_by_number",
    "get_name_map_list_by_shape_edit_distance",
    "get_weight_map",
    "load_recorded_network",
    "record_network",
    "load_weight_map",
    "save_net_and_weight_params",
]
