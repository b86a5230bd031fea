from collections.abc import Iterator

import mindspore as ms
import pytest


@pytest.fixture(params=["pynative", "graph"])
def ms_mode(request, in_tmp) -> Iterator[str]:
    """Run the test in PyNative and in GRAPH_MODE, inside a temp folder (failed compiles write rank_0/)."""
    ms.set_context(mode=ms.GRAPH_MODE if request.param == "graph" else ms.PYNATIVE_MODE)
    yield request.param
    ms.set_context(mode=ms.PYNATIVE_MODE)
