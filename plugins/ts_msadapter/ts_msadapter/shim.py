"""The one change mindnlp 0.5.1's ``mindtorch`` needs to import on MindSpore 2.10.

mindtorch builds MindSpore's inner ``Generator`` primitive with no arguments
and passes its seed and offset tensors, and an integer step, on every call.
MindSpore 2.8 and later build it with the seed and offset (``Generator(seed,
offset)``) and want a tensor step, so ``import mindnlp`` fails with
``TypeError: Generator.__init__() missing 2 required positional arguments``
and, past that, ``RuntimeError: Invalid tensor input: Step``.

:func:`enable` replaces the primitive, only where its constructor needs the
two arguments, with a subclass that takes them from the first call and turns
integer inputs into int64 tensors. Nothing else of MindSpore changes.
"""

from __future__ import annotations

import importlib
import inspect
import logging
from typing import Any

log = logging.getLogger(__name__)


def _generator_module() -> Any:
    return importlib.import_module("mindspore.ops.operations._inner_ops")


def generator_needs_shim() -> bool:
    """Say whether this MindSpore's ``Generator`` primitive needs its seed and offset when built."""
    generator = _generator_module().Generator
    if getattr(generator, "_tscore_shim", False):
        return False
    parameters = list(inspect.signature(generator.__init__).parameters.values())[1:]
    return any(p.default is inspect.Parameter.empty for p in parameters)


def _shimmed(original: type) -> type:
    import mindspore
    from mindspore._c_expression import GeneratorImpl
    from mindspore.ops.primitive import Primitive

    class Generator(original):  # type: ignore[misc, valid-type]
        """MindSpore's ``Generator`` built without seed and offset, as mindtorch builds it."""

        _tscore_shim = True

        def __init__(self, seed: Any = None, offset: Any = None) -> None:
            if seed is not None and offset is not None:
                super().__init__(seed, offset)
                return
            Primitive.__init__(self, "Generator")
            self.add_prim_attr("side_effect_mem", True)
            self._generator_impl = None

        def __call__(self, cmd: int, inputs: tuple[Any, ...]) -> Any:
            inputs = tuple(
                x if isinstance(x, mindspore.Tensor) else mindspore.Tensor(x, mindspore.int64) for x in inputs
            )
            if self._generator_impl is None:  # the caller's seed and offset tensors, as 2.10 keeps them
                self._generator_impl = GeneratorImpl(inputs[0], inputs[1])
            return self._generator_impl(cmd, inputs)

    return Generator


def enable() -> Any:
    """Make mindnlp's ``mindtorch`` importable here and import it; return the ``mindtorch`` module.

    After the call, ``import torch`` in this process gives mindtorch (mindnlp redirects it).
    Real torch must not be imported in the same process.

    :raises ImportError: naming what to install when mindnlp is missing.
    """
    module = _generator_module()
    if generator_needs_shim():
        log.info("MindSpore's Generator needs seed and offset: building it as mindtorch expects")
        module.Generator = _shimmed(module.Generator)
    try:
        importlib.import_module("mindnlp")
    except ImportError as exc:
        raise ImportError(
            f"the MSAdapter side needs mindnlp 0.5.1 (its mindtorch) beside MindSpore: {exc}; "
            "build the environment with `nox -s msadapter` or install what noxfile.py's MSADAPTER list names"
        ) from exc
    return importlib.import_module("mindtorch")
