"""MindSpore's ANF IR graph files (``*.pb``, saved with ``MS_DEV_SAVE_GRAPHS=2``) as tscore's graph records.

MindSpore ships the reader of its own format (``mindspore.train.anf_ir_pb2``,
a generated protobuf module): a ``ModelProto`` holds one graph of nodes, each
with its inputs (other nodes, parameters or constants by name), its
attributes and its output type. Shapes and dtypes of an input are those of
what it comes from.
"""

from __future__ import annotations

from typing import Any

from tscore.plugin_api import GraphInput, GraphNode, neutral_dtype


def read_ir_graph(path: str) -> list[GraphNode] | None:
    """Read an ANF IR ``.pb`` file; None for a file of another kind (not ``.pb``, not such a graph)."""
    if not path.lower().endswith(".pb"):
        return None
    from google.protobuf.message import DecodeError
    from mindspore.train import anf_ir_pb2

    model = anf_ir_pb2.ModelProto()
    try:
        with open(path, "rb") as stream:
            model.ParseFromString(stream.read())
    except (DecodeError, OSError, ValueError):
        return None
    graph = model.graph
    if not graph.node or not all(node.name and node.op_type for node in graph.node):
        return None  # bytes that parse as protobuf by chance: no graph of named operators
    known: dict[str, tuple[list[int] | None, str | None]] = {}
    for parameter in graph.parameters:
        known[parameter.name] = _type_of(parameter.type, anf_ir_pb2)
    for const in graph.const_vals:
        known[const.key] = _value_type(const.value, anf_ir_pb2)
    for node in graph.node:
        known[node.name] = _type_of(node.output_type, anf_ir_pb2)
    nodes = []
    for node in graph.node:
        shape, dtype = known[node.name]
        nodes.append(
            GraphNode(
                name=node.name,
                full_name=node.full_name or f"{node.scope}/{node.op_type}-op{node.name}",
                op_type=node.op_type,
                attrs={a.name: _text(a.value, anf_ir_pb2) for a in node.attribute},
                inputs=[_input(i.name, known) for i in node.input],
                output_shape=shape,
                output_dtype=dtype,
            )
        )
    return nodes


def _input(source: str, known: dict[str, tuple[list[int] | None, str | None]]) -> GraphInput:
    shape, dtype = known.get(source, (None, None))
    return GraphInput(source=source, shape=shape, dtype=dtype)


def _type_of(proto: Any, pb: Any) -> tuple[list[int] | None, str | None]:
    """Shape and neutral dtype of a tensor ``TypeProto``; (None, None) for tuples, monads and the rest."""
    if proto.data_type != pb.DT_TENSOR or not proto.HasField("tensor_type"):
        return None, None
    tensor = proto.tensor_type
    shape = [int(d.size) for d in tensor.shape.dim] if tensor.HasField("shape") else None
    return shape, _dtype(tensor.elem_type, pb)


def _value_type(value: Any, pb: Any) -> tuple[list[int] | None, str | None]:
    """Shape and dtype of a constant's ``ValueProto`` when it is a tensor."""
    if value.HasField("tensor_val"):
        tensor = value.tensor_val
        return [int(d) for d in tensor.dims], _dtype(tensor.data_type, pb)
    return None, None


def _dtype(code: int, pb: Any) -> str | None:
    name = pb.DataType.Name(code)  # "DT_FLOAT32"
    return neutral_dtype(name.removeprefix("DT_")) if name.startswith("DT_") else None


def _text(value: Any, pb: Any) -> str:
    """Give an attribute's value as text: a string as it is, anything else in protobuf's one-line form."""
    if value.dtype == pb.DT_STRING and value.str_val:
        return str(value.str_val)
    return " ".join(str(value).split())
