"""HuggingFace transformers models and MindSpore ports of them written with HF's module names.

``hf_gpt2(attn)`` is a tiny ``transformers`` GPT-2 (2 blocks, width 64) with
the eager or sdpa attention; ``ms_gpt2(mistake)`` its MindSpore port, correct
or with one planted migration mistake (``GPT2_MISTAKES``: the module where it
sits). The port computes in MindSpore's own operations (``ops.split``,
``ops.matmul``, ``Dense``-free ``Conv1D`` cells keeping HF's ``[in, out]``
weights), as a person porting the model would write it.
"""

from __future__ import annotations

import math

import mindspore as ms
import numpy as np
import torch
from mindspore import nn as mnn
from mindspore import ops
from transformers import GPT2Config, GPT2Model, LlamaConfig, LlamaModel

GPT2_SIZE = {"n_layer": 2, "n_embd": 64, "n_head": 4, "vocab_size": 100, "n_positions": 32}
GPT2_INPUT = (((2, 16), np.int64, (0, 100)),)

# mistake -> the module it is planted in (the path on both sides)
GPT2_MISTAKES = {
    "no_attention_scaling": "h.0.attn",
    "exact_gelu": "h.1.mlp.act",
    "ln_eps": "h.1.ln_2",
    "swapped_qk": "h.0.attn",
}


def hf_gpt2(attn: str = "eager", seed: int = 0) -> GPT2Model:
    """A tiny HF GPT-2 in eval mode, with ``attn_implementation`` ``"eager"`` or ``"sdpa"``."""
    torch.manual_seed(seed)
    model = GPT2Model(GPT2Config(**GPT2_SIZE, attn_implementation=attn))
    return model.eval()


class Conv1D(mnn.Cell):
    """HF's ``Conv1D``: a linear layer whose weight is ``[in, out]``."""

    def __init__(self, n_out: int, n_in: int) -> None:
        super().__init__()
        self.weight = ms.Parameter(ms.Tensor(np.zeros((n_in, n_out), np.float32)), name="weight")
        self.bias = ms.Parameter(ms.Tensor(np.zeros(n_out, np.float32)), name="bias")

    def construct(self, x: ms.Tensor) -> ms.Tensor:
        return ops.matmul(x, self.weight) + self.bias


class GPT2Attention(mnn.Cell):
    def __init__(self, mistake: str | None) -> None:
        super().__init__()
        width, self.heads = GPT2_SIZE["n_embd"], GPT2_SIZE["n_head"]
        self.mistake = mistake
        self.c_attn = Conv1D(3 * width, width)
        self.c_proj = Conv1D(width, width)
        self.attn_dropout = mnn.Dropout(p=0.1)
        self.resid_dropout = mnn.Dropout(p=0.1)
        positions = GPT2_SIZE["n_positions"]
        self.causal = ms.Tensor(np.tril(np.ones((positions, positions), np.bool_)))

    def _heads(self, x: ms.Tensor) -> ms.Tensor:
        batch, length, width = x.shape
        return x.view(batch, length, self.heads, width // self.heads).transpose(0, 2, 1, 3)

    def construct(self, hidden: ms.Tensor) -> ms.Tensor:
        batch, length, width = hidden.shape
        query, key, value = ops.split(self.c_attn(hidden), width, axis=2)
        if self.mistake == "swapped_qk":
            query, key = key, query
        query, key, value = self._heads(query), self._heads(key), self._heads(value)
        weights = ops.matmul(query, key.transpose(0, 1, 3, 2))
        if self.mistake != "no_attention_scaling":
            weights = weights / math.sqrt(width // self.heads)
        mask = self.causal[:length, :length]
        weights = ops.where(mask, weights, ms.Tensor(np.finfo(np.float32).min, ms.float32))
        weights = self.attn_dropout(ops.softmax(weights, axis=-1))
        out = ops.matmul(weights, value).transpose(0, 2, 1, 3).reshape(batch, length, width)
        return self.resid_dropout(self.c_proj(out))


class GPT2MLP(mnn.Cell):
    def __init__(self, mistake: str | None) -> None:
        super().__init__()
        width = GPT2_SIZE["n_embd"]
        self.c_fc = Conv1D(4 * width, width)
        self.c_proj = Conv1D(width, 4 * width)
        self.act = mnn.GELU(approximate=mistake != "exact_gelu")  # HF's gelu_new is the tanh one
        self.dropout = mnn.Dropout(p=0.1)

    def construct(self, hidden: ms.Tensor) -> ms.Tensor:
        return self.dropout(self.c_proj(self.act(self.c_fc(hidden))))


class GPT2Block(mnn.Cell):
    def __init__(self, mistake: str | None, index: int) -> None:
        super().__init__()
        width = GPT2_SIZE["n_embd"]
        planted = {
            path.split(".", 2)[2] if path.count(".") > 1 else "" for path, m in _planted(mistake, index)
        }
        self.ln_1 = mnn.LayerNorm((width,), epsilon=1e-5)
        self.attn = GPT2Attention(mistake if "attn" in planted else None)
        self.ln_2 = mnn.LayerNorm((width,), epsilon=1e-3 if "ln_2" in planted else 1e-5)
        self.mlp = GPT2MLP(mistake if "mlp.act" in planted else None)

    def construct(self, hidden: ms.Tensor) -> ms.Tensor:
        hidden = hidden + self.attn(self.ln_1(hidden))
        return hidden + self.mlp(self.ln_2(hidden))


def _planted(mistake: str | None, index: int) -> list[tuple[str, str]]:
    """The ``(path, mistake)`` planted in block ``index``."""
    path = GPT2_MISTAKES.get(mistake or "")
    return [(path, mistake)] if path and mistake and path.startswith(f"h.{index}.") else []


class MsGPT2Model(mnn.Cell):
    """The port, HF's module names: ``wte``, ``wpe``, ``drop``, ``h.N.{ln_1, attn, ln_2, mlp}``, ``ln_f``."""

    def __init__(self, mistake: str | None = None) -> None:
        super().__init__()
        width = GPT2_SIZE["n_embd"]
        self.wte = mnn.Embedding(GPT2_SIZE["vocab_size"], width)
        self.wpe = mnn.Embedding(GPT2_SIZE["n_positions"], width)
        self.drop = mnn.Dropout(p=0.1)
        self.h = mnn.CellList([GPT2Block(mistake, i) for i in range(GPT2_SIZE["n_layer"])])
        self.ln_f = mnn.LayerNorm((width,), epsilon=1e-5)

    def construct(self, input_ids: ms.Tensor) -> ms.Tensor:
        positions = ops.arange(input_ids.shape[1]).reshape(1, -1)
        hidden = self.drop(self.wte(input_ids) + self.wpe(positions))
        for block in self.h:
            hidden = block(hidden)
        return self.ln_f(hidden)


def ms_gpt2(mistake: str | None = None) -> MsGPT2Model:
    """Build the MindSpore port of :func:`hf_gpt2` in eval mode, ``mistake`` planted (``GPT2_MISTAKES``)."""
    if mistake is not None and mistake not in GPT2_MISTAKES:
        raise ValueError(f"no such mistake {mistake!r}; one of {sorted(GPT2_MISTAKES)}")
    model = MsGPT2Model(mistake)
    model.set_train(False)
    return model


# ---------------------------------------------------------------- a Llama-style model

LLAMA_SIZE = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,  # grouped-query attention: two query heads per key/value head
    "vocab_size": 100,
    "max_position_embeddings": 32,
    "rope_theta": 10000.0,
    "rms_norm_eps": 1e-6,
}
LLAMA_INPUT = GPT2_INPUT

# mistake -> the module it is planted in (the path on both sides)
LLAMA_MISTAKES = {
    "rotary_base": "rotary_emb",
    "rms_eps": "layers.1.post_attention_layernorm",
    "swapped_qk": "layers.0.self_attn",
    "no_attention_scaling": "layers.1.self_attn",
}


def hf_llama(seed: int = 0) -> LlamaModel:
    """A tiny HF Llama (RMSNorm, rotary embedding, SwiGLU, grouped-query attention) in eval mode."""
    torch.manual_seed(seed)
    model = LlamaModel(LlamaConfig(**LLAMA_SIZE, attn_implementation="eager"))
    return model.eval()


class LlamaRMSNorm(mnn.Cell):
    def __init__(self, width: int, eps: float) -> None:
        super().__init__()
        self.weight = ms.Parameter(ms.Tensor(np.ones(width, np.float32)), name="weight")
        self.variance_epsilon = eps

    def construct(self, hidden: ms.Tensor) -> ms.Tensor:
        variance = ops.mean(ops.pow(hidden, 2), -1, keep_dims=True)
        return self.weight * (hidden * ops.rsqrt(variance + self.variance_epsilon))


class LlamaRotaryEmbedding(mnn.Cell):
    def __init__(self, base: float) -> None:
        super().__init__()
        self.base = base
        head = LLAMA_SIZE["hidden_size"] // LLAMA_SIZE["num_attention_heads"]
        self.inv_freq = ms.Tensor(1.0 / (base ** (np.arange(0, head, 2, dtype=np.float32) / head)))

    def construct(self, hidden: ms.Tensor, positions: ms.Tensor) -> tuple[ms.Tensor, ms.Tensor]:
        freqs = positions.astype(ms.float32)[:, :, None] * self.inv_freq[None, None, :]
        table = ops.cat((freqs, freqs), axis=-1)
        return ops.cos(table), ops.sin(table)


def _rotate_half(x: ms.Tensor) -> ms.Tensor:
    half = x.shape[-1] // 2
    return ops.cat((-x[..., half:], x[..., :half]), axis=-1)


class LlamaAttention(mnn.Cell):
    def __init__(self, mistake: str | None) -> None:
        super().__init__()
        width, self.heads = LLAMA_SIZE["hidden_size"], LLAMA_SIZE["num_attention_heads"]
        self.kv_heads = LLAMA_SIZE["num_key_value_heads"]
        self.head = width // self.heads
        self.mistake = mistake
        self.q_proj = mnn.Dense(width, self.heads * self.head, has_bias=False)
        self.k_proj = mnn.Dense(width, self.kv_heads * self.head, has_bias=False)
        self.v_proj = mnn.Dense(width, self.kv_heads * self.head, has_bias=False)
        self.o_proj = mnn.Dense(self.heads * self.head, width, has_bias=False)
        positions = LLAMA_SIZE["max_position_embeddings"]
        self.causal = ms.Tensor(np.tril(np.ones((positions, positions), np.bool_)))

    def _split(self, x: ms.Tensor, heads: int) -> ms.Tensor:
        batch, length, _ = x.shape
        return x.view(batch, length, heads, self.head).transpose(0, 2, 1, 3)

    def construct(self, hidden: ms.Tensor, cos: ms.Tensor, sin: ms.Tensor) -> ms.Tensor:
        batch, length, _ = hidden.shape
        query = self._split(self.q_proj(hidden), self.heads)
        key = self._split(self.k_proj(hidden), self.kv_heads)
        value = self._split(self.v_proj(hidden), self.kv_heads)
        cos, sin = cos[:, None], sin[:, None]
        query, key = query * cos + _rotate_half(query) * sin, key * cos + _rotate_half(key) * sin
        repeat = self.heads // self.kv_heads
        key, value = ops.repeat_interleave(key, repeat, 1), ops.repeat_interleave(value, repeat, 1)
        if self.mistake == "swapped_qk":
            query, key = key, query
        weights = ops.matmul(query, key.transpose(0, 1, 3, 2))
        if self.mistake != "no_attention_scaling":
            weights = weights * self.head**-0.5
        weights = ops.where(
            self.causal[:length, :length], weights, ms.Tensor(np.finfo(np.float32).min, ms.float32)
        )
        out = ops.matmul(ops.softmax(weights, axis=-1), value)
        return self.o_proj(out.transpose(0, 2, 1, 3).reshape(batch, length, self.heads * self.head))


class LlamaMLP(mnn.Cell):
    """SwiGLU: ``down(silu(gate(x)) * up(x))``."""

    def __init__(self) -> None:
        super().__init__()
        width, inner = LLAMA_SIZE["hidden_size"], LLAMA_SIZE["intermediate_size"]
        self.gate_proj = mnn.Dense(width, inner, has_bias=False)
        self.up_proj = mnn.Dense(width, inner, has_bias=False)
        self.down_proj = mnn.Dense(inner, width, has_bias=False)
        self.act_fn = mnn.SiLU()

    def construct(self, hidden: ms.Tensor) -> ms.Tensor:
        return self.down_proj(self.act_fn(self.gate_proj(hidden)) * self.up_proj(hidden))


class LlamaDecoderLayer(mnn.Cell):
    def __init__(self, mistake: str | None, index: int) -> None:
        super().__init__()
        width, eps = LLAMA_SIZE["hidden_size"], LLAMA_SIZE["rms_norm_eps"]
        here = LLAMA_MISTAKES.get(mistake or "", "")
        mine = mistake if here.startswith(f"layers.{index}.") else None
        self.self_attn = LlamaAttention(mine if here.endswith("self_attn") else None)
        self.mlp = LlamaMLP()
        self.input_layernorm = LlamaRMSNorm(width, eps)
        planted_eps = mine == "rms_eps" and here.endswith("post_attention_layernorm")
        self.post_attention_layernorm = LlamaRMSNorm(width, 1e-2 if planted_eps else eps)

    def construct(self, hidden: ms.Tensor, cos: ms.Tensor, sin: ms.Tensor) -> ms.Tensor:
        hidden = hidden + self.self_attn(self.input_layernorm(hidden), cos, sin)
        return hidden + self.mlp(self.post_attention_layernorm(hidden))


class MsLlamaModel(mnn.Cell):
    """The port, with HF's names: ``embed_tokens``, ``layers.N.self_attn``, ``norm``, ``rotary_emb``."""

    def __init__(self, mistake: str | None = None) -> None:
        super().__init__()
        width = LLAMA_SIZE["hidden_size"]
        self.embed_tokens = mnn.Embedding(LLAMA_SIZE["vocab_size"], width)
        layers = LLAMA_SIZE["num_hidden_layers"]
        self.layers = mnn.CellList([LlamaDecoderLayer(mistake, i) for i in range(layers)])
        self.norm = LlamaRMSNorm(width, LLAMA_SIZE["rms_norm_eps"])
        base = LLAMA_SIZE["rope_theta"] / 10 if mistake == "rotary_base" else LLAMA_SIZE["rope_theta"]
        self.rotary_emb = LlamaRotaryEmbedding(base)

    def construct(self, input_ids: ms.Tensor) -> ms.Tensor:
        hidden = self.embed_tokens(input_ids)
        cos, sin = self.rotary_emb(hidden, ops.arange(input_ids.shape[1]).reshape(1, -1))
        for layer in self.layers:
            hidden = layer(hidden, cos, sin)
        return self.norm(hidden)


def ms_llama(mistake: str | None = None) -> MsLlamaModel:
    """Build the MindSpore port of :func:`hf_llama` in eval mode, ``mistake`` planted (``LLAMA_MISTAKES``)."""
    if mistake is not None and mistake not in LLAMA_MISTAKES:
        raise ValueError(f"no such mistake {mistake!r}; one of {sorted(LLAMA_MISTAKES)}")
    model = MsLlamaModel(mistake)
    model.set_train(False)
    return model
