"""What a backend's API capture reports to: the recorder handed to ``ts_install_api_hooks``.

The dump engine (:class:`tscore.dump.recorder.DumpRecorder`, the overflow
check's recorder) implements :class:`ApiRecorder`; a backend sees nothing
else of it. The call protocol, for each API call made at the top level (not
inside another captured call) while :attr:`ApiRecorder.busy` is 0::

    token = recorder.begin(prefix, api, args, kwargs)     # before the call runs
    recorder.busy += 1                                    # the call's own inner calls stay out
    try:
        output = call(*args, **kwargs)
    finally:
        recorder.busy -= 1
    if token is not None:
        recorder.end(token, output)                       # after it returned
        if recorder.backward_wanted:                      # and, when backward reaches it:
            ...  recorder.backward(token, grads_into_outputs, grads_into_inputs)

``prefix`` names the namespace as ptdbg does (``Torch``, ``Tensor``,
``Functional``, ``VF``, ``NPU``); ``api`` is the function's name. The token is
opaque: hand it back as it came.

A compiled capture (torch's) describes each call itself, below Python, as the
recorder's entries (``{"name": "_input.0", "type": "tensor", "dtype": ...,
"max": ...}``, each named by what follows the call's name), and reports the
calls later, a batch at a time, with ``record_described`` (``begin_described``
and ``end_described`` in one) and ``backward_described``: the stack id it took at the call
(:meth:`ApiRecorder.stack_here`, asked once per new calling stack) goes with
them. It registers, with :meth:`ApiRecorder.add_pending`, the function that
reports its held calls; the recorder calls that before anything that depends
on the order of calls (a module entered or left, a call another capture
reports as it goes, the step's end).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

# ``begin``'s default ``stack``: the recorder reads the calling stack itself
STACK_HERE = "here"


class ApiRecorder(Protocol):
    """The recorder a backend reports API calls to (``ts_install_api_hooks``).

    :ivar busy: above 0 while the recorder itself, or a call already being
        reported, runs framework code: report no call then. A capture may add
        1 around the call it reports, so the calls inside it stay out.
    """

    busy: int

    @property
    def reads_values(self) -> bool:
        """Whether records also need tensors' values on the host (tensor files, md5), not only statistics.

        A backend that summarises tensors without waiting for its device gains
        nothing when the values are read all the same (MindSpore's pipeline
        stays off then).
        """
        ...

    @property
    def backward_wanted(self) -> bool:
        """Whether any backward record may be written; skip installing backward hooks when it is False."""
        ...

    def config_wants(self, direction: str, role: str) -> bool:
        """Whether the dump keeps the ``role`` (``"input"``, ``"output"``) of ``direction`` calls.

        ``direction`` is ``"forward"`` or ``"backward"``; a backend may skip
        collecting what is not kept (MindSpore: a backward's input gradients).
        """
        ...

    def begin(
        self,
        prefix: str,
        api: str,
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        *,
        stack: Any = STACK_HERE,
    ) -> Any:
        """Count a call before it runs; return its token, or None when the call is not dumped.

        Call it even when you expect None: the count names every later call.
        """
        ...

    @property
    def takes_described(self) -> bool:
        """Whether a compiled capture may describe the calls itself (statistics only: no values needed)."""
        ...

    def entry_rules(self) -> dict[str, Any]:
        """How entries are made: ``skipped_dtypes`` (tensors left out) and ``longest_plain_list``."""
        ...

    def begin_described(
        self, prefix: str, api: str, inputs: list[dict[str, Any]], *, stack: Any, framework: str
    ) -> Any:
        """:meth:`begin` for a call described at the call and reported now (see the module's text)."""
        ...

    def end_described(self, token: Any, outputs: list[dict[str, Any]]) -> None:
        """:meth:`end` for a call :meth:`begin_described` opened."""
        ...

    def record_described(
        self,
        prefix: str,
        api: str,
        inputs: list[dict[str, Any]],
        outputs: list[dict[str, Any]] | None,
        *,
        stack: Any,
        framework: str,
    ) -> Any:
        """:meth:`begin_described` and :meth:`end_described` at once, for a call that has returned.

        ``outputs`` is None for a call that raised: it is counted, not recorded. ``stack`` is what
        :meth:`stack_here` gave at the call, or None. Returns the token for
        :meth:`backward_described`, or None. One call instead of two per captured call.
        """
        ...

    def backward_described(
        self, token: Any, into_outputs: list[dict[str, Any]], into_inputs: list[dict[str, Any]]
    ) -> None:
        """:meth:`backward` for a call :meth:`begin_described` opened."""
        ...

    def describe_value(self, side: str, path: tuple[str, ...], value: Any) -> list[dict[str, Any]]:
        """Return the entries of a value the capture does not describe itself, named as described ones."""
        ...

    def end(self, token: Any, output: Any) -> None:
        """Record the call of ``token``, which returned ``output`` (framework tensors, as returned)."""
        ...

    def stack_here(self) -> Any:
        """Take the stack that called the caller (a compiled capture asks once per new stack); None if none.

        Hand what it returns to :meth:`begin_described` as ``stack``. Call it from the frame of the
        capture that the framework called, with no Python frame of the capture between: the
        stack is read from the caller's caller.
        """
        ...

    @property
    def noted_devices(self) -> set[str]:
        """The devices whose settings the recorder has read (a set that stays the same object)."""
        ...

    def note_device(self, framework: str, device: str) -> None:
        """Read the settings of a device not in :attr:`noted_devices`, at the call that met it."""
        ...

    def add_pending(self, report: Any) -> None:
        """Have ``report()`` called before anything that depends on the order of calls.

        ``report`` hands the recorder the calls a compiled capture holds (:meth:`begin_described`
        and the others); it runs before a module is entered or left, before a call another capture
        reports as it goes, and at the step's end. ``remove_pending`` takes it off.
        """
        ...

    def remove_pending(self, report: Any) -> None:
        """Stop calling ``report`` (see :meth:`add_pending`)."""
        ...

    def backward(self, token: Any, grad_outputs: Any, grad_inputs: Any) -> object:
        """Record the backward of the call of ``token``.

        :param grad_outputs: the gradients that flowed into the call's outputs (the backward's inputs).
        :param grad_inputs: the gradients the call passed on to its inputs (the backward's outputs).
        """
        ...
