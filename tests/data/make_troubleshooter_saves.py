"""Regenerate what TroubleShooter 1.0.18 itself wrote and computed, in ``tests/data/troubleshooter_1.0.18``.

Run from the repository root, in TroubleShooter's environment (``nox -s bench_compare`` makes it)::

    .nox/troubleshooter-1.0.18/bin/python tests/data/make_troubleshooter_saves.py

The calls are those of ``SAVES`` below, with torch tensors made from fixed numbers; the same calls
made with ``tscore.save`` write spec 003's names, and the tests pair the two folders. TroubleShooter
1.0.18 gives one id per element and joins keys with dots (``0_l.0.npy``, ``1_l.1.npy``,
``2_d.x.npy``, ``4_ls.0_bw.npy``), where spec 003 writes ``0_l_0.npy``, ``0_l_1.npy``,
``1_d_x.npy``, ``2_ls_0_bw.npy``.

``cosine.json`` holds what TroubleShooter's ``cal_cosine_sim`` returns for each pair of
:func:`cosine_cases` (NaN written as null).
"""

from __future__ import annotations

import json
import math
import os
import shutil

import numpy as np

ROOT = os.path.join("tests", "data", "troubleshooter_1.0.18")
FOLDER = os.path.join(ROOT, "saves")


def values() -> dict[str, np.ndarray]:
    """The arrays saved, by the name the tests give them (the tests build the same)."""
    return {
        "a": np.arange(6, dtype=np.float32).reshape(2, 3),
        "b": np.linspace(-1, 1, 4, dtype=np.float32),
        "x": np.full((3,), 0.5, dtype=np.float32),
        "y": np.array([[1.0, -2.0]], dtype=np.float32),
    }


def cosine_cases() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Pairs of arrays whose cosine similarity is checked against TroubleShooter's."""
    rng = np.random.default_rng(1)
    return {
        "random": (rng.standard_normal(50), rng.standard_normal(50)),
        "close": (np.arange(1.0, 7.0), np.arange(1.0, 7.0) * 1.001 + 0.01),
        "zeros": (np.zeros(4), np.zeros(4)),
        "one_zero": (np.zeros(4), np.ones(4)),
        "matrix": (rng.standard_normal((3, 4)), rng.standard_normal((3, 4))),
        "opposite": (np.arange(1.0, 5.0), -np.arange(1.0, 5.0)),
        # where tscore deliberately differs: NaN and inf left out, tiny norms not taken for zero
        "nan": (np.array([1.0, np.nan, 3.0]), np.array([1.0, np.nan, 3.0])),
        "inf": (np.array([1.0, np.inf, 3.0]), np.array([1.0, np.inf, 3.5])),
        "tiny": (np.array([1e-20, 2e-20]), np.array([2e-20, 1e-20])),
    }


def main() -> None:
    """Save a list, a dict and a suffixed list with TroubleShooter 1.0.18, in a fresh folder."""
    import torch
    import troubleshooter as ts

    arrays = {k: torch.from_numpy(v) for k, v in values().items()}
    shutil.rmtree(FOLDER, ignore_errors=True)
    os.makedirs(FOLDER)
    ts.migrator.save(os.path.join(FOLDER, "l"), [arrays["a"], arrays["b"]])
    ts.migrator.save(os.path.join(FOLDER, "d"), {"x": arrays["x"], "y": arrays["y"]})
    ts.migrator.save(os.path.join(FOLDER, "ls"), [arrays["a"]], suffix="bw")
    print(sorted(os.listdir(FOLDER)))
    from troubleshooter.migrator import cal_cosine_sim

    found = {}
    for key, (a, b) in cosine_cases().items():
        value = cal_cosine_sim(a, b)
        found[key] = None if math.isnan(value) else value
    with open(os.path.join(ROOT, "cosine.json"), "w", encoding="utf-8") as stream:
        json.dump(found, stream, indent=1)


if __name__ == "__main__":
    main()
