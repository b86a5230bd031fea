"""Fill values: the largest float an attention mask writes where a position is masked.

HF's causal mask holds ``torch.finfo(float32).min`` (-3.4028235e38) where a
query may not look; mindtorch writes -3.40282e38. Subtracting two such
fills gives 3.45e32, a number no one can act on: near the largest float a
difference is relative, and two fills of one sign stand for the same thing
(masked). Shared by the finder (inputs compared element by element) and the
dump comparison (statistics).
"""

from __future__ import annotations

import numpy as np

# a finite value within this share of its dtype's largest is a fill (finfo.min in an attention mask)
FILL_SHARE = 0.5
LARGEST = {
    "float16": 65504.0,
    "bfloat16": 3.3895e38,
    "float32": 3.4028235e38,
    "float64": 1.7976931348623157e308,
}


def fill_limit(dtype: str | None) -> float:
    """Return the magnitude from which a finite value of ``dtype`` (a neutral name) is a fill."""
    return FILL_SHARE * LARGEST.get(dtype or "", LARGEST["float32"])


def both_filled(a: np.ndarray, b: np.ndarray, dtype_a: str | None, dtype_b: str | None) -> np.ndarray:
    """Say, element by element, where two arrays both hold a fill of one sign (the same mask).

    Each side is measured against its own dtype's largest value (a float16 run against a float32 one).
    """
    with np.errstate(invalid="ignore"):
        return (
            np.isfinite(a)
            & np.isfinite(b)
            & (np.abs(a) >= fill_limit(dtype_a))
            & (np.abs(b) >= fill_limit(dtype_b))
            & (np.sign(a) == np.sign(b))
        )
