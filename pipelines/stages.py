"""The decode job's stages: pure DataFrame -> DataFrame transforms around module-level task
functions (what executors run; they import the project's packages and take everything they need
as arguments, nothing from driver state).

    files -> read_segments -> by_connection -> decode_connections -> (table, Arrow IPC batch) rows

1. `read_segments` (mapInArrow, one task per group of files): each executor streams its capture
   files record by record, parses link/IP/TCP headers and emits one row per TCP segment, plus one
   `capture` row per file with what reading it found. Files are never loaded whole.
2. `by_connection`: a shuffle keyed by the connection's 4-tuple, sorted by time inside each
   partition, so each task sees every segment of a connection, from every file (rotated captures
   stitch), in capture order, one connection after another.
3. `decode_connections` (mapInArrow): amqp_decode's SegmentDecoder per connection, and
   pipelines.rows for the table rows, emitted as bounded Arrow IPC batches tagged with their table.
"""

from __future__ import annotations

import datetime
import functools
import io
import json
from typing import Iterator

import pyarrow as pa

from amqp_decode.capture import CaptureError, CaptureInfo, read_records
from amqp_decode.decoder import DecodeSettings, SegmentDecoder
from amqp_decode.packets import PacketParser, Segment, format_endpoint
from amqp_decode.stream import StreamSettings
from pipelines.inputs import open_input
from pipelines.rows import RowBatcher, rows_to_batch
from pipelines.schemas import CAPTURES

CAPTURE_KEY = "~capture"  # the key of per-file rows: sorts apart from every "ip:port|ip:port" key

SEGMENTS = pa.schema([
    ("key", pa.string()),  # both endpoints, sorted: one key per 4-tuple, whatever the direction
    ("ts_ns", pa.int64()), ("file_index", pa.int32()), ("packet_index", pa.int64()),
    ("src", pa.binary()), ("sport", pa.int32()), ("dst", pa.binary()), ("dport", pa.int32()),
    ("seq", pa.int64()), ("ack", pa.int64()), ("flags", pa.int32()), ("payload", pa.binary()),
    ("capture_json", pa.string()),  # capture rows only: what reading the file found
])
SEGMENTS_DDL = ("key string, ts_ns bigint, file_index int, packet_index bigint, src binary, sport int, "
                "dst binary, dport int, seq bigint, ack bigint, flags int, payload binary, "
                "capture_json string")
TABLE_BATCHES_DDL = "table string, batch binary"


# -- settings travel to executors as JSON (explicit, picklable, readable in a task's log) --------

def settings_to_json(settings: DecodeSettings) -> str:
    s = settings.stream
    return json.dumps({"stream": {"amqp_ports": sorted(s.amqp_ports), "tls_ports": sorted(s.tls_ports),
                                  "default_version": s.default_version, "max_frame": s.max_frame,
                                  "resync_max_frame": s.resync_max_frame,
                                  "capture_bodies": s.capture_bodies, "body_cap": s.body_cap},
                       "specs": [list(pair) for pair in settings.specs], "dialect": settings.dialect,
                       "reassembly_window": settings.reassembly_window,
                       "close_grace_seconds": settings.close_grace_seconds})


def settings_from_json(text: str) -> DecodeSettings:
    data = json.loads(text)
    stream = data.pop("stream")
    stream["amqp_ports"] = frozenset(stream["amqp_ports"])
    stream["tls_ports"] = frozenset(stream["tls_ports"])
    data["specs"] = tuple(tuple(pair) for pair in data["specs"])
    return DecodeSettings(stream=StreamSettings(**stream), **data)


# -- stage 1 -------------------------------------------------------------------------------------

def read_segments(df, batch_rows: int, progress=None):
    """files (file_index, uri, size) -> SEGMENTS rows. `progress`: optional Spark accumulators
    (files, bytes) the tasks add to as they finish files."""
    task = functools.partial(read_segments_task, batch_rows=batch_rows, progress=progress)
    return df.mapInArrow(task, SEGMENTS_DDL)


def read_segments_task(batches: Iterator[pa.RecordBatch], batch_rows: int,
                       progress=None) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        for file_index, uri, size in zip(*(batch.column(n).to_pylist() for n in ("file_index", "uri", "size"))):
            yield from _file_segments(file_index, uri, size, batch_rows)
            if progress is not None:
                progress[0].add(1)
                progress[1].add(max(size, 0))


def _file_segments(file_index: int, uri: str, size: int, batch_rows: int) -> Iterator[pa.RecordBatch]:
    info = CaptureInfo(uri, size)
    parser = PacketParser()
    rows: dict[str, list] = {name: [] for name in SEGMENTS.names}
    status, error, segments = "ok", None, 0
    try:
        with open_input(uri) as source:
            for packet_index, (ts_ns, link_type, data) in enumerate(read_records(uri, info, source)):
                segment = parser.parse(ts_ns, link_type, data)
                if segment is None:
                    continue
                segments += 1
                _append(rows, segment, file_index, packet_index)
                if len(rows["key"]) >= batch_rows:
                    yield pa.RecordBatch.from_pydict(rows, schema=SEGMENTS)
                    rows = {name: [] for name in SEGMENTS.names}
    except CaptureError as failure:
        status, error = "failed", failure.reason
    except FileNotFoundError:
        status, error = "failed", "no such file"
    except OSError as failure:
        status, error = "failed", f"cannot read: {failure}"
    parser.finish()
    if status == "ok" and info.issues:
        status, error = "partial", "; ".join(issue.detail for issue in info.issues)
    facts = {"file_index": file_index, "path": uri, "size_bytes": size, "format": info.format,
             "link_types": info.link_type_names, "packets": info.records, "captured_bytes": info.bytes,
             "first_ts_ns": info.first_ts_ns, "last_ts_ns": info.last_ts_ns, "status": status,
             "error": error, "tcp_segments": segments, "skipped_packets": dict(parser.skipped)}
    for name in SEGMENTS.names:
        rows[name].append(None)
    rows["key"][-1], rows["file_index"][-1] = CAPTURE_KEY, file_index
    rows["ts_ns"][-1], rows["packet_index"][-1] = info.first_ts_ns or 0, -1
    rows["capture_json"][-1] = json.dumps(facts)
    yield pa.RecordBatch.from_pydict(rows, schema=SEGMENTS)


@functools.lru_cache(maxsize=65536)
def _key(src: bytes, sport: int, dst: bytes, dport: int) -> str:
    """The 4-tuple's key, the same from either direction (cached: one lookup per packet)."""
    a, b = format_endpoint(src, sport), format_endpoint(dst, dport)
    return f"{a}|{b}" if a < b else f"{b}|{a}"


def _append(rows: dict[str, list], s: Segment, file_index: int, packet_index: int) -> None:
    rows["key"].append(_key(s.src, s.sport, s.dst, s.dport))
    rows["ts_ns"].append(s.ts_ns)
    rows["file_index"].append(file_index)
    rows["packet_index"].append(packet_index)
    rows["src"].append(s.src)
    rows["sport"].append(s.sport)
    rows["dst"].append(s.dst)
    rows["dport"].append(s.dport)
    rows["seq"].append(s.seq)
    rows["ack"].append(s.ack)
    rows["flags"].append(s.flags)
    rows["payload"].append(s.payload)
    rows["capture_json"].append(None)


# -- stage 2 -------------------------------------------------------------------------------------

def by_connection(segments, partitions: int):
    """The shuffle: every segment of a 4-tuple in one task, in capture order."""
    return (segments.repartition(partitions, "key")
            .sortWithinPartitions("key", "ts_ns", "file_index", "packet_index"))


# -- stage 3 -------------------------------------------------------------------------------------

def decode_connections(segments, settings: DecodeSettings, uris: list[str], run_id: str,
                       batch_rows: int, frames_counter=None):
    """Sorted SEGMENTS rows -> (table, Arrow IPC batch) rows for every raw table."""
    task = functools.partial(decode_connections_task, settings_json=settings_to_json(settings),
                             uris=uris, run_id=run_id, batch_rows=batch_rows,
                             frames_counter=frames_counter)
    return segments.mapInArrow(task, TABLE_BATCHES_DDL)


def decode_connections_task(batches: Iterator[pa.RecordBatch], settings_json: str, uris: list[str],
                            run_id: str, batch_rows: int, frames_counter=None) -> Iterator[pa.RecordBatch]:
    for name, batch in table_batches(batches, settings_json, uris, run_id, batch_rows, frames_counter):
        yield _tagged(name, batch)


def table_batches(batches: Iterator[pa.RecordBatch], settings_json: str, uris: list[str], run_id: str,
                  batch_rows: int, frames_counter=None) -> Iterator[tuple[str, pa.RecordBatch]]:
    """Sorted SEGMENTS batches -> (table name, rows of that table) pairs, in bounded batches."""
    for name, batch in _decode_connections(batches, settings_json, uris, run_id, batch_rows):
        if frames_counter is not None and name == "frames":
            frames_counter.add(batch.num_rows)
        yield name, batch


def _decode_connections(batches: Iterator[pa.RecordBatch], settings_json: str, uris: list[str],
                        run_id: str, batch_rows: int) -> Iterator[tuple[str, pa.RecordBatch]]:
    settings = settings_from_json(settings_json)
    rows = RowBatcher(run_id, batch_rows)
    captures: list[dict] = []
    ended: list = []  # connections that ended: their summaries become streams rows
    decoder, current = None, None
    for batch in batches:
        columns = [batch.column(name).to_pylist() for name in SEGMENTS.names]
        for key, ts_ns, file_index, _, src, sport, dst, dport, seq, ack, flags, payload, facts in zip(*columns):
            if key == CAPTURE_KEY:
                captures.append(_capture_row(json.loads(facts), run_id))
                continue
            if key != current:  # the previous 4-tuple is complete: end its connections
                if decoder is not None:
                    yield from _emit(rows, decoder.finish(), ended)
                decoder, current = SegmentDecoder(settings, uris, on_connection_end=ended.append), key
            records = decoder.feed(Segment(ts_ns, src, sport, dst, dport, seq, ack, flags, payload),
                                   file_index)
            if records or ended:
                yield from _emit(rows, records, ended)
    if decoder is not None:
        yield from _emit(rows, decoder.finish(), ended)
    yield from rows.finish()
    if captures:
        yield CAPTURES.name, rows_to_batch(CAPTURES, captures)


def _emit(rows: RowBatcher, records: list[dict], ended: list) -> Iterator[tuple[str, pa.RecordBatch]]:
    for record in records:
        yield from rows.add(record)
    for connection in ended:
        yield from rows.add_stream(connection.summary())
    ended.clear()


def _tagged(table: str, batch: pa.RecordBatch) -> pa.RecordBatch:
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return pa.RecordBatch.from_pydict({"table": [table], "batch": [sink.getvalue()]},
                                      schema=pa.schema([("table", pa.string()), ("batch", pa.binary())]))


def untag(blob: bytes) -> pa.RecordBatch:
    return pa.ipc.open_stream(blob).read_next_batch()


def _capture_row(facts: dict, run_id: str) -> dict:
    first, last = facts["first_ts_ns"], facts["last_ts_ns"]
    day = datetime.datetime.fromtimestamp((first or 0) / 1e9, datetime.timezone.utc).date() if first \
        else datetime.datetime.now(datetime.timezone.utc).date()
    return {"date": day, "run_id": run_id, "path": facts["path"], "size_bytes": facts["size_bytes"],
            "format": facts["format"], "link_types": facts["link_types"], "packets": facts["packets"],
            "captured_bytes": facts["captured_bytes"],
            "first_ts": first // 1000 if first is not None else None,
            "last_ts": last // 1000 if last is not None else None,
            "status": facts["status"], "error": facts["error"]}
