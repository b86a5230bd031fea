"""msprobe users switch with one import: ``from tscore.msprobe.pytorch import PrecisionDebugger``.

msprobe's documented PyTorch example (a training loop with ``start``,
``stop``, ``step``), run with that import changed, on a real torch network
and msprobe's own ``config.json`` layout; its dump is read by ``tscore
dump-compare``. msprobe's options tscore lacks are errors naming them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from torch import nn

from tscore.cli import main
from tscore.dump.config import DumpConfigError
from tscore.msprobe.pytorch import PrecisionDebugger, seed_all


@pytest.fixture(autouse=True)
def one_debugger_a_test() -> Iterator[None]:
    """msprobe keeps one debugger a process; each test starts without one and leaves none."""
    PrecisionDebugger.close()
    yield
    PrecisionDebugger.close()


def _config(tmp_path: Path, dump_path: Path, **top: object) -> Path:
    """msprobe's config.json: top-level keys and a section named after the task."""
    document = {
        "task": "statistics",
        "dump_path": str(dump_path),
        "rank": [],
        "step": [0, 1],
        "level": "L1",
        "enable_dataloader": False,
        "statistics": {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": "statistics"},
        **top,
    }
    path = tmp_path / f"config_{len(list(tmp_path.glob('config_*')))}.json"
    path.write_text(json.dumps(document))
    return path


def _train(config: Path, slope: float = 0.01, steps: int = 3) -> None:
    """msprobe's example loop, the import changed: start, the step, stop, step."""
    seed_all()
    model = nn.Sequential(nn.Linear(6, 8), nn.LeakyReLU(slope), nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    debugger = PrecisionDebugger(config_path=str(config))
    data = torch.randn(steps, 4, 6, generator=torch.Generator().manual_seed(0))
    for batch in data:
        debugger.start(model=model)
        loss = model(batch).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        debugger.stop()
        debugger.step()
    PrecisionDebugger.close()


def test_msprobes_example_dumps_the_steps_its_config_names_and_dump_compare_reads_them(tmp_path) -> None:
    good, steep = tmp_path / "good", tmp_path / "steep"
    _train(_config(tmp_path, good))
    _train(_config(tmp_path, steep), slope=0.2)
    assert sorted(p.name for p in good.iterdir()) == ["step0", "step1"]  # step 2 left out by the config
    assert main(["dump-compare", str(good / "step0" / "rank0"), str(good / "step0" / "rank0")]) == 0
    assert main(["dump-compare", str(steep / "step1" / "rank0"), str(good / "step1" / "rank0")]) == 1


def test_arguments_override_the_file_and_the_first_debugger_is_the_one_a_process_keeps(tmp_path) -> None:
    config = _config(tmp_path, tmp_path / "unused")
    first = PrecisionDebugger(config_path=str(config), dump_path=str(tmp_path / "given"), step=["1-2"])
    assert PrecisionDebugger(task="tensor") is first  # msprobe's: one a process, the first kept
    assert first.debugger.config.dump_path == str(tmp_path / "given")
    assert first.debugger.config.step == [1, 2] and first.debugger.config.task == "statistics"


def test_without_a_config_file_msprobes_defaults_hold(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    debugger = PrecisionDebugger()
    assert (debugger.debugger.config.task, debugger.debugger.config.level) == ("statistics", "L1")
    with debugger.debugger:
        torch.relu(torch.ones(3))
    assert (tmp_path / "dump_path" / "step0" / "rank0" / "dump.jsonl").is_file()


@pytest.mark.parametrize(
    ("top", "named"),
    [
        ({"task": "free_benchmark"}, "msprobe's task 'free_benchmark' is not supported by tscore"),
        ({"level": "L2"}, "msprobe's level 'L2' is not supported by tscore"),
        ({"enable_dataloader": True}, "msprobe's enable_dataloader=true is not supported by tscore"),
        ({"async_dump": True}, "msprobe's async_dump=true is not supported by tscore"),
        ({"precision": "high"}, "unknown key 'precision'"),
        ({"step": ["2-x"]}, "step '2-x' is neither a step nor a range"),
    ],
)
def test_an_msprobe_option_tscore_does_not_support_is_an_error_naming_it(tmp_path, top, named) -> None:
    config = _config(tmp_path, tmp_path / "dump", **top)
    with pytest.raises(DumpConfigError) as raised:
        PrecisionDebugger(config_path=str(config))
    assert named in str(raised.value) and str(config) in str(raised.value)
    assert PrecisionDebugger._instance is None  # a failed one is not kept


def test_msprobe_methods_tscore_lacks_are_named() -> None:
    debugger = PrecisionDebugger()
    with pytest.raises(DumpConfigError, match=r"PrecisionDebugger\.save is msprobe's"):
        debugger.save(torch.ones(1), "x")
    with pytest.raises(DumpConfigError, match="token_range"):
        debugger.start(token_range=[0, 1])


def test_a_debugger_cannot_be_pickled_into_a_second_one() -> None:
    """A copy would replace the live debugger of the process (msprobe keeps one)."""
    import pickle

    debugger = PrecisionDebugger()
    live = debugger.debugger
    with pytest.raises(TypeError, match="one a process"):
        pickle.dumps(debugger)
    assert PrecisionDebugger().debugger is live
    PrecisionDebugger.close()
    with pytest.raises(DumpConfigError, match="closed or never made"):
        getattr(debugger, "debugger")  # noqa: B009
