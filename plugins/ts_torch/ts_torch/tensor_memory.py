"""Whether a tensor's values lie in its own memory, where a kernel reading raw addresses may read them.

The dump's compiled statistics (the C pass over host memory, the Triton kernel on a GPU) read a
tensor from its ``data_ptr()`` for ``numel()`` elements, with none of torch's checks: a tensor that
only wraps others (DTensor, torchao's, ``TwoTensor``) or a ``FakeTensor`` reports no memory of its
own (address 0, or another tensor's), and FSDP frees a parameter by shrinking its storage to
nothing while the tensor keeps its shape. Reading such an address would crash the process or
read freed memory; torch's own reductions raise an error the dump records instead.
"""

from __future__ import annotations

import sys
from typing import Any


def laid_out_in_own_memory(tensor: Any) -> bool:
    """Say whether ``tensor`` is a plain contiguous tensor or parameter whose storage holds its elements.

    A subclass, a null address, a storage smaller than the elements need (freed by FSDP) or none
    at all (a tensor inside ``torch.vmap``) gives False: such a tensor is left to torch's reductions.
    """
    torch = sys.modules["torch"]
    if type(tensor) is not torch.Tensor and type(tensor) is not torch.nn.Parameter:
        return False
    try:  # a functorch tensor inside vmap has no storage to ask about: it raises
        if not tensor.is_contiguous() or tensor.data_ptr() == 0:
            return False
        needed = (tensor.storage_offset() + tensor.numel()) * tensor.element_size()
        return bool(tensor.untyped_storage().nbytes() >= needed)
    except RuntimeError:
        return False
