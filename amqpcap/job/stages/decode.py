"""Stage 2: one connection bucket -> every per-connection table, in one pass.

The bucket's staged segments are read unit by unit (each file's units in order), the files merged
by packet time as `amqpcap decode` merges files (rotated captures stitch), and fed to the same
decoder; each record becomes its raw rows and passes through the analytics state machines
(amqpcap.onepass.tabulate). Connections an earlier run saved resume where it left them, and those still
open at the end are saved for the next run (amqpcap.onepass.carry, amqpcap.lake.carryover). The task
writes every table's rows as Parquet itself (amqpcap.lake.tablefiles), stages the match sides of its
publishes and deliveries for message_flows (amqpcap.job.stages.flows), and returns only the files'
metadata.
"""

from __future__ import annotations

import itertools
import operator
import os
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from amqpcap.capture.packets import Segment, segments_from_packed
from amqpcap.capture.timeline import merge_by_time
from amqpcap.job.progress import TaskProgress
from amqpcap.job.stages.flows import FlowSides
from amqpcap.job.stages.numbering import tcp_streams_of
from amqpcap.job.stages.placed import CaptureBytes
from amqpcap.job.stages.read import SEGMENTS, staged_path
from amqpcap.job.work import BucketFile, BucketWork, RunContext
from amqpcap.lake.carryover import staged_states
from amqpcap.lake.tablefiles import TableFile, TableFiles, filesystem_of
from amqpcap.onepass.carry import CarryingDecoder
from amqpcap.process import fewer_collections, prepare_worker
from amqpcap.rules.common import day
from amqpcap.settings import Settings
from amqpcap.tables.registry import CONNECTION_STATE, RESUMPTIONS
from amqpcap.tls.keylog import KeyLog


def decode_task(buckets: Iterator[BucketWork], staging: str, uris: list[str], settings_json: str,
                run_id: str, root: str, context: RunContext, bases: dict[int, int], flow_parts: int,
                keys=None) -> Iterator[TableFile]:
    """Buckets -> the table files written (TableFile). `keys`: the TLS key log's broadcast (the
    driver's: settings.decode.tls_keylogs is never read here)."""
    prepare_worker()
    settings = Settings.from_json(settings_json)
    key_log = keys.value if keys is not None else KeyLog()
    for work in buckets:
        progress = TaskProgress(staging, f"decode-{work.bucket}")
        with fewer_collections():
            written = decode_bucket(work, staging, uris, settings, run_id, root, progress, context, bases, flow_parts,
                                    key_log)
        progress.close()
        yield from written


def decode_bucket(work: BucketWork, staging: str, uris: list[str], settings: Settings, run_id: str, root: str,
                  progress: TaskProgress | None = None, context: RunContext | None = None,
                  bases: dict[int, int] | None = None, flow_parts: int = 0, keys: KeyLog | None = None) -> list[TableFile]:
    """A bucket's files' units (those that staged segments of it, in byte order, and the time they
    span). `context`: where the run's captures end. `bases` (amqpcap.job.stages.numbering): each
    unit's first record number less one; each unit's map of local TCP streams to the file's is
    staged. `flow_parts`: the parts message_flows' sides are staged in (none when 0)."""
    context = context or RunContext()
    bases = bases or {}
    bucket, files = work.bucket, work.files
    writer = TableFiles(root, run_id, tag=f"b{bucket}-", batch_rows=settings.spark.arrow_batch_rows)
    sides = FlowSides(staging, f"b{bucket}", flow_parts) if flow_parts else None
    if sides is not None:
        sides.tap(writer)
    decoder = CarryingDecoder(settings, list(uris), writer.add, run_id, saved=staged_states(staging, bucket),
                              keys=keys if keys is not None else KeyLog())
    filesystem, base = filesystem_of(staging)
    groups = []
    for group in _overlapping(files):
        streams = [_batches(filesystem, [(staged_path(base, unit, bucket), bases.get(unit, 0), unit)
                                         for unit in f.units], staging, f.file_index)
                   for f in group]
        groups.append(streams[0] if len(streams) == 1 else _merged(streams))
    decoder.feed_all(itertools.chain.from_iterable(groups), progress)
    states = decoder.finish(context.capture_end_ns, context.closing_source)
    for state in states:
        writer.add(CONNECTION_STATE, {"date": day(state.last_ts_ns), "sensor": settings.state.sensor,
                                      "tuple_key": state.key, "connection": state.connection,
                                      "last_ts_ns": state.last_ts_ns, "source": state.source, "state": state.blob})
    for resumed in decoder.resumed:
        writer.add(RESUMPTIONS, {"date": day(resumed.ts_ns), "connection": resumed.connection,
                                 "saved_by": resumed.saved_by, "source": resumed.capture})
    written = writer.close()  # (its last batches reach the sides' tap)
    if sides is not None:
        sides.close()
    # Only this task reads its bucket's segments: they go now, not with the whole staging at the
    # end of the run (deleting a 10 GB night's segments took 2.4 s there, with both cores idle).
    # Not before the task has succeeded: a failed one is run again, on the same segments.
    for f in files:
        for unit in f.units:
            _delete(filesystem, staged_path(base, unit, bucket))
    return written


def _delete(filesystem, path: str) -> None:
    try:
        filesystem.delete_file(path)
    except OSError:  # (not found: a unit that staged nothing of this bucket has no file)
        pass


def _overlapping(files: list[BucketFile]) -> list[list[BucketFile]]:
    """The files in groups to merge by time, in time order: each group's files overlap in time,
    and every group ends before the next begins. Rotated captures follow each other, so their
    segments are read one file after another, and a task holds one batch of one file at a time, not
    one of every file of the night (all files are one group when their spans are not known)."""
    if any(f.earliest is None or f.latest is None for f in files):
        return [files]
    groups: list[list[BucketFile]] = []
    latest = None
    for f in sorted(files, key=lambda f: (f.earliest, f.file_index)):
        if groups and f.earliest <= latest:  # a tie merges too: the merge orders equal times by file
            groups[-1].append(f)
            latest = max(latest, f.latest)
        else:
            groups.append([f])
            latest = f.latest
    return groups


def _batches(filesystem, units: list[tuple[str, int, int]], staging: str,
             file_index: int) -> Iterator[tuple[int, list[Segment]]]:
    """(file index, segments) of one file's staged units, in capture order, a staged batch (or a
    slice of one) at a time. `units`: (staged path, the unit's first record number less one, the unit)."""
    for path, base, unit in units:
        stream_map = tcp_streams_of(staging, unit)  # a unit's at a time: never the whole night's
        with _open_staged(filesystem, path) as source:
            reader = pa.ipc.open_file(source)
            with CaptureBytes(reader.schema.metadata) as capture:  # payloads left in the capture, if any
                for i in range(reader.num_record_batches):
                    batch = reader.get_batch(i)
                    last = pc.max(batch.column(AT)).as_py()
                    placed = last is not None and last >= 0
                    # placed: in slices, each followed by the release of the pages read (segments
                    # come in file order; a whole batch spans tens of MB of the capture); staged
                    # bytes: the batch at once
                    parts = [batch.slice(start, PLACED_SLICE) for start in range(0, batch.num_rows, PLACED_SLICE)] \
                        if placed else [batch]
                    for part in parts:
                        segments = segments_from_packed(_packed(part), base, stream_map,
                                                        capture.open() if placed else None)
                        if placed:
                            capture.release(pc.max(part.column(AT)).as_py())
                        yield file_index, segments


def _merged(streams: list[Iterator[tuple[int, list[Segment]]]]) -> Iterator[tuple[int, list[Segment]]]:
    """Files' batches that overlap in time, merged by packet time: runs of one file's segments."""
    merged = merge_by_time(((segment.ts_ns, file_index, segment) for file_index, segments in stream
                            for segment in segments) for stream in streams)
    for file_index, run in itertools.groupby(merged, key=operator.itemgetter(1)):
        yield file_index, [segment for _, _, segment in run]


AT = SEGMENTS.get_field_index("at")
PLACED_SLICE = 1024  # staged segments whose payloads are read from the capture at a time


def _packed(batch: pa.RecordBatch) -> list:
    """A staged batch's columns as amqpcap.capture.packets.segments_from_packed takes them, with no
    Python object per value: each integer column a view of its values, each bytes column its
    offsets and its data."""
    packed = []
    for column in batch.columns:
        if column.null_count:  # (the read stage stages none)
            raise ValueError(f"a staged batch has nulls in a column of {column.type}")
        start, stop = column.offset, column.offset + len(column)
        buffers = column.buffers()
        if pa.types.is_binary(column.type):
            data = buffers[2].to_pybytes() if buffers[2] is not None else b""
            packed.append((memoryview(buffers[1]).cast("i")[start:stop + 1], data))
        else:
            width = "q" if column.type.bit_width == 64 else "i"
            packed.append(memoryview(buffers[1]).cast(width)[start:stop])
    return packed


def _open_staged(filesystem, path: str):
    """A staged file to read: mapped into memory when it is local, so that its batches are read
    from the page cache in place rather than copied into freshly allocated memory (which faulted
    in every page of every batch)."""
    if isinstance(filesystem, pafs.LocalFileSystem):
        return pa.memory_map(path)
    return filesystem.open_input_file(path)


def remove_staging(staging: str) -> None:
    filesystem, base = filesystem_of(staging)
    try:
        filesystem.delete_dir(base)
    except (FileNotFoundError, OSError):
        if os.path.isdir(base):
            raise
