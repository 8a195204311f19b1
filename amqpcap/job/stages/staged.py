"""Rows one stage leaves for the next: one Arrow IPC file per part (a connection bucket, a part of
message_flows' key space), the rows gathered per part and written in batches, so that a task's
memory does not grow with its input, nor with the number of parts (message_flows has more parts
for a bigger night). Rows come one by one (`add`: the read stage's segments) or already in Arrow
(`add_batch`: message_flows' sides, made a table batch at a time)."""

from __future__ import annotations

from array import array
from typing import Callable

import pyarrow as pa
import pyarrow.fs as pafs

from amqpcap.columnar.columns import ColumnBuffer, PartColumns
from amqpcap.lake.tablefiles import arrow_column, from_buffers


class StagedFiles:
    def __init__(self, filesystem: pafs.FileSystem, schema: pa.Schema, path_of: Callable[[int], str],
                 flush_rows: int, held_rows: int | None = None, held_bytes: int | None = None,
                 buffer=ColumnBuffer) -> None:
        """`path_of(part)`: the file a part's rows go to. A part's rows are written when it holds
        `flush_rows`; when the parts together hold `held_rows` rows, or `held_bytes` of the sizes
        given with the rows, the rows of the part holding the most (amqpcap.columnar.columns.PartColumns,
        each part's rows in a `buffer`, whose columns may come packed: see _arrow)."""
        self.filesystem = filesystem
        self.schema = schema
        self.path_of = path_of
        self.flush_rows = flush_rows
        self.held_rows = held_rows
        # rows waiting, per part
        self.parts = PartColumns(schema.names, self._flush, flush_rows, held_rows, held_bytes, buffer)
        self.batches: dict[int, list[pa.RecordBatch]] = {}  # batches waiting, per part
        self.batch_rows: dict[int, int] = {}  # their rows, per part
        self.batches_held = 0  # ... all parts
        self.writers: dict[int, tuple] = {}  # part -> (sink, IPC writer)
        self.counts: dict[int, int] = {}

    def add(self, part: int, row: tuple) -> None:
        """`row`: its values in schema order (a compiled caller adds to `parts` directly)."""
        self.parts.add(part, row)

    def add_batch(self, part: int, batch: pa.RecordBatch) -> None:
        """Rows of `part` in Arrow, of the schema; held as `add`'s rows are (the same budgets, by
        rows), and written together as one batch."""
        if not batch.num_rows:
            return
        self.batches.setdefault(part, []).append(batch)
        rows = self.batch_rows[part] = self.batch_rows.get(part, 0) + batch.num_rows
        self.batches_held += batch.num_rows
        if rows >= self.flush_rows:
            self._flush_batches(part)
        elif self.held_rows is not None and self.batches_held >= self.held_rows:
            self._flush_batches(max(self.batch_rows, key=self.batch_rows.__getitem__))

    def _flush(self, part: int) -> None:
        if not self.parts.rows(part):
            return
        self._write(part, pa.RecordBatch.from_arrays([_arrow(column, field.type)
                                                      for column, field in zip(self.parts.take(part), self.schema)],
                                                     schema=self.schema))

    def _flush_batches(self, part: int) -> None:
        held = self.batches.pop(part, None)
        if held:
            self.batches_held -= self.batch_rows.pop(part)
            self._write(part, held[0] if len(held) == 1 else pa.concat_batches(held))

    def _write(self, part: int, batch: pa.RecordBatch) -> None:
        if part not in self.writers:
            path = self.path_of(part)
            self.filesystem.create_dir(path.rsplit("/", 1)[0], recursive=True)
            sink = self.filesystem.open_output_stream(path)
            self.writers[part] = (sink, pa.ipc.new_file(sink, self.schema))
        self.writers[part][1].write_batch(batch)
        self.counts[part] = self.counts.get(part, 0) + batch.num_rows

    def close(self) -> dict[int, int]:
        """Write what is left and close every file; rows written per part."""
        for part in list(self.parts.buffers):
            self._flush(part)
        for part in list(self.batches):
            self._flush_batches(part)
        for sink, writer in self.writers.values():
            writer.close()
            sink.close()
        self.writers.clear()
        return self.counts


def _arrow(column, type_: pa.DataType) -> pa.Array:
    """A column as PartColumns.take gives it, as an Arrow array: a list of values (converted as the
    tables' are), or a packed one (amqpcap.capture.packets.packed_columns: an `array` of machine
    integers, or offsets and data) wrapped as it is, without a copy."""
    if isinstance(column, list):
        return arrow_column(column, type_)
    if isinstance(column, array):
        return from_buffers(type_, len(column), [None, column])
    offsets, data = column
    return from_buffers(type_, len(offsets) - 1, [None, offsets, data])
