"""Rows one stage leaves for the next: one Arrow IPC file per part (a connection bucket, a part of
message_flows' key space), the rows gathered per part and written in batches, so that a task's
memory does not grow with its input, nor with the number of parts (message_flows has more parts
for a bigger night)."""

from __future__ import annotations

from array import array
from typing import Callable

import pyarrow as pa
import pyarrow.fs as pafs

from amqp_decode.columns import ColumnBuffer, PartColumns
from pipelines.tablefiles import arrow_column, from_buffers


class StagedFiles:
    def __init__(self, filesystem: pafs.FileSystem, schema: pa.Schema, path_of: Callable[[int], str],
                 flush_rows: int, held_rows: int | None = None, held_bytes: int | None = None,
                 buffer=ColumnBuffer) -> None:
        """`path_of(part)`: the file a part's rows go to. A part's rows are written when it holds
        `flush_rows`; when the parts together hold `held_rows` rows, or `held_bytes` of the sizes
        given with the rows, the rows of the part holding the most (amqp_decode.columns.PartColumns,
        each part's rows in a `buffer`, whose columns may come packed: see _arrow)."""
        self.filesystem = filesystem
        self.schema = schema
        self.path_of = path_of
        # rows waiting, per part
        self.parts = PartColumns(schema.names, self._flush, flush_rows, held_rows, held_bytes, buffer)
        self.writers: dict[int, tuple] = {}  # part -> (sink, IPC writer)
        self.counts: dict[int, int] = {}

    def add(self, part: int, row: tuple) -> None:
        """`row`: its values in schema order (a compiled caller adds to `parts` directly)."""
        self.parts.add(part, row)

    def _flush(self, part: int) -> None:
        if not self.parts.rows(part):
            return
        batch = pa.RecordBatch.from_arrays([_arrow(column, field.type)
                                            for column, field in zip(self.parts.take(part), self.schema)],
                                           schema=self.schema)
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
        for sink, writer in self.writers.values():
            writer.close()
            sink.close()
        self.writers.clear()
        return self.counts


def _arrow(column, type_: pa.DataType) -> pa.Array:
    """A column as PartColumns.take gives it, as an Arrow array: a list of values (converted as the
    tables' are), or a packed one (amqp_decode.packets.packed_columns: an `array` of machine
    integers, or offsets and data) wrapped as it is, without a copy."""
    if isinstance(column, list):
        return arrow_column(column, type_)
    if isinstance(column, array):
        return from_buffers(type_, len(column), [None, column])
    offsets, data = column
    return from_buffers(type_, len(offsets) - 1, [None, offsets, data])
