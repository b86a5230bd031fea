"""Regenerate the msprobe dumps in ``tests/data/msprobe_26.2``.

Run from the repository root, in the environment that has msprobe::

    .nox/msprobe-26.2/bin/python tests/data/make_msprobe_dumps.py

(``pip install "numpy<2" torch==2.13.0 mindstudio-probe==26.2.0`` makes such an
environment.)

For every task in ("statistics", "tensor") and variant in ("base",
"perturbed") it dumps one ``train_step`` of ``msprobe_net.SmallCnn`` (forward
and backward, no optimizer) at level "L1" with
``msprobe.pytorch.PrecisionDebugger`` into ``msprobe_26.2/{task}/{variant}``.
The "perturbed" network has noise added to ``conv2.weight``, so it matches
"base" up to conv1 and differs from conv2 onward. Each combination runs in a
fresh subprocess, because msprobe patches torch globally.

What msprobe 26.2.0 writes, without torch.distributed initialised::

    {dump_path}/step0/proc{pid}/dump.json
                               /stack.json
                               /construct.json       ({} at level L1)
                               /dump_tensor_data/*.pt (task "tensor" only)

This script then makes the output independent of the process and the machine:

* ``proc{pid}`` is renamed ``rank0`` (what msprobe names it when
  torch.distributed is initialised);
* in dump.json, ``dump_data_dir`` (an absolute path to ``proc{pid}/dump_tensor_data``
  for task "tensor", null for "statistics") is rewritten relative to the
  repository root; msprobe's own compare ignores it and looks for
  ``dump_tensor_data`` next to dump.json;
* in stack.json, the repository root is cut from the absolute file paths;
* anything else msprobe leaves in the dump folder is removed (26.2.0 leaves
  nothing else there).

The text is edited as text, so msprobe's JSON layout is kept as written.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
OUT = HERE / "msprobe_26.2"
TASKS = ("statistics", "tensor")
VARIANTS = ("base", "perturbed")
KEEP = {"dump.json", "stack.json", "construct.json", "dump_tensor_data"}
COMMAND = ".nox/msprobe-26.2/bin/python tests/data/make_msprobe_dumps.py"


def dump_one(task: str, variant: str, dump_path: Path) -> None:
    """Dump one train step; run only in a fresh process (msprobe patches torch)."""
    sys.path.insert(0, str(HERE))
    import msprobe_net
    from msprobe.pytorch import PrecisionDebugger

    net = msprobe_net.build(seed=0, perturb="conv2" if variant == "perturbed" else None)
    x, y = msprobe_net.make_inputs(seed=0)
    debugger = PrecisionDebugger(task=task, dump_path=str(dump_path), level="L1")
    debugger.start()
    # Nothing else between start and stop: printing a tensor here would dump
    # the API calls of torch's tensor formatting (isfinite, masked_select, ...).
    loss = msprobe_net.train_step(net, x, y)
    debugger.stop()
    debugger.step()
    print(f"{task}/{variant}: loss {loss.item():.6f}")


def normalise(dump_path: Path) -> Path:
    """Rename step0/proc{pid} to step0/rank0 and make paths relative; return rank0."""
    step = dump_path / "step0"
    procs = [p for p in step.iterdir() if p.is_dir() and p.name.startswith("proc")]
    if len(procs) != 1 or len(list(step.iterdir())) != 1:
        raise RuntimeError(f"expected exactly one proc{{pid}} folder in {step}: {sorted(step.iterdir())}")
    proc = procs[0]
    rank0 = step / "rank0"
    proc.rename(rank0)

    for path in rank0.iterdir():
        if path.name not in KEEP:
            print(f"removing {path.relative_to(REPO)}")
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()

    dump_json = rank0 / "dump.json"
    text = dump_json.read_text(encoding="utf-8")
    text = text.replace(str(proc), str(rank0.relative_to(REPO)))
    dump_json.write_text(text, encoding="utf-8")

    stack_json = rank0 / "stack.json"
    text = stack_json.read_text(encoding="utf-8")
    text = text.replace(str(REPO) + os.sep, "")
    stack_json.write_text(text, encoding="utf-8")

    for path in (dump_json, stack_json):
        leftover = path.read_text(encoding="utf-8")
        if str(REPO) in leftover or proc.name in leftover:
            raise RuntimeError(f"{path} still names {REPO} or {proc.name}")
    return rank0


def write_readme() -> None:
    """Describe the folders, the versions and the command."""
    msprobe_version = importlib.metadata.version("mindstudio-probe")
    torch_version = importlib.metadata.version("torch")
    numpy_version = importlib.metadata.version("numpy")
    lines = [
        "# msprobe dumps for tests",
        "",
        f"Made by `{COMMAND}` (run from the repository root)",
        f"with mindstudio-probe {msprobe_version} (msprobe), torch {torch_version} (CPU),",
        f"numpy {numpy_version}, Python {platform.python_version()}. Do not edit by hand.",
        "",
        "Each folder holds one `train_step` (forward, cross-entropy loss, backward; no",
        "optimizer) of `SmallCnn` from `tests/data/msprobe_net.py` on",
        '`make_inputs(seed=0)`, dumped with `PrecisionDebugger(task=..., level="L1")`:',
        "",
        "| folder | task | network |",
        "| --- | --- | --- |",
    ]
    nets = {
        "base": "`build(seed=0)`",
        "perturbed": '`build(seed=0, perturb="conv2")`: conv2.weight + 0.05 * randn',
    }
    tasks = {
        "statistics": "Max/Min/Mean/Norm per tensor",
        "tensor": "statistics and every tensor as a .pt file",
    }
    for task in TASKS:
        for variant in VARIANTS:
            lines.append(f"| `{task}/{variant}/step0/rank0` | {task} ({tasks[task]}) | {nets[variant]} |")
    lines += [
        "",
        "Every `rank0` folder holds `dump.json` (the records), `stack.json` (call stacks),",
        "`construct.json` (module tree; empty at level L1) and, for task tensor,",
        "`dump_tensor_data/` (one `torch.save`d tensor per `data_name` in dump.json).",
        "",
        "The perturbed network equals the base one up to conv1, so the two dumps agree",
        "on the forward records up to `Functional.relu.0.forward` and differ from",
        "`Functional.conv2d.1.forward` onward. In backward, every record differs except",
        "`Functional.cross_entropy.0.backward`: msprobe records there the gradient at",
        "the input of the loss's last autograd node (NllLossBackward0, i.e. the",
        "log-softmax output, -onehot/N), which the perturbation does not change.",
        "",
        "Changed after msprobe wrote them, so that they do not depend on the machine:",
        "msprobe names the folder `proc{pid}` (no torch.distributed), renamed here",
        "`rank0`; in dump.json, `dump_data_dir` is made relative to the repository root;",
        "in stack.json, the repository root is cut from the file paths.",
        "",
    ]
    (OUT / "README.md").write_text("\n".join(lines), encoding="utf-8")


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--one":
        dump_one(sys.argv[2], sys.argv[3], OUT / sys.argv[2] / sys.argv[3])
        return
    if len(sys.argv) != 1:
        sys.exit(f"usage: {COMMAND}")
    if OUT.exists():
        shutil.rmtree(OUT)
    for task in TASKS:
        for variant in VARIANTS:
            dump_path = OUT / task / variant
            result = subprocess.run(
                [sys.executable, str(Path(__file__).resolve()), "--one", task, variant],
                cwd=REPO,
                capture_output=True,
                text=True,
            )
            if result.returncode != 0:
                sys.stderr.write(result.stdout + result.stderr)
                sys.exit(f"msprobe dump failed for {task}/{variant}")
            print(result.stdout.strip())
            rank0 = normalise(dump_path)
            print(f"  -> {rank0.relative_to(REPO)}")
    write_readme()
    size = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file())
    print(f"{OUT.relative_to(REPO)}: {size} bytes in files")


if __name__ == "__main__":
    main()
