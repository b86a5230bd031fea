"""Running a network and its port side by side, and finding the first layer that differs.

The package registers its built-in plugin (:mod:`tscore.netdiff.recorded_plugin`, which lets
a recorded network stand in for a live one) when it is imported, so a
:class:`~tscore.netdiff.recorded.RecordedNetwork` never exists without it.
"""

from tscore.netdiff import recorded_plugin
from tscore.plugins import add_builtin_plugin

BUILTIN_RECORDED = "recorded_network"

add_builtin_plugin(BUILTIN_RECORDED, recorded_plugin)
