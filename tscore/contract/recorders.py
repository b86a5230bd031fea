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

A compiled capture (torch's) reads the tensors itself, below Python, and
reports the calls later, a batch at a time: it hands the same methods
:class:`TensorSummary` values where the tensors were, the stack id it took at
the call (:meth:`ApiRecorder.stack_here`, asked once per new calling stack),
and registers, with :meth:`ApiRecorder.add_pending`, the function that
reports its held calls; the recorder calls that before anything that depends
on the order of calls (a module entered or left, the step's end).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

# ``begin``'s default ``stack``: the recorder reads the calling stack itself
STACK_HERE = "here"


class TensorSummary(tuple):  # type: ignore[type-arg]
    """What a compiled capture read of one tensor at the call, in place of the tensor in a batch of calls.

    A tuple, so that compiled code makes one cheaply: ``(framework, dtype, shape, device,
    requires_grad, stats, error)``. ``dtype`` is tscore's neutral name of it (``"float32"``),
    ``stats`` whatever the backend's ``ts_tensor_stats`` gives (four floats, None when empty, or a
    value left on the device), ``error`` the exception met reading the tensor (its record then
    says so), else None.
    """

    __slots__ = ()

    @property
    def framework(self) -> str:
        """The framework whose tensor this was (a backend's ``framework``)."""
        return str(self[0])

    @property
    def dtype(self) -> str | None:
        """The neutral name of the dtype (the backend's ``neutral_dtype``), None when it could not be read."""
        return self[1]  # type: ignore[no-any-return]

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape, as a tuple of ints (empty when it could not be read)."""
        return self[2] or ()  # type: ignore[no-any-return]

    @property
    def device(self) -> str | None:
        """Where the tensor lived (``"cpu"``, ``"cuda:0"``)."""
        return self[3]  # type: ignore[no-any-return]

    @property
    def requires_grad(self) -> bool:
        """Whether the tensor took part in autograd."""
        return bool(self[4])

    @property
    def stats(self) -> Any:
        """Max, min, mean and norm as the backend's ``ts_tensor_stats`` gave them."""
        return self[5]

    @property
    def error(self) -> BaseException | None:
        """The exception met while reading the tensor, or None."""
        return self[6]  # type: ignore[no-any-return]


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

        Call it even when you expect None: the count names every later call. A compiled capture
        reporting a call after it ran passes ``stack=`` the id :meth:`stack_here` gave at the call.
        """
        ...

    def end(self, token: Any, output: Any) -> None:
        """Record the call of ``token``, which returned ``output`` (framework tensors, as returned)."""
        ...

    def stack_here(self) -> int | None:
        """Return the id of the stack that called the caller (a compiled capture asks once per new stack).

        None when the dump records no stacks. Call it from the frame of the capture that the
        framework called, with no Python frame of the capture between: the stack is read from
        the caller's caller.
        """
        ...

    def add_pending(self, report: Any) -> None:
        """Have ``report()`` called before anything that depends on the order of calls.

        ``report`` hands the recorder the calls a compiled capture holds (:meth:`begin`,
        :meth:`end`, :meth:`backward`, with :class:`TensorSummary` values); it runs before a
        module is entered or left and at the step's end. ``remove_pending`` takes it off.
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
