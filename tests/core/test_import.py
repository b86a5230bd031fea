"""import tscore stays light and changes nothing outside itself."""

import json
import os
import subprocess
import sys

ISOLATION_PROBE = """
import json, os, sys
before = dict(os.environ)
import numpy as np
import tscore
after_import = sorted(m for m in ("torch", "mindspore", "torch_npu", "paddle") if m in sys.modules)
env_import = sorted(k for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k))
tscore.save(sys.argv[1] + "/x", {"a": np.ones(2)})
tscore.tensor_meta(np.ones(1))
after_use = sorted(m for m in ("torch", "mindspore", "torch_npu", "paddle") if m in sys.modules)
print(json.dumps({"import": after_import, "use": after_use, "env_import": env_import}))
"""


def run_isolation_probe(folder, env_extra=None):
    """Import tscore in a fresh interpreter, save numpy data, report what got imported and changed."""
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


def test_import_and_numpy_use_load_no_framework_and_change_no_environment(tmp_path):
    report = run_isolation_probe(tmp_path)
    assert report["import"] == [] and report["use"] == []
    # import alone touches no framework's environment; only a loaded plugin may prepare its own
    assert report["env_import"] == []
