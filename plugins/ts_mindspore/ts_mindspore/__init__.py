"""MindSpore backend for tscore, registered under the entry point group ``tscore`` as ``mindspore``."""

__version__ = "0.1.0"
