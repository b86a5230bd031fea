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
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


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

    def begin(self, prefix: str, api: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
        """Count a call before it runs; return its token, or None when the call is not dumped.

        Call it even when you expect None: the count names every later call.
        """
        ...

    def end(self, token: Any, output: Any) -> None:
        """Record the call of ``token``, which returned ``output`` (framework tensors, as returned)."""
        ...

    def backward(self, token: Any, grad_outputs: Any, grad_inputs: Any) -> object:
        """Record the backward of the call of ``token``.

        :param grad_outputs: the gradients that flowed into the call's outputs (the backward's inputs).
        :param grad_inputs: the gradients the call passed on to its inputs (the backward's outputs).
        """
        ...
