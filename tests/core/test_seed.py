import random

import numpy as np
import pytest

import tscore as ts


def test_seed_all_makes_python_and_numpy_repeat(monkeypatch):
    monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    seeded = ts.seed_all(7)
    first = (random.random(), np.random.rand(3).tolist())
    assert "numpy" in seeded
    ts.seed_all(7)
    assert (random.random(), np.random.rand(3).tolist()) == first
    ts.seed_all(8)
    assert (random.random(), np.random.rand(3).tolist()) != first
    import os

    assert os.environ["PYTHONHASHSEED"] == "8"


def test_default_seed_is_ptdbg_s_1234():
    ts.seed_all()
    a = np.random.rand()
    np.random.seed(1234)
    assert np.random.rand() == a


@pytest.mark.parametrize("bad", [-1, 1.5, "7", True])
def test_bad_seed_is_a_value_error(bad):
    with pytest.raises(ValueError, match="seed must be a non-negative int"):
        ts.seed_all(bad)
