"""``ts.migrator``: the functions TroubleShooter users call to migrate and compare a network.

Comparing saved tensors and gradients folder by folder (``compare_npy_dir``,
``compare_grads_dir``) and pairing their files (``get_name_map_list_by_*``);
mapping, converting and comparing checkpoints (``get_weight_map``,
``convert_weight``, ``compare_ms_ckpt``, ``compare_pth_and_ckpt``); running a
torch network and its MindSpore twin side by side and finding the first layer
that differs (``NetDifferenceFinder``).
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
from tscore.checkpoint.weight_map import WeightMap, load_weight_map
from tscore.compare import (
    CompareReport,
    PairResult,
    PairStatus,
    compare_arrays,
    compare_grads_dir,
    compare_npy_dir,
    get_name_map_list_by_name,
    get_name_map_list_by_number,
    get_name_map_list_by_shape_edit_distance,
)
from tscore.netdiff.finder import NetDifferenceFinder
from tscore.netdiff.report import NetDiffReport

__all__ = [
    "CheckpointDiff",
    "CompareReport",
    "ConversionReport",
    "NetDiffReport",
    "NetDifferenceFinder",
    "PairResult",
    "PairStatus",
    "WeightMap",
    "compare_arrays",
    "compare_grads_dir",
    "compare_ms_ckpt",
    "compare_npy_dir",
    "compare_pth_and_ckpt",
    "convert_weight",
    "convert_weight_to_pt",
    "get_name_map_list_by_name",
    "get_name_map_list_by_number",
    "get_name_map_list_by_shape_edit_distance",
    "get_weight_map",
    "load_weight_map",
]
