"""Whether a tensor's values lie in its own memory, where a kernel reading raw addresses may read them.

The dump's compiled statistics (the C pass over host memory, the Triton kernel on a GPU) read a
tensor from its ``data_ptr()`` for ``numel()`` elements, with none of torch's checks. A subclass
may hold no memory of its own (DTensor, torchao's tensors and ``TwoTensor`` report address 0, a
``FakeTensor`` none at all) or show values other than the ones its memory holds; FSDP frees a
parameter by shrinking the storage under it to nothing while the tensor keeps its shape, and an
offset view of such a storage still reports an address. Such tensors are left to torch's
reductions, which see what the tensor's operators see, or raise an error the dump records.
"""

from __future__ import annotations

import sys
from typing import Any


def plain_tensor(tensor: Any) -> bool:
    """Say whether ``tensor`` is a ``torch.Tensor`` or ``nn.Parameter`` itself, not a subclass of them."""
    torch = sys.modules["torch"]
    return type(tensor) is torch.Tensor or type(tensor) is torch.nn.Parameter


def laid_out_in_own_memory(tensor: Any) -> bool:
    """Say whether ``tensor`` is a plain contiguous tensor or parameter whose storage holds its elements.

    A subclass, a null address, a view past the end of a storage FSDP freed, or no storage at
    all (a tensor inside ``torch.vmap``) gives False: such a tensor is left to torch's reductions.
    The storage is asked about only for a view at an offset (a freed storage leaves a tensor at
    offset 0 with address 0): asking makes a Python object for the storage, which then lives as
    long as the storage does.
    """
    if not plain_tensor(tensor):
        return False
    try:  # a functorch tensor inside vmap has no storage to ask about: it raises
        if not tensor.is_contiguous() or tensor.data_ptr() == 0:
            return False
        offset = tensor.storage_offset()
        if not offset:
            return True
        needed = (offset + tensor.numel()) * tensor.element_size()
        return bool(tensor.untyped_storage().nbytes() >= needed)
    except RuntimeError:
        return False
