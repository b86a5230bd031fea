"""Small helpers that TroubleShooter users know from ``ts.widget``."""

from __future__ import annotations

from tscore.errors import UnsupportedObjectError
from tscore.plugins import hook
from tscore.tensors import type_name


def get_grads(model: object, grads: object | None = None) -> dict[str, object]:
    """Name the gradients of ``model``'s trainable parameters, for any framework.

    Keys are ``{parameter name}_{index}``, the index being the parameter's
    position among the trainable ones, so that files saved from two
    frameworks sort in parameter order (``fc.weight_0``, ``fc.bias_1``).

    :param model: a ``torch.nn.Module`` (gradients read from ``.grad``) or a
        ``mindspore.nn.Cell``.
    :param grads: for MindSpore, the gradients returned by ``grad`` or
        ``value_and_grad`` for ``model.trainable_params()`` (with or without
        ``return_ids=True``).
    :raises UnsupportedObjectError: when no loaded plugin knows ``model``.
    """
    named = hook().ts_model_grads(model=model, grads=grads)
    if named is None:
        raise UnsupportedObjectError(
            f"get_grads: no loaded tscore plugin knows models of type {type_name(model)}"
        )
    return named


def get_pt_grads(model: object) -> dict[str, object]:
    """Return ``{name_index: grad}`` for a torch model after ``loss.backward()`` (spec 000)."""
    return get_grads(model)


def get_ms_grads(net: object, grads: object) -> dict[str, object]:
    """Return ``{name_index: grad}`` for a MindSpore ``Cell`` and the gradients of its trainable params."""
    return get_grads(net, grads)
