"""torch's side of the dump on devices, checked on the CPU: the two-pass statistics a GPU uses give what
torch's own reductions give, the settings that change numbers are recorded per device, and a comparison
of two runs names the setting that differs and whether it explains the difference."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import tscore as ts
from ts_torch.device_copies import device_stats, stats_to_host
from ts_torch.plugin import plugin
from tscore.dump_format.reading import read_info, read_lines


def _torch_reductions(t: torch.Tensor) -> list[float]:
    """torch's own reductions (aminmax, sum / n, vector_norm), as the writer reads them."""
    low, high = torch.aminmax(t)
    return [float(high), float(low), float(t.sum()) / t.numel(), float(torch.linalg.vector_norm(t))]


_VIEWS = {
    "float32": lambda: torch.randn(3000, generator=_SEEDED) * 5 - 1,
    "float64": lambda: torch.randn(257, dtype=torch.float64, generator=_SEEDED) * 1e6,
    "float16": lambda: (torch.randn(999, generator=_SEEDED) * 300).half(),
    "bfloat16": lambda: (torch.randn(999, generator=_SEEDED) * 300).bfloat16(),
    "int64": lambda: torch.randint(-(2**40), 2**40, (500,), generator=_SEEDED),
    "uint8": lambda: torch.randint(0, 256, (77,), dtype=torch.uint8, generator=_SEEDED),
    "uint16": lambda: torch.randint(0, 65536, (77,), generator=_SEEDED).to(torch.uint16),
    "bool": lambda: torch.rand(40, generator=_SEEDED) > 0.5,
    "a strided view": lambda: (torch.randn(60, 50, generator=_SEEDED) * 3)[::2, 1::3].t(),
    "a view at an offset": lambda: torch.randn(1000, generator=_SEEDED)[613:],
    "a parameter": lambda: torch.nn.Parameter(torch.randn(8, 8, generator=_SEEDED)),
    "a negated view": lambda: torch._neg_view(torch.randn(100, generator=_SEEDED) + 2),
    "complex": lambda: torch.randn(64, dtype=torch.complex64, generator=_SEEDED),
    "nan": lambda: torch.tensor([1.0, float("nan"), 2.0]),
    "both infinities": lambda: torch.tensor([-float("inf"), float("inf"), 0.0]),
}


_LEFT_TO_TORCH = ("a negated view", "complex")  # the kernel does not read them: torch's float32 reductions


@pytest.mark.parametrize("kind", list(_VIEWS))
def test_cpu_statistics_from_one_compiled_pass_equal_torchs_in_float64(kind, monkeypatch) -> None:
    import tscore.array_stats
    from tscore import native_kernel

    values = _VIEWS[kind]()
    assert native_kernel.load_error() is None, "tscore was installed without its C kernel: reinstall with cc"
    found = [float(v) for v in plugin.tensor_stats(values)]
    wide = values.detach().resolve_neg()
    wide = (wide.abs() if wide.is_complex() else wide).double()
    expected = _torch_reductions(wide)  # float64: what float32 sums only approach
    assert [math.isnan(v) for v in found] == [math.isnan(v) for v in expected]
    np.testing.assert_allclose(
        [v for v in found if not math.isnan(v)],
        [v for v in expected if not math.isnan(v)],
        rtol=2e-6 if kind in _LEFT_TO_TORCH else 1e-9,  # float32 sums, or float64 ones
    )
    monkeypatch.setattr(tscore.array_stats, "_KERNEL", False)  # no compiled kernel: torch's reductions
    fallback = [float(v) for v in plugin.tensor_stats(values)]
    np.testing.assert_allclose(
        fallback, found, rtol=2e-6, atol=1e-6 * float(wide[wide.isfinite()].abs().max())
    )


_SEEDED = torch.Generator().manual_seed(7)


class _Doubled(torch.Tensor):
    """A subclass whose operators see every value doubled: its memory holds the values it was made from."""

    @staticmethod
    def __new__(cls, data: torch.Tensor) -> _Doubled:
        made = torch.Tensor._make_subclass(cls, data)
        made.elem = data
        return made

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        def unwrap(t):
            return t.elem * 2 if isinstance(t, cls) else t

        return func(*[unwrap(a) for a in args], **{k: unwrap(v) for k, v in (kwargs or {}).items()})


def test_a_subclass_gets_the_statistics_its_operators_give_not_those_of_its_memory() -> None:
    doubled = _Doubled(torch.arange(4.0))
    assert doubled.data_ptr() != 0  # memory of its own, holding 0, 1, 2, 3
    assert [float(v) for v in plugin.tensor_stats(doubled)] == pytest.approx([6.0, 0.0, 3.0, math.sqrt(56.0)])


def test_tensors_without_memory_of_their_own_are_left_to_torchs_reductions() -> None:
    from torch.testing._internal.two_tensor import TwoTensor

    import ts_torch.plugin

    inner = torch.randn(50, generator=_SEEDED)
    wrapper = TwoTensor(inner, inner.clone())  # a subclass holding others (DTensor, torchao): address 0
    assert wrapper.data_ptr() == 0 and ts_torch.plugin._host_stats(wrapper) is None
    np.testing.assert_allclose(
        [float(v) for v in plugin.tensor_stats(wrapper)], _torch_reductions(inner), rtol=1e-6
    )
    freed = torch.randn(1000, generator=_SEEDED)
    freed.untyped_storage().resize_(0)  # what FSDP does to a parameter it has sharded away
    assert ts_torch.plugin._host_stats(freed) is None
    with pytest.raises(RuntimeError, match="not allocated"):  # torch's error, which the dump records
        plugin.tensor_stats(freed)
    shrunk = torch.randn(1000, generator=_SEEDED)[500:]
    shrunk.untyped_storage().resize_(600 * 4)  # the storage no longer holds the view's last elements
    assert ts_torch.plugin._host_stats(shrunk) is None
    # inside vmap a tensor has no storage to ask about: torch's reductions say what they always said
    with pytest.raises(RuntimeError, match=r"vmap over calling \.item\(\)"):
        torch.vmap(lambda row: plugin.tensor_stats(row) and row)(torch.randn(4, 10, generator=_SEEDED))


@pytest.mark.parametrize(
    "values",
    [
        torch.randn(10_000, generator=_SEEDED) * 7 + 3,
        torch.randn(257, dtype=torch.float64, generator=_SEEDED) * 1e6,
        torch.tensor([5.0]),
        torch.tensor([1.0, float("nan"), 2.0]),
        torch.tensor([1.0, float("inf"), -2.0]),
        torch.tensor([-float("inf"), 3.0]),
        torch.tensor([-float("inf"), float("inf"), 0.0]),
    ],
    ids=["randn", "float64", "one", "nan", "inf", "-inf", "both infinities"],
)
def test_the_two_pass_statistics_of_a_device_equal_torchs_reductions(values: torch.Tensor) -> None:
    [row] = stats_to_host([device_stats(values)])()
    expected = _torch_reductions(values)
    assert [math.isnan(v) for v in row] == [math.isnan(v) for v in expected]
    finite = [(a, b) for a, b in zip(row, expected, strict=True) if not math.isnan(b)]
    # float32 rounding, on the scale of the values: a mean near 0 has no relative precision to keep
    scale = float(values[values.isfinite()].abs().max()) if bool(values.isfinite().any()) else 1.0
    np.testing.assert_allclose([a for a, _ in finite], [b for _, b in finite], rtol=1e-6, atol=1e-6 * scale)
    if not any(math.isnan(v) or math.isinf(v) for v in expected):
        a = values.double().numpy()
        np.testing.assert_allclose(
            row, [a.max(), a.min(), a.mean(), np.linalg.norm(a)], rtol=2e-6, atol=1e-6 * scale
        )


def test_many_tensors_of_mixed_dtypes_cross_in_one_batch_in_order() -> None:
    seeded = torch.Generator().manual_seed(3)
    tensors = [
        torch.randn(100, generator=seeded),
        torch.randn(50, dtype=torch.float64, generator=seeded),
        torch.arange(10).double(),
    ]
    rows = stats_to_host([device_stats(t) for t in tensors])()
    for tensor, row in zip(tensors, rows, strict=True):  # float32 rounding on the values' scale
        np.testing.assert_allclose(
            row, _torch_reductions(tensor), rtol=1e-6, atol=1e-6 * float(tensor.abs().max())
        )
    assert stats_to_host([(1.0, 2.0, 3.0, 4.0)]) is None  # not the device path's: left to the writer


def test_a_batch_mixing_finite_and_non_finite_tensors_gives_each_its_own_row() -> None:
    tensors = [
        torch.tensor([1.0, 2.0, 4.0]),
        torch.tensor([1.0, float("nan")]),
        torch.tensor([float("inf"), -1.0]),
        torch.tensor([-3.0, 3.0]),
    ]
    rows = stats_to_host([device_stats(t) for t in tensors])()
    assert rows[0] == pytest.approx([4.0, 1.0, 7.0 / 3, math.sqrt(21.0)])
    assert all(math.isnan(v) for v in rows[1])
    assert rows[2][:2] == [math.inf, -1.0] and rows[2][2:] == [math.inf, math.inf]
    assert rows[3] == pytest.approx([3.0, -3.0, 0.0, math.sqrt(18.0)])


def test_staged_statistics_let_go_of_their_device_tensors_and_are_read_again_from_the_same_copy() -> None:
    """A dump keeps a tensor's statistics for the step (the tensor may be recorded again): once its copy
    has started they hold no device tensor, and a second batch naming them reads the first copy."""
    first, second = device_stats(torch.tensor([1.0, 3.0])), device_stats(torch.tensor([-2.0]))
    wait_first = stats_to_host([first])
    assert first.high is None and first.low is None and first.mean is None and first.var is None
    wait_again = stats_to_host([second, first])
    assert wait_again() == [[-2.0, -2.0, -2.0, 2.0], wait_first()[0]]
    assert wait_first() == [[3.0, 1.0, 2.0, pytest.approx(math.sqrt(10.0))]]


@pytest.fixture
def tf32_restored():
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


def _values(device: str) -> dict[str, object]:
    return {s.name: s.value for s in plugin.run_settings(device)}


def test_tf32_holds_on_a_cuda_device_and_never_on_the_cpu(tf32_restored) -> None:
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cuda.matmul.allow_tf32 = False
    cuda, cpu = _values("cuda:0"), _values("cpu")
    assert cuda["torch.backends.cudnn.allow_tf32"] is True
    assert cuda["torch.backends.cuda.matmul.allow_tf32"] is False
    assert cpu["torch.backends.cudnn.allow_tf32"] is False
    assert "torch.backends.cudnn.benchmark" in cuda and "torch.backends.cudnn.benchmark" not in cpu
    assert cpu["autocast"] is None
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert _values("cpu")["autocast"] == "bfloat16"


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(64, 64)
        self.fc2 = nn.Linear(64, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.relu(self.fc1(x)))


def _dump(folder, autocast: bool) -> None:
    torch.manual_seed(0)
    net, x = Net(), torch.randn(16, 64)
    debugger = ts.dump.Debugger(task="statistics", dump_path=str(folder), level="L1")
    debugger.start(net)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        net(x)
    debugger.stop()


def test_a_dump_records_its_devices_and_the_settings_it_ran_with(tmp_path) -> None:
    _dump(tmp_path, autocast=True)
    info = read_info(str(tmp_path / "step0" / "rank0"))
    assert info["devices"] == ["cpu"]
    settings = {s["name"]: s for s in info["settings"]["torch cpu"]}
    assert settings["autocast"]["value"] == "bfloat16"  # read inside the step, where autocast holds
    assert settings["torch.backends.cudnn.allow_tf32"]["value"] is False
    assert settings["autocast"]["explains"] > 0 and settings["autocast"]["meaning"]


def test_a_comparison_names_the_setting_that_differs_and_what_it_explains(tmp_path) -> None:
    _dump(tmp_path / "mixed", autocast=True)
    _dump(tmp_path / "plain", autocast=False)
    report = ts.dump.compare_dumps(tmp_path / "mixed", tmp_path / "plain")
    assert not report.passed  # bfloat16 products differ beyond the default tolerance
    assert [d.name for d in report.settings_differences] == ["autocast"]
    assert report.settings_differences[0].target == "bfloat16" and report.settings_differences[0].orig is None
    assert "autocast" in report.summary() and "is within it" in report.summary()
    assert "on cpu" in report.target_label
    from tscore.dump_compare.report_page import dump_page

    notes = dump_page(report).notes  # the page a person opens lists each setting with both values
    assert any(n.startswith("setting: autocast: 'bfloat16' on torch cpu, None on torch cpu") for n in notes)
    same = ts.dump.compare_dumps(tmp_path / "plain", tmp_path / "plain")
    assert same.settings_differences == [] and same.settings_note == ""


def test_the_finder_records_both_sides_settings_and_names_none_when_they_agree() -> None:
    torch.manual_seed(0)
    a, b = Net(), Net()
    report = ts.migrator.NetDifferenceFinder(pt_net=a, ms_net=b, print_level=0).compare(
        auto_inputs=(((4, 64), np.float32),)
    )
    assert report.passed
    assert set(report.run_settings) == set(report.labels)
    assert report.run_settings_differ == [] and report.run_settings_note == ""


def test_an_error_inside_a_recorded_call_reaches_the_training_unchanged_and_the_dump_goes_on(
    tmp_path,
) -> None:
    a, b = torch.ones(2, 3), torch.ones(3, 2)
    with pytest.raises(RuntimeError) as plain:
        torch.cat([a, b], dim=1)
    debugger = ts.dump.Debugger(task="statistics", dump_path=str(tmp_path), level="L1")
    debugger.start()
    try:
        torch.relu(a)
        with pytest.raises(RuntimeError) as dumped:
            torch.cat([a, b], dim=1)
        torch.sigmoid(a)
    finally:
        debugger.stop()
    assert str(dumped.value) == str(plain.value)
    names = [r["name"] for r in read_lines(str(tmp_path / "step0" / "rank0" / "dump.jsonl"))]
    assert "Torch_relu_0_forward" in names and "Torch_sigmoid_0_forward" in names
    assert "Torch_cat_0_forward" not in names  # it never returned: no record claims an output


def test_autocast_begun_after_the_first_tensor_is_still_recorded_from_inside_the_model(tmp_path) -> None:
    torch.manual_seed(0)
    net, x = Net(), torch.randn(4, 64)
    debugger = ts.dump.Debugger(task="statistics", dump_path=str(tmp_path), level="L1")
    debugger.start(net)
    x = torch.tanh(x)  # the first tensor on this device, seen before autocast begins
    with torch.autocast("cpu", dtype=torch.bfloat16):
        net(x)
    debugger.stop()
    settings = {
        s["name"]: s["value"] for s in read_info(str(tmp_path / "step0" / "rank0"))["settings"]["torch cpu"]
    }
    assert settings["autocast"] == "bfloat16"
