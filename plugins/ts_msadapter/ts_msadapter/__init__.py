"""tscore backend for torch-API networks that run on MindSpore (MSAdapter, MindTorch, mindnlp's mindtorch).

``enable()`` makes mindnlp 0.5.1's ``mindtorch`` importable on MindSpore 2.10
(see :mod:`ts_msadapter.shim`) and imports it, after which ``import torch``
gives mindtorch; the plugin itself never imports it.
"""

from ts_msadapter.shim import enable, generator_needs_shim

__all__ = ["enable", "generator_needs_shim"]
