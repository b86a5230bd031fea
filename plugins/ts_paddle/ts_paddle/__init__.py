"""tscore backend for PaddlePaddle."""
