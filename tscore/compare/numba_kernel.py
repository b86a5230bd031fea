"""The compare kernel compiled with numba: one pass over the data instead of a dozen.

Installed with ``pip install tscore[fast]``. The numpy kernel makes about
twelve passes over float64 copies of each chunk; this one reads each element
once, converts it to float64 in a register and updates every sum, so it runs
near memory speed. It follows exactly the conventions of
:mod:`tscore.compare.pair_stats`, and the tests run every metric through both
kernels. numba is imported only when a comparison first asks for it.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import sys
from collections.abc import Callable

import numpy as np

from tscore.compare.pair_stats import ACCUMULATOR_FIELDS, PairStats, from_accumulator

logger = logging.getLogger(__name__)

# dtypes numba converts to float64 element by element (it has no float16 arithmetic).
SUPPORTED_KINDS = "biuf"
_UNSUPPORTED = (np.dtype(np.float16), np.dtype(np.longdouble))


def installed() -> bool:
    """Say whether numba can be imported (without importing it)."""
    return importlib.util.find_spec("numba") is not None


def supports(dtype: np.dtype) -> bool:
    """Say whether the compiled kernel reads arrays of ``dtype``."""
    return dtype.kind in SUPPORTED_KINDS and dtype not in _UNSUPPORTED and dtype.isnative


def loaded() -> bool:
    """Say whether this process has already loaded the compiled kernel."""
    return "tscore.compare.numba_loops" in sys.modules


@functools.cache
def load_error() -> str | None:
    """Load the compiled loops once; return why they cannot be used, or None when they can."""
    if not installed():
        return "numba is not installed: pip install 'tscore[fast]'"
    try:
        _compiled()
    except Exception as exc:  # numba raises many kinds: no cache folder, LLVM errors, ...
        logger.warning("the numba compare kernel cannot load (%s); using numpy", exc)
        return f"numba cannot load the compare kernel: {exc}"
    return None


@functools.cache
def _compiled() -> Callable[..., None]:
    from tscore.compare import numba_loops  # imports numba: only here, on first use

    logger.debug("loaded the numba compare kernel")
    return numba_loops.accumulate  # type: ignore[no-any-return]


def numba_stats(a: np.ndarray, b: np.ndarray, rtol: float, atol: float, equal_nan: bool) -> PairStats:
    """Compare two 1-d arrays of equal length in one compiled pass.

    Integer counts come back through a float64 array, exact up to 2**53
    elements.
    """
    out = np.zeros(len(ACCUMULATOR_FIELDS))
    if a.size:
        _compiled()(a, b, float(rtol), float(atol), bool(equal_nan), out)
    return from_accumulator(int(a.size), out)
