"""The three fuzz targets' properties, shared by the hypothesis tests and the atheris harnesses.

Each `check_*` takes one input, runs the installed decoder on it (whatever build of amqpcap
is installed: only public entry points are called, nothing is patched) and raises on a
violated property. A finding already reported and pinned by an xfail test in test_corpus.py is
recognised by a function in `known` and tolerated here until it is fixed (none is open today).
"""

from __future__ import annotations

import atexit
import io
import os
import shutil
import struct
import tempfile
from collections import Counter

from amqpcap.capture.readers import CaptureError, CaptureInfo, read_records
from amqpcap.cli.decode import _text_line
from amqpcap.connection.decoder import CaptureDecoder
from amqpcap.decodeview.jsonl import json_line
from amqpcap.protocol.codec import Codec
from amqpcap.protocol.errors import DecodeError
from amqpcap.protocol.frames import ContentBody, ContentHeader, Heartbeat, MethodFrame, OtherFrame
from amqpcap.protocol.spec import load_spec
from amqpcap.settings import Settings, from_data
from tests.fuzz import oracles
from tests.fuzz.oracles import CAPTURE_ISSUES, ContractError, parse_capture

RENDER = (json_line, _text_line)  # what `amqpcap decode` writes, with and without --jsonl


# -- 1. the codec ----------------------------------------------------------------------------------

CODECS = {}


def codec(name: str) -> Codec:
    if name not in CODECS:
        version, _, dialect = name.partition(" ")
        CODECS[name] = Codec(load_spec(version), dialect or "rabbitmq")
    return CODECS[name]


CODEC_NAMES = ["0-9-1", "0-9-1 spec", "0-9"]


def check_codec(codec: Codec, buf: bytes, offset: int = 0) -> str:
    """decode_frame on `buf` at `offset`: only DecodeErrors escape (anything else propagates and
    fails the caller), an accepted frame re-checks, its fields render as the CLI renders them,
    and bytes and bytearray give the same answer. Returns what happened, for statistics."""
    outcomes = []
    for view in (bytes(buf), bytearray(buf)):
        try:
            frame, next_offset = codec.decode_frame(view, offset)
        except DecodeError as error:
            _check_error(codec, buf, offset, error)
            outcomes.append((error.kind, error.frame_end))
            continue
        _check_frame(codec, buf, offset, frame, next_offset)
        outcomes.append((frame.kind, next_offset))
    if outcomes[0] != outcomes[1]:
        raise AssertionError(f"bytes and bytearray decode differently: {outcomes}")
    return outcomes[0][0]


def _check_error(codec: Codec, buf: bytes, offset: int, error: DecodeError) -> None:
    if not isinstance(error.detail, str):
        raise AssertionError(f"{error!r} has no text detail")
    if error.frame_end is not None:  # inside a well-framed payload: the next frame starts there
        frame_type, channel, size = struct.unpack_from(">BHI", buf, offset)
        if error.frame_end != offset + 8 + size or buf[error.frame_end - 1] != codec.frame_end:
            raise AssertionError(f"{error}: frame_end {error.frame_end} is not after the frame at {offset} "
                                 f"of {size} payload bytes")
        if error.channel != channel:
            raise AssertionError(f"{error}: channel {error.channel}, the frame's is {channel}")


def _check_frame(codec: Codec, buf: bytes, offset: int, frame, next_offset: int) -> None:
    frame_type, channel, size = struct.unpack_from(">BHI", buf, offset)
    if next_offset != offset + 8 + size or buf[next_offset - 1] != codec.frame_end:
        raise AssertionError(f"accepted a frame ending at {next_offset}, but its header says {size} payload "
                             f"bytes from {offset} (frame-end {buf[min(next_offset, len(buf)) - 1]:#04x})")
    if frame.channel != channel:
        raise AssertionError(f"frame on channel {frame.channel}, the header says {channel}")
    kind = codec.frame_types[frame_type]
    expected = {"method": MethodFrame, "header": ContentHeader, "body": ContentBody,
                "heartbeat": Heartbeat}.get(kind, OtherFrame)
    if not isinstance(frame, expected):
        raise AssertionError(f"a {kind} frame decoded as {type(frame).__name__}")
    record = {"ts": 1.7e9, "ts_ns": 1_700_000_000_000_000_000, "ts_last_ns": 1_700_000_000_000_000_000,
              "capture": "fuzz", "pcap_record": 1, "pcap_record_last": 1, "tcp_stream": 0, "connection": "0" * 16,
              "client": "10.0.0.1:40000", "server": "10.0.0.2:5672",
              "dir": "C>S", "channel": channel, "kind": frame.kind, "offset": 0, "size": size + 8}
    if isinstance(frame, MethodFrame):
        if frame.size != size or not isinstance(frame.args, dict):
            raise AssertionError(f"method frame size {frame.size} for {size} payload bytes")
        record.update(method=frame.name, class_id=frame.method.class_id, method_id=frame.method.method_id,
                      args=frame.args)
        if frame.method.content:  # the stream layer adds the content's summary
            record["message"] = {"body_size": None, "body_received": 0, "body_frames": 0, "complete": False,
                                 "body_sha256": None, "properties": None}
        if frame.name == "connection.start-ok" and "response" in frame.args and frame.args["response"] != "<redacted>":
            raise AssertionError("a start-ok response left unredacted")
    elif isinstance(frame, ContentHeader):
        if frame.size != size or not isinstance(frame.properties, dict):
            raise AssertionError(f"content header size {frame.size} for {size} payload bytes")
        record.update({"class": frame.class_name, "class_id": frame.class_id, "weight": frame.weight,
                       "body_size": frame.body_size, "property_flags": list(frame.property_flags),
                       "properties": frame.properties})
    elif isinstance(frame, ContentBody):
        if bytes(frame.payload) != bytes(buf[offset + 7:next_offset - 1]):
            raise AssertionError("body payload is not the frame's payload bytes")
        record["body_frame_size"] = size
    elif isinstance(frame, OtherFrame):
        return
    for warning in getattr(frame, "warnings", ()):
        if not isinstance(warning, DecodeError):
            raise AssertionError(f"a warning that is no DecodeError: {warning!r}")
    render(record)


def render(record: dict, bodies: bool = False) -> None:
    """The record through the contract and the CLI's renderers. Every record must render: a field
    table too deep for orjson (F1) is malformed."""
    oracles.check_record(record, RENDER, bodies)


# -- 2. the stream decoder (whole captures through CaptureDecoder) ------------------------------------

SETTINGS = {
    "default": Settings(),
    "bodies": from_data({"bodies": {"capture": True, "cap_bytes": 64}}),
    "spec-dialect": from_data({"decode": {"field_table_dialect": "spec"}}),
    "small-limits": from_data({"decode": {"max_frame_bytes": 4096, "resync_max_frame_bytes": 2048,
                                          "pending_records": 8},
                               "reassembly": {"window_bytes": 3000, "close_grace_seconds": 0}}),
}

_TMP = tempfile.mkdtemp(prefix="amqpcap-fuzz-")
# Removed when the interpreter exits; a process ended by libFuzzer skips this, so the atheris test
# points TMPDIR at its own temporary directory.
atexit.register(shutil.rmtree, _TMP, ignore_errors=True)


def decode_capture(data: bytes, settings: str = "default", name: str = "mutant.pcap", keys=None) -> tuple[list, object]:
    """All records of a capture (written to a file: CaptureDecoder reads paths) and the stats;
    every record checked against the contract and rendered, every connection's bytes accounted.
    `keys`: a TLS key log (amqpcap.tls.keylog.KeyLog)."""
    path = os.path.join(_TMP, f"{os.getpid()}-{name}")
    with open(path, "wb") as f:
        f.write(data)
    decoder = CaptureDecoder(SETTINGS[settings], collect_connections=True, keys=keys)
    records = list(decoder.decode([path]))
    bodies = SETTINGS[settings].bodies.capture
    for record in records:
        render(record, bodies)
    oracles.check_accounting(records, decoder.stats.connection_summaries)
    for record in records:
        if record["kind"] == "issue" and record["issue_kind"] in CAPTURE_ISSUES:
            if record["capture"] != path:
                raise ContractError(f"a capture-file issue names {record['capture']!r}, not the file")
    return records, decoder.stats


def safe_frames(original: list[dict], cut: dict | None, unsure: set = frozenset()) -> Counter:
    """The original's frames that a mutation cannot have touched: per direction (sender,
    receiver) those ending at or before `cut[direction]` (None: the whole direction). In a
    direction that needed resynchronisation (or started mid-stream: `unsure`, directions whose
    SYN was not captured) a frame counts only if the frame after it (which confirmed it) does too."""
    by_direction: dict = {}
    resynced = set(unsure)
    for record in original:
        if record["kind"] in oracles.FRAME_KINDS:
            by_direction.setdefault(oracles.sender(record), []).append(record)
        elif record["kind"] == "issue" and record["connection"] is not None and \
                record["issue_kind"] in ("resync", "gap", "framing", "retransmission-conflict"):
            resynced.add(oracles.sender(record))
    safe = Counter()
    for key, records in by_direction.items():
        limit = None if cut is None else cut.get(key, 0)
        records.sort(key=lambda r: r["offset"])
        for i, record in enumerate(records):
            end = record["offset"] + record["size"]
            if limit is not None:
                if end > limit:
                    continue
                if key in resynced and (i + 1 >= len(records) or
                                        records[i + 1]["offset"] + records[i + 1]["size"] > limit):
                    continue
            safe[oracles.frame_identity(record)] += 1
    return safe


def check_superset(original: list[dict], mutant: list[dict], cut: dict | None, what: str,
                   unsure: set = frozenset()) -> None:
    lost = oracles.missing(safe_frames(original, cut, unsure), oracles.frames(mutant))
    if lost:
        raise AssertionError(f"{what}: {len(lost)} frames the mutation cannot have touched were not decoded, "
                             f"first {lost[:3]}")


def check_expected_issues(records: list[dict], expect: list, what: str) -> None:
    """`expect`: (sender, receiver, issue kind, stream offset or None). A `framing` issue expected
    at a frame may also be a `resync` that skipped it (a direction that started mid-stream is
    still looking for frames there)."""
    for src, dst, kind, offset in expect:
        def matches(r):
            if r["kind"] != "issue" or r["connection"] is None or oracles.sender(r) != (src, dst):
                return False
            if r["issue_kind"] == kind and (offset is None or r["offset"] == offset):
                return True
            return kind == "framing" and r["issue_kind"] == "resync" and \
                r["offset"] <= offset < r["offset"] + r["size"]
        if not any(matches(r) for r in records):
            raise AssertionError(f"{what}: no {kind} issue reported for {src} > {dst}"
                                 + (f" at {offset}" if offset is not None else ""))


def without_syn(segments: list) -> set:
    """(sender, receiver) of the directions whose SYN is not among `segments`."""
    keys = {(_endpoint(s.src), _endpoint(s.dst)) for s in segments}
    return keys - {(_endpoint(s.src), _endpoint(s.dst)) for s in segments if s.flags & 0x02}


def prefix_cut(segments: list, intact: int) -> dict:
    """Per direction: the stream bytes the first `intact` capture records delivered in order."""
    cut: dict = {}
    pieces: dict = {}
    for s in segments:
        key = (_endpoint(s.src), _endpoint(s.dst))
        cut.setdefault(key, 0)
        if s.payload and s.record < intact:
            pieces.setdefault(key, []).append((s.offset, s.offset + len(s.payload)))
    for key, ranges in pieces.items():
        reached = 0
        for start, end in sorted(ranges):
            if start > reached:
                break
            reached = max(reached, end)
        cut[key] = reached
    return cut


def _endpoint(address) -> str:
    from tests.fuzz.mutators import endpoint
    return endpoint(address)


# -- 3. the capture reader -------------------------------------------------------------------------

def read_capture(data: bytes, start: int = 0, end: int | None = None) -> tuple[list, CaptureInfo]:
    """Records and info of `data` (CaptureError may come only before the first record)."""
    info = CaptureInfo("mutant", len(data))
    records = []
    iterator = read_records("mutant", info, io.BytesIO(data), start=start, end=end)
    try:
        records.append(next(iterator))
    except StopIteration:
        return records, info
    for record in iterator:  # a CaptureError here would escape CaptureDecoder (it opens with next())
        records.append(record)
    return records, info


def check_reader(data: bytes, keep: list = (), well_formed: bool = False, what: str = "", ranges=()) -> tuple:
    """`keep`: (end offset, record) of the records that must be read."""
    """The reader on `data`: no exception but CaptureError (and that one only before the first
    record); a clean read is exactly what the file literally holds; damage is reported; the
    records in `keep` are read (in order); the info adds up; byte ranges read as the whole."""
    naive = parse_capture(data)
    try:
        records, info = read_capture(data)
    except CaptureError:
        if naive is not None:
            raise AssertionError(f"{what}: a well-formed capture raised CaptureError")
        return None, None
    if info.ok:
        if naive is None:
            raise AssertionError(f"{what}: a capture that is not well formed read clean "
                                 f"({len(records)} records)")
        if records != naive.records:
            first = next((i for i, (a, b) in enumerate(zip(records, naive.records)) if a != b),
                         min(len(records), len(naive.records)))
            raise AssertionError(f"{what}: read clean, but record {first} (of {len(records)}; the file holds "
                                 f"{len(naive.records)}) is not what the file holds")
    elif well_formed:
        raise AssertionError(f"{what}: a well-formed capture read with issues {info.issues}")
    if keep and not info.ok:  # (a clean read is what the file literally holds: checked above)
        missed = _not_kept(records, [record for _, record in keep])
        if missed is not None and not _short_run(data, keep, missed, info) \
                and not _time_judged(keep[missed], info):
            raise AssertionError(f"{what}: record {missed} of the {len(keep)} the mutation cannot have touched "
                                 f"was not read (read {len(records)}, issues {info.issues})")
    _check_info(records, info, data, what)
    for start, end in ranges:
        _check_ranges(data, records, info, start, end, what)
    return records, info


def _short_run(data: bytes, keep: list, missed: int, info: CaptureInfo) -> bool:
    """Documented, not a finding: after damage, reading resumes only at a boundary that a chain
    of CHAIN (4) records or blocks confirms, or one that ends exactly at the end of the file
    (boundaries.py). Untouched records in a shorter run between two damaged places (or between
    damage and a cut tail) may be skipped with the damage; the run read from the file's start
    needs no such confirmation."""
    from amqpcap.capture.readers.boundaries import CHAIN
    plain = oracles.gunzip_prefix(data) if data[:2] == b"\x1f\x8b" else data
    pcapng = plain[:4] == oracles.PCAPNG_MAGIC

    def start_of(end: int, record: tuple) -> int:
        if pcapng:
            order = "<" if plain[8:12] == b"\x4d\x3c\x2b\x1a" else ">"
            return end - struct.unpack_from(order + "I", plain, end - 4)[0]
        return end - 16 - len(record[2])
    starts = [start_of(end, record) for end, record in keep]
    first = last = missed
    while first > 0 and keep[first - 1][0] == starts[first]:
        first -= 1
    while last + 1 < len(keep) and keep[last][0] == starts[last + 1]:
        last += 1
    # read in sequence from the file's start, with no damage before it (pcap damage shows only
    # where the reader notices it, possibly records later: there, only the first record counts)
    if pcapng:
        from_the_start = all(issue.offset is None or issue.offset >= starts[first] for issue in info.issues)
    else:
        from_the_start = starts[first] == 24
    return last - first + 1 < CHAIN and keep[last][0] != len(plain) and not from_the_start


def _time_judged(kept: tuple, info: CaptureInfo) -> bool:
    """Documented, not a finding: a pcap record's time is judged by its neighbours', so an
    untouched record next to records of another day (a splice, a moved or duplicated record) can
    be the one taken for damaged and skipped."""
    end = kept[0]
    return any(issue.kind == "damaged-record-header" and "time jumps" in issue.detail
               and issue.offset < end <= issue.end_offset for issue in info.issues)


def _not_kept(records: list, keep: list) -> int | None:
    remaining = iter(records)
    for i, record in enumerate(keep):
        if not any(record == candidate for candidate in remaining):
            return i
    return None


def _check_info(records: list, info: CaptureInfo, data: bytes, what: str) -> None:
    if info.records != len(records) or info.bytes != sum(len(r[2]) for r in records):
        raise AssertionError(f"{what}: info counts {info.records} records, {info.bytes} bytes; read "
                             f"{len(records)}, {sum(len(r[2]) for r in records)}")
    if records and (info.first_ts_ns, info.last_ts_ns) != (records[0][0], records[-1][0]):
        raise AssertionError(f"{what}: info times {info.first_ts_ns}..{info.last_ts_ns} are not the records'")
    for issue in info.issues:
        if issue.kind not in CAPTURE_ISSUES or issue.bytes_skipped < 0 or not 0 <= issue.record <= len(records):
            raise AssertionError(f"{what}: malformed issue {issue}")
        if issue.offset is not None and issue.end_offset is not None and issue.end_offset < issue.offset:
            raise AssertionError(f"{what}: issue ends before it starts {issue}")
        if issue.offset is not None and issue.kind != "gzip-damaged" and data[:2] != b"\x1f\x8b" \
                and issue.end_offset > len(data):
            raise AssertionError(f"{what}: issue past the end of the file {issue}")
    if data[:4] in oracles.PCAP_MAGICS:  # pcap: every byte is in a record, a header or skipped
        concatenated = sum(1 for i in info.issues if i.kind == "concatenated-capture")
        covered = 24 * (1 + concatenated) + sum(16 + len(r[2]) for r in records) + \
            sum(i.bytes_skipped for i in info.issues)
        if covered != len(data):
            raise AssertionError(f"{what}: records, headers and skipped bytes add up to {covered} of the file's "
                                 f"{len(data)} bytes (issues {info.issues})")


def _check_ranges(data: bytes, records: list, info: CaptureInfo, start: int, end: int, what: str) -> None:
    """Reading [0, start) and [start, end) and [end, EOF) gives the whole read's records and issues."""
    if data[:2] == b"\x1f\x8b":
        return
    points = sorted({0, start, end, len(data)})
    merged = CaptureInfo("mutant", len(data))
    parts = []
    for a, b in zip(points, points[1:]):
        part_records, part_info = read_capture(data, a, b if b < len(data) else None)
        parts += part_records
        merged.merge(part_info)
    if any(i.kind == "inconsistent-ranges" for i in merged.issues):
        return  # the ranges disagree, and say so: "read this file whole" (documented)
    if parts != records:
        raise AssertionError(f"{what}: ranges cut at {points} read {len(parts)} records, the whole file "
                             f"{len(records)}")
    whole = [(i.kind, i.offset, i.end_offset, i.bytes_skipped, i.record) for i in info.issues]
    split = [(i.kind, i.offset, i.end_offset, i.bytes_skipped, i.record) for i in merged.issues]
    if whole != split:
        raise AssertionError(f"{what}: ranges cut at {points} report {split}, the whole file {whole}")
