"""Two torch.distributed (gloo) ranks saving into one folder: each rank writes ``rank{r}/``, nothing lost.

Real processes joined by a real gloo process group; the compare functions take the parent folder.
"""

from __future__ import annotations

import sys
import textwrap

import numpy as np

import tscore as ts
from tests.conftest import run_together

RANK = textwrap.dedent(
    """
    import sys
    import torch
    import torch.distributed as dist
    import tscore as ts
    rank, store, folder, scale = int(sys.argv[1]), sys.argv[2], sys.argv[3], float(sys.argv[4])
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    for step in range(20):
        x = torch.full((3,), rank * 1000.0 + step) * scale
        ts.save(folder + "/x", x)
        g = ts.save_grad(folder + "/g", x.clone().requires_grad_())
        g.sum().backward()
    dist.barrier()
    dist.destroy_process_group()
    """
)


def _run_job(tmp_path, name: str, scale: float) -> str:
    folder = str(tmp_path / name)
    store = str(tmp_path / f"{name}.store")
    run_together([[sys.executable, "-c", RANK, str(rank), store, folder, str(scale)] for rank in (0, 1)], 180)
    return folder


def test_each_rank_saves_into_its_own_folder_and_the_parents_compare_rank_by_rank(tmp_path):
    first = _run_job(tmp_path, "a", 1.0)
    for rank in (0, 1):
        folder = tmp_path / "a" / f"rank{rank}"
        values = sorted(float(np.load(folder / f"{2 * step}_x.npy")[0]) for step in range(20))
        assert values == [rank * 1000.0 + step for step in range(20)]
        assert sorted(p.name for p in folder.glob("*_g_backward.npy")) == sorted(
            f"{2 * step + 1}_g_backward.npy" for step in range(20)
        )
    assert not list((tmp_path / "a").glob("*.npy"))  # nothing written beside the rank folders

    same = ts.migrator.compare_npy_dir(first, first, print_level=0)
    assert len(same.pairs) == 80 and same.passed
    assert same.pairs[0].orig_name == "rank0/0_x.npy" and same.pairs[-1].orig_name.startswith("rank1/")

    second = _run_job(tmp_path, "b", 1.5)  # a second job whose values differ
    differ = ts.migrator.compare_npy_dir(first, second, print_level=0)
    failed = {p.orig_name for p in differ.pairs if not p.passed}
    assert {name.split("/")[0] for name in failed} == {"rank0", "rank1"}
    assert all("_x" in name for name in failed if name != "rank0/0_x.npy")
    assert differ.pairs[0].orig_name == "rank0/0_x.npy" and differ.pairs[0].passed  # 0 * 1.5 == 0
