"""msprobe's MindSpore example with one import changed: ``from tscore.msprobe.mindspore import ...``.

A PyNative training loop (``value_and_grad``, an optimizer) dumped by
``PrecisionDebugger`` from msprobe's ``config.json``; two runs, one with
another LayerNorm epsilon, compared by ``tscore dump-compare``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import mindspore as ms
import numpy as np
import pytest
from mindspore import nn

from tscore.cli import main
from tscore.dump_compare import compare_dumps
from tscore.msprobe.mindspore import PrecisionDebugger


@pytest.fixture(autouse=True)
def one_debugger_a_test() -> Iterator[None]:
    """msprobe keeps one debugger a process; each test starts without one and leaves none."""
    PrecisionDebugger.close()
    yield
    PrecisionDebugger.close()


class Net(nn.Cell):
    def __init__(self, eps: float) -> None:
        super().__init__()
        self.dense = nn.Dense(6, 8)
        self.norm = nn.LayerNorm((8,), epsilon=eps)
        self.head = nn.Dense(8, 2)

    def construct(self, x: ms.Tensor) -> ms.Tensor:
        return self.head(ms.ops.relu(self.norm(self.dense(x))))


def _train(tmp_path: Path, name: str, eps: float) -> Path:
    """msprobe's MindSpore PyNative example: start(model), the step, stop, step."""
    ms.set_context(mode=ms.PYNATIVE_MODE)
    ms.set_seed(0)
    config = tmp_path / f"{name}.json"
    dump_path = tmp_path / name
    config.write_text(
        json.dumps(
            {
                "task": "statistics",
                "dump_path": str(dump_path),
                "rank": [],
                "step": [0],
                "level": "L1",
                "statistics": {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": "statistics"},
            }
        )
    )
    net = Net(eps)
    optimizer = nn.SGD(net.trainable_params(), learning_rate=0.1)

    def forward_fn(data: ms.Tensor) -> ms.Tensor:
        return (net(data) ** 2).mean()

    grad_fn = ms.value_and_grad(forward_fn, None, optimizer.parameters)
    debugger = PrecisionDebugger(config_path=str(config))
    rng = np.random.default_rng(0)
    for _ in range(2):
        data = ms.Tensor(rng.standard_normal((4, 6)).astype(np.float32))
        debugger.start(model=net)
        _, grads = grad_fn(data)
        optimizer(grads)
        debugger.stop()
        debugger.step()
    PrecisionDebugger.close()
    return dump_path


def test_msprobes_mindspore_example_dumps_and_dump_compare_names_the_layer_norm(tmp_path) -> None:
    good, other = _train(tmp_path, "good", 1e-5), _train(tmp_path, "other", 1e-1)
    assert sorted(p.name for p in good.iterdir()) == ["step0"]  # the config dumps step 0 only
    assert main(["dump-compare", str(good / "step0" / "rank0"), str(good / "step0" / "rank0")]) == 0
    assert main(["dump-compare", str(other / "step0" / "rank0"), str(good / "step0" / "rank0")]) == 1
    first = compare_dumps(str(other / "step0" / "rank0"), str(good / "step0" / "rank0")).first_error
    assert first is not None and first.target_call == "Primitive_LayerNorm_0_forward", first
    assert first.status == "own" and first.module == "norm"


def test_seed_all_with_deterministic_kernels_may_be_called_twice() -> None:
    """MindSpore takes set_deterministic once a process; a second seed_all(mode=True) must not raise."""
    code = "from tscore.msprobe.mindspore import seed_all; seed_all(1, mode=True); seed_all(2, mode=True)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
