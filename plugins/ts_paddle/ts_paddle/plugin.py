"""tscore backend for PaddlePaddle, written against :mod:`tscore.plugin_api` alone.

Loading this module never imports Paddle: :class:`PaddleBackend` claims an
object only when ``paddle`` is already in ``sys.modules``. It refuses to load
when Paddle is not installed, so tscore skips it with one warning. Unlike
torch and MindSpore it does not import Paddle to seed it: ``import paddle``
adds a handler to the root logger and sets ``OMP_NUM_THREADS``, which a
program that never used Paddle must not get from ``ts.seed_all``.
"""

from __future__ import annotations

import importlib.util
import logging
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import ml_dtypes
import numpy as np

from tscore.plugin_api import (
    Backend,
    CheckpointContents,
    HookHandles,
    LayerInfo,
    ModuleRecorder,
    layout_from_attributes,
)

if importlib.util.find_spec("paddle") is None:
    raise ImportError("ts_paddle needs PaddlePaddle, which is not installed (pip install paddlepaddle)")

log = logging.getLogger(__name__)

FRAMEWORK = "paddle"

# Paddle hands these out as the integers that carry their bits.
_BIT_CAST = {
    "bfloat16": (np.dtype(ml_dtypes.bfloat16), np.dtype(np.uint16)),
    "float8_e4m3fn": (np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(np.int8)),
    "float8_e5m2": (np.dtype(ml_dtypes.float8_e5m2), np.dtype(np.int8)),
}
_PLACE = re.compile(r"Place\((\w+)(?::(\d+))?\)")


class PaddleBackend(Backend):
    """Tensors, gradients, ``.pdparams`` files, layers and weight names of PaddlePaddle."""

    framework = FRAMEWORK
    distribution = "paddlepaddle"
    checkpoint_kinds = ("pdparams",)
    checkpoint_suffixes: ClassVar[Mapping[str, str]] = {".pdparams": "pdparams"}
    import_to_seed = False

    def tensor_types(self) -> tuple[type, ...]:
        """``paddle.Tensor`` (parameters are a subclass)."""
        return (sys.modules["paddle"].Tensor,)

    def model_types(self) -> tuple[type, ...]:
        """``paddle.nn.Layer``."""
        return (sys.modules["paddle"].nn.Layer,)

    def tensor_device(self, tensor: Any) -> str:
        """Return ``cpu`` or ``gpu:0`` from the tensor's place."""
        found = _PLACE.match(str(tensor.place))
        if found is None:
            return str(tensor.place)
        return found.group(1) + (f":{found.group(2)}" if found.group(2) else "")

    def model_device(self, model: Any) -> str:
        """Return the device of the first parameter, ``cpu`` when there is none."""
        first = next(iter(model.parameters()), None)
        return "cpu" if first is None else self.tensor_device(first)

    def to_numpy(self, tensor: Any, copy: bool) -> np.ndarray:
        """Copy a paddle tensor to the host; bfloat16 and float8 become ``ml_dtypes`` arrays, bit for bit."""
        array = tensor.detach().numpy()  # always a copy
        name = str(tensor.dtype).removeprefix("paddle.")
        if name in _BIT_CAST:
            array = array.view(_BIT_CAST[name][0])
        return np.asarray(array, order="C")

    def from_numpy(self, array: np.ndarray, like: Any | None) -> Any:
        """Make a paddle tensor (bfloat16 and float8 from ``ml_dtypes`` arrays), on ``like``'s place."""
        import paddle

        array = np.asarray(array, order="C")
        for name, (source, carrier) in _BIT_CAST.items():
            if array.dtype == source:
                bits = paddle.to_tensor(array.view(np.int16 if carrier == np.uint16 else carrier))
                tensor = bits.view(getattr(paddle, name))
                break
        else:
            if array.dtype == np.uint16:  # Paddle would read uint16 as bfloat16 bits
                raise TypeError("Paddle has no uint16 dtype (it reads uint16 as bfloat16); cast to int32")
            tensor = paddle.to_tensor(array)
        return tensor if like is None else tensor.to(like.place)

    def attach_grad_hook(self, tensor: Any, callback: Callable[[object], None]) -> Any:
        """Return a view of ``tensor`` whose gradient is handed to ``callback`` in backward."""
        if tensor.stop_gradient:
            log.warning(
                "save_grad: the paddle tensor has stop_gradient=True, so no gradient will reach it; "
                "nothing will be saved for it"
            )
            return tensor
        out = tensor.view_as(tensor)  # bit-exact, unlike t * 1 (which turns -0.0 into 0.0)

        def save_then_pass(grad: Any) -> None:
            callback(grad)

        out.register_hook(save_then_pass)
        return out

    def model_grads(self, model: Any, grads: object | None) -> dict[str, object]:
        """Name the gradients of the trainable parameters (``stop_gradient=False``): ``{name}_{index}``."""
        trainable = [(name, p) for name, p in model.named_parameters() if not p.stop_gradient]
        values = [p.grad for _, p in trainable] if grads is None else list(grads)  # type: ignore[call-overload]
        if len(values) != len(trainable):
            raise ValueError(
                f"get_grads: {len(values)} gradients for {len(trainable)} trainable parameters of "
                f"{type(model).__name__}; pass the gradients of all trainable parameters in order"
            )
        return {
            f"{name}_{index}": grad
            for index, ((name, _), grad) in enumerate(zip(trainable, values, strict=True))
            if grad is not None
        }

    def seed(self, seed: int, deterministic: bool) -> None:
        """Seed Paddle's generators; deterministic kernels are a GPU build's flags, set before import."""
        sys.modules["paddle"].seed(seed)
        if deterministic:
            log.info(
                "seed_all: Paddle's deterministic kernels are set by FLAGS_cudnn_deterministic=1 at start"
            )

    def load_checkpoint(self, path: str, kind: str, trust: bool) -> CheckpointContents:
        """Read a ``.pdparams`` file without running its pickle (unless trusted)."""
        from ts_paddle.pdparams import read_pdparams

        return read_pdparams(path, trust)

    def save_checkpoint(self, params: Mapping[str, np.ndarray], path: str, format: str) -> None:
        """Write a ``.pdparams`` file that ``paddle.load`` reads."""
        from ts_paddle.pdparams import write_pdparams

        write_pdparams(params, path)

    def weight_convention(self, kind: str) -> Mapping[str, Any] | None:
        """How ``paddle.nn`` stores a layer kind's weights (Linear transposed, BatchNorm ``_mean`` ...)."""
        from ts_paddle.convention import weight_convention

        return weight_convention(kind)

    def named_layers(self, model: Any) -> Sequence[LayerInfo]:
        """List every sublayer with its kind, own state entries and settings."""
        from ts_paddle.layers import named_layers

        return named_layers(model)

    def layer_layout(self, layer: Any, kind: str) -> str | None:
        """Read a layer's ``data_format`` (``_data_layout`` on ``BatchNorm``); channels first unless set."""
        return layout_from_attributes(
            layer, kind, ("_data_format", "data_format", "_data_layout"), default="channels_first"
        )

    def install_module_hooks(self, model: Any, recorder: ModuleRecorder) -> HookHandles:
        """Report every sublayer call through forward pre- and post-hooks."""
        from ts_paddle.layers import install_module_hooks

        return install_module_hooks(model, recorder)

    def run_forward(self, model: Any, args: Sequence[Any], kwargs: Mapping[str, Any], train: bool) -> Any:
        """Run the layer under ``no_grad``; restore every sublayer's mode."""
        from ts_paddle.layers import run_forward

        return run_forward(model, args, kwargs, train, lambda a: self.from_numpy(a, None))

    def model_state(self, model: Any) -> dict[str, np.ndarray]:
        """Copy every state entry once (recurrent layers list theirs twice)."""
        from ts_paddle.layers import model_state

        return model_state(model, self.to_numpy)

    def load_model_state(self, model: Any, params: Mapping[str, np.ndarray]) -> None:
        """Copy arrays into the entries of the same names (``set_value``)."""
        from ts_paddle.layers import load_model_state

        load_model_state(model, params, lambda a: self.from_numpy(a, None))


plugin = PaddleBackend()
