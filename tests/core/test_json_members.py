"""Reading one big member of a JSON document a batch at a time gives what parsing it whole gives.

:func:`tscore.json_members.read_members` finds the document's structure with numpy over its bytes,
a block at a time: strings (escaped quotes, backslashes at the end of a block), brackets and commas
at any offset. Hypothesis writes any JSON object document, compact or indented, and reads it back
with blocks and batches as small as one byte; a document cut short gives its whole members.
"""

from __future__ import annotations

import json
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tscore import json_members
from tscore.json_members import DAMAGED, NotAnObjectDocument, read_members
from tscore.testing.fuzzing import fuzz_settings

SETTINGS = fuzz_settings()
# strings with what trips a scanner: quotes, backslashes, brackets, commas and colons
_TRICKY = st.text(alphabet=string.ascii_letters + '"\\{}[],: \n\u00e9\u4e2d', max_size=8)
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**60), 2**60) | st.floats(allow_nan=False) | _TRICKY,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TRICKY, inner, max_size=4),
    max_leaves=12,
)


def _read(path, key="data"):
    with read_members(str(path), key) as members:
        found = list(members.with_spans())
        # each member reads again from its span, alone, in runs of neighbours, in any order
        spans = [span for _, _, span in found]
        assert members.values_at(spans[::-1]) == [value for _, value, _ in found][::-1]
        assert members.values_at(spans[::2]) == [value for _, value, _ in found][::2]
        # the light pass names what is read, a damaged member (one cut short) under its key too
        assert list(members.keys()) == [key for key, _, _ in members.with_spans(keep_damaged=True)]
        return members.head, [(key, value) for key, value, _ in found], members.complete


@pytest.fixture
def small_blocks(monkeypatch):
    """Make every block and batch tiny, so that every boundary falls everywhere."""

    def use(scan: int, batch: int) -> None:
        monkeypatch.setattr(json_members, "SCAN_BYTES", scan)
        monkeypatch.setattr(json_members, "BATCH_BYTES", batch)

    return use


def test_any_document_reads_as_json_reads_it(tmp_path, small_blocks):
    path = tmp_path / "dump.json"

    @SETTINGS
    @given(
        st.dictionaries(_TRICKY, _VALUES, max_size=6),
        st.dictionaries(_TRICKY.filter(lambda k: k != "data"), _VALUES, max_size=3),
        st.sampled_from([None, 1, 2]),
        st.integers(1, 64),
        st.integers(1, 64),
    )
    def one(data, head, indent, scan, batch):
        small_blocks(scan, batch)
        document = {**head, "data": data}
        path.write_text(json.dumps(document, indent=indent, ensure_ascii=bool(scan % 2)), encoding="utf-8")
        got_head, members, complete = _read(path)
        assert got_head == head
        assert members == list(data.items())
        assert complete

    one()


def test_a_document_cut_short_gives_its_whole_members(tmp_path, small_blocks, caplog):
    small_blocks(7, 50)
    data = {f"Functional.relu.{n}.forward": {"output": [{"Max": n, "s": '}"\\'}]} for n in range(20)}
    text = json.dumps({"task": "statistics", "data": data}, indent=1)
    path = tmp_path / "dump.json"
    for cut in range(text.index('"data"') + 10, len(text), 37):
        path.write_text(text[:cut])
        head, members, complete = _read(path)
        assert head == {"task": "statistics"} and not complete
        assert members == list(data.items())[: len(members)]
        assert len(members) >= text[:cut].count('"s"') - 1  # at most the member being written is lost


def test_a_damaged_member_is_left_out_and_the_rest_read(tmp_path, caplog):
    path = tmp_path / "dump.json"
    path.write_text('{"data": {"a": 1, "b": tru, "c": [3]}, "task": "x"}')
    head, members, _ = _read(path)
    assert members == [("a", 1), ("c", [3])] and head == {"task": "x"}
    assert "byte" in caplog.text and "not JSON" in caplog.text


def test_a_damaged_member_can_be_kept_under_its_key_so_the_keys_pass_agrees(tmp_path, caplog):
    path = tmp_path / "dump.json"
    path.write_text('{"data": {"a": 1, "b\\"q": tru, "c": [3]}}')
    with read_members(str(path), "data") as members:
        kept = [(key, value) for key, value, _ in members.with_spans(keep_damaged=True)]
        assert kept == [("a", 1), ('b"q', DAMAGED), ("c", [3])]
        assert list(members.keys()) == ["a", 'b"q', "c"]
    assert "'b\"q' at byte" in caplog.text and "read with no value" in caplog.text


@pytest.mark.parametrize(
    "text",
    [
        "",
        "[1, 2]",
        '{"task": 1}',
        '{"data": [1]}',
        '{"data": 3}',
        "  x{",
        '{"data": {"a": 1}'[:9],
        '{"data": {"a": {"x": 1}}}, "b": {"y": 2}, "level": 1}',  # a bracket too many
        '{"task": 1, "data": {"a": 1}} trailing',
        '{"data": {"a": 1} "b": 2}',
    ],
)
def test_what_is_not_an_object_with_that_object_is_refused(tmp_path, text):
    path = tmp_path / "dump.json"
    path.write_text(text)
    with pytest.raises(NotAnObjectDocument):
        _read(path)
