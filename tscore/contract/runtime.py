"""What tscore tells a backend about its own functions, once, when the backend's plugin is registered.

Some frameworks compile the Python a network calls (MindSpore's graph mode,
``torch.compile``). A user calls ``ts.save`` inside such code and expects
the real values at run time; ``ts.save_grad`` must instead be translated, so
that the compiled graph carries its gradient hook. Only the backend knows how
to ask its compiler for that, so the core hands it a :class:`Runtime` through
the historic hook ``ts_prepare_runtime``: every plugin gets it when it is
registered, whether before or after the first call.

``import tscore`` provides it (:func:`tscore.plugins.provide_runtime`) before
any plugin loads, so a backend is prepared as it registers; the traced
functions are looked up only when a backend asks for them. The plugins are
loaded, and so prepared, before user code can reach
``ts.save`` or ``ts.save_grad`` (``tscore`` resolves those two names on first
access), so a compiler that meets them in a network already knows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Runtime:
    """tscore's functions as a compiler needs to see them.

    :ivar package: the top-level package (``"tscore"``) whose functions, called
        from compiled code, must run in Python at run time on real values.
    :ivar traced_from: returns the functions of that package that a compiler must
        translate instead; read through :attr:`traced`, when a backend asks.
    """

    package: str
    traced_from: Callable[[], tuple[Callable[..., object], ...]]

    @property
    def traced(self) -> tuple[Callable[..., object], ...]:
        """Return the functions a compiler must translate (``save_grad`` inserts a gradient hook)."""
        return self.traced_from()
