"""Table rows to Parquet files, on the executors: what every task that produces rows writes with.

One file per (table, date) per task (the next one begun every FILE_ROWS rows) under
`<root>/<table>/date=<d>/`, with exactly the table's declared Arrow schema (amqp_decode.tables; the
`date` partition lives in the path, as Delta does), and its metadata for the commit: path, size, rows, the captures it holds, and the statistics Delta
readers skip files with, taken from the Parquet footer. No table data goes back to the driver.
"""

from __future__ import annotations

import datetime
import json
import uuid
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from amqp_decode.columns import TableColumns
from amqp_decode.tables import TABLES, Table

FILES_DDL = "table string, path string, size bigint, date string, rows bigint, captures string, stats string"
# A file is closed and the next begun after this many rows: a Parquet writer keeps every row group's
# metadata until it closes, which would grow with a task's input
FILE_ROWS = 1_000_000


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
    """How one table's rows are held until written: as columns (amqp_decode.columns), `date` first
    (it goes to the path), then the file's columns in schema order."""

    __slots__ = ("schema", "names", "run_id_at")

    def __init__(self, table: Table) -> None:
        self.schema = table.arrow(("date",))
        self.names = ("date", *self.schema.names)
        self.run_id_at = self.schema.get_field_index("run_id")


class TableFiles:
    """Collects rows per table and writes them as Parquet as they come (bounded memory)."""

    def __init__(self, root: str, run_id: str, tag: str = "", batch_rows: int = 10_000,
                 file_rows: int = FILE_ROWS) -> None:
        self.filesystem, self.root = filesystem_of(root)
        self.file_rows = file_rows
        self.run_id = run_id
        self.tag = tag
        self.layouts: dict[str, _Layout] = {}
        self.writers: dict[tuple[str, str], list] = {}  # (table, day) -> [writer, relative path, captures, rows]
        self.files: list[dict] = []  # the files closed so far
        self.columns = TableColumns(self._names, lambda table: self._flush(table.name), batch_rows)
        # add(table, row): compiled, straight into the table's columns (every row a decode task makes
        # comes this way; this class's Python runs once per batch). `columns.taps` lets another
        # consumer see some tables' rows too.
        self.add = self.columns.add

    def _names(self, table: Table) -> tuple:
        layout = self.layouts[table.name] = _Layout(table)
        return layout.names

    def close(self) -> list[dict]:
        """Write what is left, close every file; their metadata."""
        for name in list(self.layouts):
            self._flush(name)
        for key in list(self.writers):
            self._close_file(key)
        files, self.files = self.files, []
        return files

    def _close_file(self, key: tuple[str, str]) -> None:
        name, day = key
        writer, relative, captures, _ = self.writers.pop(key)
        writer.close()
        path = f"{self.root}/{name}/{relative}"
        metadata = pq.read_metadata(path, filesystem=self.filesystem)
        self.files.append({"table": name, "path": relative, "size": self.filesystem.get_file_info(path).size,
                           "date": day, "rows": metadata.num_rows, "captures": json.dumps(sorted(captures)),
                           "stats": json.dumps(stats(metadata))})

    def _flush(self, name: str) -> None:
        layout = self.layouts[name]
        buffer = self.columns.buffers[name]
        rows = buffer.size
        if not rows:
            return
        dates, *columns = buffer.take()
        batch = self._batch(layout, columns, rows)
        table = TABLES[name]
        for date, part in _by_day(dates, batch):
            day = date.isoformat()
            key = (name, day)
            if key not in self.writers:
                relative = f"date={day}/part-{self.run_id[:8]}-{self.tag}{uuid.uuid4().hex[:12]}.parquet"
                path = f"{self.root}/{name}/{relative}"
                self.filesystem.create_dir(path.rsplit("/", 1)[0], recursive=True)
                self.writers[key] = [pq.ParquetWriter(path, part.schema, filesystem=self.filesystem,
                                                      compression="zstd"), relative, set(), 0]
            file = self.writers[key]
            file[0].write_batch(part)
            key_column = table.replace_key
            if key_column in part.schema.names:  # the distinct keys, in C++ rather than a loop over rows
                file[2].update(v for v in pc.unique(part.column(key_column)).to_pylist() if v is not None)
            file[3] += part.num_rows
            if file[3] >= self.file_rows:
                self._close_file(key)

    def _batch(self, layout: _Layout, columns: list[list], rows: int) -> pa.RecordBatch:
        run_id = pa.scalar(self.run_id, pa.string())
        arrays = [pa.repeat(run_id, rows) if i == layout.run_id_at else _array(column, field.type, rows)
                  for i, (column, field) in enumerate(zip(columns, layout.schema))]
        return pa.RecordBatch.from_arrays(arrays, schema=layout.schema)


def _array(values: list, arrow_type: pa.DataType, rows: int) -> pa.Array:
    """A column as Arrow. Many of a wide table's columns are null in a whole batch (most method
    arguments of `frames`): those are made without converting each value."""
    if values[0] is None and values[-1] is None and values.count(None) == rows:
        return pa.nulls(rows, arrow_type)
    return pa.array(values, type=arrow_type)


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
                          ("date", pa.string()), ("rows", pa.int64()), ("captures", pa.string()),
                          ("stats", pa.string())])


def files_batch(files: list[dict]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({name: [f[name] for f in files] for name in FILES_SCHEMA.names},
                                      schema=FILES_SCHEMA)


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
