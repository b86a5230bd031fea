"""The settings of a run that change its numbers, and what a difference between two runs' settings explains.

A backend reports them (``ts_run_settings``) for each device a dump or a
finder run used: TF32 for matrix products and convolutions, the float32
matrix-product precision, deterministic algorithms, cuDNN's benchmark mode,
autocast. Each setting carries what a person reads (``meaning``) and the
largest relative difference a change of it alone can explain (``explains``),
so the core compares two runs' settings without knowing any framework:
a CUDA run against a CPU run whose outputs differ by 5e-5 is told that TF32
explains up to 1e-3, and is not sent looking for a bug.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict


class SettingDifference(BaseModel):
    """A setting whose value differs between the two runs compared."""

    model_config = ConfigDict(frozen=True)

    name: str
    target: Any
    orig: Any
    target_where: str = ""  # the device (and framework) the target's value is for
    orig_where: str = ""
    meaning: str = ""
    explains: float = 0.0

    def line(self) -> str:
        """One line for people: the setting, both values and where, what it explains."""
        where_t = f" on {self.target_where}" if self.target_where else ""
        where_o = f" on {self.orig_where}" if self.orig_where else ""
        text = f"{self.name}: {self.target!r}{where_t}, {self.orig!r}{where_o}"
        if self.meaning:
            text += f" ({self.meaning})"
        if self.explains > 0:
            text += f"; explains relative differences up to {self.explains:.0e}"
        return text


SettingsByDevice = Mapping[str, Sequence[Mapping[str, Any]]]


def settings_differences(target: SettingsByDevice, orig: SettingsByDevice) -> list[SettingDifference]:
    """Name the settings whose values differ between two runs.

    :param target: ``{where: [setting, ...]}`` of one run, each setting a :class:`RunSetting`'s
        fields (as a dump's ``dump_info.json`` holds them); ``where`` names the framework and
        device (``torch cuda:0``).
    :param orig: the same for the other run.

    Each run is taken on the device it ran most on: the first ``where`` that is not a CPU
    when there is one (a GPU run also touches the CPU for its inputs). A setting one run
    does not report is not compared.
    """
    where_t, mine = _main_device(target)
    where_o, theirs = _main_device(orig)
    by_name = {s["name"]: s for s in theirs if "name" in s}
    found = []
    for setting in mine:
        other = by_name.get(setting.get("name", ""))
        if other is None or other.get("value") == setting.get("value"):
            continue
        found.append(
            SettingDifference(
                name=setting["name"],
                target=setting.get("value"),
                orig=other.get("value"),
                target_where=where_t,
                orig_where=where_o,
                meaning=str(setting.get("meaning") or other.get("meaning") or ""),
                explains=max(float(setting.get("explains") or 0), float(other.get("explains") or 0)),
            )
        )
    return found


def _main_device(settings: SettingsByDevice) -> tuple[str, Sequence[Mapping[str, Any]]]:
    if not settings:
        return "", ()
    accelerated = [w for w in settings if not w.endswith(" cpu") and w != "cpu"]
    where = (accelerated or list(settings))[0]
    return where, settings[where]


def explanation(differences: Iterable[SettingDifference], largest_relative: float | None) -> str:
    """Say whether the settings that differ explain the largest relative difference found.

    :param largest_relative: the largest relative difference of the values compared (NaN,
        None: not known).
    :returns: one sentence, or ``""`` when no setting that changes numbers differs.
    """
    numeric = [d for d in differences if d.explains > 0]
    if not numeric:
        return ""
    bound = max(d.explains for d in numeric)
    names = ", ".join(d.name for d in numeric)
    settings = f"the runs' settings differ ({names}), which explains relative differences up to {bound:.0e}"
    if largest_relative is None or not math.isfinite(largest_relative):
        return f"{settings}; the largest difference here could not be measured"
    if largest_relative <= bound:
        return (
            f"{settings}; the largest here, {largest_relative:.2g}, is within it: "
            "run both with the same settings before looking for a bug"
        )
    return f"{settings}; the largest here, {largest_relative:.2g}, is beyond what they explain"
