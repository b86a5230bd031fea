"""The neutral layer kinds a backend names its layers by (``LayerInfo.kind``), and their families.

A kind says what a layer computes, whatever the framework calls its class:
torch's ``Conv2d``, MindSpore's ``Conv2d`` and Paddle's ``Conv2D`` are all
``conv2d``. Kinds with a rank (``batchnorm2d``) belong to a rank-free
*family* (``batchnorm``), which is also a kind of its own, for a framework
whose layer takes any rank (Flax's ``BatchNorm``, Paddle's ``BatchNorm``).
Two layers of one family are compared setting by setting (an epsilon)
whatever their ranks; two of one *role* (two activations, two poolings) may
stand in for each other when layers are paired.

A backend names a class tscore has no kind for ``""``; the core then pairs
it by path, weights or order alone. The backend author's guide (docs/writing-a-backend.md)
lists this table, generated from here (a test keeps the two the same).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NeutralKind:
    """One neutral layer kind.

    :ivar name: the kind (``"batchnorm2d"``).
    :ivar family: the rank-free family it belongs to (``"batchnorm"``); the kind itself when it has no rank.
    :ivar role: what it does, for pairing layers that may replace each other (``"activation"``,
        ``"pooling"``); the family when nothing can stand in for it.
    :ivar channels: True when its activations have a channel axis that a framework may put first
        (torch, the neutral form) or last (``NHWC``): see ``ts_layer_layout``.
    :ivar what: what it computes, in a few words.
    """

    name: str
    family: str
    role: str
    channels: bool
    what: str


def _ranked(
    family: str, role: str, channels: bool, what: str, ranks: tuple[int, ...] = (1, 2, 3)
) -> list[NeutralKind]:
    """Make the rank-free kind and one kind per rank (``conv``, ``conv1d``, ``conv2d``, ``conv3d``)."""
    kinds = [NeutralKind(family, family, role, channels, f"{what}, any rank")]
    kinds += [NeutralKind(f"{family}{r}d", family, role, channels, f"{what}, {r}-d") for r in ranks]
    return kinds


def _plain(name: str, role: str, what: str, channels: bool = False) -> NeutralKind:
    return NeutralKind(name, name, role, channels, what)


NEUTRAL_KINDS: tuple[NeutralKind, ...] = (
    _plain("linear", "linear", "y = x W^T + b on the last axis"),
    *_ranked("conv", "conv", True, "convolution"),
    *_ranked("conv_transpose", "conv_transpose", True, "transposed convolution"),
    *_ranked("batchnorm", "batchnorm", True, "batch normalisation over the channel axis"),
    *_ranked("instancenorm", "instancenorm", True, "instance normalisation"),
    _plain("layernorm", "layernorm", "layer normalisation over the last axes"),
    _plain("groupnorm", "groupnorm", "group normalisation over channel groups", channels=True),
    _plain("rmsnorm", "rmsnorm", "RMS normalisation over the last axis"),
    _plain("embedding", "embedding", "a table lookup"),
    _plain("rotary", "rotary", "rotary position embedding: cos and sin tables (setting ``base``)"),
    _plain("prelu", "activation", "PReLU, with a learnt slope", channels=True),
    _plain("rnn", "recurrent", "an Elman RNN"),
    _plain("lstm", "recurrent", "an LSTM"),
    _plain("gru", "recurrent", "a GRU"),
    _plain("multihead_attention", "attention", "multi-head attention with input and output projections"),
    *_ranked("maxpool", "pooling", True, "max pooling"),
    *_ranked("avgpool", "pooling", True, "average pooling"),
    *_ranked("adaptive_avgpool", "pooling", True, "average pooling to a fixed output size"),
    *_ranked("adaptive_maxpool", "pooling", True, "max pooling to a fixed output size"),
    _plain("dropout", "dropout", "dropout (nothing in eval mode)"),
    _plain("relu", "activation", "max(x, 0)"),
    _plain("relu6", "activation", "min(max(x, 0), 6)"),
    _plain("leaky_relu", "activation", "x, or a small slope times x below 0"),
    _plain("elu", "activation", "ELU"),
    _plain("gelu", "activation", "GELU (setting ``approximate``: none, tanh or sigmoid)"),
    _plain("silu", "activation", "x * sigmoid(x) (Swish)"),
    _plain("sigmoid", "activation", "the logistic function"),
    _plain("tanh", "activation", "tanh"),
    _plain("mish", "activation", "x * tanh(softplus(x))"),
    _plain("hswish", "activation", "hard Swish"),
    _plain("hsigmoid", "activation", "hard sigmoid"),
    _plain("softmax", "softmax", "softmax over one axis"),
    _plain("flatten", "flatten", "axes merged into one (their order matters: see layouts)"),
    _plain("identity", "identity", "its input, unchanged"),
    _plain("sequential", "container", "its layers, one after the other"),
    _plain("modulelist", "container", "a list of layers, never called itself"),
    _plain("moduledict", "container", "named layers, never called itself"),
)

KINDS_BY_NAME: dict[str, NeutralKind] = {kind.name: kind for kind in NEUTRAL_KINDS}


def kind_family(kind: str) -> str:
    """Give the rank-free family of a kind (``batchnorm2d`` -> ``batchnorm``; an unknown kind: itself)."""
    found = KINDS_BY_NAME.get(kind)
    return found.family if found else kind


def kind_role(kind: str) -> str:
    """Say what a kind does, for layers that may stand in for each other (``relu6`` -> ``activation``)."""
    found = KINDS_BY_NAME.get(kind)
    return found.role if found else kind
