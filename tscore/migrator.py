"""``ts.migrator``: the functions TroubleShooter users call to compare a migration.

Comparing saved tensors and gradients folder by folder (``compare_npy_dir``,
``compare_grads_dir``) and pairing their files (``get_name_map_list_by_*``).
"""

from __future__ import annotations

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

__all__ = [
    "CompareReport",
    "PairResult",
    "PairStatus",
    "compare_arrays",
    "compare_grads_dir",
    "compare_npy_dir",
    "get_name_map_list_by_name",
    "get_name_map_list_by_number",
    "get_name_map_list_by_shape_edit_distance",
]
