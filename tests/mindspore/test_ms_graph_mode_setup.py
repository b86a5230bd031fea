"""The MindSpore plugin, not the core, prepares graph mode for tscore, before a compiler meets ts.save."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from ts_mindspore.graph_mode import declare_module

FIRST_USE_IN_GRAPH_MODE = """
import json, os, sys
import numpy as np
import mindspore as ms
import tscore as ts
after_import = os.environ.get("MS_JIT_IGNORE_MODULES")
ms.set_context(mode=ms.GRAPH_MODE)

class Net(ms.nn.Cell):
    def construct(self, x):
        y = x * 2
        ts.save(sys.argv[1] + "/y", y)  # the first thing tscore is asked for
        return y + 1

os.makedirs(sys.argv[1], exist_ok=True)
Net()(ms.Tensor(np.arange(4, dtype=np.float32)))
os.makedirs(sys.argv[1], exist_ok=True)
print(json.dumps({"after_import": after_import, "after_use": os.environ.get("MS_JIT_IGNORE_MODULES"),
                  "files": sorted(os.listdir(sys.argv[1]))}))
"""


def run_first_use(folder, ignore=None):
    env = {k: v for k, v in os.environ.items() if k != "MS_JIT_IGNORE_MODULES"}
    if ignore is not None:
        env["MS_JIT_IGNORE_MODULES"] = ignore
    script = folder / "first_use.py"  # MindSpore compiles only code it can read from a file
    script.write_text(FIRST_USE_IN_GRAPH_MODE)
    out = subprocess.run(
        [sys.executable, str(script), str(folder / "out")],
        capture_output=True,
        text=True,
        env=env,
        cwd=folder,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_ts_save_as_the_first_use_inside_construct_saves_the_run_time_values(tmp_path):
    report = run_first_use(tmp_path)
    assert report["after_import"] is None  # import tscore alone changed nothing
    assert report["after_use"] == "tscore"
    import numpy as np

    assert "0_y.npy" in report["files"]
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "0_y.npy"), [0.0, 2.0, 4.0, 6.0])


def test_the_user_entries_in_ms_jit_ignore_modules_are_kept(tmp_path):
    assert run_first_use(tmp_path, "mine,other")["after_use"] == "mine,other,tscore"


def test_declaring_twice_changes_nothing():
    env = {"MS_JIT_IGNORE_MODULES": "tscore,x"}
    declare_module("tscore", env)
    assert env == {"MS_JIT_IGNORE_MODULES": "tscore,x"}
    empty: dict[str, str] = {}
    declare_module("tscore", empty)
    assert empty == {"MS_JIT_IGNORE_MODULES": "tscore"}
