"""PyTorch backend for tscore, registered under the entry point group ``tscore`` as ``torch``."""

__version__ = "0.1.0"
