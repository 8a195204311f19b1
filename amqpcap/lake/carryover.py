"""Connections carried between runs, on the lake's side (the decoding side: amqpcap.onepass.carry;
the design: docs/state.md).

Before decoding, the driver picks the saved states a run may resume (`resumable_states`): rows of
`connection_state` of this sensor, recent enough, that no run other than this one has resumed yet,
and routes them to the decode task of their connection's bucket (`stage_states`). It also finds
the connections a later run already resumed from the state this run will save again (a rerun:
`settled_later`), whose provisional rows must not come back: they are made (message_flows pairs
them as the first run did) and dropped from the run's files before the commit (`drop_superseded`).
After decoding, the run's `resumptions` rows say which earlier rows it supersedes (`superseded`):
the commit removes those provisional rows from the lake (amqpcap.lake.runlog).
"""

from __future__ import annotations

import json

import msgspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from amqpcap.capture.bucketing import bucket_of
from amqpcap.capture.packets import parse_endpoint
from amqpcap.lake.runlog import superseded_rows, table_files
from amqpcap.lake.tablefiles import TableFile, filesystem_of, stats
from amqpcap.onepass.state import SavedState
from amqpcap.settings import Settings
from amqpcap.tables.registry import CONNECTION_STATE, RESUMPTIONS

STATE_COLUMNS = ["sensor", "tuple_key", "connection", "last_ts_ns", "source", "state"]


def _rows(lake: str, table, columns: list[str]) -> list[dict]:
    rows: list[dict] = []
    for path in table_files(lake, table):
        rows += pq.read_table(path.removeprefix("file://"), columns=columns).to_pylist()
    return rows


def resumable_states(lake: str, settings: Settings, replaced: set[str], first_ts_ns: int | None) -> list[SavedState]:
    """The states this run may resume: its sensor's, saved by runs it does not replace, not yet
    resumed by another run, and not older than twice `state.max_gap_seconds` before its first
    packet (older ones have expired: never read again; between the two the decoder says why it
    does not resume one whose connection comes back)."""
    if not settings.state.carry or first_ts_ns is None:
        return []
    taken = {(r["connection"], r["saved_by"]) for r in _rows(lake, RESUMPTIONS, ["connection", "saved_by", "source"])
             if r["source"] not in replaced}
    oldest = first_ts_ns - 2 * int(settings.state.max_gap_seconds * 1e9)
    return [SavedState(r["tuple_key"], r["connection"], r["last_ts_ns"], r["source"], r["state"])
            for r in _rows(lake, CONNECTION_STATE, STATE_COLUMNS)
            if r["sensor"] == settings.state.sensor and r["source"] not in replaced
            and (r["connection"], r["source"]) not in taken and r["last_ts_ns"] >= oldest]


def settled_later(lake: str, sources: set[str], replaced: set[str]) -> set[str]:
    """Connections whose state one of `sources` saved and a run outside `replaced` resumed."""
    return {r["connection"] for r in _rows(lake, RESUMPTIONS, ["connection", "saved_by", "source"])
            if r["saved_by"] in sources and r["source"] not in replaced}


def superseded(root: str, written: list[TableFile]) -> list[tuple[str, str]]:
    """(connection, source) whose provisional rows this run's resumptions replace."""
    filesystem, base = filesystem_of(root)
    pairs = set()
    for f in written:
        if f.table == RESUMPTIONS.name:
            data = pq.read_table(f"{base}/{RESUMPTIONS.name}/{f.path}", columns=["connection", "saved_by"],
                                 filesystem=filesystem)
            pairs.update(zip(data.column("connection").to_pylist(), data.column("saved_by").to_pylist()))
    return sorted(pairs)


def drop_superseded(root: str, written: list[TableFile], pairs: list[tuple[str, str]]) -> list[TableFile]:
    """The run's own files without the provisional rows of `pairs` (not committed yet: rewritten
    in place); their metadata updated."""
    if not pairs:
        return written
    filesystem, base = filesystem_of(root)
    out = []
    for f in written:
        if not json.loads(f.stats).get("maxValues", {}).get("provisional"):
            out.append(f)  # no provisional row in it
            continue
        path = f"{base}/{f.table}/{f.path}"
        data = pq.read_table(path, filesystem=filesystem)
        kept = data.filter(pc.invert(superseded_rows(data, pairs)))
        if kept.num_rows == data.num_rows:
            out.append(f)
            continue
        filesystem.delete_file(path)
        if not kept.num_rows:
            continue
        pq.write_table(kept, path, filesystem=filesystem, compression="zstd")
        metadata = pq.read_metadata(path, filesystem=filesystem)
        out.append(msgspec.structs.replace(f, size=filesystem.get_file_info(path).size, rows=metadata.num_rows,
                                           stats=json.dumps(stats(metadata))))
    return out


# -- to the decode tasks -----------------------------------------------------------------------------

STAGED = pa.schema([("key", pa.string()), ("connection", pa.string()), ("last_ts_ns", pa.int64()),
                    ("source", pa.string()), ("state", pa.large_binary())])


def bucket_of_key(key: str, buckets: int) -> int:
    """The bucket of a saved connection, from its tuple key (the read stage's bucket_of)."""
    (a, a_port), (b, b_port) = (parse_endpoint(e) for e in key.split("|"))
    return bucket_of(a, a_port, b, b_port, buckets)


def stage_states(staging: str, states: list[SavedState], buckets: int) -> set[int]:
    """One Arrow file per bucket with states; the buckets that have some."""
    by_bucket: dict[int, list[SavedState]] = {}
    for state in states:
        by_bucket.setdefault(bucket_of_key(state.key, buckets), []).append(state)
    filesystem, base = filesystem_of(staging)
    filesystem.create_dir(f"{base}/state", recursive=True)
    for bucket, part in by_bucket.items():
        columns = [[s.key for s in part], [s.connection for s in part], [s.last_ts_ns for s in part],
                   [s.source for s in part], [s.blob for s in part]]
        with filesystem.open_output_stream(_staged_path(base, bucket)) as out:
            with pa.ipc.new_file(out, STAGED) as writer:
                writer.write_table(pa.Table.from_arrays([pa.array(c, f.type) for c, f in zip(columns, STAGED)],
                                                        schema=STAGED))
    return set(by_bucket)


def staged_states(staging: str, bucket: int) -> list[SavedState]:
    filesystem, base = filesystem_of(staging)
    path = _staged_path(base, bucket)
    import pyarrow.fs as pafs
    if filesystem.get_file_info(path).type == pafs.FileType.NotFound:
        return []
    with filesystem.open_input_file(path) as source:
        table = pa.ipc.open_file(source).read_all()
    return [SavedState(r["key"], r["connection"], r["last_ts_ns"], r["source"], r["state"]) for r in table.to_pylist()]


def _staged_path(base: str, bucket: int) -> str:
    return f"{base}/state/b{bucket:05d}.arrow"



