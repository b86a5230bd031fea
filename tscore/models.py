"""Framework-neutral helpers for networks: which plugin owns one, and how a report labels it."""

from __future__ import annotations

from tscore.contract.tensors import ModelInfo
from tscore.errors import UnsupportedObjectError
from tscore.plugins import get_plugin_manager, hook


def _installed_frameworks() -> list[str]:
    return sorted({info.name for info in hook().ts_framework_info()})


def unclaimed(obj: object, argument: str) -> UnsupportedObjectError:
    """Make the error for a network no plugin claims: what it is, what is loaded, what to install."""
    cls = type(obj)
    top = cls.__module__.partition(".")[0]
    skipped = [
        f"{record.name} ({record.status}: {record.reason})"
        for record in get_plugin_manager().records.values()
        if record.status != "loaded"
    ]
    text = (
        f"{argument} is a {cls.__module__}.{cls.__qualname__}, which no loaded tscore plugin claims "
        f"(plugins for: {', '.join(_installed_frameworks())}). "
    )
    if top in ("builtins", "numpy"):
        text += "Pass a network of one of those frameworks"
    else:
        text += (
            f"Install the plugin for {top} (for example ts_{top}) or register one with ts.register_plugin()"
        )
    if skipped:
        text += "; not loaded: " + ", ".join(skipped)
    return UnsupportedObjectError(text)


def model_info(model: object, argument: str) -> ModelInfo:
    """Ask the plugins whose network ``model`` is and where it runs.

    :param argument: how the caller names the network in an error (``"pt_net"``).
    :raises UnsupportedObjectError: naming ``argument``, the loaded plugins and the one to install.
    """
    info = hook().ts_model_info(model=model)
    if info is None:
        raise unclaimed(model, argument)
    return info
