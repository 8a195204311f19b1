"""Rows gathered as columns: what every table's rows become on their way to Arrow.

A row (a dict keyed by column name; an absent key is null) is split into its columns as it comes,
while its dict is still in the CPU's cache: one list per column, in the order given. Turning held
rows into columns later (a tuple per row, then a transposition) costs several times more: every
column is a walk over thousands of scattered objects. Compiled, `add` stores each non-null value in
its column (the columns are filled with nulls ahead), plus one dictionary lookup per column for a
row whose keys are not in the columns' order.

    buffer = ColumnBuffer(("date", "connection", "ts_ns"))
    buffer.add(row)
    columns = buffer.take()  # [[dates...], [connections...], [ts_ns...]]; the buffer is empty again

`TableColumns` holds one buffer per table, for a writer that receives many tables' rows mixed: the
path every row of a decode task takes, so it is compiled too, with no Python-level call on it.
`PartColumns` holds one buffer per numbered part, for a writer of one file per part (every TCP
segment of the read stage takes it).
"""

from __future__ import annotations

import sys

FIRST_CAPACITY = 64  # rows a ColumnBuffer's columns hold before they first grow


class ColumnBuffer:
    def __init__(self, names) -> None:
        # Interned, as the rows' literal keys are: a lookup then matches by identity, without
        # comparing the strings (names from an Arrow schema are new string objects each time).
        self.names = tuple(sys.intern(name) for name in names)
        self.size = 0
        self.bytes = 0  # what a caller counts of the rows held (PartColumns: their payloads)
        self.columns = self._empty(FIRST_CAPACITY)  # (and the capacity)

    def _empty(self, capacity: int) -> list:
        # Columns come filled with nulls ahead of the rows (doubling as they grow): most values of
        # a wide table's row are null (a method's arguments), and a null is then left in place
        # rather than appended.
        self.capacity = capacity
        return [[None] * capacity for _ in self.names]

    def _grow(self) -> None:
        more = [None] * self.capacity
        for column in self.columns:
            column += more
        self.capacity *= 2

    def add(self, row: dict) -> None:
        size = self.size
        if size == self.capacity:
            self._grow()
        names = self.names
        columns = self.columns
        n = len(names)
        # A row whose keys come in the columns' order (amqp_decode.rows builds them so) is read
        # in one walk over its entries; from the first key out of order on, by name.
        i = 0
        for key, value in row.items():
            if i == n or key is not names[i]:
                break
            if value is not None:
                columns[i][size] = value
            i += 1
        while i < n:
            value = row.get(names[i])
            if value is not None:
                columns[i][size] = value
            i += 1
        self.size = size + 1

    def add_values(self, values: tuple) -> None:
        """A row given as its values, one per name, in order."""
        columns = self.columns
        if len(values) != len(columns):
            raise ValueError(f"{len(values)} values for {len(columns)} columns")
        size = self.size
        if size == self.capacity:
            self._grow()
        for i in range(len(columns)):
            columns[i][size] = values[i]
        self.size = size + 1

    def take(self) -> list:
        """The columns so far (a list per name, in order); the buffer starts over."""
        columns = self.columns
        size = self.size
        for column in columns:
            del column[size:]
        # The next rows start with room for as many as these: a writer takes its batches at a
        # steady size, and growing to it again by doubling copied every column eight times.
        self.columns = self._empty(size if size > FIRST_CAPACITY else FIRST_CAPACITY)
        self.size = 0
        self.bytes = 0
        return columns


def _fullest(buffers: dict, by_bytes: bool) -> tuple:
    """(key, rows or bytes) of the buffer holding the most (the first found of equals), and what all
    of `buffers` hold."""
    most, chosen, total = -1, None, 0
    for key, buffer in buffers.items():
        held = buffer.bytes if by_bytes else buffer.size
        total += held
        if held > most:
            most, chosen = held, key
    return chosen, most, total


class TableColumns:
    """Rows of several tables, each table's gathered in its own ColumnBuffer.

        columns = TableColumns(names_of, full, batch_rows=10_000, held_rows=40_000)
        columns.add(table, row)  # when `table` holds batch_rows rows: full(table); when the tables
                                 # together hold held_rows rows, full(the table holding the most)
        columns.taps[table.name] = see  # see(table, row) too, for this table's rows only

    `names_of(table)`: the columns to gather a table's rows in (asked once per table). `full`
    takes the table's rows (its buffer's `take`). Without the budget across tables, a task would
    hold batch_rows rows of every one of its tables, more of them filling as its input grows.
    """

    def __init__(self, names_of, full, batch_rows: int, held_rows: int | None = None) -> None:
        self.names_of = names_of
        self.full = full
        self.batch_rows = batch_rows
        self.held_rows = held_rows if held_rows is not None else -1
        self.held = 0  # rows added since the budget was last checked, and those held then
        self.buffers: dict = {}  # table name -> ColumnBuffer
        self.tables: dict = {}  # table name -> the table
        self.taps: dict = {}  # table name -> what also sees its rows

    def add(self, table, row: dict) -> None:
        name = table.name
        buffer = self.buffers.get(name)
        if buffer is None:
            buffer = self.buffers[name] = ColumnBuffer(self.names_of(table))
            self.tables[name] = table
        buffer.add(row)
        if self.taps:
            tap = self.taps.get(name)
            if tap is not None:
                tap(table, row)
        if buffer.size >= self.batch_rows:
            self.full(table)
        self.held += 1
        if 0 <= self.held_rows <= self.held:
            self._within_budget()

    def _within_budget(self) -> None:
        """The tables holding the most handed on until the rest is within the budget (a table's
        rows leave by `full`, so what is held is counted here, not tracked on every take)."""
        while True:
            chosen, most, held = _fullest(self.buffers, False)
            self.held = held
            if held < self.held_rows or most <= 0:
                return
            self.full(self.tables[chosen])


class PartColumns:
    """Rows of numbered parts (the read stage's connection buckets, message_flows' key ranges),
    each part's gathered in its own ColumnBuffer, for a writer of one file per part.

        parts = PartColumns(names, full, flush_rows=8192, held_rows=16_384, held_bytes=16 << 20)
        parts.add(part, values, size)  # full(part) when that part holds flush_rows rows; when the
                                       # parts together hold held_rows rows or held_bytes of `size`,
                                       # full(the part holding the most)
        columns = parts.take(part)  # in full: the part's columns; the part starts over

    The parts grow with the input (and the buckets with the cluster), so a budget per part alone
    would not bound what a task holds; nor would rows alone, where a row is a packet of up to 64 KiB
    (loopback). Over a budget the biggest part goes, so the parts' batches stay as large as the
    budget allows.
    """

    def __init__(self, names, full, flush_rows: int, held_rows: int | None = None,
                 held_bytes: int | None = None, buffer=ColumnBuffer) -> None:
        """`buffer(names)`: a part's buffer, a ColumnBuffer or a subclass that holds its rows
        another way (amqp_decode.bucketing.HeldSegments)."""
        self.names = tuple(names)
        self.buffer = buffer
        self.full = full
        self.flush_rows = flush_rows
        self.held_rows = held_rows if held_rows is not None else -1
        self.held_bytes = held_bytes if held_bytes is not None else -1
        self.held = 0
        self.held_size = 0  # the `size` of the rows held, all parts
        self.buffers: dict = {}  # part -> ColumnBuffer

    def add(self, part: int, values: tuple, size: int = 0) -> None:
        buffer = self.buffers.get(part)
        if buffer is None:
            buffer = self.buffers[part] = self.buffer(self.names)
        buffer.add_values(values)
        buffer.bytes += size
        self.held += 1
        self.held_size += size
        if buffer.size >= self.flush_rows:
            self.full(part)
        elif 0 <= self.held_rows <= self.held:
            self.full(_fullest(self.buffers, False)[0])
        elif 0 <= self.held_bytes <= self.held_size:
            self.full(_fullest(self.buffers, True)[0])

    def rows(self, part: int) -> int:
        buffer = self.buffers.get(part)
        return buffer.size if buffer is not None else 0

    def take(self, part: int) -> list:
        """The part's rows so far, as columns (a list per name, or as its buffer's take gives them)."""
        buffer = self.buffers[part]
        self.held -= buffer.size
        self.held_size -= buffer.bytes
        return buffer.take()
