"""Which call goes wrong first, and is its error its own or inherited from its inputs.

ptdbg names the first row below its thresholds; in a network every call after
the first wrong one sees wrong inputs, so most failing rows are inherited.
A call is judged by comparing its inputs' error with its outputs' error
(each the largest scale-free error of its rows, :mod:`tscore.dump_compare.rows`):

* ``ok``: its outputs agree;
* ``own``: its outputs differ while its inputs agree, or differ :data:`AMPLIFIED`
  times more than its inputs do, or it was called with another option (a plain
  argument differs: ``approximate="tanh"``, an ``eps``): the call itself computes differently;
* ``weights``: an input that is a layer's parameter (a convolution's weight,
  a norm's running mean) differs: the two runs do not hold the same weights;
* ``inherited``: its inputs differ about as much as its outputs;
* ``unpaired``: the other run has no such call; ``unknown``: nothing comparable was dumped.
"""

from __future__ import annotations

import operator
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tscore.dump_compare.pairing import CallPair
from tscore.dump_compare.rows import FILLED, Row
from tscore.dump_format.names import CallName
from tscore.dump_format.stacks import where_in_user_code

AMPLIFIED = 10.0
# APIs whose inputs after the first are a layer's parameters, and the keyword names of parameters
_PARAMETER_APIS = frozenset(
    {
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
        "linear",
        "bilinear",
        "batch_norm",
        "layer_norm",
        "group_norm",
        "instance_norm",
        "rms_norm",
        "embedding",
        "prelu",
        "dense",
        "matmul_with_bias",
    }
)
_PARAMETER_KEYWORDS = frozenset({"weight", "bias", "running_mean", "running_var"})


@dataclass(slots=True)
class CallVerdict:
    """One pair of calls judged: where its error comes from."""

    target_call: str | None
    orig_call: str | None
    direction: str
    how: str  # how the calls were paired: name, aligned, kind, unpaired
    status: str  # ok, own, weights, inherited, unpaired, unknown
    module: str | None = None
    input_error: float | None = None
    output_error: float | None = None
    basis: str = "none"  # tensor (exact) or statistics (less certain)
    rows: list[int] = field(default_factory=list)  # indexes of this call's rows in the report
    stack: list[str] = field(default_factory=list)
    where: str | None = None  # the innermost frame of the user's code: "train.py:42 in forward"
    reason: str = ""
    amplified: bool = False  # own because its outputs differ far more than its inputs, not alone
    line: int | None = None  # the CSV line of its first row (the header is line 1)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickle as the class and its values: a third of the time slots' generic way takes."""
        return CallVerdict, _verdict_values(self)

    @property
    def label(self) -> str:
        """The call's name (the target side's, else the orig side's)."""
        return self.target_call or self.orig_call or ""


_verdict_values = operator.attrgetter(*CallVerdict.__dataclass_fields__)


def is_parameter(api: str, direction: str, role: str, path: str) -> bool:
    """Say whether an input of an API call holds a layer's parameter (a weight, a bias, a running mean)."""
    head = path.partition(".")[0]
    if role == "input" and head == "parameters":  # a module's own parameters (msprobe's L0 records)
        return True
    if direction != "forward" or role != "input" or api.lower() not in _PARAMETER_APIS:
        return False
    return head in _PARAMETER_KEYWORDS or (head.isdigit() and head != "0")


def largest(errors: Sequence[float | None]) -> float | None:
    """Return the largest error known (None entries are unknown); None when none is known."""
    known = [e for e in errors if e is not None]
    return max(known) if known else None


def judge_call(
    pair: CallPair,
    rows: Sequence[Row],
    indexes: list[int],
    tolerance: float,
    saved_error: float | None = None,
) -> CallVerdict:
    """Judge one pair of calls from its rows (inputs and outputs).

    :param saved_error: for a backward call, the error of what its forward call saw and
        returned: a backward computes from those (the activations autograd saved) as well as
        from the gradients it receives.
    """
    call = pair.target or pair.orig
    assert call is not None
    verdict: dict[str, Any] = {
        "target_call": pair.target.label if pair.target else None,
        "orig_call": pair.orig.label if pair.orig else None,
        "direction": call.name.direction,
        "module": call.module,
        "how": pair.how,
        "status": "unknown",
        "rows": indexes,
        "stack": call.stack,
        "where": where_in_user_code(call.stack) if call.stack else None,
    }
    _decide(verdict, pair, call.op or call.name.api, [rows[i] for i in indexes], tolerance, saved_error)
    return CallVerdict(**verdict)


def _decide(
    verdict: dict[str, Any],
    pair: CallPair,
    api: str,
    rows: Sequence[Row],
    tolerance: float,
    saved_error: float | None,
) -> None:
    if pair.target is None or pair.orig is None:
        verdict["status"] = "unpaired"
        verdict["reason"] = "only the " + ("target" if pair.orig is None else "orig") + " run made this call"
        return
    direction = pair.target.name.direction
    inputs = [r for r in rows if r.role == "input"]
    outputs = [r for r in rows if r.role == "output"]
    in_error = verdict["input_error"] = largest([r.error for r in inputs] + [saved_error])
    out_error = verdict["output_error"] = largest([r.error for r in outputs])
    bases = {r.basis for r in rows if r.basis != "none"}
    if "tensor" in bases and bases <= {"tensor", "value"}:
        verdict["basis"] = "tensor"
    elif bases:
        verdict["basis"] = "statistics"
    if out_error is None:
        verdict["reason"] = "no output of this call could be compared"
        return
    if out_error <= tolerance:
        verdict["status"] = "ok"
        return
    arguments = [r for r in inputs if r.basis == "value" and r.error]
    weights = [
        r
        for r in inputs
        if r.error is not None and r.error > tolerance and is_parameter(api, direction, r.role, r.path)
    ]
    if arguments:
        verdict["status"] = "own"
        verdict["reason"] = "an argument differs: " + "; ".join(_argument(r) for r in arguments)
    elif weights:
        verdict["status"] = "weights"
        verdict["reason"] = (
            f"a parameter of this call differs ({', '.join(r.target_name or '' for r in weights)}): "
            "the two runs do not hold the same weights"
        )
    elif (in_error is None or in_error <= tolerance) and any(r.message == FILLED for r in inputs):
        verdict["status"] = "own"
        verdict["reason"] = (
            f"its outputs differ (error {out_error:.3g}); an input holds a mask's fill values, which its "
            "statistics cannot see past: the difference is here or in the call that made that input"
        )
    elif in_error is None or in_error <= tolerance:
        verdict["status"] = "own"
        verdict["reason"] = f"its outputs differ (error {out_error:.3g}) while its inputs agree"
    elif out_error > AMPLIFIED * in_error:
        verdict["status"] = "own"
        verdict["amplified"] = True
        verdict["reason"] = (
            f"its outputs differ {out_error / in_error:.3g} times more than its inputs "
            f"({out_error:.3g} against {in_error:.3g})"
        )
    else:
        verdict["status"] = "inherited"
        verdict["reason"] = f"its inputs already differ (error {in_error:.3g}; outputs {out_error:.3g})"


class ForwardErrors:
    """What each forward call saw and made (its largest error), kept for its backward call to weigh.

    Eight bytes a call, in one array per API and side, indexed by the call's number: a dump's
    forward calls all come before their backward calls, so every one is kept until then.
    """

    _NONE = -1.0  # no error known (errors are >= 0)
    _GAP = 100_000  # a number this far past the last one (a damaged record) goes to a dict instead

    def __init__(self) -> None:
        self._by_api: dict[tuple[str, str, str], array[float]] = {}
        self._far: dict[tuple[str, str, str, int], float] = {}
        self.differed = False  # whether a forward call judged so far (in order) made or got a difference
        self.agreed = False  # whether one agreed: the runs were fed the same data
        self.alone: list[str] = []  # forward calls one run made alone since the last that agreed

    def put(self, key: tuple[str, str, str], index: int, error: float | None) -> None:
        """Keep the error of forward call ``index`` of ``key`` (side, prefix, API)."""
        values = self._by_api.setdefault(key, array("d"))
        value = self._NONE if error is None else error
        if 0 <= index < len(values):
            values[index] = value
        elif len(values) <= index <= len(values) + self._GAP:
            values.extend([self._NONE] * (index - len(values)))
            values.append(value)
        else:
            self._far[(*key, index)] = value

    def saved(self, side: str, name: CallName) -> float | None:
        """For a backward call of ``side``, the error its forward call saw and made; None for another."""
        if name.direction != "backward":
            return None
        return self.get((side, name.prefix, name.api), name.index)

    def keep(self, side: str, name: CallName, input_error: float | None, output_error: float | None) -> None:
        """Keep a forward call's largest error (inputs or outputs) for its backward call; others: nothing."""
        if name.direction == "forward":
            self.put((side, name.prefix, name.api), name.index, largest([input_error, output_error]))

    def get(self, key: tuple[str, str, str], index: int) -> float | None:
        """Return the error kept for forward call ``index`` of ``key``; None when none is known."""
        values = self._by_api.get(key)
        value = values[index] if values is not None and 0 <= index < len(values) else None
        if value is None or value == self._NONE:
            value = self._far.get((*key, index), value)
        return None if value is None or value == self._NONE else value


def judge_in_order(
    pair: CallPair,
    rows: list[Row],
    indexes: list[int],
    tolerance: float,
    forward_errors: ForwardErrors,
) -> CallVerdict:
    """Judge one pair of calls; a backward call also weighs what its forward call saw and made."""
    call = pair.target or pair.orig
    assert call is not None
    side = "target" if pair.target is not None else "orig"  # numbers of the two runs are not one count
    verdict = judge_call(pair, rows, indexes, tolerance, saved_error=forward_errors.saved(side, call.name))
    if pair.how != "composite":  # a composite is named after its last call, whose own row keeps its error
        forward_errors.keep(side, call.name, verdict.input_error, verdict.output_error)
    if verdict.direction != "forward":
        return verdict
    if verdict.status == "ok":
        forward_errors.agreed = True
        forward_errors.alone.clear()
    elif verdict.status == "unpaired":
        side_label = "target" if pair.orig is None else "orig"
        forward_errors.alone.append(f"{verdict.label} ({side_label} only)")
    elif verdict.status in ("own", "weights", "inherited"):
        if verdict.status == "inherited" and forward_errors.agreed and not forward_errors.differed:
            verdict.status = "own"
            verdict.reason = GIVEN_ANOTHER_VALUE.format(error=verdict.input_error) + _made_alone(
                forward_errors.alone
            )
        forward_errors.differed = True
    return verdict


def _made_alone(calls: list[str]) -> str:
    """Name the calls one run made alone just before the first suspect: the likeliest cause."""
    if not calls:
        return ""
    shown = ", ".join(calls[:4]) + (f", and {len(calls) - 4} more" if len(calls) > 4 else "")
    return f"; made by one run alone since the last call that agreed: {shown}"


# the first call whose inputs differ, when calls before it agree and none made a difference: the
# difference came in between (a call only one run makes, a different tensor passed); when no call
# agreed before it, the runs were fed other data, and it only inherits
GIVEN_ANOTHER_VALUE = (
    "its inputs differ (error {error:.3g}) while every call before it agrees: it is given another value "
    "than its twin (a call only one run makes just before it, or another tensor passed)"
)


def _argument(row: Row) -> str:
    """One differing argument for a verdict: ``eps: 1e-05 vs 0.001`` (the row's message names no argument)."""
    values = row.message.removeprefix("argument differs: ")
    return f"{row.path}: {values}" if row.path else values
