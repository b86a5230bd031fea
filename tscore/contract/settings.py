"""A setting of a run that changes its numbers, as a backend reports it (``ts_run_settings``).

What two runs' settings explain is worked out above the contract, in
:mod:`tscore.run_settings`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class RunSetting(BaseModel):
    """One setting of a run on one device, as a backend reports it.

    :param name: the framework's own spelling (``torch.backends.cudnn.allow_tf32``).
    :param value: its value on that device (JSON: bool, number, string or None).
    :param meaning: what it does to the numbers, for a person.
    :param explains: the largest relative difference of outputs that a change of this setting
        alone can explain (0: it changes no number, only speed).
    """

    model_config = ConfigDict(frozen=True)

    name: str
    value: Any = None
    meaning: str = ""
    explains: float = 0.0
