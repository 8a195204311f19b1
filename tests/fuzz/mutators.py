"""Mutators shared by the fuzz tests and the atheris harnesses, on real sample bytes.

Three levels, each returning the mutated input together with what the mutation cannot have
touched (what the properties check):

- capture files (`FILE_MUTATORS`): bit flips and byte runs in record headers and payloads,
  truncation, dropped / duplicated / reordered records, garbage, concatenated captures, splices
  of two captures, garbage pcapng blocks, and a gzip wrapping that may be truncated or corrupt.
  Each gives a `Mutant`: the bytes, the original records that must still be read (in order), how
  many leading packet records are untouched, and whether the file stayed well formed.
- TCP segments (`SEGMENT_MUTATORS`): split, merged, moved, duplicated (also with different
  bytes), dropped, payload bytes flipped, AMQP frame headers and frame-end octets corrupted.
  Each gives a `StreamMutant`: the segments and, per direction, the stream offset before which
  every frame must survive (or that the whole decode must be unchanged).
- AMQP frames (`FRAME_MUTATORS`): real frames with corrupted sizes, types, channels and
  frame-ends, truncated, extended, spliced; and generated frames carrying field tables with
  random tags, lengths and nesting.

Every choice goes through a `Chooser`, so the same mutators run under hypothesis (`DrawChooser`,
which shrinks), atheris (`ProviderChooser`) and plain `random` (`RandomChooser`).
"""

from __future__ import annotations

import functools
import gzip
import random
import struct
from dataclasses import dataclass, field
from pathlib import Path

from tests.fuzz import oracles
from tests.fuzz.oracles import Parsed, parse_capture

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "data" / "samples"
PUBLIC = ROOT.parent / "shared" / "captures" / "public"

# Small samples (decoding one takes about a millisecond) covering every link type and format the
# samples have: pcap (micro, nano), pcapng, gzip, Ethernet/VLAN/SLL/SLL2/BSD NULL, IPv6, fragments,
# large bodies streamed (crafted/clean), several connections, port reuse-free clean conversations.
CLEAN_SEEDS = [
    "abrupt_kill.pcap", "amqplib_node.pcap", "bunny_ruby.pcap", "channel_errors.pcap",
    "channels_qos_get.pcap", "confirms.pcap", "heartbeats.pcap", "ipv6_pcapng.pcapng",
    "kombu_gzip.pcap.gz", "rabbitmq_c.pcap", "returns_nack_reject.pcap", "rich_properties.pcap",
    "tx_bind_cancel.pcap", "crafted/clean.pcap.gz", "crafted/bsd_null_ipv6.pcap",
    "crafted/linux_sll.pcap", "crafted/linux_sll2.pcap", "crafted/vlan_qinq.pcap",
    "crafted/ip_features.pcapng", "crafted/seq_wrap.pcap.gz", "crafted/out_of_order.pcap.gz",
    "crafted/retransmissions.pcap.gz", "shovel_hops.pcap", "dead_letter_hops.pcap", "amqp10_mixed.pcap",
]
# Samples whose decode already has issues (mid-stream starts, gaps, bad protocol headers...):
# seeds for the properties that hold for any input.
DAMAGED_SEEDS = [
    "connection_errors.pcap", "protocol_headers.pcap", "mid_stream.pcap",
    "other_protocols.pcap",
    "crafted/gap_in_body.pcap.gz", "crafted/gap_in_methods.pcap.gz", "crafted/mid_frame_start.pcap.gz",
    "crafted/retransmission_conflict.pcap.gz",
]
PUBLIC_SEEDS = ["deepflow_amqp-error.pcap", "deepflow_amqp1.pcap", "ndpi_amqp.pcap"]


# -- choices ---------------------------------------------------------------------------------------

class Chooser:
    """Where every mutator's decisions come from."""

    def int(self, lo: int, hi: int) -> int:
        raise NotImplementedError

    def raw(self, size: int) -> bytes:
        return bytes(self.int(0, 255) for _ in range(size))

    def bool(self) -> bool:
        return self.int(0, 1) == 1

    def pick(self, seq):
        return seq[self.int(0, len(seq) - 1)]

    def chance(self, one_in: int) -> bool:
        return self.int(0, one_in - 1) == 0

    def blob(self, max_size: int) -> bytes:
        return self.raw(self.int(0, max_size))


class DrawChooser(Chooser):
    """Choices drawn from hypothesis's st.data(): shrinkable."""

    def __init__(self, data) -> None:
        from hypothesis import strategies as st
        self.data, self.st = data, st

    def int(self, lo: int, hi: int) -> int:
        return self.data.draw(self.st.integers(lo, hi))

    def raw(self, size: int) -> bytes:
        return self.data.draw(self.st.binary(min_size=size, max_size=size))

    def blob(self, max_size: int) -> bytes:
        return self.data.draw(self.st.binary(max_size=max_size))


class ProviderChooser(Chooser):
    """Choices from atheris's FuzzedDataProvider (libFuzzer mutates them, guided by coverage)."""

    def __init__(self, provider) -> None:
        self.provider = provider

    def int(self, lo: int, hi: int) -> int:
        return self.provider.ConsumeIntInRange(lo, hi)

    def raw(self, size: int) -> bytes:
        return self.provider.ConsumeBytes(size).ljust(size, b"\0")


class RandomChooser(Chooser):
    def __init__(self, seed) -> None:
        self.rng = random.Random(seed)

    def int(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def raw(self, size: int) -> bytes:
        return self.rng.randbytes(size)


INTERESTING = [0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF, 0xCE]
INTERESTING_32 = [0, 1, 7, 8, 0x7F, 0x80, 0xFF, 0x100, 0xFFFF, 0x10000, 0x3FFFF, 0x40000, 0x40001,
                  0x7FFFFFFF, 0x80000000, 0xFFFFFFFE, 0xFFFFFFFF]


# -- samples ---------------------------------------------------------------------------------------

@dataclass
class Capture:
    """A sample, decompressed, with its records as an independent parser reads them."""

    name: str
    data: bytes
    parsed: Parsed

    @property
    def records(self) -> list:
        return self.parsed.records

    @property
    def spans(self):
        return self.parsed.spans


def sample_path(name: str) -> Path:
    path = SAMPLES / name
    return path if path.exists() else PUBLIC / name


@functools.lru_cache(maxsize=None)
def load(name: str) -> Capture:
    data = sample_path(name).read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    parsed = parse_capture(data)
    assert parsed is not None, f"{name} is no well-formed capture"
    return Capture(name, data, parsed)


def seeds(clean_only: bool = False) -> list[str]:
    names = CLEAN_SEEDS + ([] if clean_only else DAMAGED_SEEDS)
    if PUBLIC.exists():
        names += PUBLIC_SEEDS
    return names


# -- capture files ---------------------------------------------------------------------------------

@dataclass
class Mutant:
    """A mutated capture file and what its mutation cannot have touched."""

    data: bytes
    what: str
    keep: list = field(default_factory=list)  # (end offset in data, record): must be read, in order
    intact: int = 0  # leading records of the original untouched (and followed by an untouched one)
    well_formed: bool = False  # the mutation kept the file a well-formed capture (it must read clean)

    @property
    def records(self) -> list:
        return [record for _, record in self.keep]


def _packet_spans(capture: Capture) -> list:
    return [span for span in capture.spans if span.packet is not None]


def _offset(capture: Capture, ch: Chooser) -> int:
    """A file offset, biased towards record headers (where most of the reader's logic is)."""
    data, spans = capture.data, capture.spans
    how = ch.int(0, 9)
    if how < 5 and spans:
        span = ch.pick(spans)
        return min(len(data) - 1, span.start + ch.int(0, min(span.header, span.end - span.start) - 1))
    if how < 6 and spans:
        span = ch.pick(spans)
        return max(span.start, span.end - ch.int(1, 4))  # a pcapng block's trailing length
    if how < 7:
        return ch.int(0, min(len(data), capture.parsed.header) - 1)
    return ch.int(0, len(data) - 1)


def _claimed_end(data: bytes, start: int, kind: str, order: str) -> int:
    """Where the record (pcap) or block (pcapng) whose header is at `start` in `data` claims to end."""
    if kind == "pcap":
        if start + 16 > len(data):
            return len(data)
        return start + 16 + struct.unpack_from(order + "I", data, start + 8)[0]
    if start + 8 > len(data):
        return len(data)
    return start + max(12, struct.unpack_from(order + "I", data, start + 4)[0])


def _outside_claims(keep: list, claims: list, capture: Capture) -> list:
    """Drop kept records that lie inside the extent a damaged record or block claims: whether the
    reader can tell them from its content depends on what follows (a claim that happens to end
    on a plausible header, or at a cut end of the file, is read as it claims)."""
    if not claims:
        return keep
    out = []
    for end, record in keep:
        size = 16 + len(record[2]) if capture.parsed.kind == "pcap" else None
        start = end - size if size is not None else end - 1
        if any(a < start < b or (size is None and a < end <= b) for a, b in claims):
            continue
        out.append((end, record))
    return out


def _untouched(capture: Capture, data: bytes, touched: list[int], shift_from: int | None = None,
               shift: int = 0, what: str = "") -> Mutant:
    """A mutant whose bytes differ from the original only at the file offsets `touched` (and,
    with `shift`, are moved by `shift` from `shift_from` on)."""
    first = min(touched) if touched else len(capture.data)
    keep = []
    intact = None
    header_hit = first < capture.parsed.header
    # A pcapng block that is not a packet (section header, interface description) changes how
    # every later packet reads: keep only what comes before it. So may a packet block whose type
    # the mutation touched: it may have become one (an interface description renumbers the later ones).
    pcapng = capture.parsed.kind == "pcapng"
    structural = [s.start for s in capture.spans if any(s.start <= t < s.end for t in touched)
                  and (s.packet is None or pcapng and any(s.start <= t < s.start + 4 for t in touched))]
    stop = min(structural) if structural else None
    for span in capture.spans:
        if span.packet is None:
            continue
        hit = any(span.start <= t < span.end for t in touched)
        if shift_from is not None and span.start < shift_from < span.end:
            hit = True
        if hit and intact is None:
            intact = span.packet
        if hit or header_hit or (stop is not None and span.start >= stop):
            if intact is None:
                intact = span.packet
            continue
        end = span.end + (shift if shift_from is not None and span.start >= shift_from else 0)
        keep.append((end, capture.records[span.packet]))
    if header_hit:
        intact = 0
    if intact is None:
        intact = len(capture.records)
    claims = []
    for span in capture.spans:
        if any(span.start <= t < span.end for t in touched) and (shift_from is None or span.start < shift_from):
            claims.append((span.start, _claimed_end(data, span.start, capture.parsed.kind, capture.parsed.order)))
    return Mutant(data, what, _outside_claims(keep, claims, capture), max(0, intact - 1))


def flip_bits(capture: Capture, ch: Chooser) -> Mutant:
    mutant = bytearray(capture.data)
    touched = []
    for _ in range(ch.int(1, 3)):
        offset, bit = _offset(capture, ch), ch.int(0, 7)
        mutant[offset] ^= 1 << bit
        touched.append(offset)
    return _untouched(capture, bytes(mutant), touched, what=f"flip bits at {touched}")


def set_bytes(capture: Capture, ch: Chooser) -> Mutant:
    mutant = bytearray(capture.data)
    offset = _offset(capture, ch)
    if ch.bool():
        value = struct.pack(ch.pick(["<I", ">I"]), ch.pick(INTERESTING_32))
    else:
        value = bytes(ch.pick(INTERESTING) for _ in range(ch.int(1, 8)))
    value = value[:len(mutant) - offset]
    mutant[offset:offset + len(value)] = value
    return _untouched(capture, bytes(mutant), list(range(offset, offset + len(value))),
                      what=f"set {value.hex()} at {offset}")


def truncate(capture: Capture, ch: Chooser) -> Mutant:
    spans = capture.spans
    if ch.bool() and spans:
        cut = min(len(capture.data), max(0, ch.pick(spans).end + ch.int(-20, 3)))
    else:
        cut = ch.int(0, len(capture.data))
    keep = [(s.end, capture.records[s.packet]) for s in _packet_spans(capture) if s.end <= cut]
    boundary = cut == capture.parsed.header or any(s.end == cut for s in spans)
    # a pcapng file cut right after its section header is one: but one with no interface yet
    return Mutant(capture.data[:cut], f"truncated at {cut}", keep, len(keep),
                  well_formed=boundary and cut >= capture.parsed.header)


def drop_records(capture: Capture, ch: Chooser) -> Mutant:
    packets = _packet_spans(capture)
    if not packets:
        return Mutant(capture.data, "nothing to drop", [(s.end, capture.records[s.packet]) for s in packets],
                      len(capture.records), True)
    dropped = sorted({ch.int(0, len(packets) - 1) for _ in range(ch.int(1, 3))})
    out, keep, position, removed = [], [], 0, 0
    for i, span in enumerate(packets):
        out.append(capture.data[position:span.start])
        if i in dropped:
            removed += span.end - span.start
        else:
            out.append(capture.data[span.start:span.end])
            keep.append((span.end - removed, capture.records[span.packet]))
        position = span.end
    out.append(capture.data[position:])
    return Mutant(b"".join(out), f"dropped packet records {dropped}", keep, max(0, packets[dropped[0]].packet - 1),
                  well_formed=True)


def duplicate_records(capture: Capture, ch: Chooser) -> Mutant:
    packets = _packet_spans(capture)
    if not packets:
        return Mutant(capture.data, "nothing to duplicate", [], 0, True)
    source = ch.int(0, len(packets) - 1)
    target = ch.int(source, len(packets) - 1)  # inserted after this packet
    copy = capture.data[packets[source].start:packets[source].end]
    at = packets[target].end
    data = capture.data[:at] + copy + capture.data[at:]
    keep = [(s.end + (len(copy) if s.start >= at else 0), capture.records[s.packet]) for s in packets]
    return Mutant(data, f"packet record {source} duplicated after {target}", keep,
                  max(0, packets[target].packet), well_formed=True)


def swap_records(capture: Capture, ch: Chooser) -> Mutant:
    packets = _packet_spans(capture)
    if len(packets) < 2:
        return duplicate_records(capture, ch)
    i = ch.int(0, len(packets) - 2)
    j = ch.int(i + 1, min(len(packets) - 1, i + 8))
    a, b = packets[i], packets[j]
    data = (capture.data[:a.start] + capture.data[b.start:b.end] + capture.data[a.end:b.start]
            + capture.data[a.start:a.end] + capture.data[b.end:])
    what = f"packet records {i} and {j} swapped"
    intact = max(0, a.packet - 1)
    if parse_capture(data) is None:  # pcapng: a packet moved before its interface's description
        return Mutant(data, what, [(s.end, capture.records[s.packet]) for s in packets[:i]], intact)
    order = packets[:i] + [b] + packets[i + 1:j] + [a] + packets[j + 1:]
    keep, end = [], packets[0].start
    for k, span in enumerate(order):
        if k > 0:  # what lies between two packets (pcapng: other blocks) stays where it was
            end += packets[k].start - packets[k - 1].end
        end += span.end - span.start
        keep.append((end, capture.records[span.packet]))
    return Mutant(data, what, keep, intact, well_formed=True)


GARBAGE = [b"\x5a", bytes(16), bytes(4096), b"\xff" * 64,
           b"this is not a record header, it is a log line that got into the file\n"]


def insert_garbage(capture: Capture, ch: Chooser) -> Mutant:
    how = ch.int(0, 3)
    if how == 0:
        garbage = ch.pick(GARBAGE)
    elif how == 1:
        garbage = ch.blob(64) or b"\0"
    elif how == 2 and capture.spans:  # the start of another record: a plausible header alone
        span = ch.pick(capture.spans)
        garbage = capture.data[span.start:span.start + ch.int(1, span.header + 8)]
    else:
        garbage = struct.pack(ch.pick(["<IIII", ">IIII"]), *(ch.pick(INTERESTING_32) for _ in range(4)))
    if ch.bool() and capture.spans:
        at = ch.pick(capture.spans).end  # between records
    else:
        at = ch.int(capture.parsed.header, len(capture.data))
    data = capture.data[:at] + garbage + capture.data[at:]
    mutant = _untouched(capture, data, [at] if any(s.start < at < s.end for s in capture.spans) else [],
                        shift_from=at, shift=len(garbage), what=f"{len(garbage)} bytes of garbage at {at}")
    mutant.intact = max(0, sum(1 for s in _packet_spans(capture) if s.end <= at) - 1)
    # Garbage holding a plausible record header (a copy of one, as a torn write leaves) is a
    # record as far as anyone can tell: what its claimed extent covers is not guaranteed.
    claims = []
    for g in range(len(garbage)):
        end = _claimed_end(data, at + g, capture.parsed.kind, capture.parsed.order)
        if capture.parsed.kind == "pcap" and end - at - g - 16 <= 1 << 18 or capture.parsed.kind == "pcapng" \
                and end <= len(data) and data[end - 4:end] == data[at + g + 4:at + g + 8]:  # lengths agree
            claims.append((at + g, end))
    mutant.keep = _outside_claims(mutant.keep, claims, capture)
    return mutant


def concatenate(capture: Capture, ch: Chooser) -> Mutant:
    other = load(ch.pick(seeds()))
    data = capture.data + other.data
    keep = [(s.end, capture.records[s.packet]) for s in _packet_spans(capture)]
    if capture.parsed.kind == other.parsed.kind:  # a new global header or section: read on with it
        keep += [(s.end + len(capture.data), other.records[s.packet]) for s in _packet_spans(other)]
    return Mutant(data, f"{other.name} appended", keep, len(capture.records))


def splice(capture: Capture, ch: Chooser) -> Mutant:
    """The start of one capture, the end of another (cut anywhere, or at record boundaries)."""
    other = load(ch.pick(seeds()))
    if ch.bool():
        x = ch.pick([capture.parsed.header] + [s.end for s in capture.spans])
        y = ch.pick([s.start for s in other.spans] or [len(other.data)])
    else:
        x, y = ch.int(0, len(capture.data)), ch.int(0, len(other.data))
    data = capture.data[:x] + other.data[y:]
    first = [s for s in _packet_spans(capture) if s.end <= x]
    keep = [(s.end, capture.records[s.packet]) for s in first]
    intact = max(0, len(first) - 1)
    # The other capture's records after the cut read with this one's header parameters: kept only
    # when those are the same (pcap: byte order, precision and link type).
    if capture.parsed.kind == other.parsed.kind == "pcap" and x >= 24 and capture.data[:4] == other.data[:4] \
            and capture.parsed.link_types == other.parsed.link_types:
        second = [(s.end - y + x, other.records[s.packet]) for s in _packet_spans(other) if s.start >= y]
        cut = [s for s in capture.spans if s.start < x < s.end]  # the record the cut went through
        claims = [(s.start, _claimed_end(data, s.start, "pcap", capture.parsed.order)) for s in cut]
        keep += _outside_claims(second, claims, capture)
    return Mutant(data, f"{capture.name}[:{x}] + {other.name}[{y}:]", keep, intact)


def garbage_block(capture: Capture, ch: Chooser) -> Mutant:
    """pcapng: a block of a random type between blocks, its lengths consistent or not."""
    if capture.parsed.kind != "pcapng":
        return insert_garbage(capture, ch)
    order = capture.parsed.order
    body = ch.blob(40)
    body += b"\0" * (-len(body) % 4)
    length = 12 + len(body)
    block_type = ch.pick([0, 7, 8, 9, 11, 0x101, 0x20F, 0x80000001, 0x0BAD, 0x40000BAD, 0xFFFFFFFF,
                          ch.int(0, 0xFFFFFFFF)])
    trailer = length if ch.int(0, 2) else ch.pick(INTERESTING_32)
    block = struct.pack(order + "II", block_type, length) + body + struct.pack(order + "I", trailer)
    at = ch.pick([s.end for s in capture.spans])
    data = capture.data[:at] + block + capture.data[at:]
    mutant = _untouched(capture, data, [], shift_from=at, shift=len(block),
                        what=f"block of type {block_type:#x} ({length} bytes, trailer {trailer}) at {at}")
    mutant.intact = max(0, sum(1 for s in _packet_spans(capture) if s.end <= at) - 1)
    return mutant


FILE_MUTATORS = [flip_bits, flip_bits, set_bytes, truncate, drop_records, duplicate_records, swap_records,
                 insert_garbage, concatenate, splice, garbage_block]


def mutate_file(capture: Capture, ch: Chooser) -> Mutant:
    """One to three mutations in a row (each judged against the original: the second one's `keep`
    is recomputed conservatively), then maybe a gzip wrapping."""
    mutant = ch.pick(FILE_MUTATORS)(capture, ch)
    for _ in range(ch.int(0, 2) if ch.chance(3) else 0):
        again = parse_capture(mutant.data)
        if again is None or not again.records:
            break
        second = ch.pick(FILE_MUTATORS)(Capture(capture.name, mutant.data, again), ch)
        # what survives both: records kept by the second among those the first kept
        survivors = _subsequence_map(mutant.records, [r for _, r in second.keep])
        mutant = Mutant(second.data, f"{mutant.what}; {second.what}",
                        [(end, record) for (end, record) in second.keep if id(record) in survivors],
                        min(mutant.intact, second.intact), mutant.well_formed and second.well_formed)
    if ch.chance(4):
        mutant = gzip_wrap(mutant, ch)
    return mutant


def _subsequence_map(first: list, second: list) -> set[int]:
    """ids of the records of `second` that are also (equal, in order) in `first`."""
    ids, remaining = set(), iter(first)
    for record in second:
        for candidate in remaining:
            if candidate == record:
                ids.add(id(record))
                break
    return ids


def gzip_wrap(mutant: Mutant, ch: Chooser) -> Mutant:
    """Compress the mutant (in one or two members) and maybe damage the compressed stream."""
    data = mutant.data
    if ch.chance(4) and len(data) > 1:
        cut = ch.int(1, len(data) - 1)
        compressed = gzip.compress(data[:cut], mtime=0) + gzip.compress(data[cut:], mtime=0)
    else:
        compressed = gzip.compress(data, mtime=0)
    how = ch.int(0, 5)
    what = "gzip"
    if how == 1:
        cut = ch.int(0, len(compressed) - 1)
        compressed, what = compressed[:cut], f"gzip cut at {cut}"
    elif how == 2:
        damaged = bytearray(compressed)
        at = ch.int(0, len(damaged) - 1)
        damaged[at] ^= 1 << ch.int(0, 7)
        compressed, what = bytes(damaged), f"gzip bit flipped at {at}"
    elif how == 3:
        tail = ch.pick([b"garbage after the member", bytes(ch.int(1, 100)), b"\x1f\x8b", b"\x1f"])
        compressed, what = compressed + tail, f"gzip followed by {tail[:8]!r}"
    trusted = oracles.gunzip_prefix(compressed)
    same = _common_prefix(trusted, data)
    keep = [(end, record) for end, record in mutant.keep if end <= same]
    intact = min(mutant.intact, max(0, len(keep) - 1))
    return Mutant(compressed, f"{mutant.what}; {what}", keep, intact,
                  mutant.well_formed and how in (0, 4, 5))


def _common_prefix(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


# -- TCP segments ----------------------------------------------------------------------------------

@dataclass
class Seg:
    """One TCP segment (everything else in the capture is left out)."""

    ts_ns: int
    src: tuple[bytes, int]
    dst: tuple[bytes, int]
    seq: int
    ack: int
    flags: int
    payload: bytes
    offset: int = -1  # stream offset of the first payload byte in the original (-1: none)
    record: int = -1  # index of the capture record it came from

    @property
    def key(self):
        return (self.src, self.dst)

    @property
    def control(self) -> bool:
        return bool(self.flags & 0x07)  # FIN, SYN, RST


@dataclass
class Conversation:
    name: str
    segments: list[Seg]


SYN, FIN, RST, ACK, PSH = 0x02, 0x01, 0x04, 0x10, 0x08


@functools.lru_cache(maxsize=None)
def conversation(name: str) -> Conversation:
    """The TCP segments of a sample in capture order, with each one's stream offset (the sample's
    bytes are contiguous: clean samples only)."""
    import io

    from amqpcap.capture.packets import PacketParser
    from amqpcap.capture.readers import read_records
    parser = PacketParser()
    segments = []
    for index, (ts, link, data) in enumerate(read_records(name, None, io.BytesIO(load(name).data))):
        segment = parser.parse(ts, link, data)
        if segment is not None:
            segments.append(Seg(ts, (segment.src, segment.sport), (segment.dst, segment.dport), segment.seq,
                                segment.ack, segment.flags, bytes(segment.payload), record=index))
    base: dict = {}
    for s in segments:
        if s.flags & SYN:
            base.setdefault(s.key, (s.seq + 1) & 0xFFFFFFFF)
    for s in segments:
        if s.payload:
            start = base.setdefault(s.key, s.seq)
            s.offset = (s.seq - start) & 0xFFFFFFFF
    return Conversation(name, segments)


def endpoint(address: tuple[bytes, int]) -> str:
    from amqpcap.capture.packets import format_endpoint
    return format_endpoint(*address)


@dataclass
class StreamMutant:
    segments: list[Seg]
    what: str
    exact: bool = False  # the reassembled streams are the original's: the decode must be the same
    cut: dict = field(default_factory=dict)  # (src, dst) endpoints -> stream offset: frames before survive
    expect: list = field(default_factory=list)  # (src, dst, issue_kind, offset or None) that must be reported


def _data_indices(segments: list[Seg]) -> list[int]:
    return [i for i, s in enumerate(segments) if s.payload and not s.control]


def _cut_all(segments: list[Seg], index: int) -> dict:
    """Per direction: the stream bytes delivered before segment `index` (nothing after is safe)."""
    cut: dict = {}
    for s in segments[:index]:
        if s.payload:
            key = (endpoint(s.src), endpoint(s.dst))
            cut[key] = max(cut.get(key, 0), s.offset + len(s.payload))
    for s in segments:
        cut.setdefault((endpoint(s.src), endpoint(s.dst)), 0)
    return cut


def _cut_one(segments: list[Seg], seg: Seg, offset: int) -> dict:
    """Damage to `seg`'s payload from stream offset `offset` on: that direction is safe before it,
    every other direction entirely (unless it hits the protocol header: that picks the spec)."""
    cut = {(endpoint(s.src), endpoint(s.dst)): None for s in segments}
    key = (endpoint(seg.src), endpoint(seg.dst))
    cut[key] = offset
    if offset < 8:
        for k in cut:
            if set(k) == set(key):
                cut[k] = 0 if k != key else offset
    return cut


def split_segment(conv: Conversation, ch: Chooser) -> StreamMutant:
    segments = list(conv.segments)
    data = _data_indices(segments)
    if not data:
        return StreamMutant(segments, "nothing to split", exact=True)
    i = ch.pick(data) if not ch.chance(4) else data[0]  # the first: a split protocol header
    s = segments[i]
    if len(s.payload) < 2:
        return StreamMutant(segments, "nothing to split", exact=True)
    pieces, position, cuts = [], 0, sorted({ch.int(1, len(s.payload) - 1) for _ in range(ch.int(1, 3))})
    for cut in cuts + [len(s.payload)]:
        pieces.append(Seg(s.ts_ns, s.src, s.dst, (s.seq + position) & 0xFFFFFFFF, s.ack, s.flags,
                          s.payload[position:cut], s.offset + position))
        position = cut
    segments[i:i + 1] = pieces
    return StreamMutant(segments, f"segment {i} split at {cuts}", exact=True)


def merge_segments(conv: Conversation, ch: Chooser) -> StreamMutant:
    segments = list(conv.segments)
    data = _data_indices(segments)
    if len(data) < 2:
        return StreamMutant(segments, "nothing to merge", exact=True)
    i = ch.pick(data[:-1])
    s = segments[i]
    j = next((k for k in data if k > i and segments[k].key == s.key), None)
    if j is None or segments[j].offset != s.offset + len(s.payload):
        return StreamMutant(segments, "nothing to merge", exact=True)
    merged = Seg(s.ts_ns, s.src, s.dst, s.seq, segments[j].ack, s.flags | segments[j].flags,
                 s.payload + segments[j].payload, s.offset)
    segments[i] = merged
    del segments[j]
    return StreamMutant(segments, f"segments {i} and {j} merged", exact=True)


def move_segment(conv: Conversation, ch: Chooser) -> StreamMutant:
    """A data segment arrives later (reordering). The stream is unchanged unless the peer
    acknowledged past the hole often enough for the decoder to call it lost."""
    segments = list(conv.segments)
    data = _data_indices(segments)
    if not data:
        return StreamMutant(segments, "nothing to move", exact=True)
    i = ch.pick(data)
    s = segments[i]
    limit = i + 1
    while limit < len(segments) and limit - i <= 12 and not (segments[limit].control and
                                                               {segments[limit].src, segments[limit].dst} == {s.src, s.dst}):
        limit += 1
    k = ch.int(i + 1, max(i + 1, limit - 1)) if limit - 1 > i else i
    moved = segments.pop(i)
    segments.insert(k, moved)
    between = segments[i:k]
    end = (moved.seq + len(moved.payload)) & 0xFFFFFFFF
    acks = sum(1 for t in between if t.src == s.dst and t.dst == s.src and t.flags & ACK
               and ((t.ack - end) & 0xFFFFFFFF) < 1 << 31)
    exact = acks < 3
    first = next(t for t in conv.segments if t.key == s.key and (t.payload or t.flags & SYN))
    if first is conv.segments[i] and not first.flags & SYN:
        exact = False  # no SYN: the first segment seen is where the stream starts, and this one moved
    return StreamMutant(segments, f"segment {i} moved to {k} ({acks} peer acks past it)", exact=exact,
                        cut=_cut_one(segments, s, s.offset))


def duplicate_segment(conv: Conversation, ch: Chooser) -> StreamMutant:
    """A retransmission; with `conflict`, one whose bytes differ (the first copy must win, and the
    difference be reported while the first copy is still among the last 64 KiB delivered)."""
    segments = list(conv.segments)
    data = _data_indices(segments)
    if not data:
        return StreamMutant(segments, "nothing to duplicate", exact=True)
    i = ch.pick(data)
    s = segments[i]
    k = ch.int(i + 1, min(len(segments), i + 10))
    payload = bytearray(s.payload)
    conflict = ch.bool()
    if conflict:
        at = ch.int(0, len(payload) - 1)
        payload[at] ^= 1 << ch.int(0, 7)
    segments.insert(k, Seg(s.ts_ns, s.src, s.dst, s.seq, s.ack, s.flags, bytes(payload), s.offset))
    expect = []
    delivered_after = sum(len(t.payload) for t in segments[i + 1:k] if t.key == s.key)
    if conflict and delivered_after + len(s.payload) < 60_000:
        expect.append((endpoint(s.src), endpoint(s.dst), "retransmission-conflict", None))
    return StreamMutant(segments, f"segment {i} retransmitted at {k}" + (" with different bytes" if conflict else ""),
                        exact=True, expect=expect)


def _covered(s: Seg, others: list[Seg]) -> bool:
    """Whether the other segments hold every byte of `s`."""
    reached = s.offset
    for t in sorted(others, key=lambda t: t.offset):
        if t.offset > reached:
            break
        reached = max(reached, t.offset + len(t.payload))
    return reached >= s.offset + len(s.payload)


def drop_segment(conv: Conversation, ch: Chooser) -> StreamMutant:
    segments = list(conv.segments)
    data = _data_indices(segments)
    if not data:
        return StreamMutant(segments, "nothing to drop", exact=True)
    i = ch.pick(data)
    s = segments.pop(i)
    later = any(t.key == s.key and (t.payload or t.flags & FIN) for t in segments[i:])
    copy = _covered(s, [t for t in segments if t.key == s.key and t.payload])  # retransmissions
    # (no SYN and nothing before it: the stream starts after it, no gap)
    before = any(t.key == s.key and (t.flags & SYN or t.payload) for t in segments[:i])
    expect = [(endpoint(s.src), endpoint(s.dst), "gap", None)] if later and before and not copy else []
    return StreamMutant(segments, f"segment {i} dropped ({len(s.payload)} bytes at {s.offset})",
                        cut=_cut_one(segments, s, s.offset), expect=expect)


def flip_payload(conv: Conversation, ch: Chooser) -> StreamMutant:
    segments = list(conv.segments)
    data = _data_indices(segments)
    if not data:
        return StreamMutant(segments, "nothing to flip", exact=True)
    i = ch.pick(data)
    s = segments[i]
    payload = bytearray(s.payload)
    at = ch.int(0, len(payload) - 1)
    if ch.bool():
        payload[at] ^= 1 << ch.int(0, 7)
    else:
        payload[at] = ch.pick(INTERESTING)
    segments[i] = Seg(s.ts_ns, s.src, s.dst, s.seq, s.ack, s.flags, bytes(payload), s.offset)
    return StreamMutant(segments, f"segment {i} payload byte {at} changed", cut=_cut_one(segments, s, s.offset + at))


def corrupt_frame(conv: Conversation, ch: Chooser, frames: list) -> StreamMutant:
    """An AMQP frame's type, channel, size or frame-end octet changed in its segment.

    `frames`: (src, dst, offset, size) of the original's frames (from its decode)."""
    segments = list(conv.segments)
    if not frames:
        return flip_payload(conv, ch)
    src, dst, offset, size = ch.pick(frames)
    part = ch.pick(["type", "channel", "size", "end", "end"])
    at = {"type": offset, "channel": offset + 1 + ch.int(0, 1), "size": offset + 3 + ch.int(0, 3),
          "end": offset + size - 1}[part]
    index = next((k for k, s in enumerate(segments) if s.payload and endpoint(s.src) == src and endpoint(s.dst) == dst
                  and s.offset <= at < s.offset + len(s.payload) and not s.control), None)
    if index is None:
        return StreamMutant(segments, "frame not in one data segment", exact=True)
    s = segments[index]
    payload = bytearray(s.payload)
    old = payload[at - s.offset]
    if part == "type":
        new = ch.pick([0, 4, 5, 7, 9, 0xCE, 0xFF, 1, 2, 3, 8])
    elif part == "end":
        new = ch.pick([0x00, 0xCD, 0xCF, 0xFF, 0x4E])
    else:
        new = old ^ (1 << ch.int(0, 7)) if ch.bool() else ch.pick(INTERESTING)
    payload[at - s.offset] = new
    if new == old:
        return StreamMutant(segments, "no change", exact=True)
    segments[index] = Seg(s.ts_ns, s.src, s.dst, s.seq, s.ack, s.flags, bytes(payload), s.offset)
    expect = []
    if part == "end" or (part == "type" and new not in (1, 2, 3, 8)):
        expect.append((src, dst, "framing", offset))
    return StreamMutant(segments, f"frame at {offset} ({src} > {dst}, {size} bytes): {part} byte {old:#04x} -> {new:#04x}",
                        cut=_cut_one(segments, s, offset), expect=expect)


def mid_stream_then_lost(conv: Conversation, ch: Chooser) -> StreamMutant:
    """A capture that starts mid-conversation (its first segments, the handshake among them, not
    captured), then loses, reorders or truncates: what every byte became is all that is checked
    (no frame is sure to survive: the directions start by resynchronising)."""
    data = _data_indices(conv.segments)
    if len(data) < 3:
        return StreamMutant(list(conv.segments), "too short to start mid-stream", exact=True)
    start = ch.pick(data[1:])
    segments = conv.segments[start:]
    what = [f"starts at segment {start}"]
    for _ in range(ch.int(1, 3)):
        mutator = ch.pick([drop_segment, drop_segment, move_segment, duplicate_segment, split_segment])
        mutant = mutator(Conversation(conv.name, segments), ch)
        segments, what = mutant.segments, what + [mutant.what]
    if ch.chance(3):
        segments = segments[:ch.int(len(segments) // 2, len(segments))]
        what.append(f"truncated to {len(segments)} segments")
    return StreamMutant(segments, "; ".join(what), cut=_cut_all(segments, 0))


SEGMENT_MUTATORS = [split_segment, merge_segments, move_segment, duplicate_segment, drop_segment,
                    flip_payload, corrupt_frame, corrupt_frame, mid_stream_then_lost]


def retarget(segments: list[Seg], port: int) -> list[Seg]:
    """The same conversation with the server side on another port (no AMQP port any more)."""
    out = []
    for s in segments:
        src = (s.src[0], port) if s.src[1] == 5672 else s.src
        dst = (s.dst[0], port) if s.dst[1] == 5672 else s.dst
        out.append(Seg(s.ts_ns, src, dst, s.seq, s.ack, s.flags, s.payload, s.offset))
    return out


_MACS = b"\x02\x00\x00\x00\x00\x01\x02\x00\x00\x00\x00\x02"


def write_pcap(segments: list[Seg]) -> bytes:
    """A nanosecond pcap of Ethernet/IPv4 or IPv6/TCP packets holding `segments` (checksums zero:
    nothing reads them)."""
    out = [struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1)]
    for s in segments:
        tcp = struct.pack(">HHIIBBHHH", s.src[1], s.dst[1], s.seq & 0xFFFFFFFF, s.ack & 0xFFFFFFFF, 5 << 4,
                          s.flags, 65535, 0, 0) + s.payload
        if len(s.src[0]) == 4:
            ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0x4000, 64, 6, 0, s.src[0], s.dst[0])
            frame = _MACS + b"\x08\x00" + ip + tcp
        else:
            ip = struct.pack(">IHBB16s16s", 6 << 28, len(tcp), 6, 64, s.src[0], s.dst[0])
            frame = _MACS + b"\x86\xdd" + ip + tcp
        out.append(struct.pack("<IIII", s.ts_ns // 10**9, s.ts_ns % 10**9, len(frame), len(frame)) + frame)
    return b"".join(out)


# -- AMQP frames -----------------------------------------------------------------------------------

FRAME_END = 0xCE


def frame(frame_type: int, channel: int, payload: bytes, end: int = FRAME_END) -> bytes:
    return struct.pack(">BHI", frame_type, channel, len(payload)) + payload + bytes([end])


@functools.lru_cache(maxsize=None)
def real_frames() -> list[bytes]:
    """Every distinct frame of the clean samples' streams (cut where a clean decode put them)."""
    import tempfile

    from amqpcap.connection.decoder import CaptureDecoder
    frames: set[bytes] = set()
    for name in CLEAN_SEEDS:
        conv = conversation(name)
        streams: dict = {}
        for s in conv.segments:
            if s.payload:
                buf = streams.setdefault((endpoint(s.src), endpoint(s.dst)), bytearray())
                if s.offset + len(s.payload) > len(buf):
                    buf[s.offset:s.offset + len(s.payload)] = s.payload
        with tempfile.NamedTemporaryFile(suffix=".pcap") as f:
            f.write(write_pcap(conv.segments))
            f.flush()
            for record in CaptureDecoder().decode([f.name]):
                if record["kind"] in ("method", "header", "body", "heartbeat"):
                    src = record["client"] if record["dir"] == "C>S" else record["server"]
                    dst = record["server"] if record["dir"] == "C>S" else record["client"]
                    stream = streams[(src, dst)]
                    piece = bytes(stream[record["offset"]:record["offset"] + record["size"]])
                    frames.add(piece[:4096] if record["kind"] != "body" else piece[:7] + piece[7:200])
    # bodies are cut to 200 bytes above (their size field then lies: one more mutation)
    return sorted(frames, key=lambda f: (len(f), f))


def mutate_frame(buf: bytes, ch: Chooser) -> bytes:
    buf = bytearray(buf)
    for _ in range(ch.int(1, 3)):
        how = ch.int(0, 10)
        if not buf:
            buf = bytearray(ch.blob(16))
            continue
        if how == 0:  # the size field
            value = ch.pick(INTERESTING_32) if ch.bool() else max(0, len(buf) - 8 + ch.int(-4, 4))
            buf[3:7] = struct.pack(">I", value)[:max(0, len(buf) - 3)] if len(buf) >= 7 else buf[3:7]
        elif how == 1:  # the type
            buf[0] = ch.pick([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0xCE, 0xFF])
        elif how == 2 and len(buf) >= 3:  # the channel
            buf[1:3] = struct.pack(">H", ch.pick([0, 1, 0xFFFF, ch.int(0, 0xFFFF)]))
        elif how == 3:  # the frame-end octet
            buf[-1] = ch.pick([0xCE, 0x00, 0xCD, 0xFF])
        elif how == 4:  # truncated
            del buf[ch.int(0, len(buf) - 1):]
        elif how == 5:  # bytes inside the payload (the size follows)
            at = ch.int(min(7, len(buf)), len(buf))
            buf[at:at] = ch.blob(8)
            _fix_size(buf)
        elif how == 6:  # bytes removed from the payload
            at = ch.int(min(7, len(buf)), len(buf))
            del buf[at:at + ch.int(1, 8)]
            _fix_size(buf)
        elif how == 7:  # a flipped bit anywhere
            at = ch.int(0, len(buf) - 1)
            buf[at] ^= 1 << ch.int(0, 7)
        elif how == 8:  # an interesting value over a 32-bit or 8-bit field inside
            at = ch.int(0, len(buf) - 1)
            value = struct.pack(">I", ch.pick(INTERESTING_32)) if ch.bool() else bytes([ch.pick(INTERESTING)])
            buf[at:at + len(value)] = value
            _fix_size(buf) if ch.bool() else None
        elif how == 9:  # spliced with another real frame
            other = ch.pick(real_frames())
            buf = buf[:ch.int(0, len(buf))] + bytearray(other[ch.int(0, len(other)):])
        else:  # a whole random payload, well framed
            buf = bytearray(frame(ch.pick([1, 2, 3, 8]), ch.int(0, 3), ch.blob(40)))
    return bytes(buf)


def _fix_size(buf: bytearray) -> None:
    if len(buf) >= 8:
        buf[3:7] = struct.pack(">I", len(buf) - 8)


# field tables: tags of both dialects, and bytes that are no tag
TAGS = b"tbBsuUIilLfdDSxTFAV"


def field_value(ch: Chooser, depth: int) -> bytes:
    tag = ch.pick(TAGS) if not ch.chance(12) else ch.int(0, 255)
    fixed = {ord("t"): 1, ord("b"): 1, ord("B"): 1, ord("s"): 2, ord("u"): 2, ord("U"): 2, ord("I"): 4,
             ord("i"): 4, ord("l"): 8, ord("L"): 8, ord("f"): 4, ord("d"): 8, ord("D"): 5, ord("T"): 8}
    if tag in fixed:
        size = fixed[tag] if not ch.chance(10) else ch.int(0, 9)
        value = ch.raw(size)
    elif tag in (ord("S"), ord("x")):
        text = ch.blob(12) if ch.bool() else ch.pick([b"", "é".encode(), b"\xff\xfe", b"\xed\xa0\x80", b"ok"])
        value = struct.pack(">I", _length(ch, len(text))) + text
    elif tag == ord("F"):
        value = field_table(ch, depth + 1)
    elif tag == ord("A"):
        value = field_array(ch, depth + 1)
    elif tag == ord("V"):
        value = b""
    else:
        value = ch.blob(6)
    return bytes([tag]) + value


def _length(ch: Chooser, true: int) -> int:
    how = ch.int(0, 9)
    if how < 7:
        return true
    if how < 9:
        return max(0, true + ch.int(-3, 3))
    return ch.pick(INTERESTING_32)


def field_table(ch: Chooser, depth: int = 0) -> bytes:
    entries = []
    for _ in range(ch.int(0, 3) if depth < 4 else 0):
        key = ch.pick([b"k", b"x-match", b"", b"\xff", "ключ".encode(), ch.blob(4)])
        entries.append(bytes([_length(ch, len(key)) & 0xFF]) + key + field_value(ch, depth))
    body = b"".join(entries)
    return struct.pack(">I", _length(ch, len(body))) + body


def field_array(ch: Chooser, depth: int = 0) -> bytes:
    body = b"".join(field_value(ch, depth) for _ in range(ch.int(0, 3) if depth < 4 else 0))
    return struct.pack(">I", _length(ch, len(body))) + body


def nested(depth: int, kinds: str = "F") -> bytes:
    """A table (F) or array (A) nested `depth` levels deep, well formed."""
    inner = struct.pack(">I", 0)
    for level in range(depth):
        kind = kinds[level % len(kinds)]
        if kind == "F":
            body = b"\x01k" + b"F" + inner
        else:
            body = b"A" + inner
        inner = struct.pack(">I", len(body)) + body
    return inner


def _shortstr(value: bytes) -> bytes:
    return bytes([len(value) & 0xFF]) + value


def table_frame(ch: Chooser) -> bytes:
    """A method or content header frame whose field table comes from `field_table` (or is nested
    deep), in one of the places tables sit."""
    if ch.chance(6):
        table = nested(ch.pick([1, 50, 200, 250, 251, 252, 253, 254, 255, 300, 500, 900, 1200, 5000]),
                       ch.pick(["F", "A", "FA"]))
    else:
        table = field_table(ch)
    where = ch.int(0, 5)
    if where == 0:  # queue.declare arguments
        payload = struct.pack(">HHH", 50, 10, 0) + _shortstr(b"q") + b"\x02" + table
    elif where == 1:  # exchange.declare arguments
        payload = struct.pack(">HHH", 40, 10, 0) + _shortstr(b"x") + _shortstr(b"topic") + b"\x00" + table
    elif where == 2:  # basic.consume arguments
        payload = struct.pack(">HHH", 60, 20, 0) + _shortstr(b"q") + _shortstr(b"c") + b"\x00" + table
    elif where == 3:  # connection.start server properties
        payload = struct.pack(">HHBB", 10, 10, 0, 9) + table + struct.pack(">I", 5) + b"PLAIN" + \
            struct.pack(">I", 5) + b"en_US"
    elif where == 4:  # connection.start-ok with AMQPLAIN: a table without its length as the response
        response = table[4:]
        payload = struct.pack(">HH", 10, 11) + table + _shortstr(b"AMQPLAIN") + \
            struct.pack(">I", len(response)) + response + _shortstr(b"en_US")
    else:  # a content header with headers (and a few other properties)
        flags = 0x2000 | (0x8000 if ch.bool() else 0) | (0x0800 if ch.bool() else 0)
        props = (_shortstr(b"text/plain") if flags & 0x8000 else b"") + table + \
            (b"\x02" if flags & 0x0800 else b"")
        return frame(2, 1, struct.pack(">HHQH", 60, 0, ch.int(0, 10), flags) + props)
    return frame(1, ch.int(0, 2), payload)


def codec_input(ch: Chooser) -> bytes:
    """A buffer for decode_frame: a real frame, mutated or not; a generated frame with field
    tables; random bytes; or bytes framed around random payloads."""
    how = ch.int(0, 9)
    if how < 4:
        buf = ch.pick(real_frames())
        return mutate_frame(buf, ch) if how else buf
    if how < 7:
        buf = table_frame(ch)
        return mutate_frame(buf, ch) if how == 6 else buf
    if how < 8:
        return ch.blob(64)
    payload = ch.blob(48)
    return frame(ch.pick([1, 2, 3, 4, 8]), ch.int(0, 2), payload)


# -- TLS records (a TLS conversation's segments) -----------------------------------------------------

TLS_SEEDS = ["tls/tls12_gcm.pcap", "tls/tls12_chacha.pcap", "tls/tls13_hello_retry.pcap", "tls/tls_mixed_plain.pcap",
             "tls/tls_partial_keys.pcap", "tls/tls_go_client.pcap"]


def tls_records(conv: Conversation) -> list[tuple]:
    """Every TLS record of the conversation's streams, found by walking 5-byte record headers
    from each direction's first byte (independently of amqpcap): (src, dst, stream offset,
    record length with its header, content type). A stream that is not TLS yields none."""
    streams: dict = {}
    for s in conv.segments:
        if s.payload:
            streams.setdefault(s.key, bytearray())
            data = streams[s.key]
            if s.offset == len(data):
                data += s.payload
    out = []
    for (src, dst), data in streams.items():
        at = 0
        while at + 5 <= len(data) and data[at] in (20, 21, 22, 23, 24) and data[at + 1] == 3:
            size = 5 + int.from_bytes(data[at + 3:at + 5], "big")
            out.append((src, dst, at, size, data[at]))
            at += size
    return out


def _segment_at(conv: Conversation, src, dst, offset: int):
    return next((k for k, s in enumerate(conv.segments) if s.payload and s.src == src and s.dst == dst
                 and s.offset <= offset < s.offset + len(s.payload) and not s.control), None)


def _changed(conv: Conversation, index: int, at: int, new: int) -> list[Seg]:
    segments = list(conv.segments)
    s = segments[index]
    payload = bytearray(s.payload)
    payload[at - s.offset] = new
    segments[index] = Seg(s.ts_ns, s.src, s.dst, s.seq, s.ack, s.flags, bytes(payload), s.offset)
    return segments


def corrupt_record_header(conv: Conversation, ch: Chooser) -> StreamMutant:
    """A TLS record's type, version or length changed: framing must resynchronise, or count."""
    records = tls_records(conv)
    if not records:
        return flip_payload(conv, ch)
    src, dst, offset, size, _ = ch.pick(records)
    at = offset + ch.int(0, 4)
    index = _segment_at(conv, src, dst, at)
    if index is None:
        return StreamMutant(list(conv.segments), "record header not in a data segment", exact=True)
    old = conv.segments[index].payload[at - conv.segments[index].offset]
    new = old ^ (1 << ch.int(0, 7)) if ch.bool() else ch.pick(INTERESTING)
    if new == old:
        return StreamMutant(list(conv.segments), "no change", exact=True)
    return StreamMutant(_changed(conv, index, at, new), f"TLS record at {offset} ({size} bytes): header byte "
                        f"{at - offset} {old:#04x} -> {new:#04x}", cut=_cut_one(conv.segments, conv.segments[index], offset))


def flip_ciphertext(conv: Conversation, ch: Chooser) -> StreamMutant:
    """A byte inside a protected record changed: that record does not open (its tag or MAC
    fails); the records after it do (when keys were there, a tls-undecryptable issue says so)."""
    records = [r for r in tls_records(conv) if r[4] == 23 and r[3] > 5 + 17]
    if not records:
        return flip_payload(conv, ch)
    src, dst, offset, size, _ = ch.pick(records)
    at = offset + ch.int(5, size - 1)
    index = _segment_at(conv, src, dst, at)
    if index is None:
        return StreamMutant(list(conv.segments), "record not in a data segment", exact=True)
    old = conv.segments[index].payload[at - conv.segments[index].offset]
    segments = _changed(conv, index, at, old ^ (1 << ch.int(0, 7)))
    return StreamMutant(segments, f"TLS record at {offset} ({size} bytes): byte {at - offset} flipped",
                        cut=_cut_one(conv.segments, conv.segments[index], offset))


def truncate_conversation(conv: Conversation, ch: Chooser) -> StreamMutant:
    """The capture stops early (a rotation, a killed tcpdump): records cut short at its end."""
    data = _data_indices(conv.segments)
    if len(data) < 2:
        return StreamMutant(list(conv.segments), "too short to truncate", exact=True)
    end = ch.pick(data[1:])
    return StreamMutant(list(conv.segments[:end]), f"truncated before segment {end}",
                        cut=_cut_all(conv.segments, end))


TLS_MUTATORS = [split_segment, merge_segments, move_segment, duplicate_segment, drop_segment, flip_payload,
                corrupt_record_header, flip_ciphertext, flip_ciphertext, truncate_conversation]
