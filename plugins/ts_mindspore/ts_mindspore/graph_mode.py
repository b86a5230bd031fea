"""How the MindSpore backend makes tscore work inside graph mode (``construct``, ``@ms.jit``).

MindSpore's graph compiler translates the functions that ``construct`` calls
into its graph, except those of modules it counts as third-party: those it
runs in Python at run time on the real tensor values ("JIT fallback"). Only
a short built-in list counts as third-party, and the one switch MindSpore
offers for other packages is the environment variable
``MS_JIT_IGNORE_MODULES``, read each time the compiler checks a function
(``mindspore/graph/_parse/jit_fallback_modules/check_utils.py``). A function
with a ``__jit_function__`` attribute is compiled even when its module is
ignored.

So when the plugin is registered it adds tscore's package to that variable
(keeping what the user put there) and marks ``save_grad`` for compiling. A
program that never uses MindSpore sees no difference; ``import tscore``
alone changes nothing.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping

from tscore.plugin_api import Runtime

IGNORE_MODULES_VAR = "MS_JIT_IGNORE_MODULES"
JIT_FUNCTION_MARK = "__jit_function__"

# How far up the stack to look for MindSpore's graph compiler.
_COMPILE_SEARCH_DEPTH = 64


def declare_module(package: str, environ: MutableMapping[str, str] | None = None) -> None:
    """Add ``package`` to ``MS_JIT_IGNORE_MODULES``, keeping the names already there."""
    env = os.environ if environ is None else environ
    present = [name for name in env.get(IGNORE_MODULES_VAR, "").split(",") if name]
    if package not in present:
        env[IGNORE_MODULES_VAR] = ",".join([*present, package])


def declare_runtime(runtime: Runtime, environ: MutableMapping[str, str] | None = None) -> None:
    """Run ``runtime.package`` at run time in graph mode; compile the functions of ``runtime.traced``."""
    declare_module(runtime.package, environ)
    for function in runtime.traced:
        setattr(function, JIT_FUNCTION_MARK, True)


def compiling() -> bool:
    """Say whether MindSpore's graph compiler is on the stack (it calls us to evaluate constants)."""
    frame = sys._getframe(1)
    for _ in range(_COMPILE_SEARCH_DEPTH):
        if frame is None:
            return False
        if frame.f_code.co_name == "compile" and str(frame.f_globals.get("__name__", "")).startswith(
            "mindspore."
        ):
            return True
        frame = frame.f_back
    return False
