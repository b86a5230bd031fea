"""The compiled capture of a torch dump: every API call read below Python, reported a batch at a time.

The Python capture (:mod:`ts_torch.api_capture`) runs tens of microseconds of Python per API call
(the mode's handler, describing every tensor, the stack, the record, a ``grad_fn`` hook). This one
pushes the same ``TorchFunctionMode``, but its ``__torch_function__`` is compiled code
(``csrc/capture.cpp``): it names the call (``api_name``, looked up once per function), reads each
tensor's dtype, shape and statistics (tscore's C kernel, bit for bit the Python capture's), takes
the stack's id (worked out in Python once per new stack) and hooks the ``grad_fn`` with a C++ hook.
It describes each call as the recorder's own entries (names, dtypes, shapes, finished statistics;
values it does not know, such as a ``torch.dtype`` argument, it asks the recorder to describe).
The calls wait in a list and are handed to the recorder before each module call and at
``stop()`` (``record_described``, ``backward_described``), in the order they
ran, so the records, names and keys are the Python capture's, line for line.

It serves dumps of statistics (the recorder's ``takes_described``); tensor files, md5 and the
overflow check read the tensors at the call and keep the Python capture.

**Build.** Compiled on a dump's first use, against the torch that runs it, with
``torch.utils.cpp_extension`` (ninja and a C++ compiler), into a cache folder keyed by torch's
version, Python's and the source's hash (``$TSCORE_CACHE_DIR``, else ``~/.cache/tscore``): once
per machine and torch, about 25 s on two cores. Not at install: the wheel would have to be
built against a torch that pip installs later, or rebuilt for each. Without a compiler, or when
the build fails, one warning says why and the Python capture runs.
``TSCORE_TORCH_CAPTURE=python`` chooses the Python capture; ``=compiled`` makes a failed build an
error (the tests use it, so that CI cannot pass on the fallback alone).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import logging
import os
import sys
import sysconfig
import types
from pathlib import Path
from typing import Any

from ts_torch.api_capture import api_name
from tscore.plugin_api import HookHandles, memory_stats_address, memory_stats_dtypes

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("csrc") / "capture.cpp"
CHOICE_VARIABLE = "TSCORE_TORCH_CAPTURE"  # "python", "compiled", or unset: compiled where it builds
CACHE_VARIABLE = "TSCORE_CACHE_DIR"
# what each API call costs the Python capture over the compiled one, for the warning (bench_dump)
PYTHON_COST = "a dumped step then costs 2-5 times a plain one instead of 1.2-2 times"


class CaptureBuildError(RuntimeError):
    """The compiled capture could not be built or loaded (the message says why)."""


def choice() -> str:
    """Return the capture chosen by ``TSCORE_TORCH_CAPTURE``: ``auto`` (unset), ``python`` or ``compiled``."""
    chosen = os.environ.get(CHOICE_VARIABLE, "").strip().lower() or "auto"
    if chosen not in ("auto", "python", "compiled"):
        raise ValueError(f"{CHOICE_VARIABLE}={chosen!r}: use 'python' or 'compiled', or leave it unset")
    return chosen


def build_folder() -> Path:
    """Return the folder the extension is built in: one per torch version, Python and source hash."""
    import torch

    root = os.environ.get(CACHE_VARIABLE) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "tscore"
    )
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    version = torch.__version__.replace("+", "_")
    python = sysconfig.get_config_var("SOABI") or f"py{sys.version_info[0]}{sys.version_info[1]}"
    return Path(root) / "torch-capture" / f"{version}-{python}-{digest}"


def _import_built(name: str, path: Path) -> Any:
    """Import the extension built earlier at ``path`` (no build tool imported); None when it will not load."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ImportError as exc:  # a build cut short, or a library it needs has moved: build it again
        log.info("dump: the compiled torch capture at %s will not load (%s); building it again", path, exc)
        return None
    sys.modules[name] = module
    return module


@functools.cache
def _built() -> Any:
    """Import the extension from the cache, building it first if needed; raise :class:`CaptureBuildError`."""
    folder = build_folder()
    name = f"ts_torch_capture_{folder.name.rsplit('-', 1)[-1]}"
    library = folder / f"{name}.so"
    if library.is_file():  # the common case: built once, loaded without setuptools or ninja
        found = _import_built(name, library)
        if found is not None:
            return found
    try:
        folder.mkdir(parents=True, exist_ok=True)
        from torch.utils import cpp_extension

        log.info("dump: building the compiled torch capture in %s (once per torch version)", folder)
        return cpp_extension.load(
            name=name,
            sources=[str(SOURCE)],
            build_directory=str(folder),
            extra_cflags=["-O2"],
            verbose=False,
        )
    except Exception as exc:  # no compiler, no ninja, a torch whose headers differ
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        errors = [line for line in lines if "error" in line.lower() and not line.startswith("[")]
        why = (errors or lines or [type(exc).__name__])[0][:300]
        raise CaptureBuildError(f"{type(exc).__name__}: {why} (build folder {folder})") from exc


@functools.cache
def _fallback_warning(why: str) -> None:
    """Warn once per process and reason that the Python capture runs instead."""
    log.warning(
        "dump: the compiled torch capture is not available (%s); the Python capture runs instead: %s. "
        "Install ninja and a C++ compiler, or set %s=python to choose it and silence this.",
        why,
        PYTHON_COST,
        CHOICE_VARIABLE,
    )


def extension() -> Any:
    """Return the built extension, or None (after one warning) when it cannot be built.

    :raises CaptureBuildError: when ``TSCORE_TORCH_CAPTURE=compiled`` and it cannot be built.
    """
    try:
        return _built()
    except CaptureBuildError as exc:
        if choice() == "compiled":
            raise CaptureBuildError(
                f"{exc}; {CHOICE_VARIABLE}=compiled requires the compiled capture: unset it to let the "
                "Python capture run instead"
            ) from exc
        _fallback_warning(str(exc))
        return None


def compiled_capture_for(recorder: Any, backend: Any) -> CompiledCapture | None:
    """Return a compiled capture for ``recorder``, or None where the Python capture must run.

    None when ``TSCORE_TORCH_CAPTURE=python``, when the recorder needs the tensors themselves
    (tensor files, md5, the overflow check: its ``takes_described`` is False), or when the
    extension cannot be built.
    """
    if choice() == "python" or not getattr(recorder, "takes_described", False):
        return None
    built = extension()
    return None if built is None else CompiledCapture(recorder, built, backend)


@functools.cache
def _mode_class() -> type:
    """Return the ``TorchFunctionMode`` whose ``__torch_function__`` is a compiled capture's (made once)."""
    from torch.overrides import TorchFunctionMode

    class _CompiledMode(TorchFunctionMode):
        def __init__(self, handler: Any) -> None:
            super().__init__()
            # torch calls the instance's attribute with (func, types, args, kwargs), and wants a method
            # bound to the mode: the compiled handler, bound here, runs with no Python frame
            self.__torch_function__ = types.MethodType(handler, self)  # type: ignore[method-assign]

        def unbind(self) -> None:
            """Drop the bound handler (it refers back to the mode)."""
            del self.__torch_function__

    return _CompiledMode


@functools.cache
def _kernel_codes() -> dict[Any, int]:
    """Map torch's dtypes to the codes of tscore's statistics kernel (its dtypes' order)."""
    torch = sys.modules["torch"]
    return {
        getattr(torch, d.name): code
        for code, d in enumerate(memory_stats_dtypes())
        if isinstance(getattr(torch, d.name, None), torch.dtype)
    }


class _Raised:
    """The marker of a call that raised: counted, never recorded."""


RAISED = _Raised()


class CompiledCapture:
    """Report torch API calls to a dump recorder from compiled code; nothing is left once removed."""

    def __init__(self, recorder: Any, built: Any, backend: Any) -> None:
        """Prepare the compiled capture; nothing is installed until :meth:`install`.

        :param backend: the torch backend: its ``tensor_stats`` for tensors the kernel cannot read,
            its ``neutral_dtype`` for the entries' dtype names.
        """
        import torch

        self._recorder = recorder
        self._backward = bool(recorder.backward_wanted)
        self._tokens: dict[int, Any] = {}
        self._framework = str(backend.framework)
        rules = recorder.entry_rules()
        self._compiled = built.Capture(
            {
                "name_of": api_name,
                "recorder": recorder,
                "describe_value": recorder.describe_value,
                "noted_devices": recorder.noted_devices,
                "note_device": recorder.note_device,
                "framework": self._framework,
                "skipped_dtypes": set(rules["skipped_dtypes"]),
                "longest_plain_list": int(rules["longest_plain_list"]),
                "python_stats": backend.tensor_stats,
                "dtype_name": lambda dtype: backend.neutral_dtype(str(dtype).removeprefix("torch.")),
                "stack_here": recorder.stack_here,
                "on_full": self.report,
                "on_error": self._failed,
                "plain_types": (torch.Tensor, torch.nn.Parameter),
                "raised": RAISED,
                "backward": self._backward,
                "kernel": memory_stats_address(),
                "codes": _kernel_codes(),
            }
        )
        self._mode: Any = _mode_class()(self._compiled.call)
        self._installed = False

    def install(self) -> HookHandles:
        """Push the mode; the returned handles pop it, remove the hooks and report what is held."""
        log.debug("dump: torch API calls captured by compiled code (%s)", SOURCE.name)
        self._recorder.add_pending(self.report)
        self._compiled.install()
        self._mode.__enter__()
        self._installed = True
        return HookHandles([self.remove], label="compiled torch API capture")

    def remove(self) -> None:
        """Pop the mode, remove every ``grad_fn`` hook not yet fired, and report the calls still held."""
        try:
            if self._installed:
                self._installed = False
                mode, self._mode = self._mode, None
                try:
                    mode.__exit__(None, None, None)
                finally:
                    mode.unbind()
        finally:
            self._compiled.remove()
            try:
                self.report()
            finally:
                self._recorder.remove_pending(self.report)
                self._tokens.clear()
                if self._compiled.under_compiled_autograd():
                    log.warning(
                        "dump: a backward ran under compiled autograd, which the compiled capture does not "
                        "see into: its backward records are missing. Set %s=python to record them",
                        CHOICE_VARIABLE,
                    )
                self._compiled.release()  # its references back to this capture and the recorder

    @property
    def hooks_held(self) -> int:
        """How many ``grad_fn`` hooks the compiled side holds (none once removed)."""
        return int(self._compiled.hooks_held())

    def report(self) -> None:
        """Hand the recorder the calls held, in order, as the Python capture would have at each call."""
        calls = self._compiled.take()
        if not calls:
            return
        recorder, tokens, framework = self._recorder, self._tokens, self._framework
        self._compiled.set_busy(1)  # torch calls the recorder makes now are its own: not reported
        try:
            for call in calls:
                if call[0] == 0:
                    _, (prefix, api), inputs, stack, outputs, number = call
                    raised = outputs is RAISED
                    token = recorder.record_described(
                        prefix, api, inputs, None if raised else outputs, stack=stack, framework=framework
                    )
                    if token is not None and not raised and self._backward:
                        tokens[number] = token
                elif call[0] == 1:
                    _, number, into_outputs, into_inputs = call
                    token = tokens.get(number)
                    if token is not None:
                        recorder.backward_described(token, into_outputs, into_inputs)
                else:  # the calls whose grad_fn autograd has freed: no backward can reach them now
                    for number in call[1]:
                        tokens.pop(number, None)
        finally:
            self._compiled.set_busy(-1)

    def _failed(self, message: str) -> None:
        """Warn once and turn the dump off: an error in the capture never reaches the training step.

        The calls captured before it are reported first: their records are whole.
        """
        log.warning("dump: the compiled torch capture failed (%s); the dump stops for this step", message)
        self.report()
        if hasattr(self._recorder, "enabled"):
            self._recorder.enabled = False
