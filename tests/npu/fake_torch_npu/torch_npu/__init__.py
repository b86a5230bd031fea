"""FAKE torch_npu: a stand-in for Huawei's Ascend NPU extension of torch, for machines without an NPU.

It is not torch_npu. It provides the functions that the ts_npu plugin calls,
with the behaviour torch_npu documents, on CPU tensors, so that the plugin's
logic runs for real in ``nox -s npu``:

* ``npu.init_dump()``, ``npu.set_dump(path)``, ``npu.finalize_dump()``,
  ``npu.synchronize()``, ``npu.manual_seed_all(seed)``; each call is appended
  to :data:`calls`, and ``set_dump`` before ``init_dump`` raises as torch_npu does;
* ``_C._check_overflow_npu()``, ``_C._clear_overflow_npu()``,
  ``_C._npu_is_support_inf_nan()``: the overflow flag of an NPU in
  saturation mode (:data:`SATURATION` True: float16 results are clamped to
  +-65504 and the flag raised, as the device does);
* two NPU-only operators, ``npu_fast_gelu`` and ``npu_linear``, computed by
  torch on the CPU (saturating like the device).
"""

from __future__ import annotations

import types

import torch

FAKE = True
SATURATION = True  # an NPU that clamps instead of writing inf, and keeps a flag
calls: list[str] = []
_state = {"flag": False, "dump": "off"}


def _saturate(wide: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Return ``wide`` in ``dtype``; in float16 on a saturating NPU, clamped, with the flag raised."""
    if SATURATION and dtype == torch.float16 and not (wide.abs() <= 65504).all():
        _state["flag"] = True
        wide = wide.nan_to_num(posinf=65504.0, neginf=-65504.0).clamp(-65504.0, 65504.0)
    return wide.to(dtype)


def npu_fast_gelu(x: torch.Tensor) -> torch.Tensor:
    calls.append("npu_fast_gelu")
    wide = x.float()
    return _saturate(wide * torch.sigmoid(1.702 * wide), x.dtype)


def npu_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    calls.append("npu_linear")
    wide = torch.nn.functional.linear(x.float(), weight.float(), None if bias is None else bias.float())
    return _saturate(wide, x.dtype)


def _check_overflow_npu() -> bool:
    calls.append("check_overflow")
    return _state["flag"]


def _clear_overflow_npu() -> None:
    calls.append("clear_overflow")
    _state["flag"] = False


def _npu_is_support_inf_nan() -> bool:
    return not SATURATION


_C = types.SimpleNamespace(
    _check_overflow_npu=_check_overflow_npu,
    _clear_overflow_npu=_clear_overflow_npu,
    _npu_is_support_inf_nan=_npu_is_support_inf_nan,
)


def _init_dump() -> None:
    calls.append("init_dump")
    _state["dump"] = "initialised"


def _set_dump(path: str) -> None:
    if _state["dump"] != "initialised":
        raise RuntimeError("set_dump before init_dump")  # torch_npu's order, enforced
    calls.append(f"set_dump {path}")
    _state["dump"] = "on"


def _finalize_dump() -> None:
    if _state["dump"] == "off":
        raise RuntimeError("finalize_dump before init_dump")
    calls.append("finalize_dump")
    _state["dump"] = "off"


def _manual_seed_all(seed: int) -> None:
    calls.append(f"manual_seed_all {seed}")


npu = types.SimpleNamespace(
    init_dump=_init_dump,
    set_dump=_set_dump,
    finalize_dump=_finalize_dump,
    synchronize=lambda: calls.append("synchronize"),
    manual_seed_all=_manual_seed_all,
    is_available=lambda: True,
)
