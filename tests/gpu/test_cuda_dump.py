"""The dump on a CUDA device: statistics with no host sync, tensor files from a side stream, CUDA vs CPU."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import tscore as ts
from tscore.dump_format.reading import read_info, read_lines

CUDA = torch.device("cuda")


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, padding=1)
        self.bn = nn.BatchNorm2d(32)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.head = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn(self.conv1(x)))
        y = F.relu(self.conv2(y))
        return self.head(F.adaptive_avg_pool2d(y, 1).flatten(1))


def _step(net: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    loss = F.cross_entropy(net(x), y)
    loss.backward()
    return loss


def _host_stats(values: np.ndarray) -> list[float]:
    a = values.astype(np.float64).ravel()
    return [a.max(), a.min(), a.mean(), float(np.linalg.norm(a))]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64])
def test_device_statistics_equal_float64_host_statistics(dtype) -> None:
    from ts_torch.plugin import plugin

    torch.manual_seed(1)
    tensors = [
        (torch.randn(n, device=CUDA) * scale + shift).to(dtype)
        if dtype.is_floating_point
        else torch.randint(-50, 50, (n,), device=CUDA, dtype=dtype)
        for n, scale, shift in ((1, 1.0, 0.0), (1000, 3.0, 1.0), (1 << 20, 0.1, 100.0), (4097, 1e3, -5.0))
    ]
    stats = [plugin.tensor_stats(t) for t in tensors]
    rows = plugin.stats_to_host(stats)()
    for tensor, row in zip(tensors, rows, strict=True):
        expected = _host_stats(tensor.cpu().to(torch.float64).numpy())
        # float32 accumulation over up to 2**20 elements: a few float32 roundings of the result
        np.testing.assert_allclose(row, expected, rtol=2e-5, atol=1e-6 * max(1.0, abs(expected[2])))


def test_nan_and_inf_statistics_follow_torchs_reductions() -> None:
    from ts_torch.plugin import plugin

    cases = {
        "nan": torch.tensor([1.0, float("nan"), 2.0], device=CUDA),
        "inf": torch.tensor([1.0, float("inf"), 2.0], device=CUDA),
        "both": torch.tensor([-float("inf"), float("inf"), 2.0], device=CUDA),
    }
    rows = plugin.stats_to_host([plugin.tensor_stats(t) for t in cases.values()])()
    nan, inf, both = rows
    assert all(math.isnan(v) for v in nan)
    assert inf == [math.inf, 1.0, math.inf, math.inf]
    assert both[0] == math.inf and both[1] == -math.inf and math.isnan(both[2]) and both[3] == math.inf


def test_a_dumped_cuda_step_makes_no_host_sync_and_records_exact_statistics(tmp_path) -> None:
    torch.manual_seed(0)
    net = ConvNet().to(CUDA)
    x, y = torch.randn(8, 3, 16, 16, device=CUDA), torch.randint(0, 10, (8,), device=CUDA)
    _step(net, x, y)  # cuDNN's set-up, outside the check
    torch.cuda.synchronize()
    debugger = ts.dump.Debugger(task="statistics", dump_path=str(tmp_path), level="L1")
    debugger.start(net)
    torch.cuda.set_sync_debug_mode("error")  # any .item(), .cpu(), .tolist() on this thread raises
    try:
        out = net(x)
        loss = F.cross_entropy(out, y)
        loss.backward()
    finally:
        torch.cuda.set_sync_debug_mode(0)
        debugger.stop()
    records = list(read_lines(str(tmp_path / "step0" / "rank0" / "dump.jsonl")))
    assert len(records) > 10
    linear = next(r for r in records if r["name"] == "Functional_linear_0_forward")
    got = [linear["outputs"][0][k] for k in ("max", "min", "mean", "norm")]
    np.testing.assert_allclose(got, _host_stats(out.detach().cpu().numpy()), rtol=1e-5, atol=1e-6)
    assert linear["outputs"][0]["device"] == "cuda:0"
    info = read_info(str(tmp_path / "step0" / "rank0"))
    assert info["devices"][0] == "cuda:0"
    names = {s["name"] for s in info["settings"]["torch cuda:0"]}
    assert "torch.backends.cudnn.allow_tf32" in names


def test_tensor_mode_on_cuda_writes_each_tensor_once_with_its_values(tmp_path) -> None:
    torch.manual_seed(0)
    net = ConvNet().to(CUDA)
    x, y = torch.randn(4, 3, 16, 16, device=CUDA), torch.randint(0, 10, (4,), device=CUDA)
    debugger = ts.dump.Debugger(task="tensor", dump_path=str(tmp_path), level="L1")
    debugger.start(net)
    out = net(x)
    F.cross_entropy(out, y).backward()
    debugger.stop()
    folder = tmp_path / "step0" / "rank0"
    records = list(read_lines(str(folder / "dump.jsonl")))
    linear = next(r for r in records if r["name"] == "Functional_linear_0_forward")
    written = np.load(folder / linear["outputs"][0]["file"])
    assert np.array_equal(written, out.detach().cpu().numpy())
    entries = [e for r in records for side in ("inputs", "outputs") for e in r[side] if "file" in e]
    files = list((folder / "tensors").iterdir())
    assert len(files) == len({e["file"] for e in entries}) < len(entries)  # shared tensors written once
    conv_in = next(r for r in records if r["name"] == "Functional_conv2d_0_forward")["inputs"][0]
    assert np.array_equal(np.load(folder / conv_in["file"]), x.cpu().numpy())


def _tf32_pair(tf32: bool) -> tuple[nn.Module, nn.Module, torch.Tensor]:
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.manual_seed(0)
    cpu_net = nn.Sequential(
        *[m for i in range(4) for m in (nn.Conv2d(32 if i else 3, 32, 3, padding=1), nn.Tanh())]
    )
    cuda_net = nn.Sequential(
        *[m for i in range(4) for m in (nn.Conv2d(32 if i else 3, 32, 3, padding=1), nn.Tanh())]
    )
    cuda_net.load_state_dict(cpu_net.state_dict())
    return cpu_net, cuda_net.to(CUDA), torch.randn(2, 3, 32, 32)


@pytest.fixture
def tf32_restored():
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


def test_a_cuda_run_against_a_cpu_run_names_tf32_when_it_is_the_cause(tf32_restored) -> None:
    from tscore.migrator import NetDifferenceFinder

    cpu_net, cuda_net, x = _tf32_pair(tf32=True)
    report = NetDifferenceFinder(pt_net=cpu_net, ms_net=cuda_net, auto_conv_ckpt=0).compare(
        inputs=(x.numpy(),), rtol=1e-6, atol=1e-6
    )
    assert report.labels == ("torch (cpu)", "torch (cuda:0)")
    differing = {d.name for d in report.run_settings_differ}
    assert "torch.backends.cudnn.allow_tf32" in differing
    assert "within it" in report.run_settings_note, report.run_settings_note
    assert "torch.backends.cudnn.allow_tf32" in report.verdict()

    cpu_net, cuda_net, x = _tf32_pair(tf32=False)
    report = NetDifferenceFinder(pt_net=cpu_net, ms_net=cuda_net, auto_conv_ckpt=0).compare(
        inputs=(x.numpy(),), rtol=1e-4, atol=1e-5
    )
    assert report.run_settings_differ == [] and report.run_settings_note == ""
    assert report.passed, report.verdict()


def test_a_cuda_dump_against_a_cpu_dump_names_tf32(tmp_path, tf32_restored) -> None:
    cpu_net, cuda_net, x = _tf32_pair(tf32=True)
    for name, net, device in (("cpu", cpu_net, "cpu"), ("cuda", cuda_net, CUDA)):
        debugger = ts.dump.Debugger(task="statistics", dump_path=str(tmp_path / name), level="L1")
        debugger.start(net)
        net(x.to(device))
        debugger.stop()
    report = ts.dump.compare_dumps(tmp_path / "cuda", tmp_path / "cpu")
    assert "cuda:0" in report.target_label and "cpu" in report.orig_label
    assert "torch.backends.cudnn.allow_tf32" in {d.name for d in report.settings_differences}
    assert "torch.backends.cudnn.allow_tf32" in report.summary()


def test_an_out_of_memory_error_in_a_recorded_call_reaches_the_training_as_it_would_without_the_dump(
    tmp_path,
) -> None:
    debugger = ts.dump.Debugger(task="statistics", dump_path=str(tmp_path), level="L1")
    x = torch.randn(16, device=CUDA)
    debugger.start()
    try:
        torch.relu(x)
        with pytest.raises(torch.OutOfMemoryError):
            x.repeat(1 << 46)  # 4 PB, asked for inside a recorded call: the allocator refuses it
        torch.sigmoid(x)
    finally:
        debugger.stop()
    names = [r["name"] for r in read_lines(str(tmp_path / "step0" / "rank0" / "dump.jsonl"))]
    assert "Torch_relu_0_forward" in names and "Torch_sigmoid_0_forward" in names


def test_a_model_on_two_devices_records_each_device_and_its_settings(tmp_path) -> None:
    class Split(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.first = nn.Linear(8, 8)
            self.second = nn.Linear(8, 4).to(CUDA)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.second(torch.relu(self.first(x)).to(CUDA))

    net = Split()
    debugger = ts.dump.Debugger(task="statistics", dump_path=str(tmp_path), level="L1")
    debugger.start(net)
    net(torch.randn(2, 8)).sum().backward()
    debugger.stop()
    info = read_info(str(tmp_path / "step0" / "rank0"))
    assert info["devices"] == ["cuda:0", "cpu"]
    assert set(info["settings"]) == {"torch cuda:0", "torch cpu"}


def test_tensor_copies_stay_within_the_pinned_buffer_and_give_it_all_back(tmp_path, monkeypatch) -> None:
    from ts_torch import device_copies

    small = device_copies.PinnedRing(8 << 20, lambda n: torch.empty(n, dtype=torch.uint8, pin_memory=True))
    monkeypatch.setattr(device_copies, "_RING", small)
    peak = []
    taken = small.take

    def watched(nbytes, timeout=device_copies._WAIT_SECONDS):
        found = taken(nbytes, timeout)
        peak.append(small.in_use)
        return found

    monkeypatch.setattr(small, "take", watched)
    xs = [torch.randn(1 << 20, device=CUDA) for _ in range(12)]  # 4 MB each, 48 MB in all
    debugger = ts.dump.Debugger(task="tensor", dump_path=str(tmp_path), level="L1")
    debugger.start()
    outs = [torch.tanh(x) for x in xs]
    debugger.stop()
    assert max(peak) <= 8 << 20 and small.in_use == 0
    folder = tmp_path / "step0" / "rank0"
    records = {r["name"]: r for r in read_lines(str(folder / "dump.jsonl"))}
    for index in (0, 11):
        entry = records[f"Torch_tanh_{index}_forward"]["outputs"][0]
        assert np.array_equal(np.load(folder / entry["file"]), outs[index].cpu().numpy())


def test_a_tensor_changed_in_place_right_after_its_call_is_written_as_the_call_saw_it(tmp_path) -> None:
    torch.manual_seed(0)
    xs = [torch.randn(1 << 22, device=CUDA) for _ in range(4)]  # 16 MB each: copies long enough to race
    before = [x.cpu() for x in xs]
    debugger = ts.dump.Debugger(task="tensor", dump_path=str(tmp_path), level="L1")
    debugger.start()
    for x in xs:
        torch.sigmoid(x)
        x.mul_(-3.0)  # changes the input the sigmoid record names, at once on the device
    debugger.stop()
    folder = tmp_path / "step0" / "rank0"
    records = {r["name"]: r for r in read_lines(str(folder / "dump.jsonl"))}
    for index, expected in enumerate(before):
        entry = records[f"Torch_sigmoid_{index}_forward"]["inputs"][0]
        assert np.array_equal(np.load(folder / entry["file"]), expected.numpy()), index


def test_float_tensors_take_the_one_pass_kernel_and_agree_with_atens_reductions() -> None:
    from ts_torch import fused_stats
    from ts_torch.device_copies import DeviceStats, device_stats
    from ts_torch.plugin import plugin

    assert fused_stats.enabled(), "Triton comes with CUDA torch: the one-pass kernel must be in use"
    torch.manual_seed(2)
    big = torch.randn(fused_stats.BLOCK * fused_stats.MAX_PROGRAMS * 3 + 7, device=CUDA)  # several rounds
    tensors = [big, big[1:], torch.randn(64, 33, device=CUDA).half(), torch.randn(5, device=CUDA).bfloat16()]
    assert tensors[1].data_ptr() % 16 != 0  # a kernel compiled for aligned data must not read it
    fused = [plugin.tensor_stats(t) for t in tensors] + [plugin.tensor_stats(t) for t in tensors]
    assert [type(s) for s in fused] == [fused_stats.SlabStats] * 8
    # the second round went through the compiled kernels directly, one per device, dtype and alignment
    assert fused_stats._direct and {(0, big.dtype, True), (0, big.dtype, False)} <= set(fused_stats._COMPILED)
    assert type(plugin.tensor_stats(torch.randn(8, 4, device=CUDA).t())) is DeviceStats  # not contiguous
    aten = [device_stats(t.float()) for t in tensors] * 2
    got, want = plugin.stats_to_host(fused)(), plugin.stats_to_host(aten)()
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)


def test_statistics_spread_over_several_slabs_come_back_in_their_order() -> None:
    from ts_torch import fused_stats
    from ts_torch.plugin import plugin

    size = fused_stats.BLOCK * fused_stats.MIN_ROUNDS * 300  # 300 rows each: past one slab's 16384
    tensors = [torch.full((size,), float(i), device=CUDA) for i in range(60)]
    stats = [plugin.tensor_stats(t) for t in tensors]
    assert {s.programs for s in stats} == {300}
    assert len({id(s.slab) for s in stats}) >= 2
    rows = plugin.stats_to_host(stats[::-1])()[::-1]  # a batch in any order
    assert [row[0] for row in rows] == [float(i) for i in range(60)]
    assert [row[2] for row in rows] == [float(i) for i in range(60)]


def test_statistics_made_on_a_side_stream_are_copied_after_their_kernel_there() -> None:
    from ts_torch import fused_stats
    from ts_torch.plugin import plugin

    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(
            200_000_000
        )  # the side stream is busy for a while: a copy not waiting reads too soon
        x = torch.full((1 << 20,), 3.0, device=CUDA)
        stats = plugin.tensor_stats(x)
    assert type(stats) is fused_stats.SlabStats and stats.slab.stream == side.cuda_stream
    row = plugin.stats_to_host([stats])()[0]  # staged on the default stream, as the dump's hand-over is
    assert row == [3.0, 3.0, 3.0, 3.0 * 1024]


def test_the_overflow_check_on_cuda_reads_no_probe_per_call_and_names_where_it_started(tmp_path) -> None:
    """Probes stay on the device until a window's read (here at ``stop()``): no sync per API call."""
    import warnings

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.Linear(16, 4)).to(CUDA).half()
    x = (torch.randn(4, 8, device=CUDA) * 30).half()
    net(x).float().sum().backward()  # cuBLAS's set-up, outside the check
    torch.cuda.synchronize()
    debugger = ts.dump.Debugger(task="overflow_check", dump_path=str(tmp_path), overflow_nums=-1)
    debugger.start(net)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")  # each .item(), .cpu(), .tolist() on this thread warns
        try:
            net(x).float().sum().backward()
        finally:
            torch.cuda.set_sync_debug_mode(0)
    debugger.step()
    assert [str(w.message) for w in caught if "synchroniz" in str(w.message)] == []
    assert debugger.overflows[0].events == [] and debugger.overflows[0].first_own is None
    with torch.no_grad():
        net[2].weight.mul_(10000.0)  # the second linear's float16 output overflows now
    debugger.start(net)
    net(x)
    debugger.stop()
    first = debugger.overflows[1].first_own
    assert first is not None and first.call == "Functional.linear.1.forward" and first.module == "2"
    assert first.where is not None and "test_cuda_dump.py" in first.where
    from tscore.dump.overflow import WINDOW

    debugger.step()
    debugger.start()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            for _ in range(4 * WINDOW):
                torch.add(x, 1.0)
        finally:
            torch.cuda.set_sync_debug_mode(0)
    debugger.stop()
    syncs = [w for w in caught if "synchroniz" in str(w.message)]
    assert 1 <= len(syncs) <= 4  # a read per window of calls, not one per call
