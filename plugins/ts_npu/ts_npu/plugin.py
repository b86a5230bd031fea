"""tscore plugin for what torch_npu adds to torch on an Ascend NPU.

Loading this module never imports torch_npu (importing it initialises the
device runtime): :class:`NpuBackend` answers only once the user's program
imported ``torch_npu``. The module refuses to load where torch_npu is not
installed, so tscore skips it with one warning. Tensors on the ``npu``
device are torch tensors: the torch backend brings them to the host.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any

from tscore.plugin_api import Backend, HookHandles

if importlib.util.find_spec("torch_npu") is None:
    raise ImportError("ts_npu needs torch_npu (Ascend's CANN and torch_npu), which is not installed")

log = logging.getLogger(__name__)

# what seed_all(mode=True) sets for the collective reductions of HCCL and LCCL
DETERMINISTIC_ENV = {"HCCL_DETERMINISTIC": "true", "LCCL_DETERMINISTIC": "1"}


class NpuBackend(Backend):
    """NPU-only APIs in the dump, the NPU overflow flag, ACL dumps and NPU seeding (torch_npu)."""

    framework = "torch_npu"
    import_to_seed = False  # importing torch_npu starts the device runtime: only seed it when imported

    def _torch_npu(self) -> Any:
        return sys.modules["torch_npu"]

    def seed(self, seed: int, deterministic: bool) -> None:
        """Seed every NPU; with ``deterministic`` make HCCL's and LCCL's reductions deterministic.

        torch's own switch (``torch.use_deterministic_algorithms``), which torch_npu's kernels
        follow, is the torch backend's to set.
        """
        torch_npu = self._torch_npu()
        torch_npu.npu.manual_seed_all(seed)
        if deterministic:
            os.environ.update(DETERMINISTIC_ENV)

    def install_api_hooks(self, recorder: Any) -> HookHandles:
        """Report the NPU-only APIs of torch_npu (``NPU_npu_fast_gelu_0_forward``)."""
        from ts_npu.npu_apis import install

        return install(self._torch_npu(), recorder)

    def device_overflow(self) -> bool | None:
        """Read and lower torch_npu's overflow flag; None on an NPU that writes inf and NaN itself."""
        native = self._torch_npu()._C
        supports = getattr(native, "_npu_is_support_inf_nan", None)
        if supports is not None and supports():
            return None  # the values carry inf and NaN: the check reads them
        raised = bool(native._check_overflow_npu())
        if raised:
            native._clear_overflow_npu()
        return raised

    def kernel_dump(self, config_path: str) -> AbstractContextManager[object] | None:
        """Run torch_npu's ACL dump with ``config_path`` (spec 004's dump.json) while entered."""
        return _acl_dump(self._torch_npu().npu, config_path)


@contextlib.contextmanager
def _acl_dump(npu: Any, config_path: str) -> Iterator[None]:
    npu.synchronize()  # kernels queued before the call stay out of its dump
    npu.init_dump()
    npu.set_dump(os.path.abspath(config_path))
    npu.synchronize()
    try:
        yield
    finally:
        npu.synchronize()  # the call's kernels have run before the dump ends
        npu.finalize_dump()
        npu.synchronize()


plugin = NpuBackend()
