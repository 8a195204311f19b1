"""Columns laid out as Arrow's buffers (amqpcap.columnar.arrow_layout), wrapped by the table writer
(amqpcap.lake.tablefiles): the same Arrow arrays as pyarrow's own conversion of the values, and for
every value the layout leaves to pyarrow, pyarrow's own answer, its errors included. Run compiled
and interpreted (the reference) alike."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqpcap.columnar import arrow_layout
from amqpcap.lake import tablefiles

INT64 = (-(1 << 63), (1 << 63) - 1)
INT32 = (-(1 << 31), (1 << 31) - 1)
TYPES = {"int64": pa.int64(), "int32": pa.int32(), "timestamp": pa.timestamp("us", tz="UTC"),
         "bool": pa.bool_(), "string": pa.string()}


def wrapped(values: list, arrow_type: pa.DataType) -> pa.Array:
    """The layout's buffers as the writer wraps them (whichever build the writer itself would use)."""
    laid = tablefiles._laid_out(values, arrow_type)
    assert laid is not None, values
    laid.validate(full=True)
    return laid


def same(values: list, arrow_type: pa.DataType) -> None:
    expected = pa.array(values, type=arrow_type)
    got = wrapped(values, arrow_type)
    assert got.equals(expected) and got.null_count == expected.null_count
    if pa.types.is_timestamp(arrow_type):  # (as integers: Python's datetime has a smaller range)
        got, expected = got.view(pa.int64()), expected.view(pa.int64())
    assert got.to_pylist() == expected.to_pylist()


@given(st.lists(st.one_of(st.none(), st.integers(*INT64)), max_size=70))
@settings(max_examples=200, deadline=None)
def test_integers_are_arrows_own(values):
    same(values, pa.int64())
    same(values, pa.timestamp("us", tz="UTC"))


@given(st.lists(st.one_of(st.none(), st.integers(*INT32)), max_size=70))
@settings(max_examples=200, deadline=None)
def test_int32_values_are_arrows_own(values):
    same(values, pa.int32())


@given(st.lists(st.one_of(st.none(), st.booleans()), max_size=70))
@settings(max_examples=200, deadline=None)
def test_booleans_are_arrows_own(values):
    same(values, pa.bool_())


@given(st.lists(st.one_of(st.none(), st.text(), st.text(alphabet="abc.:-_0123456789", max_size=12)), max_size=70))
@settings(max_examples=300, deadline=None)
def test_strings_are_arrows_own_ascii_or_not(values):
    same(values, pa.string())


def test_a_column_of_real_table_rows_is_laid_out_as_arrow_converts_it():
    """Several thousand values, every null pattern, as a decode task's batches hold them."""
    rng = random.Random(7)
    names = ["amq.direct", "rk.é", "10.0.0.1:5672", "", "queue-1"]
    columns = {
        "int64": [rng.choice([None, rng.randrange(*INT64)]) for _ in range(5000)],
        "int32": [rng.choice([None, 0, rng.randrange(*INT32)]) for _ in range(5000)],
        "timestamp": [rng.choice([None, 1_700_000_000_000_000 + i]) for i in range(5000)],
        "bool": [rng.choice([None, True, False]) for _ in range(5000)],
        "string": [rng.choice([None, *names]) for _ in range(5000)],
    }
    for name, values in columns.items():
        same(values, TYPES[name])
        same([v for v in values if v is not None], TYPES[name])  # no nulls: no validity bitmap
    assert arrow_layout.integers([1, 2], 8)[0] is None
    assert arrow_layout.strings(["a", None])[:2] == (bytearray(b"\x01"), 1)


@pytest.mark.parametrize("name, values", [
    ("int64", [1, True]), ("int64", [1, 2.0]), ("int64", [1 << 63]), ("int64", [-(1 << 63) - 1]),
    ("int32", [1 << 31]), ("int32", [-(1 << 31) - 1]), ("int32", [1 << 70]), ("int64", ["1"]),
    ("bool", [True, 1]), ("bool", [None, 0]), ("string", ["a", b"b"]), ("string", ["a", 1]),
    ("string", ["ok", "\ud800"]),
])
def test_what_the_layout_leaves_to_pyarrow_converts_or_fails_as_pyarrow_does(name, values):
    arrow_type = TYPES[name]
    assert tablefiles._laid_out(values, arrow_type) is None
    try:
        expected = pa.array(values, type=arrow_type)
    except Exception as error:  # noqa: BLE001 (whatever pyarrow raises, the writer raises)
        with pytest.raises(type(error)):
            tablefiles.arrow_column(values, arrow_type)
    else:
        assert tablefiles.arrow_column(values, arrow_type).equals(expected)


def test_an_empty_column_and_other_widths():
    for name in ("int64", "int32", "bool", "string"):
        same([], TYPES[name])
    with pytest.raises(ValueError, match="4 or 8"):
        arrow_layout.integers([1], 2)
    assert tablefiles._laid_out([1.5], pa.float64()) is None  # a type it leaves to pyarrow
