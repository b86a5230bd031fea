"""Fixing every source of randomness a training step may draw on."""

from __future__ import annotations

import logging
import os

from tscore.plugins import hook

log = logging.getLogger(__name__)


def seed_all(seed: int = 1234, mode: bool = False) -> list[str]:
    """Seed Python's ``random``, numpy and every installed framework.

    Same name and defaults as ptdbg_ascend's ``seed_all``. Every plugin seeds
    its own framework (importing it if it is installed); ``PYTHONHASHSEED``
    is set for child processes.

    :param seed: the seed, a non-negative integer.
    :param mode: also switch on deterministic algorithms
        (``torch.use_deterministic_algorithms``, ``mindspore.set_deterministic``).
    :return: the names of the frameworks that were seeded.
    :raises ValueError: for a negative or non-integer seed.
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed_all: seed must be a non-negative int, got {seed!r}")
    os.environ["PYTHONHASHSEED"] = str(seed)
    seeded = [name for name in hook().ts_seed_all(seed=seed, deterministic=bool(mode)) if name]
    log.info("seeded %s with %d (deterministic=%s)", ", ".join(seeded), seed, bool(mode))
    return seeded
