"""Comparing the loss curves of two training runs from their logs: ``ts.widget.loss_compare``.

See :mod:`tscore.loss_compare.logs` for how a loss and its step are read from a
line, :mod:`tscore.loss_compare.compare` for the files written.
"""

from __future__ import annotations

from tscore.loss_compare.compare import compare_losses, loss_compare
from tscore.loss_compare.logs import LossLog, LossLogError, read_losses
from tscore.loss_compare.report import LossCompareReport

__all__ = ["LossCompareReport", "LossLog", "LossLogError", "compare_losses", "loss_compare", "read_losses"]
