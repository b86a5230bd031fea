"""Pairing the calls of two frameworks' dumps (tscore.dump_compare.pairing), on calls built by hand.

Calls named by neutral operations (``op`` set: two frameworks) that are alike
in kind, module and shapes pair by their statistics where the runs make them
in other orders, also where the alignment left some of them alone.
"""

from __future__ import annotations

import numpy as np

from tscore.dump_compare.calls import Call, Item
from tscore.dump_compare.pairing import pair_calls, pair_items
from tscore.dump_format.names import CallName

MODULE = "layers.0.self_attn"


def _stats(values: np.ndarray) -> tuple[float, float, float, float]:
    return float(values.max()), float(values.min()), float(values.mean()), float(np.linalg.norm(values))


def _call(
    prefix: str, api: str, op: str, index: int, order: int, given: np.ndarray, made: np.ndarray
) -> Call:
    name = CallName(prefix, api, index, "forward")
    call = Call(name=name, order=order, module=MODULE)
    call.op = op
    call.inputs = [Item("input", "input", f"{call.label}_input.0", shape=given.shape, stats=_stats(given))]
    call.outputs = [Item("output", "", f"{call.label}_output", shape=made.shape, stats=_stats(made))]
    return call


def _pairs(target: list[Call], orig: list[Call]) -> dict[str | None, str | None]:
    return {
        p.target.label if p.target else None: p.orig.label if p.orig else None
        for p in pair_calls(target, orig)
    }


def test_halves_taken_in_other_orders_pair_by_their_values_also_where_the_alignment_left_one_alone() -> None:
    """HF's rotate_half takes x[..., :h] then x[..., h:]; a port takes -x[..., h:] first."""
    x = np.random.default_rng(0).standard_normal((2, 4, 16, 16)).astype(np.float32)
    low, high = x[..., :8] * 3 + 1, x[..., 8:]
    orig = [  # torch: getitem low, getitem high, neg, cat
        _call("Tensor", "__getitem__", "getitem", 0, 0, x, low),
        _call("Tensor", "__getitem__", "getitem", 1, 1, x, high),
        _call("Tensor", "__neg__", "neg", 0, 2, high, -high),
        _call("Torch", "cat", "cat", 0, 3, -high, np.concatenate([-high, low], -1)),
    ]
    target = [  # the port: getitem high, neg, getitem low, cat
        _call("Tensor", "__getitem__", "getitem", 0, 0, x, high),
        _call("Tensor", "__neg__", "neg", 0, 1, high, -high),
        _call("Tensor", "__getitem__", "getitem", 1, 2, x, low),
        _call("Functional", "cat", "cat", 0, 3, -high, np.concatenate([-high, low], -1)),
    ]
    pairs = _pairs(target, orig)
    assert pairs["Tensor___getitem___0_forward"] == "Tensor___getitem___1_forward"
    assert pairs["Tensor___getitem___1_forward"] == "Tensor___getitem___0_forward"
    assert None not in pairs  # nothing alone


def test_a_call_only_one_run_makes_stays_alone_when_its_values_fit_no_twin() -> None:
    x = np.random.default_rng(1).standard_normal((4, 32)).astype(np.float32)
    a, b, extra = x[:, :8] * 2, x[:, 8:16] - 1, x[:, 16:24] * 50
    orig = [
        _call("Tensor", "__getitem__", "getitem", 0, 0, x, a),
        _call("Tensor", "__getitem__", "getitem", 1, 1, x, b),
    ]
    target = [
        _call("Tensor", "__getitem__", "getitem", 0, 0, x, b),
        _call("Tensor", "__getitem__", "getitem", 1, 1, x, extra),
        _call("Tensor", "__getitem__", "getitem", 2, 2, x, a),
    ]
    result = pair_calls(target, orig)
    pairs = {p.target.label: p.orig.label if p.orig else None for p in result if p.target}
    assert pairs == {
        "Tensor___getitem___0_forward": "Tensor___getitem___1_forward",
        "Tensor___getitem___1_forward": None,
        "Tensor___getitem___2_forward": "Tensor___getitem___0_forward",
    }
    assert len(result) == 3  # every orig call in exactly one pair


def test_a_gradient_one_run_lists_as_none_is_never_compared_with_the_others_tensor() -> None:
    """MindSpore lists None for a weight's gradient of ``w * x`` where torch gives a (64,) tensor."""
    target = Call(name=CallName("Tensor", "__mul__", 0, "backward"), order=0, module="norm")
    orig = Call(name=CallName("Tensor", "mul", 0, "backward"), order=0, module="norm")
    target.op, orig.op = "mul", "mul"
    target.outputs = [
        Item("output", "0", "t.0", is_tensor=False, dtype="NoneType"),
        Item("output", "1", "t.1", shape=(2, 16, 64)),
    ]
    orig.outputs = [Item("output", "0", "o.0", shape=(64,)), Item("output", "1", "o.1", shape=(2, 16, 64))]
    pairs = [(a.name if a else None, b.name if b else None) for a, b in pair_items(target, orig)]
    assert ("t.1", "o.1") in pairs
    assert ("t.0", None) in pairs and (None, "o.0") in pairs


def test_a_matmul_pairs_with_a_linear_and_a_gradient_only_passed_on_is_compared_with_nothing() -> None:
    """MindSpore's Dense calls MatMul where torch calls linear; torch's 3-d linear ends in a view,
    whose backward records the gradient it received (the same numbers), not its input's."""
    x = np.random.default_rng(2).standard_normal((32, 64)).astype(np.float32)
    weight = np.random.default_rng(3).standard_normal((64, 64)).astype(np.float32)
    y = x @ weight.T
    target = [_call("Primitive", "MatMul", "matmul", 0, 0, x, y)]
    orig = [_call("Functional", "linear", "linear", 0, 0, x.reshape(2, 16, 64), y.reshape(2, 16, 64))]
    grad = np.ones_like(y)
    for call, given, made in ((target[0], grad, grad @ weight), (orig[0], grad, grad)):  # torch's: passed on
        back = _call(call.name.prefix, call.name.api, call.op or "", 0, 1, given, made)
        back.name = back.name._replace(direction="backward")
        back.label = back.name.ptdbg
        (target if call is target[0] else orig).append(back)
    pairs = pair_calls(target, orig)
    assert [(p.target.label, p.orig.label) for p in pairs if p.target and p.orig] == [
        ("Primitive_MatMul_0_forward", "Functional_linear_0_forward"),
        ("Primitive_MatMul_0_backward", "Functional_linear_0_backward"),
    ]
    outputs = [(a, b) for a, b in pair_items(target[1], orig[1]) if (a or b).role == "output"]  # type: ignore[union-attr]
    assert all(a is None or b is None for a, b in outputs) and len(outputs) == 2


def test_one_call_against_the_calls_the_other_run_makes_for_it_is_compared_as_one() -> None:
    """A port's gelu against HF's gelu_new in eight calls, in one module, between paired calls."""
    from tscore.dump_compare.pairing import fill_composite

    x = np.random.default_rng(4).standard_normal((2, 16, 64)).astype(np.float32)
    inner = np.tanh(0.79788456 * (x + 0.044715 * x**3)).astype(np.float32)
    made = (0.5 * x * (1 + inner)).astype(np.float32)
    target = [_call("Functional", "gelu", "gelu", 0, 0, x, made)]
    parts = [("mul", x * 0.5), ("pow", x**3), ("mul", inner), ("add", 1 + inner), ("mul", made)]
    orig = [_call("Tensor", api, api, k, k, x if k == 0 else out, out) for k, (api, out) in enumerate(parts)]
    for call in (*target, *orig):
        call.module = "h.0.mlp.act"
    pairs = [fill_composite(p) for p in pair_calls(target, orig)]
    whole = [p for p in pairs if p.how == "composite"]
    assert len(whole) == 1 and whole[0].target is target[0] and whole[0].orig is not None
    assert whole[0].orig.label == "Tensor_mul_0_forward..Tensor_mul_4_forward (5 calls)"
    items = pair_items(whole[0].target, whole[0].orig)
    assert [(a.stats, b.stats) for a, b in items if a and b] == [
        (target[0].inputs[0].stats, orig[0].inputs[0].stats),  # x, the tensor its first call takes
        (target[0].outputs[0].stats, orig[-1].outputs[0].stats),  # what its last call returns
    ]
    assert sum(1 for p in pairs if p.how == "unpaired") == 5  # the several stay rows of their own


def test_an_api_map_still_pairs_its_names_whatever_their_namespace() -> None:
    x = np.arange(6.0).reshape(2, 3)
    target = [_call("Functional", "relu", "", 0, 0, x, x), _call("Functional", "dense", "", 0, 1, x, x)]
    orig = [_call("Functional", "relu", "", 0, 0, x, x), _call("Functional", "linear", "", 0, 1, x, x)]
    for call in (*target, *orig):
        call.op = None  # one framework's names, mapped by the user
    pairs = pair_calls(target, orig, {"Functional.dense": "Functional.linear"})
    assert [(p.target.label, p.orig.label) for p in pairs if p.target and p.orig][-1] == (
        "Functional_dense_0_forward",
        "Functional_linear_0_forward",
    )


def test_every_call_stays_in_one_pair_when_the_other_runs_twins_have_no_module() -> None:
    rng = np.random.default_rng(5)
    small, large = rng.standard_normal((4, 8)), rng.standard_normal((4, 8)) * 5
    target = [_call("Functional", "relu", "relu", k, k, v, v) for k, v in enumerate((small, large))]
    orig = [_call("Functional", "relu", "relu", k, k, v, v) for k, v in enumerate((small, large, large))]
    for call in orig[:2]:
        call.module = None  # a dump that did not record where these were made
    pairs = pair_calls(target, orig)
    listed = [id(c) for p in pairs for c in (p.target, p.orig) if c is not None]
    assert sorted(listed) == sorted(id(c) for c in (*target, *orig))  # each once, none lost


def test_a_call_that_only_passes_its_input_on_is_no_side_of_a_composite() -> None:
    """An extra eval-mode dropout against two other calls alone in its module stays alone."""
    x = np.random.default_rng(6).standard_normal((2, 16, 64)).astype(np.float32)
    target = [_call("Functional", "dropout", "dropout", 0, 0, x, x)]
    orig = [_call("Tensor", "float", "cast", 0, 0, x, x), _call("Tensor", "exp", "exp", 0, 1, x, np.exp(x))]
    pairs = pair_calls(target, orig)
    assert all(p.how == "unpaired" for p in pairs) and len(pairs) == 3


def test_a_fill_is_measured_against_each_sides_own_dtype() -> None:
    """33,000 in float16 is near its largest (a fill); 40,000 in float32 is a number: not one mask."""
    from tscore.fill_values import both_filled

    half, single = np.array([33000.0, -65504.0]), np.array([40000.0, -3.4e38])
    assert both_filled(half, single, "float16", "float32").tolist() == [False, True]
    assert both_filled(single, half, "float32", "float16").tolist() == [False, True]
