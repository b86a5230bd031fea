"""A framework's saved computation graph as plain records: what ``ts_read_graph_file`` returns.

A backend reads its framework's graph file (MindSpore's ANF IR ``.pb``) into
:class:`GraphNode` records; the core then works on those with no framework:
``precision_tracker`` lists the operators whose precision the backend
changed, with what feeds them and what they feed.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class GraphInput(BaseModel):
    """One input of an operator: the node or parameter it comes from, and its shape and dtype when known."""

    model_config = ConfigDict(frozen=True)

    source: str = Field(description="the name of the node, parameter or constant it comes from")
    shape: list[int] | None = None
    dtype: str | None = None


class GraphNode(BaseModel):
    """One operator of a graph."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="its name in the graph, unique there; inputs refer to it")
    full_name: str = Field(description="its scope and name, 'Default/0-Dense/MatMul-op0'")
    op_type: str
    attrs: dict[str, str] = Field(default_factory=dict, description="its attributes, each as text")
    inputs: list[GraphInput] = Field(default_factory=list)
    output_shape: list[int] | None = None
    output_dtype: str | None = None
