"""Stage 3: message_flows, the one table across connections.

The tasks that write `publishes` and `deliveries` rows (the decode tasks; the replay of
`amqpcap analyze`) also stage each row's match side (`FlowSides`): the match key (message id, else
body hash with exchange and routing key), its time, and what a flow row needs, into one Arrow IPC
file per part of the key space (a stable hash of the key). Then one task per part reads its files
from every task, sorts them by key and time, and pairs each key's sides by
amqpcap.rules.message_flows. No Spark SQL, no shuffle of the tables, no second read of
them: the sides of a night are a few hundred bytes per message, and a part's share of them is
bounded by choosing the number of parts from the input's size (`flow_parts`).
"""

from __future__ import annotations

import math
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from amqpcap.job.stages.staged import StagedFiles
from amqpcap.lake.tablefiles import TableFile, TableFiles, arrow_column, filesystem_of
from amqpcap.process import prepare_worker
from amqpcap.rules.message_flows import SIDE_COLUMNS, KeyParts, arrow_flows, arrow_keys, flow_pairs, host_of
from amqpcap.tables.registry import DELIVERIES, MESSAGE_FLOWS, PUBLISHES

_TYPES = {**{f.name: f.type for f in DELIVERIES.arrow()}, **{f.name: f.type for f in PUBLISHES.arrow()}}
SIDES = pa.schema([("key", pa.string()), ("ts_ns", pa.int64()), ("is_delivery", pa.bool_()),
                   *[(name, _TYPES[name]) for name in SIDE_COLUMNS]])
# Ties in (key, time, side) are broken by who sent and where, so that pairs never depend on the
# order tasks ran in.
SORT = [("key", "ascending"), ("ts_ns", "ascending"), ("is_delivery", "ascending"), ("connection", "ascending"),
        ("channel", "ascending"), ("message_key", "ascending")]
FLUSH_ROWS = 4096
# Sides a task holds before writing them, across parts: the parts grow with the night, this does not.
HELD_ROWS = 16_384
# Of TCP payload: a flows task then holds the sides of at most that much traffic (a side is
# ~200 bytes of Arrow; a message takes at least about as many on the wire).
BYTES_PER_PART = 128 << 20
# Keys whose sides are turned into Python values at a time (a key has a side or two, mostly:
# one publish and its deliveries)
SLICE_KEYS = 16_384
# The columns the rule reads (and the key that groups them)
RULE_COLUMNS = ["key", "is_delivery", "ts_ns", "connection", "channel", "consumer_tag", "redelivered", "message_id",
                "exchange", "routing_key", "death_exchange", "client", "settled_ns", "outcome"]
FLOW_SCHEMA = MESSAGE_FLOWS.arrow(("run_id",))


def flow_parts(traffic_bytes: int, minimum: int) -> int:
    """Parts of the key space for `traffic_bytes` of captured traffic: at least `minimum` (the
    cores), more as the traffic grows, so that a flows task's memory does not."""
    return max(minimum, math.ceil(traffic_bytes / BYTES_PER_PART), 1)


def sides_dir(staging: str) -> str:
    return f"{staging}/flows"


class FlowSides:
    """Collects one task's publishes and deliveries rows as match sides, one IPC file per part."""

    def __init__(self, staging: str, tag: str, parts: int) -> None:
        filesystem, root = filesystem_of(sides_dir(staging))
        self.files = StagedFiles(filesystem, SIDES, lambda part: f"{root}/p{part:05d}-{tag}.arrow", FLUSH_ROWS,
                                 HELD_ROWS)
        self.parts = KeyParts(parts)

    def tap(self, writer) -> None:
        """Take the publishes and deliveries rows a table writer (amqpcap.lake.tablefiles) writes."""
        for table in (PUBLISHES, DELIVERIES):
            writer.taps[table.name] = self.see

    def see(self, name: str, dates: list, batch: pa.RecordBatch) -> None:
        """A batch of `deliveries` rows when `name` is that table's, else of `publishes`: their
        dates (datetime.date), then the table's columns."""
        sides = side_batch(name == DELIVERIES.name, dates, batch)
        by_part = self.parts.rows_by_part(sides.column(0).to_pylist())
        if len(by_part) == 1:
            self.files.add_batch(next(iter(by_part)), sides)
            return
        for part, rows in by_part.items():
            self.files.add_batch(part, sides.take(pa.array(rows, pa.int32())))

    def close(self) -> None:
        self.files.close()


def side_batch(is_delivery: bool, dates: list, batch: pa.RecordBatch) -> pa.RecordBatch:
    """Rows of `deliveries` (else `publishes`) as their match sides (SIDES), column by column: their
    key, time and kind, then SIDE_COLUMNS (null where the table has no such column)."""
    rows = batch.num_rows
    names = batch.schema.names

    def column(name: str) -> pa.Array:
        if name == "date":
            return arrow_column(dates, pa.date32())
        return batch.column(name) if name in names else pa.nulls(rows, SIDES.field(name).type)
    columns = {name: column(name) for name in SIDE_COLUMNS}
    key = arrow_keys(columns["message_id"], columns["body_sha256"], columns["exchange"], columns["routing_key"])
    time = columns["delivered_ns" if is_delivery else "published_ns"]
    kind = pa.repeat(pa.scalar(is_delivery, pa.bool_()), rows)
    return pa.RecordBatch.from_arrays([key, time, kind, *columns.values()], schema=SIDES)


def flows_task(parts: Iterator[int], staging: str, root: str, run_id: str, batch_rows: int) -> Iterator[TableFile]:
    """message_flows of some parts of the key space -> the files written (TableFile)."""
    prepare_worker()
    writer = TableFiles(root, run_id, tag="flows-", batch_rows=batch_rows)
    for part in parts:
        sides = _read_part(staging, part)
        if sides is not None:
            for rows in part_flows(sides):
                writer.add_arrow(MESSAGE_FLOWS, rows)
    yield from writer.close()


def part_flows(sides: pa.Table) -> Iterator[pa.Table]:
    """The message_flows rows of a part's sides, as Arrow tables (the date, then the table's
    columns less run_id). Only what the rule reads becomes Python values (amqpcap.rules.
    message_flows.flow_pairs), a slice of whole keys at a time; the rows are taken and computed
    from the sides' columns in Arrow (arrow_flows), with no Python value per row and column.
    (Scalars given to pyarrow are typed: inferring a Python value's type imports pandas, 0.3 s;
    amqpcap.process.)"""
    order = pc.sort_indices(sides, sort_keys=SORT)
    keyed = sides.select(RULE_COLUMNS).take(order).combine_chunks()
    keys = keyed["key"]
    count = len(keys)
    if not count:
        return
    changes = pc.indices_nonzero(pc.not_equal(keys[1:], keys[:-1]))
    starts = [0, *pc.add(changes, pa.scalar(1, changes.type)).to_pylist(), count]  # each key's first side, then the end
    no = pa.scalar(False, pa.bool_())
    for begin in range(0, len(starts) - 1, SLICE_KEYS):
        bounds = starts[begin:begin + SLICE_KEYS + 1]
        first = bounds[0]
        rows = keyed.slice(first, bounds[-1] - first)
        connections = rows["connection"].to_pylist()
        streams = list(zip(connections, rows["channel"].to_pylist(), rows["consumer_tag"].to_pylist()))
        hosts = [host_of(client) for client in rows["client"].to_pylist()]
        out = flow_pairs([bound - first for bound in bounds], rows["is_delivery"].to_pylist(), rows["ts_ns"].to_pylist(),
                         streams, pc.fill_null(rows["redelivered"], no).to_pylist(),
                         pc.is_valid(rows["message_id"]).to_pylist(),
                         list(zip(rows["exchange"].to_pylist(), rows["routing_key"].to_pylist())),
                         rows["death_exchange"].to_pylist(), list(zip(connections, hosts)),
                         rows["settled_ns"].to_pylist(), rows["outcome"].to_pylist())
        yield arrow_flows(sides, _rows_of(order, out.publish, first), _rows_of(order, out.delivery, first),
                          _rows_of(order, out.journey, first), out, FLOW_SCHEMA)


def _rows_of(order: pa.Array, rows: list, first: int) -> pa.Array:
    """Rows of a slice of the sorted sides (None: none), from `first` on, as rows of the sides."""
    return order.take(pc.add(pa.array(rows, pa.int64()), pa.scalar(first, pa.int64())))


def _read_part(staging: str, part: int) -> pa.Table | None:
    filesystem, base = filesystem_of(sides_dir(staging))
    try:
        infos = filesystem.get_file_info(pafs.FileSelector(base))
    except (FileNotFoundError, OSError):
        return None
    prefix = f"p{part:05d}-"
    tables = []
    for info in sorted(infos, key=lambda i: i.path):
        if info.base_name.startswith(prefix):
            with filesystem.open_input_file(info.path) as source:
                tables.append(pa.ipc.open_file(source).read_all())
    return pa.concat_tables(tables) if tables else None
