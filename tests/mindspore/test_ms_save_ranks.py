"""Two MindSpore ranks (a real dynamic cluster on CPU: a scheduler and two workers) save into one folder.

Each rank writes ``rank{r}/``, as with torch.distributed; the rank comes from MindSpore's communication.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap

import numpy as np

import tscore as ts

WORKER = textwrap.dedent(
    """
    import sys
    import numpy as np
    import mindspore as ms
    from mindspore.communication import get_rank, init
    ms.set_context(device_target="CPU")
    init()
    import tscore as ts
    folder = sys.argv[1]
    for step in range(5):
        ts.save(folder + "/x", ms.Tensor(np.full(3, get_rank() * 100.0 + step, np.float32)))
    print("saved", flush=True)
    """
)
SCHEDULER = (
    "import mindspore as ms; ms.set_context(device_target='CPU'); "
    "from mindspore.communication import init; init()"
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_each_mindspore_rank_saves_into_its_own_folder(tmp_path):
    env = {
        **os.environ,
        "MS_SCHED_HOST": "127.0.0.1",
        "MS_SCHED_PORT": str(_free_port()),
        "MS_WORKER_NUM": "2",
    }
    folder = tmp_path / "out"
    procs = [subprocess.Popen([sys.executable, "-c", SCHEDULER], env={**env, "MS_ROLE": "MS_SCHED"})]
    procs += [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(folder)],
            env={**env, "MS_ROLE": "MS_WORKER", "MS_NODE_ID": str(node)},
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        for node in (0, 1)
    ]
    try:
        outputs = [proc.communicate(timeout=180)[0] if proc.stdout else "" for proc in procs]
        codes = [proc.wait(timeout=180) for proc in procs]
    finally:
        for proc in procs:
            proc.kill()
    assert all("saved" in out for out in outputs[1:]), "a rank's ts.save did not return"
    # every process ends well; MindSpore 2.10's CPU cluster worker sometimes dies of SIGSEGV in its own
    # teardown, after it has unregistered (seen once in a CI run, load-dependent): not a failed save
    assert codes[0] == 0 and all(code in (0, -11) for code in codes[1:]), codes
    for rank in (0, 1):
        values = [float(np.load(folder / f"rank{rank}" / f"{step}_x.npy")[0]) for step in range(5)]
        assert values == [rank * 100.0 + step for step in range(5)]
    assert not list(folder.glob("*.npy"))
    report = ts.migrator.compare_npy_dir(folder, folder, print_level=0)
    assert report.total == 10 and report.passed
    assert [p.orig_name for p in report.pairs][:2] == ["rank0/0_x.npy", "rank0/1_x.npy"]
