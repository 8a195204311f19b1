"""Table rows to Parquet files, on the executors: what every task that produces rows writes with.

One file per (table, date) per task (the next one begun every FILE_ROWS rows) under
`<root>/<table>/date=<d>/`, with exactly the table's declared Arrow schema (amqpcap.tables.registry; the
`date` partition lives in the path, as Delta does), and its metadata for the commit: path, size, rows, the captures it holds, and the statistics Delta
readers skip files with, taken from the Parquet footer (a `TableFile`: what goes back to the driver,
never table data).
"""

from __future__ import annotations

import datetime
import json
import uuid
from typing import Iterator

import msgspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from amqpcap.columnar import arrow_layout
from amqpcap.columnar.columns import BOOL, INT32, INT64, OBJECT, Laid, TableColumns
from amqpcap.tables.registry import TABLES, Table


class TableFile(msgspec.Struct, frozen=True):
    """A Parquet file a task wrote into a table's folder, for the run to commit (a typed work item
    back across the driver line, and a row of a run's manifest in the run log)."""

    table: str
    path: str  # under the table's folder: date=D/<part>.parquet
    size: int
    date: str  # its date partition, ISO
    rows: int
    captures: list[str]  # the captures its rows come from, sorted
    stats: str  # Delta's per-file statistics (the JSON the Delta log holds: stats())

    @classmethod
    def of(cls, data: dict) -> "TableFile":
        """From a manifest's row or a Spark row (a manifest 0.2.0 wrote holds `captures` as JSON)."""
        captures = data.get("captures") or []
        if isinstance(captures, str):
            captures = json.loads(captures)
        return msgspec.convert({**data, "captures": captures}, cls)


FILES_DDL = "table string, path string, size bigint, date string, rows bigint, captures array<string>, stats string"
# A file is closed and the next begun after this many rows: a Parquet writer keeps every row group's
# metadata until it closes, which would grow with a task's input
FILE_ROWS = 1_000_000
# Rows arrive in batches of a few thousand (Python lists cost ~10x their Arrow form), but a Parquet
# row group per batch took 1.4-2x the CPU to write (a page, a compressor and statistics per column
# each time) and made larger files: batches are held as Arrow until a file's next row group has
# GROUP_ROWS rows, or all the files' held batches GROUP_BYTES (then every file writes its own).
GROUP_ROWS = 32_768
GROUP_BYTES = 16 << 20
# Batches' worth of rows held as Python objects, all tables together: a decode task makes rows of
# some 16 tables; held a batch each, they were its largest Python data, more filling as a night grew.
HELD_BATCHES = 2
# A string column is written with a dictionary when its file's first batch has at most this many
# distinct values per value (repeating_strings)
DICTIONARY_SHARE = 0.5


def filesystem_of(root: str) -> tuple[pafs.FileSystem, str]:
    if "://" in root and not root.startswith("file://"):
        return pafs.FileSystem.from_uri(root)
    import os
    return pafs.LocalFileSystem(), os.path.abspath(root.removeprefix("file://"))


def rows_to_batch(table: Table, rows: list[dict], constants: dict | None = None,
                  without: tuple[str, ...] = ()) -> pa.RecordBatch:
    """Rows (dicts keyed by column; absent keys are null) as a batch with exactly the table's
    schema, less `without`; `constants`: columns with one value for every row (run_id)."""
    schema = table.arrow(without)
    batch = pa.RecordBatch.from_pylist(rows, schema=schema)  # row to column in C++: ~10x a Python loop
    if not constants:
        return batch
    columns = [pa.array([constants[f.name]] * len(rows), type=f.type) if f.name in constants else batch.column(i)
               for i, f in enumerate(schema)]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


class _Layout:
    """How one table's rows are held until written: as columns (amqpcap.columnar.columns), `date` first
    (it goes to the path), then the file's columns in schema order; compiled, integers, times and
    booleans in Arrow's layout as they come (interpreted, those loops cost more than pyarrow's
    conversion of lists: arrow_layout.COMPILED)."""

    __slots__ = ("schema", "names", "kinds", "run_id_at")

    def __init__(self, table: Table) -> None:
        self.schema = table.arrow(("date",))
        self.names = ("date", *self.schema.names)
        self.kinds = (OBJECT, *[kind_of(field.type) if arrow_layout.COMPILED else OBJECT for field in self.schema])
        self.run_id_at = self.schema.get_field_index("run_id")


def kind_of(arrow_type: pa.DataType) -> int:
    """How amqpcap.columnar.columns holds a column of this Arrow type until it is written."""
    if arrow_type == pa.int64() or arrow_type.id == pa.timestamp("us").id:
        return INT64
    if arrow_type == pa.int32():
        return INT32
    if arrow_type == pa.bool_():
        return BOOL
    return OBJECT  # (text too: see amqpcap.columnar.columns)


class TableFiles:
    """Collects rows per table and writes them as Parquet as they come (bounded memory)."""

    def __init__(self, root: str, run_id: str, tag: str = "", batch_rows: int = 10_000,
                 file_rows: int = FILE_ROWS, held_rows: int | None = None) -> None:
        """`held_rows`: the rows of all tables held as Python objects before the biggest table's
        become a batch (default: HELD_BATCHES x batch_rows)."""
        self.filesystem, self.root = filesystem_of(root)
        self.file_rows = file_rows
        self.run_id = run_id
        self.tag = tag
        self.layouts: dict[str, _Layout] = {}
        self.writers: dict[tuple[str, str], _File] = {}
        self.held_bytes = 0  # of the batches every file holds
        self.files: list[TableFile] = []  # the files closed so far
        self.columns = TableColumns(self._names, lambda table: self._flush(table.name), batch_rows,
                                    held_rows if held_rows is not None else HELD_BATCHES * batch_rows,
                                    kinds_of=lambda table: self.layouts[table.name].kinds)
        # add(table, row): compiled, straight into the table's columns (every row a decode task makes
        # comes this way; this class's Python runs once per batch).
        self.add = self.columns.add
        # table name -> see(name, dates, batch): another consumer of that table's rows, a batch at
        # a time as they are written (their dates, then the batch of the table's columns less date)
        self.taps: dict = {}

    def _names(self, table: Table) -> tuple:
        layout = self.layouts[table.name] = _Layout(table)
        return layout.names

    def close(self) -> list[TableFile]:
        """Write what is left, close every file; their metadata."""
        for name in list(self.layouts):
            self._flush(name)
        for key in list(self.writers):
            self._close_file(key)
        files, self.files = self.files, []
        return files

    def _close_file(self, key: tuple[str, str]) -> None:
        name, day = key
        file = self.writers.pop(key)
        self._write_group(file)
        file.writer.close()
        path = f"{self.root}/{name}/{file.relative}"
        # the footer the writer just wrote, without reading it back (a request per file on an object store)
        metadata = getattr(file.writer.writer, "metadata", None) or pq.read_metadata(path, filesystem=self.filesystem)
        self.files.append(TableFile(name, file.relative, self.filesystem.get_file_info(path).size, day,
                                    metadata.num_rows, sorted(file.captures), json.dumps(stats(metadata))))

    def _write_group(self, file: "_File") -> None:
        if file.held:
            file.writer.write_table(pa.Table.from_batches(file.held), row_group_size=file.held_rows)
            self.held_bytes -= file.held_bytes
            file.held, file.held_rows, file.held_bytes = [], 0, 0

    def _flush(self, name: str) -> None:
        layout = self.layouts[name]
        buffer = self.columns.buffers.get(name)
        rows = buffer.size if buffer is not None else 0  # (none: a table only added as Arrow)
        if not rows:
            return
        dates, *columns = buffer.take()
        self._write(name, dates, self._batch(layout, columns, rows))

    def add_arrow(self, table: Table, rows: pa.Table) -> None:
        """Rows already in Arrow (message_flows' tasks make theirs column by column): `date`, then
        the table's columns less run_id, its types. They follow the rows added before them."""
        layout = self.layouts.get(table.name)
        if layout is None:
            layout = self.layouts[table.name] = _Layout(table)
        else:
            self._flush(table.name)
        if not rows.num_rows:
            return
        run_id = pa.scalar(self.run_id, pa.string())
        arrays = [pa.repeat(run_id, rows.num_rows) if i == layout.run_id_at else rows.column(field.name).combine_chunks()
                  for i, field in enumerate(layout.schema)]
        dates = rows.column("date")
        low, high = pc.min_max(dates).values()
        # nearly always one day: not a Python date per row
        days = [low.as_py()] * rows.num_rows if not dates.null_count and low == high else dates.to_pylist()
        self._write(table.name, days, pa.RecordBatch.from_arrays(arrays, schema=layout.schema))

    def _write(self, name: str, dates: list, batch: pa.RecordBatch) -> None:
        """A batch of a table's rows to its files, by `dates` (each row's)."""
        table = TABLES[name]
        tap = self.taps.get(name)
        if tap is not None:
            tap(name, dates, batch)
        for date, part in _by_day(dates, batch):
            day = date.isoformat()
            key = (name, day)
            file = self.writers.get(key)
            if file is None:
                relative = f"date={day}/part-{self.run_id[:8]}-{self.tag}{uuid.uuid4().hex[:12]}.parquet"
                path = f"{self.root}/{name}/{relative}"
                self.filesystem.create_dir(path.rsplit("/", 1)[0], recursive=True)
                file = self.writers[key] = _File(_parquet_writer(path, part, self.filesystem), relative)
            key_column = table.replace_key
            if key_column in part.schema.names:  # the distinct keys, in C++ rather than a loop over rows
                file.captures.update(v for v in pc.unique(part.column(key_column)).to_pylist() if v is not None)
            file.held.append(part)
            file.held_rows += part.num_rows
            # (the buffers' sizes: `nbytes` walks every column for what a slice would use, ~1% of a
            # decode task, for batches that are never slices)
            size = part.get_total_buffer_size()
            file.held_bytes += size
            self.held_bytes += size
            file.rows += part.num_rows
            if file.rows >= self.file_rows:
                self._close_file(key)
            elif file.held_rows >= GROUP_ROWS:
                self._write_group(file)
            elif self.held_bytes >= GROUP_BYTES:
                for each in self.writers.values():
                    self._write_group(each)

    def _batch(self, layout: _Layout, columns: list[list], rows: int) -> pa.RecordBatch:
        run_id = pa.scalar(self.run_id, pa.string())
        arrays = [pa.repeat(run_id, rows) if i == layout.run_id_at else arrow_column(column, field.type)
                  for i, (column, field) in enumerate(zip(columns, layout.schema))]
        return pa.RecordBatch.from_arrays(arrays, schema=layout.schema)


class _File:
    """A Parquet file being written: its writer, path under the table, the captures its rows come
    from, its rows, and the batches held for its next row group."""

    __slots__ = ("writer", "relative", "captures", "rows", "held", "held_rows", "held_bytes")

    def __init__(self, writer: pq.ParquetWriter, relative: str) -> None:
        self.writer = writer
        self.relative = relative
        self.captures: set = set()
        self.rows = 0
        self.held: list[pa.RecordBatch] = []
        self.held_rows = 0
        self.held_bytes = 0


def _parquet_writer(path: str, first: pa.RecordBatch, filesystem: pafs.FileSystem) -> pq.ParquetWriter:
    """zstd; dictionary pages for the string columns whose values repeat (names, exchanges, queues,
    methods), as the file's first batch shows them. Numbers, times and bytes are mostly distinct:
    trying a dictionary on them cost a fifth of the writing and made the files larger; so it did on
    the strings that are nearly one per row (message keys, body digests, message ids, JSON of
    arguments): Parquet hashes every value into the dictionary until it outgrows its page, then
    writes them plain anyway (the small-frame night: files 5 % larger, 0.8 % more instructions)."""
    return pq.ParquetWriter(path, first.schema, filesystem=filesystem, compression="zstd",
                            use_dictionary=repeating_strings(first))


def repeating_strings(batch: pa.RecordBatch) -> list[str]:
    """The batch's string columns with at most DICTIONARY_SHARE distinct values per value."""
    chosen = []
    for field, column in zip(batch.schema, batch.columns):
        if not (pa.types.is_string(field.type) or pa.types.is_large_string(field.type)):
            continue
        values = len(column) - column.null_count
        if values and pc.count_distinct(column).as_py() <= DICTIONARY_SHARE * values:
            chosen.append(field.name)
    return chosen


def arrow_column(values, arrow_type: pa.DataType) -> pa.Array:
    """A column of Python values as Arrow: what every table's and every staged file's lists
    become. Many of a wide table's columns are null in a whole batch (most method arguments of
    `frames`): those are made without converting each value. Compiled, ints, bools and strings are
    laid out as Arrow's buffers (amqpcap.columnar.arrow_layout); anything else pyarrow converts. A
    column amqpcap.columnar.columns laid out already (`Laid`) is wrapped as it is."""
    if isinstance(values, Laid):
        if values.nulls == values.rows:
            return pa.nulls(values.rows, arrow_type)
        return from_buffers(arrow_type, values.rows, values.buffers(), values.nulls)
    rows = len(values)
    if rows and values[0] is None and values[-1] is None and values.count(None) == rows:
        return pa.nulls(rows, arrow_type)
    if arrow_layout.COMPILED:
        laid = _laid_out(values, arrow_type)
        if laid is not None:
            return laid
    return pa.array(values, type=arrow_type)


def from_buffers(arrow_type: pa.DataType, length: int, buffers: list, nulls: int = 0) -> pa.Array:
    """An Arrow array wrapping `buffers` as they are (validity or None, then the data: `array`s,
    bytes, bytearrays), without a copy."""
    return pa.Array.from_buffers(arrow_type, length, [None if each is None else pa.py_buffer(each) for each in buffers],
                                 null_count=nulls)


# Arrow type id -> how its columns are laid out without pyarrow's conversion (amqpcap.columnar.arrow_layout)
_INTEGER_WIDTHS = {pa.int64().id: 8, pa.timestamp("us").id: 8, pa.int32().id: 4}


def _laid_out(values: list, arrow_type: pa.DataType) -> pa.Array | None:
    """The column wrapped from the buffers amqpcap.columnar.arrow_layout lays it out in; None for a type
    or a value it leaves to pyarrow."""
    type_id = arrow_type.id
    width = _INTEGER_WIDTHS.get(type_id)
    if width is not None:
        laid = arrow_layout.integers(values, width)
    elif type_id == pa.bool_().id:
        laid = arrow_layout.booleans(values)
    elif type_id == pa.string().id:
        laid = arrow_layout.strings(values)
    else:
        return None
    if laid is None:
        return None
    validity, nulls, *data = laid
    return from_buffers(arrow_type, len(values), [validity, *data], nulls)


def _by_day(dates: list, batch: pa.RecordBatch) -> Iterator[tuple[datetime.date, pa.RecordBatch]]:
    """The batch's rows per date (its partition), in their order; nearly always one date."""
    first = dates[0]
    if dates.count(first) == len(dates):
        yield first, batch
        return
    rows: dict[datetime.date, list[int]] = {}
    for i, date in enumerate(dates):
        at = rows.get(date)
        if at is None:
            at = rows[date] = []
        at.append(i)
    for date, at in rows.items():
        yield date, batch.take(pa.array(at, pa.int64()))


FILES_SCHEMA = pa.schema([("table", pa.string()), ("path", pa.string()), ("size", pa.int64()),
                          ("date", pa.string()), ("rows", pa.int64()), ("captures", pa.list_(pa.string())),
                          ("stats", pa.string())])


def files_batch(files: list[TableFile]) -> pa.RecordBatch:
    """Table files as rows (FILES_DDL), for a task Spark runs with mapInArrow."""
    return pa.RecordBatch.from_pylist([msgspec.structs.asdict(f) for f in files], schema=FILES_SCHEMA)


def stats(metadata: pq.FileMetaData) -> dict:
    """Delta's per-file statistics from the Parquet footer: record count, min/max, null counts of
    every flat column (what delta readers prune files with)."""
    minimum, maximum, nulls = {}, {}, {}
    flat = {field.name for field in metadata.schema.to_arrow_schema()
            if not pa.types.is_nested(field.type) and not pa.types.is_binary(field.type)}
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        for leaf in range(row_group.num_columns):  # leaves: a map or list column has several
            column = row_group.column(leaf)
            name = column.path_in_schema
            statistics = column.statistics
            if name not in flat or statistics is None:
                continue
            nulls[name] = nulls.get(name, 0) + (statistics.null_count or 0)
            if statistics.has_min_max:
                low, high = _json(statistics.min), _json(statistics.max)
                minimum[name] = low if name not in minimum else min(minimum[name], low)
                maximum[name] = high if name not in maximum else max(maximum[name], high)
    return {"numRecords": metadata.num_rows, "minValues": minimum, "maxValues": maximum, "nullCount": nulls}


def _json(value):
    if isinstance(value, datetime.datetime):
        value = value if value.tzinfo else value.replace(tzinfo=datetime.timezone.utc)
        return value.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if isinstance(value, datetime.date):
        return value.isoformat()
    return value
