"""Rows gathered as columns (amqp_decode.columns): the same values, in the same order, as the rows
themselves, absent keys null; run compiled and interpreted (the reference) alike."""

from __future__ import annotations

from amqp_decode.columns import ColumnBuffer
from amqp_decode.rows import RawRows
from amqp_decode.tables import FRAMES
from tests.capture.conftest import EXPECTED, decoded


def test_columns_hold_every_rows_values_in_order():
    path = next(p for p in EXPECTED if p.name == "returns_nack_reject.expected.json")
    builder = RawRows("run-1")
    rows = [builder.frame_row(r) for r in decoded(path)[1] if r["kind"] != "issue"]
    names = ("date", *FRAMES.arrow().names, "not_a_column")
    buffer = ColumnBuffer(names)
    for row in rows:
        buffer.add(row)
    assert buffer.size == len(rows) > 20
    columns = buffer.take()
    assert len(columns) == len(names)
    for name, column in zip(names, columns):
        assert column == [row.get(name) for row in rows], name
    assert columns[-1] == [None] * len(rows)
    assert buffer.size == 0 and buffer.take() == [[] for _ in names]  # it starts over


def test_a_buffer_reused_after_take_keeps_only_new_rows():
    buffer = ColumnBuffer(("a", "b"))
    buffer.add({"a": 1, "b": "x"})
    first = buffer.take()
    buffer.add({"b": "y", "c": 3})
    assert first == [[1], ["x"]]
    assert buffer.take() == [[None], ["y"]]


def test_rows_given_as_values_go_to_their_columns_and_a_short_one_is_refused():
    buffer = ColumnBuffer(("ts_ns", "payload"))
    buffer.add_values((1, b"ab"))
    buffer.add_values((2, None))
    try:
        buffer.add_values((3,))
    except ValueError as error:
        assert "1 values for 2 columns" in str(error)
    else:
        raise AssertionError("a row with too few values was taken")
    assert buffer.size == 2 and buffer.take() == [[1, 2], [b"ab", None]]
