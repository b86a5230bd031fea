"""Ascend NPU extras for tscore through torch_npu (see ``ts_npu.plugin``)."""
