"""Rows gathered as columns (amqpcap.columnar.columns): the same values, in the same order, as the rows
themselves, absent keys null; run compiled and interpreted (the reference) alike."""

from __future__ import annotations

import pytest

from amqpcap.columnar.columns import ColumnBuffer
from amqpcap.tables.registry import FRAMES
from amqpcap.tables.rows import RawRows
from tests.helpers.samples import EXPECTED, decoded


def test_columns_hold_every_rows_values_in_order():
    path = next(p for p in EXPECTED if p.name == "returns_nack_reject.expected.json")
    builder = RawRows("run-1")
    rows = [builder.frame_row(r) for r in decoded(path)[1] if r["kind"] != "issue"]
    names = ("date", *FRAMES.arrow().names, "not_a_column")
    buffer = ColumnBuffer(names)
    for row in rows:
        buffer.add(row.as_dict())
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


def test_columns_grow_past_their_first_capacity_and_start_over_after_a_take():
    """Columns come filled with nulls ahead of the rows and double as rows come, and after a take
    start with room for as many rows as it held: whatever the number of rows (none, one, exactly a
    capacity, past several doublings, fewer than the room left by the take before, more than it),
    a take holds exactly the rows added since the last one, a null where a row gave none or gave
    None, and a value where it gave one (falsy ones too)."""
    from amqpcap.columnar.columns import FIRST_CAPACITY
    names = ("a", "b", "c")
    buffer = ColumnBuffer(names)
    for count in (0, 1, FIRST_CAPACITY, FIRST_CAPACITY + 1, 5 * FIRST_CAPACITY + 3, 2, 3, 11 * FIRST_CAPACITY + 5):
        rows = [{"a": n, "b": None if n % 3 else f"s{n}", **({"c": n % 2 == 0} if n % 5 else {})}
                for n in range(count)]
        for n, row in enumerate(rows):
            if n % 7 == 3:
                buffer.add_values(tuple(row.get(name) for name in names))
            else:
                buffer.add(row)
        assert buffer.size == count
        assert buffer.take() == [[row.get(name) for row in rows] for name in names], count


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


def test_rows_in_column_order_out_of_order_or_with_other_keys_all_land_right():
    """The walk over a row's entries in column order, and the lookups from the first key out of
    order on, give the same columns whatever the row's keys: in order, shuffled, extra keys in the
    middle or at the end, keys equal to a name but another string object, fewer keys than columns."""
    names = ("a", "b", "c", "d")
    built = "".join(["c"])  # equal to "c", not the interned object
    rows = [{"a": 1, "b": 2, "c": 3, "d": 4},
            {"a": 1, "b": 2, "c": 3, "d": 4, "extra": 5},
            {"a": 1, "extra": 5, "b": 2, "c": 3, "d": 4},
            {"b": 2, "a": 1, "d": 4, "c": 3},
            {"a": 1, "b": 2, built: 3, "d": 4},
            {"a": 1, "b": 2},
            {"d": 4},
            {}]
    buffer = ColumnBuffer(names)
    for row in rows:
        buffer.add(row)
    assert buffer.take() == [[row.get(name) for row in rows] for name in names]


def test_typed_rows_give_their_values_in_the_tables_column_order():
    """A frames or messages row gives its values in its table's column order (what the writer's
    buffer takes them in, ColumnBuffer.add_values), whatever the frame's kind: every column, and
    each value the one its field holds."""
    from amqpcap.tables.registry import MESSAGES
    from amqpcap.tables.rows import FRAME_FIELDS, MESSAGE_FIELDS
    path = next(p for p in EXPECTED if p.name == "returns_nack_reject.expected.json")
    builder = RawRows("run-1")
    records = [r for r in decoded(path)[1] if r["kind"] != "issue"]
    rows = [builder.frame_row(r) for r in records]
    messages = [builder.message_row(r) for r in records if "message" in r]
    assert {row.kind for row in rows} >= {"method", "header", "body", "protocol-header"} and messages
    assert FRAME_FIELDS == tuple(FRAMES.arrow().names) and MESSAGE_FIELDS == tuple(MESSAGES.arrow().names)
    for row, fields in [(row, FRAME_FIELDS) for row in rows] + [(row, MESSAGE_FIELDS) for row in messages]:
        assert row.column_values() == tuple(getattr(row, name) for name in fields)
    # each position is its own column: a distinct value put in every field comes back in its place
    for row, fields in ((rows[0], FRAME_FIELDS), (messages[0], MESSAGE_FIELDS)):
        for i, name in enumerate(fields):
            setattr(row, name, f"value-{i}")
        assert row.column_values() == tuple(f"value-{i}" for i in range(len(fields)))


@pytest.mark.parametrize("table_name", ["publishes", "deliveries", "rpc_calls"])
def test_analytics_typed_rows_are_their_tables_columns_in_order(table_name):
    """The analytics' typed rows: a field per column of their table, in its order; each position of
    column_values its own column; a mapping of the columns (get, [], update) equal to a dict of them."""
    from amqpcap.rules.table_rows import DeliveryRow, PublishRow, RpcCallRow
    from amqpcap.tables.registry import TABLES
    table = TABLES[table_name]
    cls = {"publishes": PublishRow, "deliveries": DeliveryRow, "rpc_calls": RpcCallRow}[table_name]
    names = tuple(table.arrow().names)
    row = cls.__new__(cls)
    assert row.fields() == names and row.column_values() == (None,) * len(names)
    for i, name in enumerate(names):
        setattr(row, name, f"value-{i}")
    assert row.column_values() == tuple(f"value-{i}" for i in range(len(names)))
    assert row == {name: f"value-{i}" for i, name in enumerate(names)} and row["date"] == "value-0"
    row.update({"date": None}, source="s")
    assert (row.get("date"), row.source, row.get("no such column", 7)) == (None, "s", 7)
    with pytest.raises(KeyError):
        row.update(no_such_column=1)
    assert cls.from_dict(dict(row)) == row


def test_table_columns_keep_each_tables_rows_apart_and_hand_on_full_tables():
    from amqpcap.columnar.columns import TableColumns
    from amqpcap.tables.registry import DELIVERIES, FRAMES, PUBLISHES
    asked, written = [], []

    def names_of(table):
        asked.append(table.name)
        return ("n", table.name)

    def full(table):  # as a writer does: takes the table's columns
        written.append((table.name, columns.buffers[table.name].take()))

    columns = TableColumns(names_of, full, batch_rows=3)
    for n in range(7):
        columns.add(FRAMES, {"n": n, FRAMES.name: "f"})
        if n % 2:
            columns.add(PUBLISHES, {"n": n})
    columns.add(DELIVERIES, {"n": 99})
    assert asked == ["frames", "publishes", "deliveries"]  # once per table
    assert written == [("frames", [[0, 1, 2], ["f"] * 3]), ("frames", [[3, 4, 5], ["f"] * 3]),
                       ("publishes", [[1, 3, 5], [None] * 3])]  # each table when it holds 3 rows
    assert columns.buffers["frames"].take() == [[6], ["f"]]
    assert columns.buffers["deliveries"].take() == [[99], [None]]


def test_table_columns_hand_on_the_biggest_table_when_all_together_hold_the_budget():
    """Many tables each short of a batch would together hold many batches: past `held_rows` rows in
    all, the table holding the most is handed on (and the next, until the rest is within the budget)."""
    from amqpcap.columnar.columns import TableColumns
    from amqpcap.tables.registry import DELIVERIES, FRAMES, PUBLISHES
    written = []

    def full(table):
        written.append((table.name, columns.buffers[table.name].take()[0]))

    columns = TableColumns(lambda table: ("n",), full, batch_rows=100, held_rows=10)
    for n in range(4):
        columns.add(FRAMES, {"n": n})
        columns.add(PUBLISHES, {"n": n})
    assert written == []  # 8 rows held, within the budget
    columns.add(DELIVERIES, {"n": 0})
    columns.add(FRAMES, {"n": 4})  # 10 rows: frames, the biggest, goes
    assert written == [("frames", [0, 1, 2, 3, 4])]
    for n in range(4, 9):
        columns.add(PUBLISHES, {"n": n})  # at 10 rows in all again, publishes (9 of them) go
    assert written[-1] == ("publishes", list(range(9))) and len(written) == 2
    assert columns.held == 1 and columns.buffers["deliveries"].size == 1


# -- columns held in Arrow's layout (kinds) -----------------------------------------------------------

def _plain(column):
    """A taken column as Python values, whether a list or laid out."""
    from amqpcap.columnar.columns import Laid
    return column.values() if isinstance(column, Laid) else column


def test_typed_columns_hold_the_same_values_as_lists_past_growth_and_takes():
    """Integers of both widths and booleans held in Arrow's layout give back what the rows gave,
    nulls where they gave none, falsy values kept, whatever the number of rows (past several
    doublings, after a take), added as dicts or as values."""
    from amqpcap.columnar.columns import BOOL, FIRST_CAPACITY, INT32, INT64, OBJECT, Laid
    names = ("a", "b", "c", "d")
    kinds = (INT64, INT32, BOOL, OBJECT)
    buffer = ColumnBuffer(names, kinds)
    for count in (0, 1, 8, FIRST_CAPACITY, FIRST_CAPACITY + 1, 5 * FIRST_CAPACITY + 3, 2, 11 * FIRST_CAPACITY + 5):
        rows = [{"a": None if n % 4 == 1 else n * 10**12 - 2**62, "b": None if n % 3 == 2 else -n,
                 **({"c": n % 2 == 0} if n % 5 else {}), "d": f"s{n}"} for n in range(count)]
        for n, row in enumerate(rows):
            if n % 7 == 3:
                buffer.add_values(tuple(row.get(name) for name in names))
            else:
                buffer.add(row)
        columns = buffer.take()
        assert [type(c) for c in columns] == [Laid, Laid, Laid, list]
        assert [_plain(c) for c in columns] == [[row.get(name) for row in rows] for name in names], count
        for column, name in zip(columns[:3], names):
            nulls = sum(row.get(name) is None for row in rows)
            assert column.rows == count and column.nulls == nulls
            assert (column.validity is None) == (nulls == 0)


def test_typed_columns_used_again_after_a_take_keep_nothing_of_the_rows_before():
    """A typed column is cleared and used again for the next batch: a row that is null or false
    now, where the batch before had a value or a true one at that place, comes out null or false,
    whether the new batch is shorter or longer (growing past the old rows)."""
    from amqpcap.columnar.columns import BOOL, FIRST_CAPACITY, INT32, INT64
    names = ("a", "b", "c")
    buffer = ColumnBuffer(names, (INT64, INT32, BOOL))
    batches = [[{"a": n, "b": -n, "c": True} for n in range(3 * FIRST_CAPACITY + 5)],
               [{"c": False} if n % 2 else {} for n in range(FIRST_CAPACITY + 1)],
               [{"a": 7} if n % 3 == 0 else {"c": n % 3 == 1} for n in range(9 * FIRST_CAPACITY)]]
    for rows in batches:
        for row in rows:
            buffer.add(row)
        columns = buffer.take()
        assert [_plain(c) for c in columns] == [[row.get(name) for row in rows] for name in names]


def test_a_value_a_typed_column_cannot_hold_turns_it_into_objects_for_the_batch():
    """A bool or a float among integers, an integer past the column's width, anything but a bool
    among booleans: that column is a list from then on, with every value so far (and the next
    batch starts typed again); the other columns stay laid out."""
    from amqpcap.columnar.columns import BOOL, INT32, INT64, Laid
    cases = [(INT64, [1, None, True, 2]), (INT64, [1, 2**63, 3]), (INT64, [-2**63, 1.5]),
             (INT32, [2**31 - 1, 2**31]), (INT32, [-2**31, -2**31 - 1, None]), (BOOL, [True, None, 1, False]),
             (BOOL, [False, "yes"])]
    for kind, values in cases:
        buffer = ColumnBuffer(("x", "y"), (kind, INT64))
        for n, value in enumerate(values):
            buffer.add({"x": value, "y": n})
        x, y = buffer.take()
        assert x == values and type(x) is list, (kind, values)
        assert isinstance(y, Laid) and y.values() == list(range(len(values)))
        buffer.add({"x": values[0]})
        assert isinstance(buffer.take()[0], Laid)


def test_laid_columns_become_the_arrow_arrays_pyarrow_makes_of_the_values():
    """What a table writer makes of a laid column (its buffers wrapped) equals pyarrow's own
    conversion of the same values, for every typed column of every table."""
    import pyarrow as pa

    from amqpcap.columnar.columns import OBJECT
    from amqpcap.lake.tablefiles import arrow_column, kind_of
    from amqpcap.tables.registry import TABLES
    samples = {pa.int64(): [5, None, -2**63, 2**63 - 1, 0], pa.int32(): [None, -2**31, 2**31 - 1, 0, 7],
               pa.bool_(): [True, False, None, True, True]}
    for table in TABLES.values():
        for field in table.arrow():
            kind = kind_of(field.type)
            if kind == OBJECT:
                continue
            values = samples.get(field.type) or [1_700_000_000_000_000, None, 0, 1, 2]  # timestamps (us)
            for column in (values, [None] * 5, [v for v in values if v is not None]):
                buffer = ColumnBuffer((field.name,), (kind,))
                for value in column:
                    buffer.add({field.name: value})
                laid = buffer.take()[0]
                assert arrow_column(laid, field.type).equals(pa.array(column, type=field.type)), (table.name, field)
