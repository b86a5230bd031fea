"""Build hook: compile the C compare kernel (``tscore/compare/pair_kernel.c``) into the wheel.

hatchling runs this when it builds a wheel, the editable one included. The
kernel is a plain shared library loaded with ctypes (no Python C API), so any
C compiler will do: ``$CC``, else the one Python was built with, else ``cc``.
Without a compiler, with one that fails on the file (the build shows its
message), or with ``TSCORE_NO_C_KERNEL=1``, the wheel is built without it,
pure Python, and comparisons and a dump's statistics run on numpy (``tscore.native_kernel`` says
why).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SOURCE = "tscore/compare/pair_kernel.c"
LIBRARY = "tscore/compare/_pair_kernel.so"
# Full optimisation, SIMD reductions allowed by the file's pragmas, and no other reordering or
# fusing of floating-point work: the sums must follow IEEE arithmetic as numpy's do.
FLAGS = [
    "-O3",
    "-fPIC",
    "-shared",
    "-fopenmp-simd",
    "-ffp-contract=off",
    "-fno-math-errno",
    "-fno-trapping-math",
    "-Wall",
]


def _compiler() -> list[str] | None:
    """Return the C compiler's command line, or None when there is none."""
    named = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    command = shlex.split(named)
    if command and shutil.which(command[0]):
        return command
    if shutil.which("cc"):
        return ["cc"]
    return None


def _arch_flags() -> list[str]:
    """Return the architectures a macOS build asks for (``ARCHFLAGS``); none elsewhere."""
    return shlex.split(os.environ.get("ARCHFLAGS", "")) if sys.platform == "darwin" else []


def _platform_tag() -> str:
    """Return the wheel's platform tag for this machine (``linux_x86_64``), as pip spells it."""
    return sysconfig.get_platform().replace("-", "_").replace(".", "_")


class PairKernelBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    """Compile ``pair_kernel.c`` and put the library into the wheel."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        """Compile the kernel; mark the wheel as platform-specific when it holds the library."""
        if self.target_name != "wheel":
            return
        if os.environ.get("TSCORE_NO_C_KERNEL") == "1":
            self.app.display_info("TSCORE_NO_C_KERNEL=1: building tscore without its C compare kernel")
            return
        compiler = _compiler()
        if compiler is None or sys.platform == "win32":
            self.app.display_warning(
                "no C compiler found (set CC): tscore is built without its C compare kernel, "
                "and compares with numpy"
            )
            return
        if version == "editable":  # the package is imported from the source tree: the library goes there
            library = Path(self.root, LIBRARY)
        else:
            self._scratch = tempfile.mkdtemp(prefix="tscore-kernel-")
            library = Path(self._scratch, Path(LIBRARY).name)
        source = Path(self.root, SOURCE)
        digest = hashlib.sha256(source.read_bytes()).hexdigest()  # tscore.native_kernel checks it
        command = [*compiler, *FLAGS, *_arch_flags(), f'-DTSCORE_KERNEL_SOURCE="{digest}"']
        command += ["-o", str(library), str(source), "-lm"]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode:  # a compiler that cannot make the AVX2 clone: the baseline alone
            command.insert(len(compiler), "-DTSCORE_NO_CLONES")
            done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode:
            self.app.display_warning(
                f"compiling the C compare kernel failed ({shlex.join(command)}):\n{done.stderr}\n"
                "tscore is built without it, and compares with numpy"
            )
            return
        build_data["pure_python"] = False
        # a plain C library, no Python C API: one wheel serves every Python of the platform
        build_data["tag"] = f"py3-none-{_platform_tag()}"
        if version != "editable":
            build_data["force_include"][str(library)] = LIBRARY

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        """Remove the scratch folder of a regular wheel's library."""
        scratch = getattr(self, "_scratch", None)
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
