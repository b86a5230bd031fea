"""Checkpoints: reading and writing them, weight maps between frameworks, conversion and comparison.

The package registers its built-in plugin (:mod:`tscore.checkpoint.formats_plugin`: MindSpore
``.ckpt`` and safetensors with numpy alone) when it is imported, before any of its modules
asks the checkpoint hooks.
"""

from tscore.checkpoint import formats_plugin
from tscore.plugins import add_builtin_plugin

BUILTIN_FORMATS = "checkpoint-formats"

add_builtin_plugin(BUILTIN_FORMATS, formats_plugin)
