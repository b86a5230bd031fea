"""In which layout to read each side of a paired layer call, so that values are compared axis by axis.

A backend declares the layout its layers compute in (``ts_layer_layout``):
torch's convolutions ``channels_first``, Paddle's
``Conv2D(data_format="NHWC")`` ``NHWC``. A layer that takes whatever it is
given (a ReLU, a container) declares nothing; its tensors are read in the
layout that makes its inputs line up with the other side's, chosen among
the layouts its network declares elsewhere, and by the values when several
line up. Where nothing is declared and the two sides' shapes are the same
axes in another order, the call is marked as one that cannot be compared:
the finder then says it cannot tell, and never names a layer from values
that are not in the same places.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tscore.contract.layers import LayerInfo
from tscore.dtypes import neutral_dtype
from tscore.fill_values import both_filled
from tscore.layouts import check_layout, for_rank, from_neutral, is_neutral, reordered, to_neutral
from tscore.netdiff.call_roles import RolePairs, pair_roles
from tscore.netdiff.recording import LayerCall
from tscore.plugins import hook
from tscore.structures import array_leaves


@dataclass(frozen=True)
class CallLayouts:
    """How to read one paired call: each side's layout (None: as the tensors are) and why.

    :ivar orig: the orig side's layout (``"NHWC"``, ``"channels_first"``) or None.
    :ivar target: the target side's.
    :ivar how: ``declared``, ``inferred`` (from the network's other layers and the values) or ``""``.
    :ivar unknown: set when the tensors cannot be compared: why.
    """

    orig: str | None = None
    target: str | None = None
    how: str = ""
    unknown: str = ""

    def read(self, array: np.ndarray, side: int) -> np.ndarray:
        """Return one side's array (0 orig, 1 target) in the neutral layout."""
        layout = self.orig if side == 0 else self.target
        axes = for_rank(layout, array.ndim) if layout else None
        return to_neutral(array, axes) if axes else array

    def into_target(self, array: np.ndarray) -> np.ndarray:
        """Return an orig array in the target side's layout (for replaying the target layer on it)."""
        neutral = self.read(array, 0)
        axes = for_rank(self.target, neutral.ndim) if self.target else None
        return from_neutral(neutral, axes) if axes else neutral

    def loses_order(self, orig_call: LayerCall, target_call: LayerCall) -> bool:
        """Say whether the call takes a tensor whose axes were moved and returns one no layout covers.

        A channels-last port's ``Flatten`` returns its values in another order than the channels-first
        original's: once merged, no layout can put them back, so those outputs cannot be compared.
        """
        for side, call in enumerate((orig_call, target_call)):
            layout = self.orig if side == 0 else self.target
            if not layout:
                continue
            moved = any(_moves(layout, x.ndim) for x in _leaves(call))
            if moved and any(
                x.ndim >= 2 and for_rank(layout, x.ndim) is None for x in array_leaves(call.output)
            ):
                return True
        return False

    def note(self) -> str:
        """Say how the tensors were read, for the layer's row; ``""`` when both are as given."""
        if self.unknown:
            return self.unknown
        shown = [layout for layout in (self.orig, self.target) if layout]
        if self.how != "inferred" or not shown:
            return ""
        return (
            f"read as {self.orig or 'given'} / {self.target or 'given'} (inferred from the network's layouts)"
        )


AS_GIVEN = CallLayouts()


def declared_layouts(layers: Sequence[LayerInfo], side: str) -> dict[str, str]:
    """Ask the backends for each layer's layout: ``{path: layout}`` for the layers that have one.

    :raises LayoutError: when a backend answers with something that is not a layout, naming it.
    """
    found: dict[str, str] = {}
    for layer in layers:
        answer = hook().ts_layer_layout(layer=layer.layer, kind=layer.kind)
        if answer is not None:
            what = f"the {side} layer {layer.path or '(root)'}'s layout (ts_layer_layout)"
            found[layer.path] = check_layout(answer, what)
    return found


def _moves(layout: str, rank: int) -> bool:
    axes = for_rank(layout, rank)
    return axes is not None and not is_neutral(axes)


def _leaves(call: LayerCall) -> list[np.ndarray]:
    return array_leaves((call.args, call.kwargs))


def _numeric(x: np.ndarray) -> bool:
    return x.dtype.kind in "biufV"


def _lines_up(left: list[np.ndarray], right: list[np.ndarray], layouts: CallLayouts) -> bool:
    return all(layouts.read(x, 0).shape == layouts.read(y, 1).shape for x, y in zip(left, right, strict=True))


def _reading(left: list[np.ndarray], right: list[np.ndarray], layouts: CallLayouts) -> tuple[object, ...]:
    """Say what ``layouts`` does to each tensor: the axes it moves on each side (None: none)."""

    def moved(layout: str | None, rank: int) -> str | None:
        axes = for_rank(layout, rank) if layout else None
        return axes if axes and not is_neutral(axes) else None

    return tuple(
        (moved(layouts.orig, x.ndim), moved(layouts.target, y.ndim)) for x, y in zip(left, right, strict=True)
    )


def _input_error(left: list[np.ndarray], right: list[np.ndarray], layouts: CallLayouts) -> float:
    """Give the largest |difference| of the inputs read in ``layouts`` (inf where one is not finite)."""
    largest = 0.0
    for x, y in zip(left, right, strict=True):
        a, b = layouts.read(x, 0), layouts.read(y, 1)
        if _numeric(a) and _numeric(b) and a.size:
            wide_a, wide_b = a.astype(np.float64), b.astype(np.float64)
            diff = np.abs(wide_a - wide_b)
            diff[both_filled(wide_a, wide_b, neutral_dtype(str(a.dtype)), neutral_dtype(str(b.dtype)))] = (
                0.0  # one mask, two spellings
            )
            largest = max(largest, float(np.nanmax(np.where(np.isfinite(diff), diff, np.inf))))
    return largest


def _permuted(
    left: list[np.ndarray], right: list[np.ndarray]
) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """Find the first pair of shapes that hold the same axes in another order (None: none)."""
    for x, y in zip(left, right, strict=True):
        if reordered(x.shape, y.shape):
            return x.shape, y.shape
    return None


def _candidates(declared: str | None, network: set[str]) -> list[str | None]:
    return [declared] if declared is not None else [None, *sorted(network)]


def call_layouts(
    orig_call: LayerCall,
    target_call: LayerCall,
    declared: tuple[str | None, str | None],
    network: tuple[set[str], set[str]],
    roles: RolePairs | None = None,
) -> CallLayouts:
    """Choose the layouts that make one paired call's tensors line up.

    :param declared: each side's declared layout for the called layer, None where it has none.
    :param network: each side's layouts declared by any of its layers (the candidates for one that
        declares nothing).
    """
    left, right = (roles or pair_roles(orig_call, target_call)).arrays()
    if not left:
        left, right = array_leaves(orig_call.output), array_leaves(target_call.output)
    if len(left) != len(right):
        return CallLayouts(*declared, how="declared")
    how = "declared" if None not in declared else "inferred"
    fitting = [
        CallLayouts(orig, target, how)
        for orig, target in itertools.product(
            _candidates(declared[0], network[0]), _candidates(declared[1], network[1])
        )
        if _lines_up(left, right, CallLayouts(orig, target))
    ]
    distinct: dict[tuple[object, ...], CallLayouts] = {}
    for layouts in fitting:  # the first of each way to read the tensors (channels first is as they are)
        distinct.setdefault(_reading(left, right, layouts), layouts)
    options = list(distinct.values())
    if len(options) == 1:
        return options[0]
    if options:  # several line up: the one under which the inputs agree best, the first among equals
        errors = [_input_error(left, right, layouts) for layouts in options]
        return options[errors.index(min(errors))]
    permuted = _permuted(left, right)
    if permuted is not None and None in declared:
        return CallLayouts(
            unknown=(
                f"cannot tell which values to compare: the shapes {permuted[0]} and {permuted[1]} hold the "
                "same axes in another order, and no backend says in which layout this layer computes "
                "(ts_layer_layout)"
            )
        )
    return CallLayouts(*declared, how="declared")


class LayoutBook:
    """Each side's declared layouts, asked once per layer; the layouts of each paired call on demand."""

    def __init__(self, orig_layers: Sequence[LayerInfo], target_layers: Sequence[LayerInfo]) -> None:
        """Ask both backends for every layer's layout."""
        self.orig = declared_layouts(orig_layers, "orig")
        self.target = declared_layouts(target_layers, "target")
        self._network = (set(self.orig.values()), set(self.target.values()))

    def of(
        self,
        pair_paths: tuple[str, str],
        orig_call: LayerCall,
        target_call: LayerCall,
        roles: RolePairs | None = None,
    ) -> CallLayouts:
        """Return the layouts to read one paired call in (its inputs paired by ``roles``)."""
        declared = (self.orig.get(pair_paths[0]), self.target.get(pair_paths[1]))
        return call_layouts(orig_call, target_call, declared, self._network, roles)
