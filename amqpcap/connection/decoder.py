"""Capture files in, AMQP frame records out: the library path the CLI and the Spark tasks share.

    decoder = CaptureDecoder(Settings())
    for record in decoder.decode(["a.pcap", "b.pcapng"]):
        ...
    decoder.stats   # per-file info, packets, connections, frames, issues

Several files are merged by packet time, so rotated captures of one connection stitch into one
stream. A file that cannot be read is recorded as failed and the others still decode.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections import Counter
from typing import Iterable, Iterator

import msgspec
from msgspec import field

from amqpcap.capture.inputs import expand_inputs
from amqpcap.capture.packets import PacketParser, format_endpoint, pair_key
from amqpcap.capture.readers import CaptureError, CaptureInfo, read_records
from amqpcap.capture.stream_index import FileStreams
from amqpcap.capture.tcp import TcpConnection, TcpTracker
from amqpcap.capture.timeline import merge_by_time
from amqpcap.connection.options import StreamOptions
from amqpcap.connection.record import CAPTURE_ISSUE, CONNECTION_END, Record, new_record
from amqpcap.connection.stream import AmqpConnection
from amqpcap.protocol.codec import Codec
from amqpcap.protocol.spec import BUNDLED, load_spec
from amqpcap.settings import Settings
from amqpcap.tls.keylog import KeyLog, read_key_logs


class DecodeStats(msgspec.Struct, dict=True):  # (a Struct: made in C at import, amqpcap.protocol.spec says why)
    captures: list[CaptureInfo] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # path -> reason
    packets: int = 0
    tcp_segments: int = 0
    skipped_packets: Counter = field(default_factory=Counter)
    connections: Counter = field(default_factory=Counter)  # status -> count
    ignored_bytes: int = 0  # TCP payload of connections that are not AMQP (or are TLS)
    connection_summaries: list[dict] = field(default_factory=list)  # AmqpConnection.summary()
    records: Counter = field(default_factory=Counter)  # kind -> count
    issues: Counter = field(default_factory=Counter)  # issue_kind -> count
    bytes_skipped: int = 0

    def frames(self) -> int:
        """The AMQP frames decoded: every record but issues and protocol headers."""
        return sum(n for kind, n in self.records.items() if kind not in ("issue", "protocol-header"))


def connection_id(a: str, b: str, first_ts_ns: int) -> str:
    """Stable across reruns and independent of which side is the client."""
    return hashlib.blake2b(f"{pair_key(a, b)}|{first_ts_ns}".encode(), digest_size=8).hexdigest()


@functools.lru_cache(maxsize=8)
def codecs_for(specs: tuple[tuple[str, str], ...], dialect: str) -> dict[str, Codec]:
    """One codec per protocol version, built once per process: compiling a spec's decoders costs
    tens of milliseconds, and the Spark job starts a SegmentDecoder per connection."""
    chosen = dict(specs)
    codecs = {version: Codec(load_spec(chosen.get(version, version)), dialect) for version in BUNDLED}
    for version, path in chosen.items():
        if version not in codecs:
            codecs[version] = Codec(load_spec(path), dialect)
    return codecs


# CaptureDecoder.batches: records per batch, gathered from as many packets as they take, and the
# packet time a batch may span at most (live input keeps showing as its time passes)
BATCH_RECORDS = 256
BATCH_NS = 1_000_000_000


class SegmentDecoder:
    """TCP segments in (any order a capture gives them), AMQP records out: the part of the path
    after packet parsing, shared by CaptureDecoder and the Spark job (which feeds it segments
    grouped by connection)."""

    def __init__(self, settings: Settings, capture_names: list[str],
                 on_connection_end=None, resumable: bool = False, fold_content: bool = False,
                 keys: KeyLog | None = None) -> None:
        """`keys`: the TLS key log (the job's tasks get the driver's; none: TLS is accounted, not
        decrypted)."""
        self.settings = settings
        self.options = StreamOptions(settings, resumable, fold_content, keys)
        self.codecs = codecs_for(tuple(sorted(settings.decode.specs.items())), settings.decode.field_table_dialect)
        self.capture_names = capture_names
        self.on_connection_end = on_connection_end
        self.out: list[Record] = []
        self.tracker = TcpTracker(self._new_connection, settings.reassembly.window_bytes,
                                  int(settings.reassembly.close_grace_seconds * 1e9))

    def _new_connection(self, tcp: TcpConnection) -> AmqpConnection:
        a, b = format_endpoint(*tcp.a), format_endpoint(*tcp.b)
        return AmqpConnection(tcp, connection_id(a, b, tcp.first_ts_ns), self.codecs, self.options,
                              self.out, self.capture_names, on_end=self.on_connection_end, endpoints=(a, b))

    def feed(self, segment, capture_index: int) -> list[Record]:
        """Records completed by this segment (often none)."""
        self.tracker.segment(segment, capture_index)
        return self._take() if self.out else []

    def finish(self) -> list[Record]:
        """End of input: every open connection ends; the records that completes."""
        self.tracker.finish()
        return self._take()

    def earliest_pending(self, low: int) -> int:
        """The earliest time a record still to come from the connections open can carry, if
        before `low` (the time of the packet being decoded: later packets are no earlier)."""
        for tcp in self.tracker.each_connection():
            low = tcp.sink.earliest_pending(low)
        return low

    def _take(self) -> list[Record]:
        records, self.out[:] = self.out[:], []
        return records


class CaptureDecoder:
    def __init__(self, settings: Settings | None = None,
                 collect_connections: bool = False, fold_content: bool = False, keys: KeyLog | None = None) -> None:
        """`collect_connections` keeps one summary per AMQP connection in stats (byte accounting,
        end reason...); off by default so memory does not grow with the number of connections.
        `fold_content`: content header and body frames make no records, their method's `message`
        tells of them (amqpcap.connection.options.StreamOptions); stats still count them by kind.
        `keys`: the TLS key log; by default the one settings.decode.tls_keylogs names, read here (a
        key log that cannot be read raises amqpcap.tls.keylog.KeyLogError)."""
        self.settings = settings if settings is not None else Settings()
        self.keys = keys if keys is not None else read_key_logs(self.settings.decode.tls_keylogs)
        self.collect_connections = collect_connections
        self.fold_content = fold_content
        self.stats = DecodeStats()
        self._kinds: dict[str, int] = {}  # records by kind (a plain dict is cheaper per record)
        self._ends = False
        # While decode() runs, for consumers that look at the decoder between records (the time
        # order of amqpcap decode): the time of the packet being decoded, and the SegmentDecoder.
        self.now_ns: int | None = None
        self.segments: SegmentDecoder | None = None

    def decode(self, inputs: Iterable[str], ends: bool = False) -> Iterator[Record]:
        """Records of every connection in the inputs. `ends`: also each connection's
        CONNECTION_END record (its summary), after its last record."""
        for records in self.batches(inputs, ends):
            yield from records

    def batches(self, inputs: Iterable[str], ends: bool = False) -> Iterator[list[Record]]:
        """decode()'s records, in lists completed by consecutive packets (PacketFeed says how many),
        then by the end of input. Between two lists, `now_ns` is the time of the last packet
        decoded, which completed the list (and ended its connections, if the list ends any), and
        `segments` holds exactly the state the records still to come are made from."""
        self._ends = ends
        paths = expand_inputs(inputs)
        parser = PacketParser()
        stats = self.stats
        segments = self.segments = SegmentDecoder(self.settings, paths, on_connection_end=self._count_connection,
                                                  fold_content=self.fold_content, keys=self.keys)
        infos: dict[int, CaptureInfo] = {}
        reported = [0] * len(paths)  # capture issues already emitted, per file
        feed = PacketFeed(parser, segments, infos, reported)
        try:
            opened = self._open(paths, infos)
            if len(opened) == 1:
                runs = feed.run_file(*opened[0])
            else:  # rotated or parallel captures: one timeline
                runs = feed.run(merge_by_time(_tagged(first, records, index) for index, first, records in opened))
            for records in runs:
                self.now_ns = feed.ts_ns
                stats.packets, stats.tcp_segments = feed.packets, feed.tcp_segments
                yield self._count(records)
        finally:
            stats.packets, stats.tcp_segments = feed.packets, feed.tcp_segments
        if feed.packets:  # the last packet, whether it completed records or not
            self.now_ns = feed.ts_ns
        parser.finish()
        for index, info in infos.items():
            info.time_issues(info.last_ts_ns, reported[index])  # damage at the file's end
            issues = capture_issues(info, reported, index)
            if issues:
                yield self._count(issues)
        records = self._count(segments.finish())
        if records:
            yield records
        stats.skipped_packets.update(parser.skipped)
        stats.records.update(self._kinds)

    def earliest_pending(self) -> int | None:
        """The earliest ts_ns a record still to come can carry (None: no packet read yet): what a
        time order of the records may release up to (amqpcap decode's views)."""
        if self.now_ns is None or self.segments is None:
            return None
        return self.segments.earliest_pending(self.now_ns)

    def open_connections(self) -> int:
        """How many connections are held open (what a look at each of them costs)."""
        return len(self.segments.tracker.connections) // 2 if self.segments is not None else 0

    def _count(self, records: list[Record]) -> list[Record]:
        ended = count_kinds(records, self._kinds, self.stats)
        if ended and not self._ends:
            return [r for r in records if r.kind != CONNECTION_END]
        return records

    def _count_connection(self, connection: AmqpConnection) -> None:
        self.stats.connections[connection.speaks()] += 1
        self.stats.ignored_bytes += connection.ignored_bytes
        if connection.headers_folded or connection.bodies_folded:  # counted as if they had made records
            kinds = self._kinds
            kinds["header"] = kinds.get("header", 0) + connection.headers_folded
            kinds["body"] = kinds.get("body", 0) + connection.bodies_folded
        if (connection.status == "amqp" or connection.tls is not None) and self.collect_connections:
            self.stats.connection_summaries.append(connection.summary())

    def _open(self, paths: list[str], infos: dict) -> list[tuple]:
        """(file index, first record, the records after it) of every file that opens as a capture
        (a record: (ts_ns, link type, bytes)); a file that does not is recorded as failed."""
        opened = []
        for index, path in enumerate(paths):
            info = infos[index] = CaptureInfo(path, _size(path))
            try:
                records = read_records(path, info)
                first = next(records, None)  # opens the file: a bad one fails here
            except CaptureError as error:
                self.stats.failed[path] = error.reason
                continue
            self.stats.captures.append(info)
            if first is not None:
                opened.append((index, first, records))
        return opened


def count_kinds(records: list[Record], counts: dict[str, int], stats: DecodeStats) -> bool:
    """Adds `records` to `counts` by kind (their issues to `stats`, by issue kind and bytes skipped),
    a connection's end record aside: whether one was there. (A function, so that compiled its
    dictionaries and records are typed: every record of `amqpcap decode` passes it. The three
    kinds most records are, counted in C integers, go to `counts` once per call.)"""
    ended = False
    methods = headers = bodies = 0
    for record in records:
        kind = record.kind
        if kind == "method":
            methods += 1
        elif kind == "body":
            bodies += 1
        elif kind == "header":
            headers += 1
        elif kind == CONNECTION_END:
            ended = True
        else:
            if kind == "issue":
                stats.issues[record.issue_kind] += 1
                stats.bytes_skipped += record.bytes_skipped
            counts[kind] = counts.get(kind, 0) + 1
    if methods:
        counts["method"] = counts.get("method", 0) + methods
    if headers:
        counts["header"] = counts.get("header", 0) + headers
    if bodies:
        counts["body"] = counts.get("body", 0) + bodies
    return ended


def capture_issues(info: CaptureInfo, reported: list[int] | None = None, index: int = 0) -> list[Record]:
    """Damage to the capture file itself, as issue records (not tied to a connection), timed as
    CaptureInfo.time_issues timed them: by the packet read right after it (or the file's last).
    `reported`: per file, the issues already made records of (None: all of the file's). The one
    way to make them: `amqpcap decode` and the job's driver (amqpcap.job.nightly) both."""
    new = info.issues[reported[index]:] if reported is not None else info.issues
    if reported is not None:
        reported[index] = len(info.issues)
    records = []
    for issue in new:
        ts = issue.ts_ns
        record = new_record("issue", ts, ts, info.path, None, None, None, None, None, None, None, None, None, 0)
        record.issue_kind = issue.kind
        record.detail = issue.detail
        record.bytes_skipped = issue.bytes_skipped
        record.file_offset = issue.offset
        record.file_end_offset = issue.end_offset
        record.shape = CAPTURE_ISSUE
        records.append(record)
    return records


class PacketFeed:
    """CaptureDecoder's work per packet, from its bytes to the records it completes: parsing, the
    file's TCP stream number (Wireshark's tcp.stream), reassembly and decoding.

        feed = PacketFeed(parser, segments, infos, reported)
        for records in feed.run(packets):  # packets: (ts_ns, file index, record number, link type, bytes)
            ...  # feed.ts_ns: the time of the packet that completed the last of them (of the last
                 # packet, once feed.packets > 0)

    Records come in batches completed by consecutive packets (`BATCH_RECORDS`, at most `BATCH_NS`
    of packet time): what consumes them pays its calls per batch, and a batch per packet held two
    records on average. A batch ends at a packet that ended a connection, so that `ts_ns` after it
    is when the connection ended (the CLI times a port reuse's end by it).

    `infos`: file index -> its CaptureInfo, as the readers fill them in; `reported`: per file, its
    issues already turned into records. Damage a file's reader has found since comes as issue
    records (capture_issues), ahead of the packet's own.
    A class, so that compiled the steps are C calls on typed fields: as a loop over a generator's
    Python locals, looking up and calling each by name cost about a tenth of the decoder's time."""

    def __init__(self, parser: PacketParser, segments: SegmentDecoder, infos: dict, reported: list[int]) -> None:
        self.parser = parser
        self.segments = segments
        self.infos = infos
        self.reported = reported
        self.streams = [FileStreams() for _ in reported]
        self.packets = 0
        self.tcp_segments = 0
        self.ts_ns = 0
        self.held: list[Record] = []  # the records of the batch being gathered
        self.held_since = 0  # the time of the packet that began it
        self.ended = 0  # connections the tracker had ended when the last batch was taken

    def run(self, packets) -> Iterator[list[Record]]:
        """Packets of several files: (ts_ns, file index, record number in the file, link type, bytes)."""
        for ts_ns, index, number, link_type, data in packets:
            if self.packet(ts_ns, index, number, link_type, data):
                yield self.take()
        if self.held:
            yield self.take()

    def run_file(self, index: int, first: tuple, rest) -> Iterator[list[Record]]:
        """The packets of one file, numbered here: its first record, then the records after it."""
        ts_ns, link_type, data = first
        if self.packet(ts_ns, index, 1, link_type, data):
            yield self.take()
        number = 1
        for ts_ns, link_type, data in rest:
            number += 1
            if self.packet(ts_ns, index, number, link_type, data):
                yield self.take()
        if self.held:
            yield self.take()

    def packet(self, ts_ns: int, index: int, number: int, link_type: int, data: bytes) -> bool:
        """Decodes a packet, holding the records it completes: whether the batch is due (`take`)."""
        self.packets += 1
        self.ts_ns = ts_ns
        held = self.held
        if not held:
            self.held_since = ts_ns
        if len(self.infos[index].issues) > self.reported[index]:  # the file was damaged just before
            self.infos[index].time_issues(ts_ns, self.reported[index])
            held += capture_issues(self.infos[index], self.reported, index)
        segment = self.parser.parse(ts_ns, link_type, data)
        if segment is not None:
            self.tcp_segments += 1
            segment.record = number
            streams = self.streams[index]
            segment.stream = streams.segment(segment.src, segment.sport, segment.dst, segment.dport,
                                             segment.flags, segment.seq, ts_ns)
            records = self.segments.feed(segment, index)
            if records:
                held += records
        return len(held) > 0 and (len(held) >= BATCH_RECORDS or ts_ns - self.held_since >= BATCH_NS
                                  or self.segments.tracker.ended != self.ended)

    def take(self) -> list[Record]:
        """The batch gathered; the next one starts."""
        records = self.held
        self.held = []
        self.ended = self.segments.tracker.ended
        return records


def _tagged(first, records, index: int) -> Iterator[tuple[int, int, int, int, bytes]]:
    ts_ns, link_type, data = first
    yield ts_ns, index, 1, link_type, data
    number = 1
    for ts_ns, link_type, data in records:
        number += 1
        yield ts_ns, index, number, link_type, data


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
