"""The NPU-only APIs of torch_npu in the API dump: ``NPU_npu_fast_gelu_0_forward``.

torch's own API capture (a ``TorchFunctionMode`` in the torch backend) names
what torch defines; the operators that torch_npu adds are functions of the
``torch_npu`` module, which it does not name. While a dump runs, each of
those that exists is replaced by a wrapper that tells the recorder before and
after the call, and put back (checked by identity) when the handles are
removed. The call runs with the recorder marked busy, so a torch call made
inside it is not recorded again: ptdbg's rule.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from tscore.plugin_api import HookHandles

PREFIX = "NPU"
# spec 004's list of NPU operators that ptdbg dumps
NPU_APIS = (
    "one_",
    "npu_sort_v2",
    "npu_transpose",
    "npu_broadcast",
    "npu_dtype_cast",
    "empty_with_format",
    "npu_one_hot",
    "npu_stride_add",
    "npu_ps_roi_pooling",
    "npu_roi_align",
    "npu_nms_v4",
    "npu_iou",
    "npu_nms_with_mask",
    "npu_pad",
    "npu_bounding_box_encode",
    "npu_bounding_box_decode",
    "npu_batch_nms",
    "npu_slice",
    "_npu_dropout",
    "npu_indexing",
    "npu_ifmr",
    "npu_max",
    "npu_scatter",
    "npu_layer_norm_eval",
    "npu_alloc_float_status",
    "npu_get_float_status",
    "npu_clear_float_status",
    "npu_confusion_transpose",
    "npu_bmmV2",
    "fast_gelu",
    "npu_sub_sample",
    "npu_deformable_conv2d",
    "npu_mish",
    "npu_anchor_response_flags",
    "npu_yolo_boxes_encode",
    "npu_grid_assign_positive",
    "npu_normalize_batch",
    "npu_masked_fill_range",
    "npu_linear",
    "npu_bert_apply_adam",
    "npu_giou",
    "npu_ciou",
    "npu_ciou_backward",
    "npu_diou",
    "npu_diou_backward",
    "npu_sign_bits_pack",
    "npu_sign_bits_unpack",
    "npu_fast_gelu",
)


def _grad_nodes(output: Any) -> list[Any]:
    items = output if isinstance(output, (tuple, list)) else (output,)
    nodes: list[Any] = []
    for item in items:
        node = getattr(item, "grad_fn", None)
        if node is not None and all(node is not seen for seen in nodes):
            nodes.append(node)
    return nodes


def _wrap(name: str, original: Callable[..., Any], recorder: Any) -> Callable[..., Any]:
    @functools.wraps(original)
    def reported(*args: Any, **kwargs: Any) -> Any:
        if recorder.busy:  # the recorder's own work, or a call inside a captured one
            return original(*args, **kwargs)
        token = recorder.begin(PREFIX, name, args, kwargs)
        recorder.busy += 1
        try:
            output = original(*args, **kwargs)
        finally:
            recorder.busy -= 1
        if token is not None:
            recorder.end(token, output)
            if recorder.backward_wanted:
                for node in _grad_nodes(output):
                    node.register_hook(lambda grad_in, grad_out: recorder.backward(token, grad_out, grad_in))
        return output

    return reported


def install(torch_npu: Any, recorder: Any) -> HookHandles:
    """Replace every NPU-only API that ``torch_npu`` has with a reporting wrapper; return how to undo it."""
    replaced: list[tuple[str, Callable[..., Any], Callable[..., Any]]] = []
    for name in NPU_APIS:
        original = getattr(torch_npu, name, None)
        if callable(original):
            wrapper = _wrap(name, original, recorder)
            setattr(torch_npu, name, wrapper)
            replaced.append((name, original, wrapper))

    def restore() -> None:
        for name, original, wrapper in reversed(replaced):
            if getattr(torch_npu, name, None) is wrapper:  # put back only what is still ours
                setattr(torch_npu, name, original)
        replaced.clear()

    return HookHandles([restore], label="torch_npu NPU-only APIs")
