"""Calls of two frameworks made comparable: each one's dumped APIs as neutral operations and slots.

A MindSpore network's ``nn.Conv2d`` calls ``Primitive.Conv2D`` then
``Primitive.BiasAdd``; its torch twin calls ``Functional.conv2d`` once, with the
bias as its third input. Each backend says which neutral operation each API it
dumps is, and what each of its positional values is called
(``ts_dump_api_names``: torch's functional names). :func:`neutral_calls`
renames every tensor of a call to its neutral slot (``input``, ``weight``,
``bias``, ``running_mean``), so that values pair by what they are, not where
they sat (plain options, which each framework passes its own way, are left
out), and folds a ``bias_add`` into the convolution or ``matmul`` just
before it (that ``matmul`` becoming ``linear``). Pairing then knows calls by
their operation (:mod:`tscore.dump_compare.pairing`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tscore.dump_compare.calls import Call, Item
from tscore.plugins import hook

log = logging.getLogger(__name__)

# an operation followed by a bias_add is, as one call, this operation
FOLDED_BIAS = {
    "conv1d": "conv1d",
    "conv2d": "conv2d",
    "conv3d": "conv3d",
    "matmul": "linear",
    "linear": "linear",
}
BIAS_ADD = "bias_add"
EMBEDDING = "embedding"
ADD = "add"

# an API no table names is the operation its own name says, whatever its namespace: ``Tensor.split``,
# ``Functional.split`` (MindSpore's ops.split) and ``Torch.split`` are all ``split``; operators by name
DUNDER_OPS = {
    "__add__": "add",
    "__radd__": "add",
    "__iadd__": "add",
    "__sub__": "sub",
    "__isub__": "sub",
    "__rsub__": "rsub",
    "__mul__": "mul",
    "__rmul__": "mul",
    "__imul__": "mul",
    "__truediv__": "div",
    "__itruediv__": "div",
    "__rtruediv__": "rdiv",
    "__matmul__": "matmul",
    "__pow__": "pow",
    "__neg__": "neg",
    "__getitem__": "getitem",
    "__setitem__": "setitem",
}
SYNONYMS = {"view": "reshape", "divide": "div", "true_divide": "div", "multiply": "mul", "subtract": "sub"}
SYNONYMS |= {
    "concat": "cat",
    "astype": "cast",
    "to": "cast",
    "type": "cast",
    "float": "cast",
    "swapaxes": "transpose",
}


# names two frameworks give to different operations: torch's gather is MindSpore's gather_elements,
# torch's transpose swaps two axes where MindSpore's permutes all, repeat repeats whole or each element
AMBIGUOUS = {"gather", "transpose", "repeat", "expand", "scatter", "index_select", "take", "select"}


def default_op(api: str) -> str | None:
    """Name the neutral operation of an API no table knows, from its own name (``__truediv__`` -> ``div``).

    None for names that mean different operations in different frameworks (:data:`AMBIGUOUS`): such
    calls pair by their own names only.
    """
    name = DUNDER_OPS.get(api, api.strip("_").lower())
    name = SYNONYMS.get(name, name)
    return None if name in AMBIGUOUS else name


@dataclass(frozen=True)
class NeutralApi:
    """One dumped API as a neutral operation: its name and the neutral names of its positional values."""

    op: str
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()


def api_table(framework: str | None) -> dict[str, NeutralApi]:
    """Return ``{"Prefix.api": NeutralApi}`` for a framework's dumps, from its plugin; empty if none.

    A plugin that fails, or an entry that is not ``{"op": str, "inputs": [str], "outputs": [str]}``,
    is logged and left out: the calls it would have named pair by name only.
    """
    if not framework:
        return {}
    try:
        answer = hook().ts_dump_api_names(framework=framework)
        entries = list(answer.items()) if answer is not None else []
    except Exception as exc:  # a plugin's bug or a missing data file must not end the comparison
        log.warning("the API names of %s cannot be read (%r); its calls pair by name only", framework, exc)
        return {}
    table: dict[str, NeutralApi] = {}
    for api, entry in entries:
        try:
            inputs = tuple(str(n) for n in entry.get("inputs", ()))
            outputs = tuple(str(n) for n in entry.get("outputs", ()))
            table[str(api)] = NeutralApi(str(entry["op"]), inputs, outputs)
        except (AttributeError, KeyError, TypeError) as exc:
            log.warning("%s's API names: %r is not {op, inputs, outputs} (%r); left out", framework, api, exc)
    return table


def _renamed(item: Item, names: Sequence[str], single: bool) -> None:
    """Give an item the neutral name of its position (``0.1`` becomes ``input.1``)."""
    head, dot, rest = item.path.partition(".")
    if item.role == "output":
        if single and head in ("", "0"):
            item.path = rest  # the one output ("0.1": its second element, "1")
        elif single and head.isdigit():
            item.path = f"extra.{item.path}"
        elif head == "" and names:
            item.path = names[0]  # a sole output of a call whose outputs are named
        elif head.isdigit() and int(head) < len(names):
            item.path = names[int(head)] + dot + rest
        return
    if head.isdigit() and int(head) < len(names):
        item.path = names[int(head)] + dot + rest


def neutral_calls(calls: Sequence[Call], table: Mapping[str, NeutralApi]) -> list[Call]:
    """Name the values of every forward call the table knows by neutral slots; fold each ``bias_add`` in.

    The calls are changed in place (their values loaded: not for a dump read on demand); the
    list returned leaves out the folded ``bias_add`` calls (and the ``add`` of a bias after a
    ``matmul``). Backward calls (whose values are gradients, in another order) get their operation
    and keep their values' positions: they pair through their forward calls, their values by shape.
    """
    out: list[Call] = []
    folded: set[tuple[str, str, int]] = set()  # bias adds folded into the matmul before them
    for call in calls:
        entry = table.get(f"{call.name.prefix}.{call.name.api}")
        if entry is None:
            op = default_op(call.name.api)
            if op is None:  # a name two frameworks use for different things: left as it is
                out.append(call)
                continue
            entry = NeutralApi(op)
        if call.name.direction != "forward":
            # its values keep their places: gradients pair by shape (pair_items); a folded add's
            # gradient has no twin (the other run's bias gradient is its linear's)
            folded_away = (call.name.prefix, call.name.api, call.name.index) in folded
            call.op = f"{entry.op} (folded)" if folded_away else entry.op
            out.append(call)
            continue
        if entry.op == EMBEDDING and not _looks_up_rows(call, entry):
            out.append(call)  # MindSpore's Gather along another axis, or of another table: not named
            continue
        call.op = entry.op
        single = len(entry.outputs) == 1
        # options (stride, eps) are passed differently in each framework (MindSpore sets most on the
        # Primitive): only tensors are compared across frameworks
        call.inputs = [item for item in call.inputs if item.is_tensor]
        for item in call.inputs:
            _renamed(item, entry.inputs, False)
        for item in call.outputs:
            _renamed(item, entry.outputs, single)
        before = out[-1] if out else None
        bias = [i for i in call.inputs if i.path == "bias"]
        if (
            entry.op == BIAS_ADD
            and len(bias) == 1
            and before is not None
            and before.name.direction == "forward"
            and before.op in FOLDED_BIAS
            and not any(i.path == "bias" for i in before.inputs)
        ):
            before.op = FOLDED_BIAS[before.op]
            if before.op == "linear":  # matmul(input, other) with a bias is linear(input, weight, bias)
                for item in before.inputs:
                    if item.path.partition(".")[0] == "other":
                        item.path = "weight" + item.path[len("other") :]
            before.inputs += bias
            before.outputs = call.outputs
            continue
        if _adds_a_bias(call, before):  # matmul(x, w) + b, as a port writes a linear layer by hand
            assert before is not None
            before.op = "linear"
            for item in before.inputs:
                if item.path.partition(".")[0] == "other":
                    item.path = "weight" + item.path[len("other") :]
            bias_item = next(i for i in call.inputs if i.shape is not None and len(i.shape) == 1)
            bias_item.path = "bias"
            before.inputs += [bias_item]
            before.outputs = call.outputs
            folded.add((call.name.prefix, call.name.api, call.name.index))
            continue
        out.append(call)
    return out


def _looks_up_rows(call: Call, entry: NeutralApi) -> bool:
    """Say whether a call named ``embedding`` looks rows up in a 2-d table (its ``axis``, if given, 0).

    MindSpore's ``Gather`` is an embedding only so: the same primitive gathers along any axis of
    any tensor, which no torch ``embedding`` does.
    """
    named = {}
    for item in call.inputs:
        head = item.path.partition(".")[0]
        if head.isdigit() and int(head) < len(entry.inputs) and "." not in item.path:
            named[entry.inputs[int(head)]] = item
    weight, axis = named.get("weight"), named.get("axis")
    if weight is None or not weight.is_tensor or weight.shape is None or len(weight.shape) != 2:
        return False
    return axis is None or axis.is_tensor or axis.value in (0, None)


def _adds_a_bias(call: Call, before: Call | None) -> bool:
    """Say whether ``call`` adds a 1-d bias to the output of the ``matmul`` just before it."""
    if call.op != ADD or before is None or before.op != "matmul" or before.name.direction != "forward":
        return False
    shapes = [i.shape for i in call.inputs if i.is_tensor and i.shape is not None]
    made = [o.shape for o in before.outputs if o.is_tensor and o.shape is not None]
    if len(shapes) != 2 or len(made) != 1 or not made[0]:
        return False
    vectors = [shape for shape in shapes if len(shape) == 1]
    others = [shape for shape in shapes if len(shape) != 1]
    if not (len(vectors) == 1 and len(others) == 1 and others[0] == made[0] and vectors[0][0] == made[0][-1]):
        return False
    operand = next(i for i in call.inputs if i.is_tensor and i.shape is not None and len(i.shape) != 1)
    result = next(o for o in before.outputs if o.is_tensor and o.shape is not None)
    # the add's other operand is the matmul's result (a residual add of another tensor is not a bias)
    return operand.stats is None or result.stats is None or _same_stats(operand.stats, result.stats)


def _same_stats(a: Sequence[float | None], b: Sequence[float | None]) -> bool:
    """Say whether two tensors' statistics are the same (where both recorded them)."""
    return all(
        x is None or y is None or math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-12)
        for x, y in zip(a, b, strict=False)
    )
