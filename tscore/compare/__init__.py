"""The compare engine: folders of ``.npy`` files or in-memory arrays, pair by pair.

See :mod:`tscore.compare.engine` for the flow, :mod:`tscore.compare.pair_stats`
for what each metric means, and :mod:`tscore.compare.name_maps` for how files
are paired.
"""

from __future__ import annotations

from tscore.compare.engine import (
    compare_arrays,
    compare_dict_dir,
    compare_grads_dir,
    compare_list_dir,
    compare_npy_dir,
)
from tscore.compare.name_maps import (
    get_name_map_list_by_name,
    get_name_map_list_by_number,
    get_name_map_list_by_shape_edit_distance,
)
from tscore.compare.npy_layout import NpyReadError
from tscore.compare.pairs import PairResult, PairStatus
from tscore.compare.report import CompareReport

__all__ = [
    "CompareReport",
    "NpyReadError",
    "PairResult",
    "PairStatus",
    "compare_arrays",
    "compare_dict_dir",
    "compare_grads_dir",
    "compare_list_dir",
    "compare_npy_dir",
    "get_name_map_list_by_name",
    "get_name_map_list_by_number",
    "get_name_map_list_by_shape_edit_distance",
]
