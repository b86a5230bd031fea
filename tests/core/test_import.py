"""import tscore stays light and has one documented effect outside itself."""

import json
import os
import subprocess
import sys

from tscore import mindspore_jit

ISOLATION_PROBE = """
import json, os, sys
before = dict(os.environ)
import numpy as np
import tscore
after_import = sorted(m for m in ("torch", "mindspore", "torch_npu") if m in sys.modules)
tscore.save(sys.argv[1] + "/x", {"a": np.ones(2)})
tscore.tensor_meta(np.ones(1))
after_use = sorted(m for m in ("torch", "mindspore", "torch_npu") if m in sys.modules)
changed = sorted(k for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k))
print(json.dumps({"import": after_import, "use": after_use, "env": changed,
                  "ms_ignore": os.environ.get("MS_JIT_IGNORE_MODULES")}))
"""


def run_isolation_probe(folder, env_extra=None):
    """Import tscore in a fresh interpreter, save numpy data, report what got imported."""
    env = {k: v for k, v in os.environ.items() if k != "MS_JIT_IGNORE_MODULES"}
    env.update(env_extra or {})
    out = subprocess.run(
        [sys.executable, "-c", ISOLATION_PROBE, str(folder)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_import_and_numpy_use_load_no_framework(tmp_path):
    report = run_isolation_probe(tmp_path)
    assert report["import"] == [] and report["use"] == []
    assert report["env"] == ["MS_JIT_IGNORE_MODULES"]
    assert report["ms_ignore"] == "tscore"


def test_user_entries_in_ms_jit_ignore_modules_are_kept(tmp_path):
    report = run_isolation_probe(tmp_path, {"MS_JIT_IGNORE_MODULES": "mine,other"})
    assert report["ms_ignore"] == "mine,other,tscore"


def test_declare_runtime_module_is_idempotent():
    env = {"MS_JIT_IGNORE_MODULES": "tscore,x"}
    mindspore_jit.declare_runtime_module(env)
    assert env == {"MS_JIT_IGNORE_MODULES": "tscore,x"}
    empty: dict[str, str] = {}
    mindspore_jit.declare_runtime_module(empty)
    assert empty == {"MS_JIT_IGNORE_MODULES": "tscore"}
