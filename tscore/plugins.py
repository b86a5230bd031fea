"""Finding, loading and listing backend plugins.

Plugins are found through the entry point group ``tscore``. They are loaded on
first use, not at ``import tscore``, and loading one never imports its
framework. ``TSCORE_PLUGINS=torch,mindspore`` narrows which entry points load;
a plugin that fails to load is skipped with one logged warning and listed with
the reason by ``tscore plugins``.

This module imports no feature of tscore. A feature that brings a built-in
plugin (the checkpoint formats that need no framework, the recorded-run
backend) registers it here itself, with :func:`add_builtin_plugin`, and
``import tscore`` says how a compiler must treat tscore's functions with
:func:`provide_runtime`: every manager, made now or later, gets both.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import re
import threading
from dataclasses import dataclass, field
from typing import Any

import pluggy

from tscore import hookspecs, numpy_plugin
from tscore.backend import Backend
from tscore.contract.runtime import Runtime
from tscore.errors import PluginError

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "tscore"
PLUGINS_ENV_VAR = "TSCORE_PLUGINS"
BUILTIN_NUMPY = "numpy"
BUILTIN_DISTRIBUTION = "tscore (built in)"
IN_PROCESS = "registered in process"


@dataclass
class PluginRecord:
    """What happened to one plugin: where it came from and whether it loaded."""

    name: str
    module: str
    distribution: str | None = None
    version: str | None = None
    status: str = "loaded"  # loaded | skipped | failed | not selected
    reason: str | None = None
    hooks: list[str] = field(default_factory=list)


class TscorePluginManager(pluggy.PluginManager):
    """A pluggy manager that also remembers how each plugin was found."""

    def __init__(self) -> None:
        super().__init__(hookspecs.PROJECT_NAME)
        self.add_hookspecs(hookspecs)
        self.records: dict[str, PluginRecord] = {}
        self.runtime_given = False  # ts_prepare_runtime has been called (historic) on this manager

    def parse_hookimpl_opts(self, plugin: object, name: str) -> Any:
        """Register a :class:`Backend`'s hook only when the subclass overrides the methods it needs.

        A backend that builds on another framework (:attr:`Backend.builds_on`) is asked first.
        """
        opts = super().parse_hookimpl_opts(plugin, name)
        if opts is not None and isinstance(plugin, Backend):
            if not plugin.implements(name):
                return None
            if plugin.builds_on:
                opts = {**opts, "tryfirst": True}
        return opts

    def backends(self) -> list[Backend]:
        """Return the registered backends, those that build on another framework first, then by name."""
        found = [(name, p) for name, p in self.list_name_plugin() if isinstance(p, Backend)]
        return [p for _, p in sorted(found, key=lambda item: (not item[1].builds_on, item[0]))]

    def covered_backends(self) -> list[Backend]:
        """Return the backends that another one, imported now, builds on (their API capture stays out)."""
        backends = self.backends()
        covered = {b.builds_on for b in backends if b.builds_on and b.imported() is not None}
        return [b for b in backends if b.framework in covered]

    def register_plugin(self, plugin: object, name: str | None = None, **origin: Any) -> str:
        """Register ``plugin``, check its hooks against the specs and record it.

        :raises PluginError: if a hook name is misspelt or the name is taken.
        """
        try:
            registered = self.register(plugin, name=name)
            self.check_pending()
        except (ValueError, pluggy.PluginValidationError) as exc:
            if self.is_registered(plugin):
                self.unregister(plugin)
            raise PluginError(f"plugin {name or plugin!r} cannot be registered: {exc}") from exc
        assert registered is not None
        module = getattr(plugin, "__name__", type(plugin).__module__)
        self.records[registered] = PluginRecord(
            name=registered,
            module=module,
            hooks=sorted(caller.name for caller in self.get_hookcallers(plugin) or []),
            **origin,
        )
        return registered

    def loaded_names(self) -> list[str]:
        """Names of the plugins that are registered now."""
        return sorted(name for name, plugin in self.list_name_plugin() if plugin is not None)

    def unregister_plugin(self, name: str) -> None:
        """Remove a plugin registered under ``name``, if any."""
        plugin = self.get_plugin(name)
        if plugin is not None:
            self.unregister(plugin)
        self.records.pop(name, None)


def selected_plugin_names(environ: dict[str, str] | None = None) -> set[str] | None:
    """Read ``TSCORE_PLUGINS``: the entry point names to load, or None for all."""
    value = (os.environ if environ is None else environ).get(PLUGINS_ENV_VAR)
    if value is None:
        return None
    return {part.strip() for part in value.split(",") if part.strip()}


# what tscore's own layers registered: the features' built-in plugins, and the runtime for compilers
_builtins: dict[str, object] = {BUILTIN_NUMPY: numpy_plugin}
_runtime: list[Runtime] = []
# guards the two above and each manager's built-ins; never held while a module is imported (a
# feature adds its built-in from its package's __init__, under the import system's own lock)
_registry_lock = threading.RLock()


def add_builtin_plugin(name: str, plugin: object) -> None:
    """Register a feature's built-in plugin under ``name``, in the manager now and in every later one.

    A feature calls it when it is imported, before it calls the hooks its plugin answers. A name
    added twice keeps the first plugin. A built-in plugin's hooks are ``trylast``, so an installed
    or in-process plugin is asked first, whichever was registered first.
    """
    with _registry_lock:
        if name in _builtins:
            return
        _builtins[name] = plugin
    manager = _manager
    if manager is not None:
        _complete(manager)


def provide_runtime(runtime: Runtime) -> None:
    """Tell every backend, now and when it registers later, how a compiler must treat tscore's functions.

    ``import tscore`` calls it once (:mod:`tscore.contract.runtime`), before any manager is made;
    later calls are ignored, since each backend is prepared once.
    """
    with _registry_lock:
        if _runtime:
            return
        _runtime.append(runtime)
    manager = _manager
    if manager is not None:
        _complete(manager)


def create_plugin_manager(*, load_entry_points: bool = True) -> TscorePluginManager:
    """Build a manager with the built-in plugins and, if asked, the installed plugins."""
    pm = TscorePluginManager()
    _complete(pm)
    if load_entry_points:
        _load_entry_points(pm, selected_plugin_names())
        _complete(pm)  # a built-in or the runtime that an installed plugin's import brought
    return pm


def _complete(pm: TscorePluginManager) -> None:
    """Give ``pm`` the runtime (once: the hook is historic) and every built-in plugin it lacks."""
    with _registry_lock:
        if _runtime and not pm.runtime_given:
            pm.runtime_given = True  # every plugin registered from now on is prepared when it registers
            pm.hook.ts_prepare_runtime.call_historic(kwargs={"runtime": _runtime[0]})
        for name, plugin in list(_builtins.items()):
            if pm.get_plugin(name) is None:
                pm.register_plugin(plugin, name, distribution=BUILTIN_DISTRIBUTION)


def _load_entry_points(pm: TscorePluginManager, selected: set[str] | None) -> None:
    entry_points = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    seen: set[str] = set()
    for ep in entry_points:
        if ep.name in seen:
            continue
        seen.add(ep.name)
        dist = ep.dist.name if ep.dist is not None else None
        version = ep.dist.version if ep.dist is not None else None
        if selected is not None and ep.name not in selected:
            pm.records[ep.name] = PluginRecord(
                ep.name,
                ep.value,
                dist,
                version,
                status="not selected",
                reason=f"not named in {PLUGINS_ENV_VAR}",
            )
            continue
        try:
            plugin = ep.load()
        except ImportError as exc:
            log.warning("tscore plugin %r skipped: its framework did not import (%s)", ep.name, exc)
            pm.records[ep.name] = PluginRecord(
                ep.name, ep.value, dist, version, status="skipped", reason=str(exc)
            )
            continue
        except Exception as exc:  # a broken third-party plugin must not break tscore
            log.warning("tscore plugin %r failed to load: %s: %s", ep.name, type(exc).__name__, exc)
            pm.records[ep.name] = PluginRecord(
                ep.name, ep.value, dist, version, status="failed", reason=f"{type(exc).__name__}: {exc}"
            )
            continue
        try:
            pm.register_plugin(plugin, ep.name, distribution=dist, version=version)
        except PluginError as exc:
            log.warning("tscore plugin %r rejected: %s", ep.name, exc)
            pm.records[ep.name] = PluginRecord(
                ep.name, ep.value, dist, version, status="failed", reason=str(exc)
            )
    if selected:
        for missing in sorted(selected - seen):
            log.warning(
                "%s names %r, but no installed plugin has that name (installed: %s)",
                PLUGINS_ENV_VAR,
                missing,
                ", ".join(sorted(seen)) or "none",
            )


_manager: TscorePluginManager | None = None
_manager_lock = threading.Lock()


def get_plugin_manager() -> TscorePluginManager:
    """Return the process-wide plugin manager, loading the installed plugins on first call."""
    global _manager
    if _manager is None:
        with _manager_lock:
            if _manager is None:
                _manager = create_plugin_manager()
        _complete(_manager)  # what another thread added while the manager was being made
    return _manager


def reset_plugin_manager() -> None:
    """Forget the process-wide manager; the next call loads the plugins again."""
    global _manager
    with _manager_lock:
        _manager = None


def plugin_packages() -> frozenset[str]:
    """Return the code of the installed plugins loaded now: their packages (``ts_torch``) or modules.

    A plugin whose distribution is named for its top-level package (``ts-torch``: ``ts_torch``)
    counts with that whole package; any other only with the module its entry point names, so a
    plugin shipped inside a user's own project does not hide the project. A dump leaves these
    frames out of the stacks a user reads, as it leaves out tscore's own. Built-in plugins and
    those registered in process (a user's or a test's module) are not counted.
    """
    found = set()
    for record in get_plugin_manager().records.values():
        if record.status != "loaded" or record.distribution in (BUILTIN_DISTRIBUTION, IN_PROCESS, None):
            continue
        top = record.module.partition(".")[0]
        own = re.sub(r"[-_.]+", "_", record.distribution).lower() == top.lower()
        found.add(top if own else record.module)
    return frozenset(found)


def hook() -> Any:
    """Return the hook relay of the process-wide manager (``hook().ts_to_numpy(obj=x)``)."""
    return get_plugin_manager().hook


def register_plugin(plugin: object, name: str | None = None) -> str:
    """Register an in-process plugin (a module or object with ``@hookimpl`` functions).

    Use this for a framework that has no installed plugin package, or in
    tests. Returns the name it was registered under.
    """
    return get_plugin_manager().register_plugin(plugin, name, distribution=IN_PROCESS)


def unregister_plugin(name: str) -> None:
    """Remove a plugin added with :func:`register_plugin`."""
    get_plugin_manager().unregister_plugin(name)
