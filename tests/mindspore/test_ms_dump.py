"""The API dump on real MindSpore (PyNative, CPU): names, levels, filters, files, and a run left as it was."""

from __future__ import annotations

import inspect
import weakref
from pathlib import Path

import mindspore as ms
import mindspore.mint.nn.functional as mint_functional
import mindspore.ops.functional as ops_functional
import numpy as np
import pytest
from mindspore import Tensor, mint, nn, ops
from mindspore.ops import relu  # bound before the dump starts: seen at the Primitive level

import tscore as ts
from tests.conftest import cyclic_garbage
from tscore.dump_format.reading import read_lines


class SmallCell(nn.Cell):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, pad_mode="valid", has_bias=True)
        self.fc = nn.Dense(16, 3)

    def construct(self, x: Tensor) -> Tensor:
        y = ops.relu(self.conv(x))
        y = y.reshape(y.shape[0], -1)[:, :16] * 2 + 1
        return self.fc(y)


def train_step(debugger: ts.dump.Debugger | None = None, optimizer: str = "SGD") -> list[np.ndarray]:
    """One step of SmallCell from a fixed seed: the loss, the gradients and the new parameters.

    :param optimizer: the name of one of MindSpore's optimizers (SGD: with momentum 0.9).
    """
    ms.set_seed(0)
    net = SmallCell()
    params = net.trainable_params()
    opt = nn.SGD(params, 0.1, momentum=0.9) if optimizer == "SGD" else getattr(nn, optimizer)(params, 0.01)
    x = Tensor(np.random.default_rng(0).standard_normal((2, 3, 6, 6)).astype(np.float32))
    label = Tensor(np.array([0, 2], np.int32))
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    grad_fn = ms.value_and_grad(lambda x, y: loss_fn(net(x), y), None, opt.parameters)
    if debugger is not None:
        debugger.start(net)
    try:
        loss, grads = grad_fn(x, label)
        opt(grads)
    finally:
        if debugger is not None:
            debugger.stop()
    return [loss.asnumpy()] + [g.asnumpy() for g in grads] + [p.asnumpy() for p in net.trainable_params()]


def records(folder: Path) -> list[dict]:
    return list(read_lines(str(folder / "step0" / "rank0" / "dump.jsonl")))


def names(folder: Path) -> list[str]:
    return [r["name"] for r in records(folder)]


def patched_objects() -> dict[tuple[str, str], object]:
    """Every attribute the capture may replace, by identity: namespaces, Tensor, Primitive classes."""
    found: dict[tuple[str, str], object] = {}
    for label, namespace in (
        ("ops", ops),
        ("ops.functional", ops_functional),
        ("mint", mint),
        ("mint.nn.functional", mint_functional),
    ):
        found.update({(label, k): v for k, v in vars(namespace).items() if not k.startswith("_")})
    found.update({("Tensor", k): v for k, v in vars(Tensor).items()})
    stack = [ops.Primitive]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if "__call__" in vars(cls):
            found[(cls.__qualname__, "__call__")] = vars(cls)["__call__"]
    return found


@pytest.fixture(autouse=True)
def pynative():
    ms.set_context(mode=ms.PYNATIVE_MODE)
    yield


@pytest.mark.parametrize("level", ["L1", "L0", "mix"])
def test_a_dumped_training_step_is_bit_identical(tmp_path, level) -> None:
    plain = train_step()
    dumped = train_step(ts.dump.Debugger(dump_path=str(tmp_path), level=level))
    assert len(plain) == len(dumped)
    for a, b in zip(plain, dumped, strict=True):
        assert a.tobytes() == b.tobytes()
    got = names(tmp_path)
    modules = [n for n in got if n.startswith("Module.")]
    if level == "L0":
        assert modules == got and {"Module.conv.Conv2d.forward.0", "Module.fc.Dense.forward.0"} <= set(got)
    elif level == "L1":
        assert not modules
        # the convolution's input is data (no gradient comes back to it): its record is written all the same
        assert "Primitive_Conv2D_0_backward" in got and "Primitive_BiasAdd_0_backward" in got
    else:
        assert modules and len(modules) < len(got)


def test_api_calls_are_named_as_msprobe_names_them_each_once(tmp_path) -> None:
    train_step(ts.dump.Debugger(dump_path=str(tmp_path)))
    got = names(tmp_path)
    forward = [n for n in got if n.endswith("_forward")]
    assert forward[:7] == [
        "Primitive_Conv2D_0_forward",  # nn.Conv2d calls a Conv2D instance, then BiasAdd
        "Primitive_BiasAdd_0_forward",
        "Functional_relu_0_forward",  # ops.relu: its relu_op inside is not recorded again
        "Tensor_reshape_0_forward",
        "Tensor___getitem___0_forward",
        "Tensor___mul___0_forward",
        "Tensor___add___0_forward",
    ]
    assert "Primitive_ReLU_0_forward" not in got
    assert {"Primitive_MatMul_0_forward", "Primitive_BiasAdd_1_forward"} <= set(forward)
    assert not any("Shape" in n or "ProxyOp" in n for n in got)  # shape reads and routing: not computing
    by_name = {r["name"]: r for r in records(tmp_path)}
    assert by_name["Primitive_MatMul_0_forward"]["module"] == "fc"
    assert by_name["Primitive_Conv2D_0_forward"]["key"] == "conv#0/Primitive.Conv2D#0"


def test_a_function_bound_before_the_dump_is_seen_at_the_primitive_level(tmp_path) -> None:
    x = Tensor(np.array([-1.0, 2.0], np.float32))
    with ts.dump.Debugger(dump_path=str(tmp_path)):
        relu(x)  # from mindspore.ops import relu: the wrapper on ops.relu is not reached
        mint.add(x, 1.0)
        mint_functional.sigmoid(x)
    assert names(tmp_path) == [
        "Primitive_ReLU_0_forward",
        "Mint_add_0_forward",
        "MintFunctional_sigmoid_0_forward",
    ]


def test_statistics_match_numpy_and_tensor_files_hold_the_values(tmp_path) -> None:
    x = Tensor(np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32))
    with ts.dump.Debugger(task="tensor", dump_path=str(tmp_path)):
        y = ops.tanh(x)
    (record,) = records(tmp_path)
    out = record["outputs"][0]
    saved = np.load(tmp_path / "step0" / "rank0" / out["file"])
    np.testing.assert_array_equal(saved, y.asnumpy())
    assert out["max"] == pytest.approx(float(saved.max())) and out["min"] == pytest.approx(float(saved.min()))
    assert out["mean"] == pytest.approx(float(saved.mean()), abs=1e-7)
    assert out["norm"] == pytest.approx(float(np.linalg.norm(saved)), rel=1e-6)
    assert out["dtype"] == "float32" and out["shape"] == [3, 4]


def test_half_and_integer_tensors_get_statistics_and_bfloat16_files_are_exact(tmp_path) -> None:
    values = np.array([1.5, -2.25, 3.0], np.float32)
    with ts.dump.Debugger(task="tensor", dump_path=str(tmp_path), filter_int=False):
        ops.neg(Tensor(values, ms.bfloat16))
        ops.abs(Tensor(np.array([3, -4, 5], np.int32)))
    neg, absolute = records(tmp_path)
    entry = neg["outputs"][0]
    assert entry["dtype"] == "bfloat16" and entry["max"] == 2.25 and entry["min"] == -3.0
    stored = np.load(tmp_path / "step0" / "rank0" / entry["file"])
    np.testing.assert_array_equal(stored, -values)  # these values are exact in bfloat16
    assert absolute["inputs"][0]["max"] == 5 and absolute["inputs"][0]["mean"] == pytest.approx(4 / 3)


def test_backward_records_carry_the_gradients_into_and_out_of_each_call(tmp_path) -> None:
    x = Tensor(np.array([1.0, -2.0, 3.0], np.float32))

    def loss(x: Tensor) -> Tensor:
        return (ops.exp(x) * 3).sum()

    with ts.dump.Debugger(dump_path=str(tmp_path)):
        ms.grad(loss)(x)
    by_name = {r["name"]: r for r in records(tmp_path)}
    exp_backward = by_name["Functional_exp_0_backward"]["inputs"][0]
    assert exp_backward["shape"] == [3] and exp_backward["max"] == 3.0 and exp_backward["min"] == 3.0
    assert "Tensor___mul___0_backward" in by_name
    # and the gradient the call sent back to its input: 3 * exp(x), through an ops.HookBackward identity
    sent = by_name["Functional_exp_0_backward"]["outputs"][0]
    assert sent["name"] == "Functional_exp_0_backward_output.0"
    assert sent["max"] == pytest.approx(3 * np.exp(3.0), rel=1e-6)
    assert sent["min"] == pytest.approx(3 * np.exp(-2.0), rel=1e-6)


def test_parameter_gradients_are_recorded_per_cell_at_l0(tmp_path) -> None:
    values = train_step(ts.dump.Debugger(dump_path=str(tmp_path), level="L0", task="tensor"))
    returned = dict(zip(["conv.weight", "conv.bias", "fc.weight", "fc.bias"], values[1:5], strict=True))
    found = {r["name"]: r for r in records(tmp_path) if r["direction"] == "parameters_grad"}
    assert set(found) == {"Module.conv.Conv2d.parameters_grad.0", "Module.fc.Dense.parameters_grad.0"}
    for record in found.values():
        cell = record["name"].split(".")[1]
        for entry in record["outputs"]:
            local = entry["name"].rpartition(".")[2]
            kept = np.load(tmp_path / "step0" / "rank0" / entry["file"])
            # what value_and_grad returned, bit for bit: the hook saw the same gradient
            assert kept.tobytes() == returned[f"{cell}.{local}"].tobytes(), entry["name"]


def test_nothing_is_left_installed_after_stop_or_after_an_exception(tmp_path) -> None:
    net = SmallCell()
    net(Tensor(np.ones((1, 3, 6, 6), np.float32)))  # MindSpore adds ops.tensor_method on a first call
    before = patched_objects()
    debugger = ts.dump.Debugger(dump_path=str(tmp_path), level="mix")
    debugger.start(net)
    assert ops.relu is not before[("ops", "relu")]  # installed while it runs
    net(Tensor(np.ones((1, 3, 6, 6), np.float32)))
    debugger.stop()
    after = patched_objects()
    assert after.keys() == before.keys()
    assert all(after[k] is before[k] for k in before)
    failing = ts.dump.Debugger(dump_path=str(tmp_path / "b"), level="mix")
    failing.start(net)
    with pytest.raises((ValueError, RuntimeError, TypeError)):
        try:
            net(Tensor(np.ones((1, 5, 6, 6), np.float32)))  # a wrong input raises inside the dumped step
        finally:
            failing.stop()
    after = patched_objects()
    assert after.keys() == before.keys() and all(after[k] is before[k] for k in before)
    assert ops.relu is ops_functional.relu and inspect.getmodule(ops.relu).__name__.startswith("mindspore")


@pytest.mark.parametrize("statistics", ["read at once", "launched"])
def test_a_dumped_step_leaves_nothing_for_the_garbage_collector(tmp_path, monkeypatch, statistics) -> None:
    """What a step's dump made is freed when stop() returns, not at Python's next full collection.

    The API wrappers were made for each dump, each holding its capture, which held them: 11,000
    objects a step in reference cycles, which set off full collections of the whole process.
    Each way the statistics may go is pinned (the dump picks one by timing its first reads).
    """
    from ts_mindspore import pipeline_stats

    monkeypatch.setattr(pipeline_stats, "SAMPLE", 0)
    monkeypatch.setattr(pipeline_stats, "LAUNCH_SECONDS", -1.0 if statistics == "launched" else float("inf"))
    train_step()  # a first step makes what is made once (imports, caches)
    plain = cyclic_garbage(train_step)
    debugger = ts.dump.Debugger(dump_path=str(tmp_path))
    train_step(debugger)  # a first dump makes what is made once (the wrappers, caches)
    assert cyclic_garbage(lambda: train_step(debugger)) == plain


def test_an_api_kept_from_inside_a_dump_calls_the_original_after_it_and_reports_to_a_later_one(
    tmp_path,
) -> None:
    x = Tensor(np.array([-1.0, 2.0], np.float32))
    with ts.dump.Debugger(dump_path=str(tmp_path / "a"), level="L1"):
        kept = ops.relu  # the dump's wrapper
        kept(x)
    written = names(tmp_path / "a")
    assert kept(x).asnumpy().tolist() == [0.0, 2.0]  # after stop(): nothing recorded, nothing raised
    assert names(tmp_path / "a") == written and "Functional_relu_0_forward" in written
    with ts.dump.Debugger(dump_path=str(tmp_path / "b"), level="L1"):
        kept(x)
    assert names(tmp_path / "b") == ["Functional_relu_0_forward"]  # as ops.relu, not as its Primitive


def test_dumps_stopped_out_of_order_leave_nothing_installed(tmp_path) -> None:
    before = patched_objects()
    x = Tensor(np.array([-1.0, 2.0], np.float32))
    outer = ts.dump.Debugger(dump_path=str(tmp_path / "outer"), level="L1")
    inner = ts.dump.Debugger(dump_path=str(tmp_path / "inner"), level="L1")
    outer.start()
    ops.exp(x)
    inner.start()
    ops.relu(x)
    outer.stop()  # the outer dump first: the inner one had wrapped its wrappers
    inner.stop()
    after = patched_objects()
    assert after.keys() == before.keys() and all(after[k] is before[k] for k in before)
    assert names(tmp_path / "outer") == ["Functional_exp_0_forward", "Functional_relu_0_forward"]
    assert names(tmp_path / "inner") == ["Functional_relu_0_forward"]
    with ts.dump.Debugger(dump_path=str(tmp_path / "later"), level="L1"):
        ops.relu(x)
    assert names(tmp_path / "later") == ["Functional_relu_0_forward"]
    after = patched_objects()
    assert all(after[k] is before[k] for k in before)


def test_a_function_the_user_replaced_is_not_kept_alive_by_the_dump(tmp_path) -> None:
    """One wrapper per API is kept for the process; none for a function no longer in its place."""
    x = Tensor(np.array([-1.0, 2.0], np.float32))
    original = ops.relu

    def users_relu(value: Tensor) -> Tensor:
        return original(value)

    gone = weakref.ref(users_relu)
    ops.relu = users_relu
    try:
        with ts.dump.Debugger(dump_path=str(tmp_path / "a"), level="L1"):
            ops.relu(x)
    finally:
        ops.relu = original
    del users_relu
    with ts.dump.Debugger(dump_path=str(tmp_path / "b"), level="L1"):
        ops.relu(x)
    assert gone() is None


def test_a_function_the_user_replaced_between_dumps_is_the_one_put_back(tmp_path) -> None:
    net = SmallCell()
    x = Tensor(np.ones((1, 3, 6, 6), np.float32))
    with ts.dump.Debugger(dump_path=str(tmp_path / "a")):
        net(x)  # the first dump finds what to wrap
    original = ops.relu

    def users_relu(value: Tensor) -> Tensor:
        return original(value)

    ops.relu = users_relu
    try:
        with ts.dump.Debugger(dump_path=str(tmp_path / "b")):
            assert ops.relu is not users_relu
            net(x)
        assert ops.relu is users_relu  # not the original the first dump wrapped
    finally:
        ops.relu = original


def test_scope_and_list_filters(tmp_path) -> None:
    train_step(ts.dump.Debugger(dump_path=str(tmp_path / "list"), list=["Primitive_MatMul"]))
    assert set(names(tmp_path / "list")) == {"Primitive_MatMul_0_forward", "Primitive_MatMul_0_backward"}
    train_step(
        ts.dump.Debugger(
            dump_path=str(tmp_path / "range"),
            scope=["Functional_relu_0_forward", "Tensor___mul___0_forward"],
            data_mode=["forward"],
        )
    )
    assert names(tmp_path / "range") == [
        "Functional_relu_0_forward",
        "Tensor_reshape_0_forward",
        "Tensor___getitem___0_forward",
        "Tensor___mul___0_forward",
    ]


def test_the_ptdbg_functions_take_a_cell(tmp_path, in_tmp) -> None:
    from tscore.ptdbg import acc_cmp_dump, register_hook, set_dump_path, set_dump_switch

    net = SmallCell()
    set_dump_path(str(tmp_path / "npu_dump.pkl"), dump_tag="cell")
    register_hook(net, acc_cmp_dump)
    set_dump_switch("ON", mode="api_list", api_list=["MatMul", "relu"])
    net(Tensor(np.ones((1, 3, 6, 6), np.float32)))
    set_dump_switch("OFF")
    assert names(tmp_path / "cell") == ["Functional_relu_0_forward", "Primitive_MatMul_0_forward"]
    assert (tmp_path / "cell" / "step0" / "rank0" / "npu_dump.pkl").exists()


def test_at_l1_no_parameter_is_hooked_and_no_gradient_is_kept(tmp_path) -> None:
    from ts_mindspore.cells import CAPTURED_GRADS

    net = SmallCell()
    debugger = ts.dump.Debugger(dump_path=str(tmp_path), level="L1")
    debugger.start(net)
    grad_fn = ms.value_and_grad(lambda x: net(x).sum(), None, net.trainable_params())
    grad_fn(Tensor(np.ones((1, 3, 6, 6), np.float32)))
    debugger.stop()
    assert net not in CAPTURED_GRADS  # nothing hooked, nothing held after stop()


def test_a_parameter_is_recorded_as_requiring_grad_and_a_plain_tensor_says_nothing(tmp_path) -> None:
    weight = ms.Parameter(Tensor(np.ones((4, 2), np.float32)), name="w")
    x = Tensor(np.ones((3, 4), np.float32))
    with ts.dump.Debugger(task="statistics", dump_path=str(tmp_path)):
        ops.matmul(x, weight)
    (record,) = records(tmp_path)
    data, param = record["inputs"]
    assert param["requires_grad"] is True and "requires_grad" not in data  # MindSpore does not say
    assert "requires_grad" not in record["outputs"][0]


@pytest.mark.parametrize("optimizer", ["Adam", "AdamWeightDecay", "RMSProp"])
def test_an_optimizer_compiled_with_jit_runs_under_the_dump_and_gives_the_same_numbers(
    tmp_path, optimizer
) -> None:
    # the compiler parses what an API name holds: it must reach the original, not the wrapper
    plain = train_step(optimizer=optimizer)
    dumped = train_step(ts.dump.Debugger(dump_path=str(tmp_path), level="L1"), optimizer)
    for a, b in zip(plain, dumped, strict=True):
        assert a.tobytes() == b.tobytes()
    assert names(tmp_path)  # the step's own calls were recorded


@ms.jit(capture_mode="bytecode")
def _bytecode_compiled(a: Tensor) -> Tensor:
    return (ops.tanh(a) * a.sum() + mint.exp(a).mean() + ops.matmul(a, a.T)).sum()


def test_a_function_compiled_from_bytecode_runs_under_the_dump(tmp_path) -> None:
    # the frames of MindSpore's bytecode JIT have no line number: the stack must do without
    x = Tensor(np.ones((4, 4), np.float32))
    with ts.dump.Debugger(task="statistics", dump_path=str(tmp_path), level="L1"):
        ops.abs(x)
        dumped = _bytecode_compiled(x).asnumpy()  # compiled here, while the dump runs
    assert dumped.tobytes() == _bytecode_compiled(x).asnumpy().tobytes()
