"""Rows gathered as columns: what every table's rows become on their way to Arrow.

A row (a dict keyed by column name; an absent key is null) is split into its columns as it comes,
while its dict is still in the CPU's cache: one column per name, in the order given. Turning held
rows into columns later (a tuple per row, then a transposition) costs several times more: every
column is a walk over thousands of scattered objects. Compiled, `add` stores each non-null value in
its column (the columns are filled with nulls ahead), plus one dictionary lookup per column for a
row whose keys are not in the columns' order.

    buffer = ColumnBuffer(("date", "connection", "ts_ns"), kinds=(OBJECT, OBJECT, INT64))
    buffer.add(row)
    columns = buffer.take()  # [[dates...], [connections...], Laid(...)]; the buffer is empty again

A column's kind says how it is held. OBJECT: a list of the values. INT64, INT32, BOOL: the values
go into Arrow's layout as they come (a validity bitmap, then machine integers or bits), and `take`
gives a `Laid` column that pyarrow wraps without a conversion. A value such a column cannot hold
(another type, an integer out of its width) turns that column into a list of objects for the rest
of the batch, which the caller converts as it converts any list (pyarrow accepts or refuses it).
Held as objects, a decode task's integers and booleans (half its tables' values) were each kept
alive until their batch was written, then walked again to be laid out: a decode task took 14-17%
longer (alternating runs in one process; the whole job's decode stage, about 4%).
Text stays a list: encoding it value by value cost more than the one join and encode of a whole
column when it is written (amqpcap.columnar.arrow_layout).

`TableColumns` holds one buffer per table, for a writer that receives many tables' rows mixed: the
path every row of a decode task takes, so it is compiled too, with no Python-level call on it.
`PartColumns` holds one buffer per numbered part, for a writer of one file per part (every TCP
segment of the read stage takes it).
"""

from __future__ import annotations

import sys
from array import array

COMPILED = __file__.endswith((".so", ".pyd"))  # (compiled: the stores are columns.pxd's C helpers)
FIRST_CAPACITY = 64  # rows a ColumnBuffer's columns hold before they first grow

# How a column is held (ColumnBuffer's `kinds`)
OBJECT, INT64, INT32, BOOL = 0, 1, 2, 3


class TypedRow:
    """A row held as an object with a field per column rather than as a dict (amqpcap.tables.rows: the
    tables with a row per frame): it gives its values in the columns' order, in one call."""

    def column_values(self) -> tuple:
        raise NotImplementedError


class Laid:
    """A column in Arrow's layout: `validity` (a bitmap, bit i set: value i is not null; None when
    no value is), `nulls`, and `data`: machine integers (an `array`) or a bitmap of booleans."""

    __slots__ = ("kind", "rows", "validity", "nulls", "data")

    def __init__(self, kind: int, rows: int, validity, nulls: int, data) -> None:
        self.kind = kind
        self.rows = rows
        self.validity = validity
        self.nulls = nulls
        self.data = data

    def buffers(self) -> list:
        """What pyarrow.Array.from_buffers takes for it: validity, data."""
        return [self.validity, self.data]

    def values(self) -> list:
        """The column as Python values (None for nulls)."""
        validity, data = self.validity, self.data
        out = [None] * self.rows
        for i in range(self.rows):
            if validity is not None and not validity[i >> 3] & (1 << (i & 7)):
                continue
            out[i] = bool(data[i >> 3] & (1 << (i & 7))) if self.kind == BOOL else data[i]
        return out


class _Typed:
    """A column of one kind held in Arrow's layout while its rows come. `put` stores a value
    (False: one it cannot hold); rows never given a value stay null."""

    def __init__(self, capacity: int) -> None:
        self.valid = bytearray((capacity + 7) >> 3)
        self.bits = self.valid  # (compiled: a typed view of it)

    def _grow_valid(self, capacity: int) -> None:
        valid = bytearray((capacity + 7) >> 3)
        valid[:len(self.valid)] = self.valid
        self.valid = valid
        self.bits = valid

    def put(self, row: int, value) -> bool:
        raise NotImplementedError

    def grow(self, capacity: int) -> None:
        raise NotImplementedError

    def clear(self, size: int) -> None:
        """Every row null again, after a take of `size` rows (only those were set): the column is
        used again for the next rows as it is, rather than allocated anew. Values left in null
        rows are never read (nor by Arrow)."""
        n = (size + 7) >> 3
        self.valid[:n] = bytes(n)

    def take(self, size: int) -> Laid:
        raise NotImplementedError

    def _validity(self, size: int) -> tuple:
        """(the validity bitmap of `size` rows, or None when none is null; the nulls)."""
        valid = bytes(self.valid[:(size + 7) >> 3])
        nulls = size - int.from_bytes(valid, "little").bit_count()
        return (valid if nulls else None), nulls


class _Integers(_Typed):
    """Machine integers of `width` bytes (8: Arrow's int64 and times, `kind` INT64; 4: int32). Each
    width has its own class for `put`, so that its store is one typed C store, with no test of the
    width per value."""

    def __init__(self, capacity: int, kind: int, width: int) -> None:
        _Typed.__init__(self, capacity)
        self.kind = kind
        self.width = width
        self._bind(array("q" if width == 8 else "i", bytes(width * capacity)))

    def _bind(self, data) -> None:
        raise NotImplementedError

    def grow(self, capacity: int) -> None:
        if len(self.data) >= capacity:  # (kept from a larger batch)
            return
        data = array(self.data.typecode, bytes(self.width * capacity))
        data[:len(self.data)] = self.data
        self._bind(data)
        self._grow_valid(capacity)

    def take(self, size: int) -> Laid:
        validity, nulls = self._validity(size)
        return Laid(self.kind, size, validity, nulls, self.data[:size])


class _Int64s(_Integers):
    def __init__(self, capacity: int) -> None:
        _Integers.__init__(self, capacity, INT64, 8)

    def _bind(self, data) -> None:
        self.data = data
        self.longs = data  # (compiled: a typed view of it)

    def put(self, row: int, value) -> bool:
        if type(value) is not int:  # (bool, a subclass of int, too: Arrow refuses it)
            return False
        try:
            self.longs[row] = value  # (to a C long long: OverflowError past its range, compiled or not)
        except OverflowError:
            return False
        self.bits[row >> 3] |= 1 << (row & 7)
        return True


class _Int32s(_Integers):
    def __init__(self, capacity: int) -> None:
        _Integers.__init__(self, capacity, INT32, 4)

    def _bind(self, data) -> None:
        self.data = data
        self.ints = data  # (compiled: a typed view of it)

    def put(self, row: int, value) -> bool:
        if type(value) is not int:
            return False
        try:
            self.ints[row] = value  # (to a C int: OverflowError past its range, compiled or not)
        except OverflowError:
            return False
        self.bits[row >> 3] |= 1 << (row & 7)
        return True


class _Bools(_Typed):
    def __init__(self, capacity: int) -> None:
        _Typed.__init__(self, capacity)
        self.data = bytearray((capacity + 7) >> 3)
        self.truths = self.data  # (compiled: a typed view of it)

    def put(self, row: int, value) -> bool:
        if value is True:
            self.truths[row >> 3] |= 1 << (row & 7)
        elif value is not False:
            return False
        self.bits[row >> 3] |= 1 << (row & 7)
        return True

    def grow(self, capacity: int) -> None:
        if len(self.data) >= (capacity + 7) >> 3:  # (kept from a larger batch)
            return
        data = bytearray((capacity + 7) >> 3)
        data[:len(self.data)] = self.data
        self.data = data
        self.truths = data
        self._grow_valid(capacity)

    def take(self, size: int) -> Laid:
        validity, nulls = self._validity(size)
        return Laid(BOOL, size, validity, nulls, bytes(self.data[:(size + 7) >> 3]))

    def clear(self, size: int) -> None:
        n = (size + 7) >> 3
        self.valid[:n] = bytes(n)
        self.data[:n] = bytes(n)  # (a true value is a set bit: none may stay)


def _typed(kind: int, capacity: int):
    """A new column of `kind` (a list of nulls for OBJECT)."""
    if kind == INT64:
        return _Int64s(capacity)
    if kind == INT32:
        return _Int32s(capacity)
    if kind == BOOL:
        return _Bools(capacity)
    return [None] * capacity


class ColumnBuffer:
    def __init__(self, names, kinds=None) -> None:
        # Interned, as the rows' literal keys are: a lookup then matches by identity, without
        # comparing the strings (names from an Arrow schema are new string objects each time).
        self.names = tuple(sys.intern(name) for name in names)
        self.kinds = tuple(kinds) if kinds is not None else (OBJECT,) * len(self.names)
        if len(self.kinds) != len(self.names):
            raise ValueError(f"{len(self.kinds)} kinds for {len(self.names)} columns")
        self.size = 0
        self.bytes = 0  # what a caller counts of the rows held (PartColumns: their payloads)
        self.columns = self._empty(FIRST_CAPACITY)  # (and the capacity)

    def _empty(self, capacity: int) -> list:
        # Columns come filled with nulls ahead of the rows (doubling as they grow): most values of
        # a wide table's row are null (a method's arguments), and a null is then left in place
        # rather than appended.
        self.capacity = capacity
        return [_typed(kind, capacity) for kind in self.kinds]

    def _grow(self) -> None:
        capacity = 2 * self.capacity
        more = [None] * self.capacity
        for column in self.columns:
            if type(column) is list:
                column += more
            else:
                typed = column
                typed.grow(capacity)
        self.capacity = capacity

    def _put(self, i: int, size: int, value) -> None:
        """A value (not None) into column i, row `size`."""
        if COMPILED:
            _put_value(self, i, size, value)  # noqa: F821  (columns.pxd)
            return
        column = self.columns[i]
        if type(column) is list:
            column[size] = value
            return
        typed = column
        if not typed.put(size, value):
            _as_object(self, i, size, value)

    def _to_objects(self, i: int, size: int) -> list:
        """Column i, holding a value its kind cannot, as a list of objects from now on (this batch)."""
        typed = self.columns[i]
        laid = typed.take(size)
        objects = laid.values() + [None] * (self.capacity - size)
        self.columns[i] = objects
        return objects

    def add(self, row: dict) -> None:
        size = self.size
        if size == self.capacity:
            self._grow()
        names = self.names
        n = len(names)
        # A row whose keys come in the columns' order (amqpcap.tables.rows builds them so) is read
        # in one walk over its entries; from the first key out of order on, by name.
        i = 0
        for key, value in row.items():
            if i == n or key is not names[i]:
                break
            if value is not None:
                self._put(i, size, value)
            i += 1
        while i < n:
            value = row.get(names[i])
            if value is not None:
                self._put(i, size, value)
            i += 1
        self.size = size + 1

    def add_values(self, values: tuple) -> None:
        """A row given as its values, one per name, in order."""
        n = len(self.names)
        if len(values) != n:
            raise ValueError(f"{len(values)} values for {n} columns")
        size = self.size
        if size == self.capacity:
            self._grow()
        if COMPILED:
            _put_values(self, values, size)  # noqa: F821  (columns.pxd)
        else:
            for i in range(n):
                value = values[i]
                if value is not None:
                    self._put(i, size, value)
        self.size = size + 1

    def take(self) -> list:
        """The columns so far, one per name in order: a list of values, or a `Laid` column for a
        typed kind; the buffer starts over."""
        columns = self.columns
        size = self.size
        # The next rows start with room for as many as these: a writer takes its batches at a
        # steady size, and growing to it again by doubling copied every column eight times.
        capacity = size if size > FIRST_CAPACITY else FIRST_CAPACITY
        taken = []
        for i in range(len(columns)):
            column = columns[i]
            if type(column) is list:
                del column[size:]
                taken.append(column)
                columns[i] = _typed(self.kinds[i], capacity)  # (a typed column held objects this batch)
            else:
                # taken as copies: the column itself is cleared and kept (allocating every typed
                # column anew per batch, zeroed, was ~2% of a decode task)
                typed = column
                taken.append(typed.take(size))
                typed.clear(size)
                typed.grow(capacity)
        self.capacity = capacity
        self.size = 0
        self.bytes = 0
        return taken


def _no_column(i: int, n: int) -> int:
    """The compiled stores' bad column index (columns.pxd), out of line: raised there, it kept
    them from being inlined."""
    raise IndexError(f"column {i} of {n}")


def _as_object(buffer: ColumnBuffer, i: int, size: int, value) -> int:
    """A value its typed column cannot hold: the column becomes a list of objects for the rest of
    the batch (out of line in the compiled stores, which seldom take this way)."""
    buffer._to_objects(i, size)[size] = value
    return 0


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

    `names_of(table)`: the columns to gather a table's rows in (asked once per table). `full`
    takes the table's rows (its buffer's `take`). Without the budget across tables, a task would
    hold batch_rows rows of every one of its tables, more of them filling as its input grows.
    """

    def __init__(self, names_of, full, batch_rows: int, held_rows: int | None = None, kinds_of=None) -> None:
        """`kinds_of(table)`: how each of its columns is held (ColumnBuffer's `kinds`; default OBJECT)."""
        self.names_of = names_of
        self.kinds_of = kinds_of
        self.full = full
        self.batch_rows = batch_rows
        self.held_rows = held_rows if held_rows is not None else -1
        self.held = 0  # rows added since the budget was last checked, and those held then
        self.buffers: dict = {}  # table name -> ColumnBuffer
        self.tables: dict = {}  # table name -> the table

    def add(self, table, row) -> None:
        """`row`: a dict, or a TypedRow whose values come in the order of the names asked for it."""
        name = table.name
        buffer = self.buffers.get(name)
        if buffer is None:
            buffer = self.buffers[name] = ColumnBuffer(self.names_of(table),
                                                       self.kinds_of(table) if self.kinds_of is not None else None)
            self.tables[name] = table
        if type(row) is dict:
            buffer.add(row)
        else:
            typed = row
            buffer.add_values(typed.column_values())
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
        another way (amqpcap.capture.bucketing.HeldSegments)."""
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
