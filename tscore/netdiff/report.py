"""The difference finder's report as data, and its rendering as TroubleShooter's three stages.

:class:`NetDiffReport` holds the weight stages, one row per network output
per case, one row per paired layer call when the layers were located, the
layers whose settings differ, and ``first_divergence``: the layer a person
should look at first. ``verdict()`` is the one line to act on.
"""

from __future__ import annotations

import enum
import os
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, computed_field
from tabulate import tabulate

from tscore.checkpoint.layer_alignment import AMBIGUOUS, NAMES, STRUCTURE, alignment_table
from tscore.compare.pairs import PairResult, format_number
from tscore.compare.report import boxed, pair_table
from tscore.contract.settings import RunSetting
from tscore.netdiff.recording import RunFailure
from tscore.netdiff.weights import WeightStage
from tscore.run_settings import SettingDifference

if TYPE_CHECKING:
    from tscore.html_report.page import ReportPage

OUTPUT_TITLE = "The comparison results of Net"
LAYER_TITLE = "The comparison results of layers"
NO_TWIN = "no twin"  # the status shown for a layer that was called on one side and found no twin
SEPARATOR_WIDTH = 141


def separator(title: str, character: str = "=") -> str:
    """Centre ``title`` in a line of ``character``, as TroubleShooter marks its stages."""
    return f" {title} ".center(SEPARATOR_WIDTH, character)


def short(value: float | None) -> str:
    """Write a number for a sentence: ``2.0``, ``0.000153``, ``1.5e+08``."""
    if value is None:
        return "-"
    text = f"{value:.3g}"
    return text if any(c in text for c in ".en") else text + ".0"


class LayerStatus(str, enum.Enum):
    """What the comparison of one paired layer call found."""

    OK = "ok"  # the outputs agree
    DIVERGES = "diverges"  # given the same inputs, the target layer computes something else
    INHERITS = "inherits"  # the outputs differ only because the inputs already did
    CONTAINS = "contains"  # a layer inside it diverges
    UNKNOWN = "unknown"  # the outputs differ and the layer could not be replayed
    NOT_CALLED = "not_called"  # called on one side only, or a different number of times


Labels = tuple[str, str]


class SettingDiff(BaseModel):
    """One setting of a paired layer that differs (neutral meaning, see ``ts_named_layers``)."""

    name: str
    orig: Any
    target: Any

    def text(self, labels: Labels = ("orig", "target")) -> str:
        """``eps torch (cpu) 1e-05, mindspore (CPU) 1e-07``."""
        return f"{self.name} {labels[0]} {self.orig}, {labels[1]} {self.target}"


def layer_label(orig_path: str, target_path: str, call: int, orig_type: str, target_type: str) -> str:
    """Write ``features.3 (MaxPool2d / MaxPool2d)`` with both paths when they differ."""
    path = orig_path or "(root)"
    if target_path != orig_path:
        path = f"{path} / {target_path or '(root)'}"
    shown_call = f" call {call}" if call else ""
    return f"{path}{shown_call} ({orig_type} / {target_type})"


class LayerRow(BaseModel):
    """One call of a paired layer: output metrics, error of its own and error inherited through its inputs."""

    model_config = ConfigDict(ser_json_inf_nan="strings")

    orig_path: str
    target_path: str
    orig_type: str
    target_type: str
    call: int = Field(default=0, description="the layer's n-th call in the run")
    paired_by: str
    status: LayerStatus
    output: PairResult | None = Field(default=None, description="the output leaf that agrees least")
    own: PairResult | None = Field(
        default=None, description="the target layer replayed on the orig layer's inputs"
    )
    own_error: float | None = Field(default=None, description="largest |difference| of the replayed output")
    inherited_error: float | None = Field(default=None, description="largest |difference| of the inputs")
    settings: list[SettingDiff] = Field(default_factory=list)
    note: str = ""

    @property
    def differs(self) -> bool:
        """Whether this call's outputs differ where the layer itself may be the cause."""
        return self.status not in (LayerStatus.OK, LayerStatus.CONTAINS)

    def label(self) -> str:
        """``features.3 (MaxPool2d / MaxPool2d)``, both paths when they differ."""
        return layer_label(self.orig_path, self.target_path, self.call, self.orig_type, self.target_type)


class Divergence(BaseModel):
    """The first layer that computes differently from its twin, given the same inputs."""

    model_config = ConfigDict(ser_json_inf_nan="strings")

    orig_path: str
    target_path: str
    orig_type: str
    target_type: str
    call: int = 0
    own_error: float | None
    inherited_error: float | None
    where: str = Field(
        default="", description="for a layer whose own code diverges: between which of its layers"
    )
    shapes: str = Field(default="", description="when the outputs' shapes differ: both shapes")
    settings: list[SettingDiff] = Field(default_factory=list)
    paired_by: str = Field(default="", description="how the two layers were paired (see LayerPair)")
    unlocalised: str = Field(
        default="", description="why the difference could not be placed further inside it (unpaired layers)"
    )

    def line(self, labels: Labels = ("orig", "target")) -> str:
        """``first divergence: features.3 (MaxPool2d / MaxPool2d): own error 2.0, inherited 0.0``."""
        label = layer_label(self.orig_path, self.target_path, self.call, self.orig_type, self.target_type)
        own = f"output shapes differ, {self.shapes}" if self.shapes else f"own error {short(self.own_error)}"
        text = f"first divergence: {label}: {own}, inherited {short(self.inherited_error)}"
        if self.where:
            text += f"; in its own code, {self.where}"
        if self.unlocalised:
            text += f"; not localised further: {self.unlocalised}"
        if self.paired_by == AMBIGUOUS:
            text += (
                "; the two layers were paired by order among layers alike, which may be wrong: check the "
                "alignment table, or pass weight_map="
            )
        if self.settings:
            text += "; settings differ: " + ", ".join(s.text(labels) for s in self.settings)
        return text


class CaseRun(BaseModel):
    """One input case: how long each network took, or how it failed."""

    case: int
    inputs: str = Field(description="shapes and dtypes of the inputs")
    orig_seconds: float | None = None
    target_seconds: float | None = None
    failure: RunFailure | None = None


class NetDiffReport(BaseModel):
    """Everything ``NetDifferenceFinder.compare`` found."""

    model_config = ConfigDict(ser_json_inf_nan="strings")

    rtol: float
    atol: float
    equal_nan: bool
    orig_label: str = Field(default="orig", description="the first network: framework (device)")
    target_label: str = Field(default="target", description="the second network: framework (device)")
    weights: WeightStage | None = None
    cases: list[CaseRun] = Field(default_factory=list)
    outputs: list[PairResult] = Field(default_factory=list)
    located_case: int | None = Field(default=None, description="the case whose layers were compared")
    layers: list[LayerRow] = Field(default_factory=list)
    unpaired: dict[str, list[str]] = Field(
        default_factory=dict, description="per side ('orig', 'target'): layers that found no twin"
    )
    alignment: list[dict[str, str | None]] = Field(
        default_factory=list,
        description="when the layers' names differ: each weight-owning layer's twin and how it was found",
    )
    settings_differ: list[LayerRow] = Field(default_factory=list)
    run_settings: dict[str, list[RunSetting]] = Field(
        default_factory=dict, description="each side's settings that change numbers, by its label"
    )
    run_settings_differ: list[SettingDifference] = Field(default_factory=list)
    run_settings_note: str = Field(default="", description="whether those differences explain the outputs'")
    first_divergence: Divergence | None = None
    location_note: str = ""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def passed(self) -> bool:
        """True when every case ran and every output of every case is within tolerance."""
        return (
            bool(self.outputs)
            and all(case.failure is None for case in self.cases)
            and all(row.passed for row in self.outputs)
        )

    @property
    def labels(self) -> Labels:
        """The two sides' labels, ``("torch (cpu)", "mindspore (CPU)")``."""
        return self.orig_label, self.target_label

    def unpaired_count(self) -> str:
        """Say how many layers found no twin on each side, ``""`` when all did."""
        counts = [
            (len(self.unpaired.get(side, [])), label)
            for side, label in zip(("orig", "target"), self.labels, strict=True)
        ]
        if not any(n for n, _ in counts):
            return ""
        return "layers with no twin: " + ", ".join(f"{n} of {label}" for n, label in counts)

    def verdict(self) -> str:
        """Return the one line to act on."""
        failures = [case.failure.line() for case in self.cases if case.failure is not None]
        if failures:
            return f"{len(failures)} case(s) failed to run; the first: {failures[0]}"
        unpaired = self.unpaired_count()
        explained = f"; {self.run_settings_note}" if self.run_settings_note else ""
        if self.first_divergence is not None:
            line = self.first_divergence.line(self.labels)
            return (f"{line}; {unpaired} (rows 'no twin')" if unpaired else line) + explained
        settings = "; ".join(
            f"{row.label()}: " + ", ".join(s.text(self.labels) for s in row.settings)
            for row in self.settings_differ
        )
        if self.passed:
            if settings:
                return (
                    "outputs agree, but layer settings differ (they matter in training or on other inputs): "
                    + settings
                    + explained
                )
            return "outputs agree: no divergence" + explained
        text = "outputs differ; " + (self.location_note or "the layer was not located (pass locate=True)")
        text += f"; {unpaired}" if unpaired else ""
        return text + (f"; settings differ: {settings}" if settings else "") + explained

    def output_table(self, only_failed: bool = False) -> str:
        """TroubleShooter's table of the networks' outputs."""
        return pair_table(
            self.outputs,
            title=OUTPUT_TITLE,
            name_headers=(f"{self.orig_label} out", f"{self.target_label} out"),
            only_failed=only_failed,
        )

    def layer_table(self, only_failed: bool = False) -> str:
        """One row per paired layer call: status, output metrics, own and inherited error."""
        rows = []
        for row in self.layers:
            if only_failed and row.status is LayerStatus.OK and not row.settings:
                continue
            out = row.output
            rows.append(
                [
                    row.label(),
                    row.status.value,
                    "-" if out is None else str(out.allclose),
                    "-" if out is None else format_number(out.cosine),
                    "-" if out is None else format_number(out.max_abs_diff),
                    short(row.own_error) if row.own is not None else "-",
                    short(row.inherited_error),
                    "; ".join(filter(None, [row.note, *(s.text(self.labels) for s in row.settings)])),
                ]
            )
        for side, path in ((s, p) for s in ("orig", "target") for p in self.unpaired.get(s, [])):
            label = f"{path or '(root)'} / -" if side == "orig" else f"- / {path or '(root)'}"
            rows.append([label, NO_TWIN, "-", "-", "-", "-", "-", f"only in {self.labels[side == 'target']}"])
        headers = [
            f"layer ({self.orig_label} / {self.target_label})",
            "status",
            "allclose",
            "cosine",
            "max diff",
            "own",
            "inherited",
            "note",
        ]
        if not rows:
            return f"{LAYER_TITLE}: no layer to show"
        return boxed(LAYER_TITLE, tabulate(rows, headers=headers, tablefmt="pretty", colalign=("left",)))

    def render(self, print_level: int = 1) -> str:
        """Render the three stages and the located layers as ``print_level`` asks (1: all, 2: differences)."""
        only = print_level == 2
        parts: list[str] = []
        if self.weights is not None:
            if self.weights.conversion is not None:
                parts += [
                    separator(f"Start Converting {self.orig_label} Weights to {self.target_label}"),
                    self.weights.conversion.table(),
                ]
            if self.weights.comparison is not None:
                parts += [
                    separator(f"Start comparing {self.orig_label} and {self.target_label} parameters"),
                    self.weights.comparison.table(only_diff=only),
                ]
            parts.append(self.weights.verdict())
        parts.append(separator("Start Performing Network Inference"))
        for case in self.cases:
            if case.failure is not None:
                parts.append(f"case {case.case} ({case.inputs}): {case.failure.line()}")
            elif not only:
                parts.append(
                    f"case {case.case} ({case.inputs}): {self.orig_label} {case.orig_seconds:.5f} s, "
                    f"{self.target_label} {case.target_seconds:.5f} s"
                )
        if self.outputs and not (only and self.passed):
            parts.append(self.output_table(only_failed=only))
        moved = [m for m in self.alignment if m.get("how") != NAMES]
        if moved and not (only and all(m.get("how") == STRUCTURE for m in moved)):
            parts += [
                separator("Pairing the layers whose names differ"),
                alignment_table(self.alignment, self.labels),
            ]
        if self.layers:
            parts += [
                separator(f"Comparing every layer (case {self.located_case})"),
                self.layer_table(only_failed=only),
            ]
        parts.append(self.verdict())
        return "\n".join(parts)

    def to_html(self, path: str | os.PathLike[str], metric: str | None = None) -> str:
        """Write this report as one self-contained HTML page (:mod:`tscore.html_report`); return the path.

        :param metric: the error metric charted first (``max_rel``, ``cosine_distance``, ``max_abs``).
        :raises TargetPathError: naming the path, when its folder is missing or not writable.
        """
        from tscore.html_report import write_html

        return write_html(self, path, metric)

    def to_page(self) -> ReportPage:
        """Return this report's page data, which :mod:`tscore.html_report` renders."""
        from tscore.netdiff.report_page import netdiff_page

        return netdiff_page(self)

    def to_json(self, indent: int | None = 2) -> str:
        """Render the whole report as JSON."""
        return self.model_dump_json(indent=indent)
