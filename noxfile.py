"""Every way to install, test, lint and benchmark tscore.

Plain ``nox`` runs lint and the ten test sessions: the core with no framework
installed, torch alone, MindSpore alone, both together, a real model zoo's
port (mindcv) against torch, the MSAdapter backend on mindnlp's mindtorch,
the PaddlePaddle backend beside torch, the Ascend NPU plugin against a fake
torch_npu, the HTML reports in a real headless Chromium, and the documentation
site built in strict mode. ``nox -s gpu`` runs the GPU tests on a machine with CUDA.
``nox -s example`` runs the bundled example; ``nox -s bench``,
``nox -s bench_compare``, ``nox -s bench_checkpoint``, ``nox -s bench_netdiff``,
``nox -s bench_dump``, ``nox -s bench_host_stats``, ``nox -s bench_dump_compare`` and ``nox -s bench_html``
the benchmarks; ``nox -s fuzz`` the fuzz suites at length.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import nox

nox.options.sessions = [
    "lint",
    "core",
    "torch",
    "mindspore",
    "both",
    "zoo",
    "msadapter",
    "paddle",
    "npu",
    "browser",
    "docs",
]
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = True

PYTHON = None  # the interpreter nox runs with
CONSTRAINTS = ("-c", ".ci/constraints.txt")
CORE = ".[test,fast]"
TORCH_PLUGIN = "./plugins/ts_torch"
MS_PLUGIN = "./plugins/ts_mindspore"
PADDLE_PLUGIN = "./plugins/ts_paddle"
NPU_PLUGIN = "./plugins/ts_npu"
# HuggingFace models for the transformer ports (tests/cross/transformer_ports.py); the version mindnlp
# 0.5.1 runs with, which imports beside torch 2.13 and MindSpore 2.10 with numpy 1.
TRANSFORMERS = "transformers==4.57.1"
# MindSpore 2.10 cannot compute gradients with numpy 2 (FRAMEWORKS.md).
MS_NUMPY = "numpy>=1.25,<2"


def _pytest(session: nox.Session, *paths: str) -> None:
    session.run("pytest", *(session.posargs or paths))


def _compiled_capture(session: nox.Session) -> None:
    """Make the sessions that dump torch use ts_torch's compiled capture, built once for all of them.

    ``TSCORE_TORCH_CAPTURE=compiled`` makes a failed build an error, not a quiet fallback to the
    Python capture (whose own tests force it where they need it); the build lands in one folder
    under ``.nox`` that every session shares (its key holds torch's version and the source's hash).
    """
    session.env["TSCORE_TORCH_CAPTURE"] = "compiled"
    session.env["TSCORE_CACHE_DIR"] = str(Path(".nox", "tscore-cache").resolve())


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """Ruff over the whole tree, mypy over the core."""
    session.install(
        "ruff>=0.6",
        "mypy>=1.10",
        "pydantic>=2.4",
        "numpy>=1.25",
        "pluggy>=1.3",
        "orjson>=3.9",
        "types-tabulate",
        "types-tqdm",
        "jinja2>=3.1",
        "threadpoolctl",
        "ml_dtypes",
        "pytest>=7.4",  # tscore.testing.conformance, the kit shipped for backend authors
        "hypothesis>=6.100",  # tscore.testing.fuzzing
    )
    session.run("ruff", "check", ".")
    session.run("mypy", "tscore")


@nox.session(python=PYTHON)
def core(session: nox.Session) -> None:
    """The core with no framework installed; the plugins are present but must be skipped."""
    session.install(CORE)
    # The plugin packages without their frameworks: tscore must skip them with a warning.
    session.install("--no-deps", TORCH_PLUGIN, MS_PLUGIN, PADDLE_PLUGIN, NPU_PLUGIN)
    session.run(
        "python",
        "-c",
        "import importlib.util as u, sys; "
        "sys.exit(any(u.find_spec(m) for m in ('torch', 'mindspore', 'paddle', 'torch_npu')))",
        silent=True,
    )
    _pytest(session, "tests/core")


@nox.session(python=PYTHON)
def torch(session: nox.Session) -> None:
    """The core and the PyTorch plugin without MindSpore; the GPU statistics kernel, interpreted."""
    # Triton's interpreter runs ts_torch's GPU kernel on CPU tensors (tests/triton); CUDA builds of
    # torch bring Triton themselves, the CPU build does not
    session.install(*CONSTRAINTS, CORE, TORCH_PLUGIN, "triton")
    session.env["TRITON_INTERPRET"] = "1"  # read when Triton is imported, which torch._dynamo may do first
    _compiled_capture(session)
    _pytest(session, "tests/core", "tests/torch", "tests/triton")


@nox.session(python=PYTHON)
def mindspore(session: nox.Session) -> None:
    """The core and the MindSpore plugin, without torch."""
    session.install(*CONSTRAINTS, CORE, MS_PLUGIN, MS_NUMPY)
    _pytest(session, "tests/core", "tests/mindspore")


@nox.session(python=PYTHON)
def both(session: nox.Session) -> None:
    """Both frameworks in one environment: the torch, MindSpore and cross-framework tests (HF models too)."""
    session.install(*CONSTRAINTS, CORE, TORCH_PLUGIN, MS_PLUGIN, MS_NUMPY, TRANSFORMERS)
    _compiled_capture(session)
    _pytest(session, "tests/core", "tests/torch", "tests/mindspore", "tests/cross")


@nox.session(python=PYTHON)
def zoo(session: nox.Session) -> None:
    """The difference finder on a real model zoo's port (mindcv 0.3.0), no weight map passed."""
    session.install(*CONSTRAINTS, CORE, TORCH_PLUGIN, MS_PLUGIN, MS_NUMPY, "mindcv==0.3.0")
    _compiled_capture(session)
    _pytest(session, "tests/zoo")


# mindnlp 0.5.1's own requirements pin MindSpore <= 2.7 and pull real torch through accelerate: its
# mindtorch runs on MindSpore 2.10 with these, found one missing import at a time (FRAMEWORKS.md).
MSADAPTER_NO_DEPS = (
    "mindnlp==0.5.1",
    "transformers==4.57.1",
    "tokenizers==0.22.1",
    "huggingface-hub==0.36.2",
    "accelerate==1.15.0",
    "diffusers==0.35.2",
)
MSADAPTER_DEPS = (
    "mindspore==2.10.0",
    "ml_dtypes",
    "regex",
    "safetensors",
    "requests",
    "pyyaml",
    "filelock",
    "fsspec",
    "packaging",
    "tqdm",
    "typing_extensions",
    "ftfy",
    "pillow",
    "psutil",
    "importlib_metadata",
)


@nox.session(python=PYTHON)
def msadapter(session: nox.Session) -> None:
    """The MSAdapter backend: mindnlp 0.5.1's mindtorch on MindSpore 2.10, no real torch in the venv.

    ts_mindspore is installed beside it, as a user of both would have them: both claim MindSpore's
    tensors, and the tests check that the backend that builds on MindSpore answers.
    """
    session.install(*CONSTRAINTS, CORE, "./plugins/ts_msadapter", MS_PLUGIN, MS_NUMPY, *MSADAPTER_DEPS)
    session.install("--no-deps", *MSADAPTER_NO_DEPS)
    _pytest(session, "tests/msadapter")


@nox.session(python=PYTHON)
def paddle(session: nox.Session) -> None:
    """The PaddlePaddle backend beside torch: its conformance kit, torch/Paddle pairs, .pdparams files."""
    session.install(*CONSTRAINTS, CORE, TORCH_PLUGIN, PADDLE_PLUGIN)
    _compiled_capture(session)
    _pytest(session, "tests/paddle")


@nox.session(python=PYTHON)
def npu(session: nox.Session) -> None:
    """The Ascend NPU plugin beside torch, against a FAKE torch_npu (tests/npu): no NPU exists here."""
    session.install(*CONSTRAINTS, CORE, TORCH_PLUGIN, NPU_PLUGIN)
    session.env["PYTHONPATH"] = str(Path("tests/npu/fake_torch_npu").resolve())
    _compiled_capture(session)
    _pytest(session, "tests/npu")


def _chromium(session: nox.Session) -> None:
    """Install Debian's Chromium when the machine has none (root, or sudo): Playwright drives it."""
    if shutil.which("chromium"):
        return
    sudo = "" if os.geteuid() == 0 else "sudo "
    install = f"{sudo}apt-get install -y chromium"
    session.run("sh", "-c", f"{install} || ({sudo}apt-get update && {install})", external=True)


@nox.session(python=PYTHON)
def browser(session: nox.Session) -> None:
    """Every kind of HTML report opened in headless Chromium: markers, filters, clicks, no network."""
    _chromium(session)
    session.install(*CONSTRAINTS, CORE, TORCH_PLUGIN, "playwright>=1.40")
    _compiled_capture(session)
    _pytest(session, "tests/browser")


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """The documentation site (``docs/``, ``mkdocs.yml``): built in strict mode, then checked as built.

    Strict mode fails on a broken link, a missing page or a reference mkdocstrings cannot resolve;
    ``tests/site`` then reads the built pages (every hook and public name in the reference, every
    page in the navigation, the pictures). The Python blocks of its pages run in the framework
    sessions (``tests/cross/test_docs_examples.py`` and its kin), which have the frameworks they use.
    """
    session.install(*CONSTRAINTS, ".[docs]", "pytest>=7.4")
    session.env["NO_MKDOCS_2_WARNING"] = "1"  # Material's banner about its successor, not a problem here
    site = Path(session.create_tmp()).resolve() / "site"
    session.run("mkdocs", "build", "--strict", "--site-dir", str(site))
    session.env["TSCORE_SITE_DIR"] = str(site)
    _pytest(session, "tests/site")


@nox.session(python=PYTHON)
def bench_html(session: nox.Session) -> None:
    """HTML report size and open time in headless Chromium, at 1,000 and 200,000 rows."""
    _chromium(session)
    session.install(*CONSTRAINTS, ".", "playwright>=1.40")
    session.run("python", "benchmarks/bench_html.py", *session.posargs)


@nox.session(python=PYTHON)
def example(session: nox.Session) -> None:
    """Run the bundled example: a torch net and its MindSpore twin save tensors and gradients."""
    session.install(*CONSTRAINTS, ".", TORCH_PLUGIN, MS_PLUGIN, MS_NUMPY)
    session.run("python", "examples/save_twins.py", *(session.posargs or ["example_output"]))


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Benchmarks: import time and save throughput against plain np.save."""
    session.install(*CONSTRAINTS, ".", TORCH_PLUGIN, MS_PLUGIN, MS_NUMPY)
    session.run("python", "benchmarks/bench_save.py", *session.posargs)


# TroubleShooter 1.0.18, the tool users switch from, in its own venv: it imports without MindSpore.
TROUBLESHOOTER_ENV = Path(".nox") / "troubleshooter-1.0.18"


@nox.session(python=PYTHON)
def fuzz(session: nox.Session) -> None:
    """The fuzz suites with 2,000 examples a reader (CI's sessions run 60): ``nox -s fuzz``."""
    session.install(*CONSTRAINTS, CORE, TORCH_PLUGIN)
    session.env["TSCORE_FUZZ_EXAMPLES"] = os.environ.get("TSCORE_FUZZ_EXAMPLES", "2000")
    _pytest(session, "tests/core/test_fuzz_readers.py", "tests/torch/test_fuzz_torch_files.py")


@nox.session(python=PYTHON)
def bench_compare(session: nox.Session) -> None:
    """Compare throughput and memory against TroubleShooter 1.0.18, side by side (about 4 GB of disk)."""
    session.install(*CONSTRAINTS, ".[fast]")
    ts_python = TROUBLESHOOTER_ENV / "bin" / "python"
    if not ts_python.exists():
        session.run("python", "-m", "venv", str(TROUBLESHOOTER_ENV))
        session.run(
            str(ts_python), "-m", "pip", "install", "troubleshooter==1.0.18", "torch==2.13.0", external=True
        )
    session.run("python", "benchmarks/bench_compare.py", "--ts-python", str(ts_python), *session.posargs)


@nox.session(python=PYTHON)
def bench_checkpoint(session: nox.Session) -> None:
    """Checkpoint conversion and reading against torch.load + mindspore.save_checkpoint (3 GB of disk)."""
    session.install(*CONSTRAINTS, ".", TORCH_PLUGIN, MS_PLUGIN, MS_NUMPY)
    session.run("python", "benchmarks/bench_checkpoint.py", *session.posargs)


# msprobe 26.2 (PyPI mindstudio-probe), the tool users switch from, in its own venv beside torch 2.13.
MSPROBE_ENV = Path(".nox") / "msprobe-26.2"


def _msprobe_env(session: nox.Session) -> Path:
    """Make msprobe's venv once (it patches torch globally: never beside tscore); return its python."""
    msprobe_python = MSPROBE_ENV / "bin" / "python"
    if not msprobe_python.exists():
        session.run("python", "-m", "venv", str(MSPROBE_ENV))
        session.run(
            str(msprobe_python),
            "-m",
            "pip",
            "install",
            "numpy<2",
            "torch==2.13.0",
            "mindstudio-probe==26.2.0",
            TRANSFORMERS,
            external=True,
        )
    return msprobe_python


@nox.session(python=False)
def gpu(session: nox.Session) -> None:
    """The GPU tests (tests/gpu), on a machine with CUDA: ``nox -s gpu``; CI's sessions never collect them.

    They run in the interpreter that holds the machine's CUDA build of torch (``python3``, or
    ``TSCORE_GPU_PYTHON``): a fresh venv would fetch a CPU build. tscore and ts_torch are installed
    into it, editable; on a machine with no package index, ``TSCORE_WHEELS`` names a folder of the
    wheels they need (pydantic, orjson, tabulate, hatchling ...) and pip reads only that.
    """
    python = os.environ.get("TSCORE_GPU_PYTHON", "python3")
    wheels = os.environ.get("TSCORE_WHEELS")
    source = ["--no-index", "--find-links", wheels] if wheels else []
    # sybil: the manual's blocks marked "runs in nox -s gpu" run here (tests/gpu/test_docs_examples.py)
    session.run(
        python, "-m", "pip", "install", "-q", *source, "-e", ".", "-e", TORCH_PLUGIN, "sybil", external=True
    )
    session.env["TSCORE_GPU"] = "1"
    session.run(python, "-m", "pytest", *(session.posargs or ["tests/gpu"]), external=True)


@nox.session(python=PYTHON)
def bench_dump(session: nox.Session) -> None:
    """The API dump's cost per training step against msprobe 26.2, side by side (ResNet, encoder, GPT-2).

    ``-- --device cuda`` runs the GPU models (ResNet-50, a 6 x 512 encoder, the small ResNet) on a
    machine with CUDA; there the venv needs a CUDA build of torch.
    """
    session.install(*CONSTRAINTS, ".", TORCH_PLUGIN, TRANSFORMERS)
    msprobe_python = _msprobe_env(session)
    session.run(
        "python", "benchmarks/bench_dump.py", "--msprobe-python", str(msprobe_python), *session.posargs
    )


@nox.session(python=PYTHON)
def bench_dump_floor(session: nox.Session) -> None:
    """What a dumped step costs before any call is recorded, and what ATen's operator callback would cost.

    ``dump_floor.py``: the step's folder, module hooks and API capture with nothing recorded, beside
    the dump; ``record_function_probe.py``: a ``RecordFunction`` callback, the capture's alternative.
    """
    session.install(*CONSTRAINTS, ".", TORCH_PLUGIN, TRANSFORMERS)
    _compiled_capture(session)
    session.run("python", "benchmarks/dump_floor.py", *session.posargs)
    session.run("python", "benchmarks/record_function_probe.py")  # ARGS go to dump_floor.py alone


@nox.session(python=PYTHON)
def bench_host_stats(session: nox.Session) -> None:
    """The statistics of host memory: one compiled pass against numpy's and torch's reductions."""
    session.install(*CONSTRAINTS, ".", TORCH_PLUGIN)
    session.run("python", "benchmarks/bench_host_stats.py", *session.posargs)


@nox.session(python=PYTHON)
def bench_ms_dump(session: nox.Session) -> None:
    """The dump's cost per MindSpore training step, PyNative then graph mode (ResNet, encoder; one thread)."""
    session.install(*CONSTRAINTS, ".", MS_PLUGIN, MS_NUMPY)
    session.run("python", "benchmarks/bench_ms_dump.py", *session.posargs)
    session.run("python", "benchmarks/bench_ms_dump.py", "--graph", *session.posargs)


@nox.session(python=PYTHON)
def bench_dump_compare(session: nox.Session) -> None:
    """Dump comparison against msprobe compare 26.2, on msprobe's own dumps (ResNet tensors, 100k stats)."""
    session.install(*CONSTRAINTS, ".", TORCH_PLUGIN)
    msprobe_python = _msprobe_env(session)
    session.run(
        "python",
        "benchmarks/bench_dump_compare.py",
        "--msprobe-python",
        str(msprobe_python),
        *session.posargs,
    )


@nox.session(python=PYTHON)
def bench_netdiff(session: nox.Session) -> None:
    """NetDifferenceFinder's layer localisation against two plain forward passes (ResNets, HF GPT-2)."""
    session.install(*CONSTRAINTS, ".", TORCH_PLUGIN, MS_PLUGIN, MS_NUMPY, TRANSFORMERS)
    session.run("python", "benchmarks/bench_netdiff.py", *session.posargs)
