"""``NetDifferenceFinder``: run two networks side by side on the same inputs; say where they part.

The two networks may belong to any installed backends, the same one
included: a torch network and its MindSpore port, two torch networks (a run
on two devices, before and after an upgrade), MindSpore and torch, torch and
PaddlePaddle. The first is the *orig* side, the second the *target* side;
each is labelled with its framework and device (``torch (cpu)``). The three
stages of TroubleShooter (weight conversion, weight comparison, inference
comparison) and then, when the outputs disagree or when asked, the layer
localisation of :mod:`tscore.netdiff.locate`.
"""

from __future__ import annotations

import logging
import math
import os
import time

from tscore.checkpoint.weight_map import WeightMap, build_weight_map, load_weight_map
from tscore.compare.engine import compare_arrays
from tscore.compare.pairs import PairResult, PairStatus
from tscore.compare.report import print_report
from tscore.contract.layers import LayerInfo
from tscore.contract.settings import RunSetting
from tscore.models import model_info
from tscore.netdiff.call_layouts import LayoutBook
from tscore.netdiff.inputs import Case, describe, input_cases
from tscore.netdiff.locate import locate, setting_diffs
from tscore.netdiff.pairing import LayerPair, in_call_order, pair_layers
from tscore.netdiff.recorded import RecordedNetwork
from tscore.netdiff.recording import (
    CallRecorder,
    NetRunError,
    changed_modes,
    layer_modes,
    record_run,
    run_hooked,
    run_network,
)
from tscore.netdiff.report import CaseRun, Labels, LayerRow, LayerStatus, NetDiffReport
from tscore.netdiff.weights import AUTO_CONV_MODES, identity_map, model_state, set_weights
from tscore.plugins import hook
from tscore.run_settings import explanation, settings_differences
from tscore.seeding import seed_all
from tscore.structures import pair_leaves

log = logging.getLogger(__name__)

PathLike = str | os.PathLike[str]


def _check_print_level(print_level: object) -> int:
    if print_level not in (0, 1, 2):
        raise ValueError(
            f"print_level must be 0 (print nothing), 1 (everything) or 2 (differences), not {print_level!r}"
        )
    return int(print_level)  # type: ignore[call-overload]


def _output_rows(
    case: int, orig_out: object, target_out: object, tol: tuple[float, float, bool], labels: Labels
) -> list[PairResult]:
    """Make one row per output leaf, paired by path (by order when the structures differ)."""
    rtol, atol, equal_nan = tol
    pairs, orig_only, target_only = pair_leaves(orig_out, target_out)
    rows = [
        compare_arrays(
            x, y, rtol, atol, equal_nan, orig_name=f"step_{case}_{a}", target_name=f"step_{case}_{b}"
        )
        for a, x, b, y in pairs
    ]
    for name, array in orig_only:
        rows.append(_one_sided(f"step_{case}_{name}", None, array.shape, f"only {labels[0]} returns it"))
    for name, array in target_only:
        rows.append(_one_sided(None, f"step_{case}_{name}", array.shape, f"only {labels[1]} returns it"))
    if not rows:
        rows.append(
            _one_sided(f"step_{case}_out", f"step_{case}_out", None, "neither network returned a tensor")
        )
    return rows


def _one_sided(
    orig: str | None, target: str | None, shape: tuple[int, ...] | None, message: str
) -> PairResult:
    return PairResult(
        orig_name=orig,
        target_name=target,
        status=PairStatus.MISSING,
        message=message,
        orig_shape=shape if orig else None,
        target_shape=shape if target else None,
    )


def _settings_rows(pairs: list[LayerPair]) -> list[LayerRow]:
    """Make a row for every paired layer whose settings differ, whether or not it ran."""
    rows = []
    for pair in pairs:
        diffs = setting_diffs(pair)
        if diffs:
            rows.append(
                LayerRow(
                    orig_path=pair.orig.path,
                    target_path=pair.target.path,
                    orig_type=pair.orig.type_name,
                    target_type=pair.target.type_name,
                    paired_by=pair.paired_by,
                    status=LayerStatus.OK,
                    settings=diffs,
                )
            )
    return rows


class NetDifferenceFinder:
    """Compare two networks on the same inputs; find the first layer that differs.

    Same arguments as TroubleShooter's class, plus ``weight_map``, ``fix_seed`` and ``locate``.
    TroubleShooter's names stay: ``pt_net`` is the first (orig) network and ``ms_net`` the
    second (target), whatever their frameworks.

    :param pt_net: the first network, of any framework whose plugin is installed
        (TroubleShooter: the ``torch.nn.Module``).
    :param ms_net: the second network (TroubleShooter: the ``mindspore.nn.Cell``; with
        ``auto_conv_ckpt=2``, an MSAdapter network).
    :param print_level: 0 prints nothing, 1 every stage, 2 only the differences.
    :param pt_params_path: a checkpoint to load into the first network before anything else
        (TroubleShooter's name; the finder keeps it as ``orig_params_path``).
    :param ms_params_path: a checkpoint to load into the second network; then nothing is
        converted or compared (kept as ``target_params_path``).
    :param auto_conv_ckpt: 1 (default) converts ``pt_net``'s weights through the weight map
        (renamed and reshaped only where the two frameworks store them differently) and
        loads them into ``ms_net``; 2 does the same with every name kept (MSAdapter networks,
        which keep torch's names); 0 leaves the weights as they are.
    :param compare_params: compare ``pt_net``'s weights with ``ms_net``'s own after loading,
        which checks that the structures match.
    :param weight_map: a :class:`WeightMap` or the path of a map file, instead of the one
        built from ``pt_net`` for ``ms_net``'s framework.
    :param fix_seed: the seed set before every forward (``None``: do not seed).
    :param locate: compare every layer when the outputs differ (``None``, the default),
        always (``True``) or never (``False``).
    """

    def __init__(
        self,
        pt_net: object,
        ms_net: object,
        print_level: int = 1,
        *,
        pt_params_path: PathLike | None = None,
        ms_params_path: PathLike | None = None,
        auto_conv_ckpt: int = 1,
        compare_params: bool = True,
        weight_map: WeightMap | PathLike | None = None,
        fix_seed: int | None = 16,
        locate: bool | None = None,
    ) -> None:
        """Check the arguments; nothing runs until :meth:`compare`."""
        if auto_conv_ckpt not in AUTO_CONV_MODES:
            raise ValueError(
                "auto_conv_ckpt must be 0 (no conversion), 1 (through the weight map) or 2 (same names, "
                f"MSAdapter), not {auto_conv_ckpt!r}"
            )
        if isinstance(ms_net, RecordedNetwork):
            raise TypeError(
                "ms_net is a recorded network: it can only be the first network (pt_net), whose layers are "
                "not replayed; record the other network instead, or pass them the other way round"
            )
        self.orig_info = model_info(pt_net, "pt_net")
        self.target_info = model_info(ms_net, "ms_net")
        for argument, net, info in (("pt_net", pt_net, self.orig_info), ("ms_net", ms_net, self.target_info)):
            if hook().ts_named_layers(model=net) is None:
                raise TypeError(
                    f"{argument} is a {info.framework} network, but the {info.framework} plugin cannot "
                    "list its layers, which the finder needs; update the plugin"
                )
        self.pt_net = pt_net
        self.ms_net = ms_net
        self.print_level = _check_print_level(print_level)
        self.orig_params_path = pt_params_path
        self.target_params_path = ms_params_path
        self.auto_conv_ckpt = auto_conv_ckpt
        self.compare_params = bool(compare_params)
        self.fix_seed = fix_seed
        self.locate = locate
        self._orders: list[CallRecorder | None] = [None, None]
        self._weight_map = (
            load_weight_map(weight_map) if isinstance(weight_map, (str, os.PathLike)) else weight_map
        )
        if self._weight_map is not None:
            self._weight_map.check_frameworks(
                self.orig_info.framework, self.target_info.framework, "pt_net and ms_net"
            )

    @property
    def labels(self) -> Labels:
        """How reports name the two sides: ``("torch (cpu)", "mindspore (CPU)")``.

        Two sides that would read the same (two torch networks on the CPU) are told apart as
        ``orig torch (cpu)`` and ``target torch (cpu)``.
        """
        orig, target = self.orig_info.label(), self.target_info.label()
        if orig == target:
            return f"orig {orig}", f"target {target}"
        return orig, target

    def weight_map(self) -> WeightMap:
        """Return the map that converts the weights and pairs the layers.

        Unless one was given, it is built for ``ms_net`` itself: where the layer names differ, the
        weight-owning layers are aligned by structure (``WeightMap.alignment`` says how each pair
        was found), so conversion, weight comparison and layer pairing all go through one map.
        """
        if self._weight_map is None:
            if self.auto_conv_ckpt == 2:
                state = model_state(self.pt_net, "pt_net")
                self._weight_map = identity_map(state, self.orig_info.framework, self.target_info.framework)
            else:
                self._weight_map = build_weight_map(
                    self.pt_net, target_model=self.ms_net, arguments=("pt_net", "ms_net")
                )
        return self._weight_map

    def _seed(self) -> None:
        if self.fix_seed is not None:
            seed_all(self.fix_seed)

    def _layers(self) -> tuple[list[LayerInfo], list[LayerInfo]]:
        """Both networks' layers, in the order they were called when a run was tracked (listed order else)."""
        layers = []
        for net, order in zip((self.pt_net, self.ms_net), self._orders, strict=True):
            listed = list(hook().ts_named_layers(model=net))
            layers.append(in_call_order(listed, order.first_calls()) if order is not None else listed)
        return layers[0], layers[1]

    def compare(
        self,
        inputs: object = None,
        auto_inputs: object = None,
        rtol: float = 1e-4,
        atol: float = 1e-4,
        equal_nan: bool = False,
        *,
        locate: bool | None = None,
    ) -> NetDiffReport:
        """Set the weights, run both networks on every case, compare the outputs, and locate a difference.

        :param inputs: a tuple of inputs (tensors of any framework, numpy arrays, ``.npy`` paths),
            or a list of such tuples for several cases.
        :param auto_inputs: ``((shape, dtype), ...)`` or ``{"input": ((shape, dtype), ...), "num": N}``:
            random inputs (floats standard normal, integers in ``[0, 10)``; a third element ``(low, high)``
            sets the range).
        :param rtol: relative tolerance, as ``numpy.allclose``.
        :param atol: absolute tolerance.
        :param equal_nan: count NaN against NaN as equal.
        :param locate: overrides the ``locate`` given to the constructor for this call.
        :return: the report; ``.passed`` is True when every output of every case is within tolerance.
        """
        if not (rtol >= 0 and atol >= 0):
            raise ValueError(f"rtol and atol must be >= 0, got rtol={rtol}, atol={atol}")
        cases = input_cases(inputs, auto_inputs, self.fix_seed or 0)
        labels = self.labels
        report = NetDiffReport(
            rtol=rtol, atol=atol, equal_nan=equal_nan, orig_label=labels[0], target_label=labels[1]
        )
        self._orders = [None, None]
        modes = [layer_modes(layers) for layers in self._layers()]
        mapping = self.weight_map() if (self.auto_conv_ckpt or self.compare_params) else None
        report.weights = set_weights(
            self.pt_net,
            self.ms_net,
            mapping,
            orig_params_path=self.orig_params_path,
            target_params_path=self.target_params_path,
            auto_conv_ckpt=self.auto_conv_ckpt,
            compare_params=self.compare_params,
            labels=labels,
            tolerances=(rtol, atol, equal_nan),
        )
        first_failing: int | None = None
        for index, case in enumerate(cases):
            run = self._run_case(index, case, report)
            if run is not None and first_failing is None and not all(r.passed for r in run):
                first_failing = index
        self._note_settings(report)
        wanted = self.locate if locate is None else locate
        target = first_failing
        if wanted and target is None:
            target = 0
        runs = None
        if wanted is not False and target is not None and report.cases[target].failure is None:
            runs = self._record(cases[target], report)
        self._orders = list(runs) if runs is not None else [None, None]
        orig_layers, target_layers = self._layers()
        pairs = pair_layers(orig_layers, target_layers, self.weight_map())
        if runs is None and cases and any(pair.paired_by == "order" for pair in pairs):
            self._orders = self._track_order(cases[0], report.labels)  # pairing by order needs the call order
            orig_layers, target_layers = self._layers()
            pairs = pair_layers(orig_layers, target_layers, self.weight_map())
        report.alignment = [match.to_dict() for match in self.weight_map().alignment]
        report.settings_differ = _settings_rows(pairs)
        if runs is not None and target is not None:
            self._locate(target, runs, pairs, (orig_layers, target_layers), report)
        self._check_modes(modes, report.labels)
        if self.print_level:
            print_report(report.render(self.print_level))
        return report

    def _note_settings(self, report: NetDiffReport) -> None:
        """Record each side's settings that change numbers; name those that differ and what they explain.

        The difference they are set against is the outputs' largest, by angle: sqrt(2 (1 - cosine)),
        the relative L2 difference of two outputs of equal length, which near-zero elements
        cannot blow up as they do an element's relative difference.
        """
        found = {}
        for label, info in zip(report.labels, (self.orig_info, self.target_info), strict=True):
            settings = hook().ts_run_settings(framework=info.framework, device=info.device)
            found[label] = [RunSetting.model_validate(s) for s in settings or ()]
        report.run_settings = found
        orig, target = ({label: [s.model_dump() for s in found[label]]} for label in report.labels)
        report.run_settings_differ = settings_differences(target, orig)
        if report.run_settings_differ:
            angles = [
                math.sqrt(max(0.0, 2 * (1 - row.cosine)))
                for row in report.outputs
                if row.cosine is not None and math.isfinite(row.cosine)
            ]
            report.run_settings_note = explanation(
                report.run_settings_differ, max(angles) if angles else None
            )

    def _check_modes(self, before: list[dict[str, bool | None]], labels: Labels) -> None:
        """Warn, naming the layers, when running a network left a layer in another mode than it had."""
        for label, modes, layers in zip(labels, before, self._layers(), strict=True):
            changed = changed_modes(modes, layer_modes(layers))
            if changed:
                log.warning(
                    "running the %s network left %d layer(s) in another mode: %s; its plugin's "
                    "ts_run_forward must give every layer its own mode back",
                    label,
                    len(changed),
                    ", ".join(changed[:5]),
                )

    def _run_case(self, index: int, case: Case, report: NetDiffReport) -> list[PairResult] | None:
        run = CaseRun(case=index, inputs=describe(case))
        report.cases.append(run)
        try:
            self._seed()
            began = time.perf_counter()
            orig_out = run_network(self.pt_net, case, report.orig_label)
            run.orig_seconds = time.perf_counter() - began
            self._seed()
            began = time.perf_counter()
            target_out = run_network(self.ms_net, case, report.target_label)
            run.target_seconds = time.perf_counter() - began
        except NetRunError as exc:
            run.failure = exc.failure
            log.warning("case %d: %s", index, exc)
            return None
        tol = (report.rtol, report.atol, report.equal_nan)
        rows = _output_rows(index, orig_out, target_out, tol, report.labels)
        report.outputs.extend(rows)
        return rows

    def _record(self, case: Case, report: NetDiffReport) -> tuple[CallRecorder, CallRecorder] | None:
        """Record every layer call of both networks on ``case``; None (the report says why) if one fails."""
        try:
            self._seed()
            _, orig_run = record_run(self.pt_net, case, report.orig_label)
            self._seed()
            _, target_run = record_run(self.ms_net, case, report.target_label)
        except NetRunError as exc:
            report.location_note = f"the layers could not be recorded: {exc}"
            return None
        return orig_run, target_run

    def _track_order(self, case: Case, labels: Labels) -> list[CallRecorder | None]:
        """Learn the order in which each network calls its layers, from a run whose hooks keep no values.

        A side whose layers cannot be hooked, or whose run fails, keeps the order its plugin lists.
        """
        orders: list[CallRecorder | None] = []
        for net, label in zip((self.pt_net, self.ms_net), labels, strict=True):
            tracker = CallRecorder(keep_values=False)
            try:
                self._seed()
                run_hooked(net, case, label, tracker)
                orders.append(tracker)
            except Exception as exc:  # pairing falls back to the listed order
                log.info(
                    "the %s network's call order is unknown (%s); its layers pair in listed order", label, exc
                )
                orders.append(None)
        return orders

    def _locate(
        self,
        index: int,
        runs: tuple[CallRecorder, CallRecorder],
        pairs: list[LayerPair],
        layers: tuple[list[LayerInfo], list[LayerInfo]],
        report: NetDiffReport,
    ) -> None:
        orig_run, target_run = runs
        tol = (report.rtol, report.atol, report.equal_nan)
        book = LayoutBook(*layers)
        found = locate(orig_run, target_run, pairs, layers[1], tol, report.labels, book)
        report.located_case = index
        report.layers = found.rows
        report.first_divergence = found.first
        report.location_note = found.note
        report.unpaired = found.unpaired
