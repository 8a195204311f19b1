"""Build a realistic nightly capture from the recorded samples: many overlapping connections, varied bodies.

    python bench/synth.py OUT --mb 2000 [--files 16] [--seed 1] [--rate 1.0] [--stretch 4,24] [--shape small]

Sources: the real recordings in data/samples/ (Ethernet pcap and pcap.gz; not crafted/, not
heartbeats.pcap, whose mix is almost only heartbeats). Two nights (--shape):

- `mixed` (the default, the benchmarks' first night): every sample but steady_small_frames. Most of
  its bytes are large bodies (large_and_pipelined, long_connection), on which tshark is fast.
- `small`: a broker's steady traffic, mostly small frames, on which every per-frame cost shows: the
  samples whose frame bytes are mostly in frames under 1 kB (steady_small_frames, a long publisher
  with confirms and a consumer acking, is most of them; acks, multiple acks, confirms, small
  publishes and deliveries, heartbeats and a few 40 kB bodies; SMALL_WEIGHT copies of it per
  round, so that it is most of the bytes and the short connections of the others sit beside it),
  and none of the large-body ones.

Each sample is decoded once with the project's
decoder into a template: its packets, the client address of every packet, and where every content
body frame's payload lies in those packets (the decoder's `body` records give the frame's stream
offset and size; TCP segments are placed on the same stream offsets by feeding them through the
decoder's own TCP reassembly, so its notion of offset 0 is mirrored exactly).

The output is one continuous timeline of copies of the samples (every sample once per round, rounds
in a seeded random order, until --mb is reached; whole copies only, so every connection starts and
ends inside the output). Over a window of (size / --rate MB/s) seconds each copy starts at a seeded
random time and keeps its own packet timing, except the long samples (long_connection, ~25 s), whose
times are stretched by a random factor in --stretch (to minutes; within 80% of the window), so a busy
broker's tens to hundreds of concurrent connections overlap and long connections span many files.
Every connection of the output has its own client 4-tuple: client ports 32768-60999 (Linux's
ephemeral range, so never an AMQP or TLS port) in turn, then the next client IP (127.0.0.1,
127.0.0.2, ...); the IPv4 header checksum is updated, TCP checksums are not (neither decoder checks
them).

Message contents vary: in every copy the payload of every body frame (never frame headers,
frame-end octets, methods or content headers) is replaced with JSON-like text that gzips about 2x.
A body's new bytes are a function of (copy, the original body, position in the body): retransmitted
segments get the same bytes as the first copy; a delivery carries the same new body as its publish
(message_flows can still pair them by body); and every body starts with 8 base-62 digits of a hash
of (copy, message), so body SHA-256s differ between copies and between a copy's distinct messages,
short bodies included.

--files N writes N files rotated by size like `tcpdump -C` (each a pcap with its own header,
records never split), OUT/part-000.pcap ...; --files 1 writes the single file OUT. The same --seed
gives the same bytes, and the N files concatenated record-wise equal the single file.
Timestamps: nanosecond pcap, from 2026-11-21 01:00 UTC.
"""

from __future__ import annotations

import argparse
import base64
import bisect
import random
import struct
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from amqpcap.capture.packets import TCP_SYN, PacketParser, format_endpoint  # noqa: E402
from amqpcap.capture.readers import read_records  # noqa: E402
from amqpcap.connection.decoder import SegmentDecoder  # noqa: E402
from amqpcap.settings import Settings  # noqa: E402

SAMPLES = ROOT / "data" / "samples"
EXCLUDED = {"heartbeats.pcap"}  # almost only heartbeats
SHAPES = ("mixed", "small")
SMALL_SAMPLE = "steady_small_frames.pcap"  # the small night's own: not in the mixed one (which it would change)
SMALL_FRAME = 1000  # bytes: a small frame is shorter
SMALL_WEIGHT = 4  # copies of SMALL_SAMPLE per round of the small night (the others: one each)
AMQP_PORT = 5672
ETHERNET, IP_OFFSET = 1, 14
LONG_NS = 20 * 10**9  # samples at least this long are stretched
START_NS = int(datetime(2026, 11, 21, 1, tzinfo=timezone.utc).timestamp()) * 10**9
FIRST_PORT, PORTS = 32768, 61000 - 32768  # client ports per client IP: Linux's ephemeral range
FIRST_CLIENT_IP = 0x7F000001  # 127.0.0.1
VERSION = 2  # of the output for the same arguments (job_bench regenerates kept captures of another)
TAG = 8  # base-62 digits of a hash of (copy, message) at the start of every body
DIGITS = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
POOL_BYTES = 8 << 20
PCAP_HEADER = struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, ETHERNET)  # nanosecond pcap
RECORD = struct.Struct("<IIII")
MASK64 = (1 << 64) - 1


@dataclass
class Template:
    """One sample, ready to copy."""
    name: str
    packets: list[bytes]
    ts: np.ndarray  # ns from the first packet, non-decreasing
    client: list[tuple[int, int, int] | None]  # per packet: (connection, client IP field, client port field)
    patches: list[tuple[tuple[int, int, int, int], ...]]  # per packet: (start, length, message, position)
    client_ips: list[int] = field(default_factory=list)  # per connection: its original client IP
    spans: list[tuple[int, int]] = field(default_factory=list)  # per connection: first, last packet ns
    messages: int = 0
    body_bytes: int = 0
    max_body: int = 0
    issues: Counter = field(default_factory=Counter)  # the sample's own decode issues, by kind
    contents: Counter = field(default_factory=Counter)  # content methods by `complete`
    frames: int = 0  # AMQP frames (methods, content headers and bodies, heartbeats)
    small_share: float = 0.0  # of the frames' bytes, the share in frames under SMALL_FRAME bytes

    @property
    def size(self) -> int:
        return sum(16 + len(p) for p in self.packets)

    @property
    def duration(self) -> int:
        return int(self.ts[-1])


def sample_paths() -> list[Path]:
    """Every sample either night may use."""
    paths = sorted(p for p in SAMPLES.iterdir() if p.name.endswith((".pcap", ".pcap.gz")) and p.name not in EXCLUDED)
    return [p for p in paths if all(link == ETHERNET for _, link, _ in read_records(str(p)))]


def shaped(templates: list["Template"], shape: str) -> list["Template"]:
    """The templates of one night (--shape)."""
    if shape == "mixed":
        return [t for t in templates if t.name != SMALL_SAMPLE]
    if shape == "small":  # (steady traffic most of the bytes, short connections beside it)
        return [t for t in templates if t.small_share >= 0.5 and t.name != SMALL_SAMPLE] \
            + [t for t in templates if t.name == SMALL_SAMPLE] * SMALL_WEIGHT
    raise ValueError(f"no night shaped {shape!r} (one of {', '.join(SHAPES)})")


def load_template(path: Path) -> Template:
    """Decode a sample once: its packets, client fields, and every body payload's place in them."""
    captured = list(read_records(str(path)))
    parser = PacketParser()
    decoder = SegmentDecoder(Settings(), [path.name])
    records: list[dict] = []
    segments = []  # per packet: (connection id, tcp direction, stream offset, payload start, length) or None
    client: list[tuple[int, int, int] | None] = []
    connections: dict[tuple[bytes, int], int] = {}
    client_ips: list[int] = []
    spans: list[list[int]] = []
    first = captured[0][0]
    for ts_ns, _, data in captured:
        segment = parser.parse(ts_ns, ETHERNET, data)
        if segment is None or data[12:14] != b"\x08\x00":
            client.append(None)
            segments.append(None)
            continue
        records += decoder.feed(segment, 0)
        tcp = IP_OFFSET + (data[IP_OFFSET] & 0x0F) * 4
        if segment.dport == AMQP_PORT:
            ends, fields = (segment.src, segment.sport), (IP_OFFSET + 12, tcp)
        else:
            ends, fields = (segment.dst, segment.dport), (IP_OFFSET + 16, tcp + 2)
        if ends not in connections:
            connections[ends] = len(connections)
            client_ips.append(int.from_bytes(ends[0], "big"))
            spans.append([ts_ns - first, ts_ns - first])
        index = connections[ends]
        spans[index][1] = ts_ns - first
        client.append((index, *fields))
        connection = decoder.tracker.connections.get((segment.src, segment.sport, segment.dst, segment.dport))
        if not segment.payload or connection is None:
            segments.append(None)
            continue
        direction = 0 if (segment.src, segment.sport) == connection.a else 1
        seq = (segment.seq + 1) if segment.flags & TCP_SYN else segment.seq
        offset = (seq - connection.halves[direction].base) % (1 << 32)
        offset -= (1 << 32) if offset >= 1 << 31 else 0
        start = tcp + (data[tcp + 12] >> 4) * 4
        assert data[start:start + len(segment.payload)] == segment.payload, path
        segments.append((connection.sink.id, connection.a, direction, offset, start, len(segment.payload)))
    records += decoder.finish()

    # Body payloads per (connection id, client or server), keyed by message: the original body's
    # SHA-256 (a publish and its deliveries share it), else the frame's own place.
    keys: dict[object, int] = {}
    bodies: dict[tuple[str, str], list[tuple[int, int, int, int]]] = {}  # -> [(start, end, message, position)]
    current: dict[tuple[str, str], list] = {}
    body_bytes = max_body = 0
    for record in records:
        where = (record.get("connection"), record.get("dir"))
        kind = record["kind"]
        if kind == "method" and record.get("message"):
            message = record["message"]
            key = message["body_sha256"] or ("incomplete", *where, record["offset"])
            current[where] = [keys.setdefault(key, len(keys)), 0]
            max_body = max(max_body, message["body_size"] or 0)
        elif kind == "body":
            if where not in current:
                current[where] = [keys.setdefault(("orphan", *where, record["offset"]), len(keys)), 0]
            message, position = current[where]
            length = record["size"] - 8
            start = record["offset"] + 7  # after the frame header; the frame-end octet stays
            bodies.setdefault(where, []).append((start, start + length, message, position))
            current[where][1] += length
            body_bytes += length
            max_body = max(max_body, current[where][1])
        elif kind != "header":
            current.pop(where, None)
    client_of = {r["connection"]: r["client"] for r in records if r.get("client")}
    for ranges in bodies.values():
        ranges.sort()

    patches: list[tuple[tuple[int, int, int, int], ...]] = []
    patched = 0
    for seg in segments:
        if seg is None:
            patches.append(())
            continue
        connection, a, direction, offset, start, length = seg
        from_client = (format_endpoint(*a) == client_of.get(connection)) == (direction == 0)
        ranges = bodies.get((connection, "C>S" if from_client else "S>C"), [])
        found = []
        i = max(bisect.bisect_right(ranges, (offset, 1 << 62)) - 1, 0)
        while i < len(ranges) and ranges[i][0] < offset + length:
            lo, hi, message, position = ranges[i]
            lo2, hi2 = max(lo, offset), min(hi, offset + length)
            if lo2 < hi2:
                found.append((start + lo2 - offset, hi2 - lo2, message, position + lo2 - lo))
                patched += hi2 - lo2
            i += 1
        patches.append(tuple(found))
    times = np.maximum.accumulate(np.array([ts for ts, _, _ in captured], dtype=np.int64) - first)
    sizes = [r["size"] for r in records if r["kind"] in ("method", "header", "body", "heartbeat")]
    return Template(path.name, [data for _, _, data in captured], times, client, patches, client_ips,
                    [tuple(s) for s in spans], len(keys), patched, max_body,
                    Counter(r["issue_kind"] for r in records if r["kind"] == "issue"),
                    Counter(r["message"]["complete"] for r in records if r.get("message")),
                    len(sizes), sum(x for x in sizes if x < SMALL_FRAME) / max(sum(sizes), 1))


def text_pool(seed: int, size: int = POOL_BYTES) -> bytes:
    """JSON-lines-like events with random ids, numbers and base64 notes (gzip -1: about 2.3x)."""
    rnd = random.Random(seed)
    bits = rnd.getrandbits
    events = ("order.created", "order.paid", "order.shipped", "invoice.issued", "user.signed_in",
              "payment.refused", "stock.adjusted", "cart.updated")
    currencies = ("EUR", "USD", "GBP", "CHF", "JPY")
    parts, length, seq = [], 0, 0
    while length < size:
        seq += 1 + bits(3)
        line = ('{"event":"%s","id":"%032x","seq":%d,"ts":"2026-11-21T%02d:%02d:%02d.%06dZ","customer":"cust-%05d",'
                '"amount":"%d.%02d","currency":"%s","lines":%d,"note":"%s"}\n') % (
            events[bits(3)], bits(128), seq, bits(4), bits(6) % 60, bits(6) % 60, bits(20) % 1000000,
            bits(17) % 100000, bits(14), bits(7) % 100, currencies[bits(8) % 5], 1 + bits(3),
            base64.b64encode(rnd.randbytes(12 + bits(6))).decode())
        parts.append(line)
        length += len(line)
    return "".join(parts).encode()[:size]


def _mix(*values: int) -> int:
    h = 0x243F6A8885A308D3
    for v in values:
        h = ((h ^ (v & MASK64)) * 0x9E3779B97F4A7C15) & MASK64
        h ^= h >> 29
    return h


def _tag(key: int) -> bytes:
    return bytes(DIGITS[(key // 62**i) % 62] for i in range(TAG))


def _checksum_delta(old: int, new: int) -> int:
    """One's-complement addend that turns a header checksum over `old` into one over `new` (RFC 1624)."""
    return (~old >> 16 & 0xFFFF) + (~old & 0xFFFF) + (new >> 16) + (new & 0xFFFF)


@dataclass
class Plan:
    templates: list[Template]
    template: np.ndarray  # per copy, in start order
    start: np.ndarray  # ns
    stretch: np.ndarray
    connection: np.ndarray  # global number of each copy's first connection
    total: int  # bytes of all records (headers included), without the file headers
    span: int  # ns


def plan(templates: list[Template], target: int, seed: int, rate: float, stretch: tuple[float, float]) -> Plan:
    rng = np.random.default_rng(seed)
    sizes = [t.size for t in templates]
    chosen, total = [], 0
    while total < target:
        for t in rng.permutation(len(templates)):
            chosen.append(int(t))
            total += sizes[t]
            if total >= target:
                break
    chosen_a = np.array(chosen)
    span = max(int(total / (rate * 1e6) * 1e9), 1)
    durations = np.array([templates[t].duration for t in chosen], dtype=np.float64)
    factors = np.where([templates[t].duration >= LONG_NS for t in chosen],
                       rng.uniform(stretch[0], stretch[1], len(chosen)), 1.0)
    factors = np.minimum(factors, np.maximum(0.8 * span / np.maximum(durations, 1), 1.0))
    room = np.maximum(span - durations * factors, 0)
    starts = (rng.random(len(chosen)) * room).astype(np.int64)
    order = np.argsort(starts, kind="stable")
    chosen_a, starts, factors = chosen_a[order], starts[order], factors[order]
    per_copy = np.array([len(templates[t].client_ips) for t in chosen_a], dtype=np.int64)
    first_connection = np.concatenate([[0], np.cumsum(per_copy)[:-1]])
    return Plan(templates, chosen_a, starts, factors, first_connection, total, span)


def _timeline(p: Plan) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every packet of every copy in time order: (ts ns, copy, packet index)."""
    times, copies, indexes = [], [], []
    for c, (t, start, factor) in enumerate(zip(p.template, p.start, p.stretch)):
        ts = p.templates[t].ts
        times.append(START_NS + start + (ts if factor == 1.0 else (ts * factor).astype(np.int64)))
        copies.append(np.full(len(ts), c, dtype=np.int32))
        indexes.append(np.arange(len(ts), dtype=np.int32))
    ts, copy, index = np.concatenate(times), np.concatenate(copies), np.concatenate(indexes)
    order = np.lexsort((index, copy, ts))
    return ts[order], copy[order], index[order]


def concurrency(p: Plan) -> tuple[float, int]:
    """(mean, max) connections open at once (first to last packet of each)."""
    opened, closed = [], []
    for t, start, factor in zip(p.template, p.start, p.stretch):
        for first, last in p.templates[t].spans:
            opened.append(start + int(first * factor))
            closed.append(start + int(last * factor) + 1)
    events = np.concatenate([np.array(opened), np.array(closed)])
    steps = np.concatenate([np.ones(len(opened), np.int64), -np.ones(len(closed), np.int64)])
    order = np.argsort(events, kind="stable")
    open_now = np.cumsum(steps[order])
    busy = (np.array(closed) - np.array(opened)).sum()
    return busy / max(p.span, 1), int(open_now.max())


@dataclass
class Result:
    paths: list[Path]
    bytes: int
    packets: int
    copies: int
    connections: int
    span_s: float
    mean_concurrent: float
    max_concurrent: int
    seconds: float
    plan: Plan
    frames: int  # AMQP frames in it (each copy's sample's)


def copy_of(p: Plan, client: str) -> int:
    """The copy a connection of the output belongs to, from its client endpoint ("ip:port")."""
    ip, port = client.rsplit(":", 1)
    g = (int.from_bytes(bytes(int(x) for x in ip.split(".")), "big") - FIRST_CLIENT_IP) * PORTS + int(port) - FIRST_PORT
    return int(np.searchsorted(p.connection, g, side="right")) - 1


def synthesise(out: Path, megabytes: float, files: int = 1, seed: int = 1, rate: float = 1.0,
               stretch: tuple[float, float] = (4.0, 24.0), templates: list[Template] | None = None,
               shape: str = "mixed") -> Result:
    """Write the capture (files == 1: the file `out`; else `out`/part-NNN.pcap). `templates`: every
    sample's (loaded once by a caller that makes several nights), of which the shape's are used."""
    began = time.perf_counter()
    templates = shaped(templates if templates is not None else [load_template(p) for p in sample_paths()], shape)
    p = plan(templates, int(megabytes * 1e6) - len(PCAP_HEADER) * files, seed, rate, stretch)
    pool = text_pool(seed)
    reach = len(pool) - max(t.max_body for t in templates) - 1
    ts_all, copy_all, index_all = _timeline(p)
    if files == 1:
        paths = [out]
        out.parent.mkdir(parents=True, exist_ok=True)
    else:
        out.mkdir(parents=True, exist_ok=True)
        for old in out.glob("part-*.pcap"):
            old.unlink()
        paths = [out / f"part-{i:03d}.pcap" for i in range(files)]
    thresholds = [p.total * i // files for i in range(1, files)] + [1 << 62]
    copy_template = p.template.tolist()
    copy_connection = p.connection.tolist()
    pack = RECORD.pack
    deltas: dict[tuple[int, int], int] = {}
    written = 0
    f = open(paths[0], "wb", buffering=1 << 22)
    f.write(PCAP_HEADER)
    opened = 1
    step = 1 << 20
    for chunk in range(0, len(ts_all), step):
        for ts, c, i in zip(ts_all[chunk:chunk + step].tolist(), copy_all[chunk:chunk + step].tolist(),
                            index_all[chunk:chunk + step].tolist()):
            t = templates[copy_template[c]]
            data = t.packets[i]
            if written >= thresholds[opened - 1]:
                f.close()
                f = open(paths[opened], "wb", buffering=1 << 22)
                f.write(PCAP_HEADER)
                opened += 1
            buf = bytearray(data)
            where = t.client[i]
            if where is not None:
                connection, ip_field, port_field = where
                g = copy_connection[c] + connection
                buf[port_field:port_field + 2] = (FIRST_PORT + g % PORTS).to_bytes(2, "big")
                ip = FIRST_CLIENT_IP + g // PORTS
                old = t.client_ips[connection]
                if ip != old:
                    buf[ip_field:ip_field + 4] = ip.to_bytes(4, "big")
                    delta = deltas.get((old, ip))
                    if delta is None:
                        delta = deltas[(old, ip)] = _checksum_delta(old, ip)
                    s = (~((buf[24] << 8) | buf[25]) & 0xFFFF) + delta
                    s = (s & 0xFFFF) + (s >> 16)
                    s = (s & 0xFFFF) + (s >> 16)
                    buf[24:26] = (~s & 0xFFFF).to_bytes(2, "big")
            for start, length, message, position in t.patches[i]:
                key = _mix(seed, c, message)
                base = key % reach + position
                buf[start:start + length] = pool[base:base + length]
                if position < TAG:
                    tag = _tag(key >> 16)[position:position + length]
                    buf[start:start + len(tag)] = tag
            f.write(pack(ts // 1_000_000_000, ts % 1_000_000_000, len(buf), len(buf)))
            f.write(buf)
            written += 16 + len(buf)
    f.close()
    mean, peak = concurrency(p)
    return Result(paths[:opened], written + len(PCAP_HEADER) * opened, len(ts_all), len(p.template),
                  int(p.connection[-1] + len(templates[p.template[-1]].client_ips)), p.span / 1e9, mean, peak,
                  time.perf_counter() - began, p, sum(templates[t].frames for t in copy_template))


def join(parts: list[Path], out: Path) -> None:
    """Rotated files back into one (record-wise: every file's records after the first header)."""
    with open(out, "wb") as f:
        for n, part in enumerate(parts):
            with open(part, "rb") as src:
                header = src.read(len(PCAP_HEADER))
                if n == 0:
                    f.write(header)
                while block := src.read(1 << 24):
                    f.write(block)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the file (--files 1) or the folder of part-NNN.pcap files")
    parser.add_argument("--mb", type=float, default=150.0, help="size of the output, in MB (10^6 bytes)")
    parser.add_argument("--files", type=int, default=1, help="rotate into this many files by size (tcpdump -C)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rate", type=float, default=1.0, help="capture rate, MB per second of capture time")
    parser.add_argument("--stretch", default="4,24", help="time stretch of the long samples: min,max factor")
    parser.add_argument("--shape", choices=SHAPES, default="mixed",
                        help="the night: mixed (every sample: mostly large bodies) or small (small frames)")
    parser.add_argument("--list", action="store_true", help="only list the samples used and their templates")
    args = parser.parse_args(argv)
    templates = shaped([load_template(p) for p in sample_paths()], args.shape)
    for t in templates:
        print(f"  {t.name:26} {t.size / 1e3:8.1f} kB {len(t.packets):5} packets {len(t.client_ips):3} connections "
              f"{t.duration / 1e9:6.2f} s  bodies {t.body_bytes / 1e3:8.1f} kB in {t.messages} messages, "
              f"{t.frames} frames ({t.small_share:.0%} of their bytes in frames under {SMALL_FRAME} bytes)")
    if args.list:
        return 0
    low, high = (float(x) for x in args.stretch.split(","))
    r = synthesise(args.out, args.mb, args.files, args.seed, args.rate, (low, high), templates, args.shape)
    print(f"wrote {len(r.paths)} file(s) in {args.out}: {r.bytes / 1e6:.1f} MB, {r.packets} packets, {r.frames} frames, "
          f"{r.copies} copies, {r.connections} connections over {r.span_s / 60:.1f} min of capture, "
          f"{r.mean_concurrent:.0f} connections open on average (max {r.max_concurrent}), in {r.seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
