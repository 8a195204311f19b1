"""Between the stages, on the driver: each unit's record numbers and local TCP streams become the
numbers Wireshark shows in the whole file (frame.number, tcp.stream), so every row can be opened in
Wireshark though the file was read in byte ranges by several tasks.

A unit numbers its records from 0 and its TCP streams locally (amqpcap.capture.stream_index). Its
reading task stages its local streams beside its segments (`stage_streams`); here a file's units
are taken in byte order, a unit's first record number is one more than the records of the units
before it, and its local streams are placed in the file's stream index, whose map (local stream ->
tcp.stream) is staged for the decode tasks (`tcp_streams_of`). Nothing here grows with the night:
the driver reads one unit's streams at a time and the index forgets the conversations that ended
(amqpcap.capture.stream_index.GRACE_NS); only the record counts (one number per unit) travel in the
tasks' results and arguments.
"""

from __future__ import annotations

import pyarrow as pa

from amqpcap.capture.stream_index import GRACE_NS, LocalStream, StreamIndex
from amqpcap.lake.tablefiles import filesystem_of

# A unit's local streams, in order (row i: local stream i), as amqpcap.capture.stream_index keeps them
STREAMS = pa.schema([
    ("a", pa.binary()), ("a_port", pa.int32()), ("b", pa.binary()), ("b_port", pa.int32()),
    ("opener", pa.int8()), ("opener_seq", pa.int64()), ("first_a", pa.int64()), ("first_b", pa.int64()),
    ("last_ts_ns", pa.int64()), ("ended", pa.int8()),
])
TCP_STREAMS = pa.schema([("tcp_stream", pa.int64())])  # row i: the file's index of local stream i


def streams_path(staging: str, unit: int) -> str:
    return f"{staging}/u{unit:06d}-streams.arrow"


def tcp_streams_path(staging: str, unit: int) -> str:
    return f"{staging}/u{unit:06d}-tcp-streams.arrow"


def stage_streams(staging: str, unit: int, streams: list[LocalStream]) -> None:
    """A reading task's local streams (RangeStreams.streams), for number_units."""
    columns: list[list] = [[] for _ in STREAMS]
    for stream in streams:
        a, a_port, b, b_port = stream.key
        for column, value in zip(columns, (a, a_port, b, b_port, stream.opener, stream.opener_seq, stream.first_lower,
                                           stream.first_higher, stream.last_ts, stream.ended)):
            column.append(value)
    _write(staging, streams_path, unit, pa.table(columns, schema=STREAMS))


def number_units(plans, staged: dict, staging: str) -> dict[int, int]:
    """`plans`: the units in file order, each file's in byte order; `staged`: {unit: ReadResult}.
    Stages each unit's map of local streams to tcp.stream; returns {unit: its first record number
    less one}."""
    bases: dict[int, int] = {}
    by_file: dict[int, list] = {}
    for unit in plans:
        by_file.setdefault(unit.file_index, []).append(unit)
    for units in by_file.values():
        index, records = StreamIndex(), 0
        for unit in sorted(units, key=lambda u: u.start):
            bases[unit.unit] = records
            records += staged[unit.unit].facts.records
            streams = _staged_streams(staging, unit.unit)
            placed = [index.place(stream) for stream in streams]
            _write(staging, tcp_streams_path, unit.unit, pa.table([pa.array(placed, pa.int64())], schema=TCP_STREAMS))
            if streams:  # the units after this one begin where it ends
                index.forget_ended(max(stream.last_ts for stream in streams) - GRACE_NS)
    return bases


def tcp_streams_of(staging: str, unit: int) -> list[int]:
    """A unit's map, local stream -> tcp.stream (empty when it was not numbered)."""
    table = _read(staging, tcp_streams_path, unit)
    return [] if table is None else table.column(0).to_pylist()


def _staged_streams(staging: str, unit: int) -> list[LocalStream]:
    table = _read(staging, streams_path, unit)
    if table is None:  # its reading failed before it staged anything
        return []
    return [LocalStream((a, a_port, b, b_port), opener, opener_seq, first_a, first_b, last_ts, ended, local)
            for local, (a, a_port, b, b_port, opener, opener_seq, first_a, first_b, last_ts, ended)
            in enumerate(zip(*(column.to_pylist() for column in table.columns)))]


def _read(staging: str, path_of, unit: int) -> pa.Table | None:
    filesystem, base = filesystem_of(staging)
    try:
        with filesystem.open_input_file(path_of(base, unit)) as source:
            return pa.ipc.open_file(source).read_all()
    except FileNotFoundError:
        return None


def _write(staging: str, path_of, unit: int, table: pa.Table) -> None:
    filesystem, base = filesystem_of(staging)
    path = path_of(base, unit)
    filesystem.create_dir(path.rsplit("/", 1)[0], recursive=True)
    with filesystem.open_output_stream(path) as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
