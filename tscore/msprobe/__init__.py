"""msprobe's import paths, so that switching from msprobe (PyPI ``mindstudio-probe``) is one import.

::

    from tscore.msprobe.pytorch import PrecisionDebugger      # was: from msprobe.pytorch import ...
    from tscore.msprobe.mindspore import PrecisionDebugger    # was: from msprobe.mindspore import ...

:class:`~tscore.msprobe.debugger.PrecisionDebugger` takes msprobe's arguments
and its ``config.json`` and writes tscore's dump, which ``tscore dump-compare``
reads as it reads msprobe's. An msprobe option tscore does not support is an
error naming it, raised before anything runs.
"""
