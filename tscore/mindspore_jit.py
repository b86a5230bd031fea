"""How tscore asks MindSpore to run it, not compile it, inside graph mode.

MindSpore's graph compiler translates the functions that ``construct`` calls
into its graph, except those of modules it counts as third-party: those it
runs in Python at run time on the real tensor values ("JIT fallback"). Only a
short built-in list counts as third-party, and the one switch MindSpore
offers for other packages is the environment variable
``MS_JIT_IGNORE_MODULES``, read each time a graph is compiled. So that
``tscore.save`` can be called from ``construct``, ``import tscore`` adds
``tscore`` to that variable. This is its only effect outside tscore: it
changes nothing for a program that does not use MindSpore.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

IGNORE_MODULES_VAR = "MS_JIT_IGNORE_MODULES"
RUNTIME_MODULE = "tscore"


def declare_runtime_module(environ: MutableMapping[str, str] | None = None) -> None:
    """Add ``tscore`` to ``MS_JIT_IGNORE_MODULES``, keeping what the user put there."""
    env = os.environ if environ is None else environ
    present = [name for name in env.get(IGNORE_MODULES_VAR, "").split(",") if name]
    if RUNTIME_MODULE not in present:
        env[IGNORE_MODULES_VAR] = ",".join([*present, RUNTIME_MODULE])
