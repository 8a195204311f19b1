"""Connections that outlive a run: their whole state saved at the end of one run and resumed in
the next (docs/state.md).

What a connection still open at the captures' end holds is plain data: per TCP direction the
sequence number of stream offset 0, the next offset and what waits out of order; per AMQP
direction the bytes of a frame cut in the middle and where framing stands; the messages whose
content is still arriving (their bodies so far, so the SHA-256 completes); and the analytics
state machines of every channel (unconfirmed publishes, outstanding deliveries, consumers,
pending requests, the handshake facts). `save` turns one connection into a blob, `resume` makes a
live connection of it again, for the first packet of the next run that continues it.

A blob is a pickle of plain data and of the analytics objects, read back by an unpickler that
knows only those types (a blob cannot make it run anything else); capture files are named, not
numbered, so a resumed connection's chunks keep the capture they came from.
"""

from __future__ import annotations

import collections
import hashlib
import io
import pickle
import zlib
from dataclasses import dataclass

from amqp_decode.packets import Segment, format_endpoint
from amqp_decode.frame_start import frame_start_for
from amqp_decode.record import as_record
from amqp_decode.stream import READER_STATES, AmqpConnection, FrameReader, _Content
from amqp_decode.tcp import NONE, SEQ_MOD, TCP_SYN, HalfStream

FORMAT = 2  # of the blob; a blob of another format is not resumed (2: pcap records and TCP stream indices)
FRAMES, RESYNC, SKIP = READER_STATES["frames"], READER_STATES["resync"], READER_STATES["skip"]


@dataclass
class SavedState:
    """One connection as the end of a run left it."""

    key: str  # the 4-tuple, the same from either side ("a|b" with a < b)
    connection: str  # its id, kept for its whole life
    last_ts_ns: int  # its last packet
    source: str  # the capture file of the run that saved it (its last)
    blob: bytes


def tuple_key(src: bytes, sport: int, dst: bytes, dport: int) -> str:
    a, b = format_endpoint(src, sport), format_endpoint(dst, dport)
    return f"{a}|{b}" if a < b else f"{b}|{a}"


# -- saving --------------------------------------------------------------------------------------

def save(connection: AmqpConnection, analyzer, seq: int, capture_names: list[str]) -> bytes:
    """One open connection (its decoder, its analytics, its frame counter) as a blob."""
    tcp = connection.tcp

    def name(index: int):
        return capture_names[index] if index >= 0 else None

    data = {
        "format": FORMAT, "seq": seq,
        "tcp": {"a": tcp.a, "b": tcp.b, "first_ts_ns": tcp.first_ts_ns, "last_ts_ns": tcp.last_ts_ns,
                "syn_from": tcp.syn_from, "fins": list(tcp.fins), "rst": tcp.rst,
                "first_capture": name(tcp.first_capture),
                "streams": {name(c): n for c, n in tcp.streams.items()},
                "halves": [_half(h, name, _may_send_secrets(connection, h.direction)) for h in tcp.halves]},
        "amqp": {"id": connection.id, "version": connection.version, "protocol": connection.protocol,
                 "client": connection.client,
                 "client_reason": connection.client_reason, "status": connection.status,
                 "pending": [(direction, record.as_dict()) for direction, record in connection.pending],
                 "ignored_bytes": connection.ignored_bytes,
                 "first_capture": name(connection.first_capture),
                 "contents": {key: _content(c) for key, c in connection.contents.items()},
                 "readers": [_reader(r, name, _may_send_secrets(connection, r.direction))
                             for r in connection.readers]},
    }
    out = io.BytesIO()
    pickler = pickle.Pickler(out, protocol=5)
    pickler.persistent_id = _persistent_id(analyzer, connection.version)
    pickler.dump((data, analyzer))
    return zlib.compress(out.getvalue(), 1)


def _may_send_secrets(connection: AmqpConnection, direction: int) -> bool:
    """Credentials travel from the client: its direction, or either while the client is unknown."""
    return connection.client is None or connection.client == direction


def _half(half: HalfStream, name, may_send_secrets: bool) -> dict:
    # Bytes waiting out of order are not framed yet: from the client they may hold credentials,
    # so they are never saved; the next run counts them as not captured (a gap, bytes skipped).
    pending = [] if may_send_secrets else half.pending
    return {"base": half.base, "next": half.next, "fin": half.fin, "syn": half.syn, "order": half.order,
            "pending": [(o, order, d, ts, name(c), r) for o, order, d, ts, c, r in pending],
            # not the delivered bytes kept to compare retransmissions with: a retransmission
            # across the runs' boundary is counted, not compared (they would hold any payload)
            "pending_bytes": sum([len(item[2]) for item in pending]), "recent": [], "recent_bytes": 0,
            "packets": half.packets, "bytes": half.bytes, "duplicate_bytes": half.duplicate_bytes,
            "hole_acks": half.hole_acks if pending else 0}


def _reader(reader: FrameReader, name, may_send_secrets: bool) -> dict:
    body = dict(reader.body, capture=name(reader.body["capture"])) if reader.body is not None else None
    saved = {"buf": bytes(reader.buf), "base": reader.base, "end": reader.end,
             "chunks": [(end, ts, name(c), r) for end, ts, c, r in reader.chunks], "state": reader.state,
             "mid_stream": reader.mid_stream, "skipped": reader.skipped,
             "skip_first": (reader.skip_first[0], name(reader.skip_first[1]), reader.skip_first[2]),
             "skip_last": (reader.skip_last[0], name(reader.skip_last[1]), reader.skip_last[2]),
             "skip_remaining": reader.skip_remaining,
             "skip_detail": reader.skip_detail, "resync_waiting": sorted(reader.resync_live or ()),
             "resync_scanned": reader.resync_scanned, "body": body, "frames": reader.frames,
             "decoded_bytes": reader.decoded_bytes, "skipped_bytes": reader.skipped_bytes,
             "walked_frames": reader.walked_frames, "walked_sasl": reader.walked_sasl,
             "undecoded_frames": reader.undecoded_frames, "opaque_kind": reader.opaque_kind}
    if reader.buf and (reader.state == FRAMES and reader.connection.codec.may_hold_secret(reader.buf)
                       or reader.state == RESYNC and may_send_secrets):
        saved.update(_withheld(reader, name))
    return saved


def _withheld(reader: FrameReader, name) -> dict:
    """What is saved instead of a buffer that may hold credentials: none of its bytes, and the
    next run skips them with an issue saying why. A frame cut by the run's end whose size is known
    (the codec says which frames may carry credentials) is skipped to its end, framing kept; bytes
    a resynchronisation was still judging (not framed yet: any frame's) are dropped, and the
    resynchronisation goes on from the next run's first byte."""
    held = len(reader.buf)
    size = reader._known_frame_size() if reader.state == FRAMES else None
    first = reader._first_byte(reader.base) if reader.state == FRAMES or not reader.skipped else reader.skip_first
    withheld = {"buf": b"", "base": reader.base + held, "skip_first": (first[0], name(first[1]), first[2])}
    if size is not None:
        withheld.update(state=SKIP, skipped=held, skip_remaining=size - held,
                        skip_detail=f"a {size}-byte frame that may carry credentials was cut by the end of the "
                                    "previous run; its bytes were not saved: the frame is lost, framing kept")
        return withheld
    last = reader._first_byte(reader.base + held - 1)
    withheld.update(state=RESYNC, skipped=reader.skipped + held, skip_last=(last[0], name(last[1]), last[2]),
                    resync_waiting=[], resync_scanned=reader.base + held,
                    skip_detail="bytes not yet framed when the previous run ended were not saved (they may carry "
                                "credentials): skipped until frames were found again")
    return withheld


def _content(content: _Content) -> dict:
    return {"records": [record.as_dict() for record in content.records], "body_size": content.body_size,
            "received": content.received,
            "frames": content.frames, "intact": content.intact,
            "body": bytes(content.body) if content.body is not None else None,
            "received_bytes": content.received_bytes()}


# -- resuming ------------------------------------------------------------------------------------

def load(blob: bytes, analytics_context) -> tuple[dict, object]:
    """(decoder data, analytics objects) of a blob; `analytics_context`: what the analytics objects
    refer to in this run (amqp_decode.analytics.Analytics: its emit, settings, and naming by version)."""
    unpickler = _Unpickler(io.BytesIO(zlib.decompress(blob)))
    unpickler.persistent_load = _persistent_load(analytics_context)
    data, analyzer = unpickler.load()
    if data.get("format") != FORMAT:
        raise ValueError(f"saved state of format {data.get('format')} (this version reads {FORMAT})")
    return data, analyzer


def continues(data: dict, segment: Segment, max_gap_ns: int, tolerance: int) -> str | None:
    """Why this first packet does not continue the saved connection (None when it does)."""
    tcp = data["tcp"]
    gap = segment.ts_ns - tcp["last_ts_ns"]
    if gap > max_gap_ns:
        return f"silent for {gap / 3.6e12:.1f} hours since its last packet"
    if gap < 0:
        return "the saved state is later than this packet (captures out of order, or another capture point)"
    if segment.flags & TCP_SYN:
        return "a new connection (SYN) on the same addresses and ports"
    direction = 0 if (segment.src, segment.sport) == tuple(tcp["a"]) else 1
    half = tcp["halves"][direction]
    if half["base"] == NONE:
        return None  # that direction never carried data: nothing to compare
    relative = (segment.seq - half["base"]) % SEQ_MOD
    offset = relative + ((half["next"] - relative + (1 << 31)) // SEQ_MOD) * SEQ_MOD
    if abs(offset - half["next"]) > tolerance:
        return f"its sequence numbers jumped by {offset - half['next']} bytes from where the saved state ended"
    return None


def restore(data: dict, connection: AmqpConnection, capture_names: list[str]) -> None:
    """Make a freshly made connection (same 4-tuple, its TCP object too) the saved one."""
    def index(name) -> int:
        if name is None:
            return -1
        if name not in capture_names:
            capture_names.append(name)  # a file of an earlier run: records name it still
        return capture_names.index(name)

    saved, tcp = data["tcp"], connection.tcp
    tcp.first_ts_ns, tcp.last_ts_ns = saved["first_ts_ns"], saved["last_ts_ns"]
    tcp.syn_from, tcp.fins, tcp.rst = saved["syn_from"], list(saved["fins"]), saved["rst"]
    tcp.first_capture = index(saved["first_capture"])
    tcp.streams = {index(name): n for name, n in saved["streams"].items()}
    flipped = tuple(saved["a"]) != tcp.a  # the new run saw the other side first
    halves = saved["halves"][::-1] if flipped else saved["halves"]
    for half, state in zip(tcp.halves, halves):
        half.base, half.next, half.fin, half.syn, half.order = (state["base"], state["next"], state["fin"],
                                                                state["syn"], state["order"])
        half.pending = [(o, order, d, ts, index(c), r) for o, order, d, ts, c, r in state["pending"]]
        half.pending_bytes = state["pending_bytes"]
        # (no delivered bytes kept: a state has none, "recent" is always empty, see _half)
        half.packets, half.bytes = state["packets"], state["bytes"]
        half.duplicate_bytes, half.hole_acks = state["duplicate_bytes"], state["hole_acks"]
    amqp = data["amqp"]
    connection.id = amqp["id"]
    if amqp["version"] is not None and amqp["version"] in connection.codecs:
        connection.version = amqp["version"]
        connection.codec = connection.codecs[amqp["version"]]
        connection.frame_start = frame_start_for(connection.codec, connection.settings.resync_max_frame)
    connection.status = amqp["status"]
    connection.protocol = amqp.get("protocol")
    if connection.protocol == "amqp-1.0":
        connection.version = amqp["version"]
    connection.ignored_bytes = amqp["ignored_bytes"]
    connection.first_capture = index(amqp["first_capture"])
    if amqp["client"] is not None:
        connection._decide_client(1 - amqp["client"] if flipped else amqp["client"], amqp["client_reason"])
    connection.pending = [((1 - d) if flipped else d, as_record(record)) for d, record in amqp["pending"]]
    connection.contents = {}
    for (direction, channel), state in amqp["contents"].items():
        hasher = None
        if state["received_bytes"] is not None:  # the hash resumes from the body so far
            hasher = hashlib.sha256(state["received_bytes"])
        records = [as_record(record) for record in state["records"]]
        connection.contents[((1 - direction) if flipped else direction, channel)] = _Content(
            records=records, method=records[0], body_size=state["body_size"],
            received=state["received"], frames=state["frames"], intact=state["intact"], hasher=hasher,
            body=bytearray(state["body"]) if state["body"] is not None else None,
            received_bytes=state["received_bytes"] if state["received_bytes"] is not None
            and connection.settings.resumable else None)
    readers = amqp["readers"][::-1] if flipped else amqp["readers"]
    for reader, state in zip(connection.readers, readers):
        reader.buf = bytearray(state["buf"])
        reader.base, reader.end = state["base"], state["end"]
        reader.chunks = collections.deque((end, ts, index(c), r) for end, ts, c, r in state["chunks"])
        reader.state, reader.mid_stream = state["state"], state["mid_stream"]
        reader.skipped = state["skipped"]
        reader.skip_first = (state["skip_first"][0], index(state["skip_first"][1]), state["skip_first"][2])
        last = state.get("skip_last", state["skip_first"])  # (a state saved before it was kept: its first byte)
        reader.skip_last = (last[0], index(last[1]), last[2])
        reader.skip_remaining, reader.skip_detail = state["skip_remaining"], state["skip_detail"]
        waiting = sorted(state["resync_waiting"])  # judged again at once: due from offset 0
        if waiting:
            reader.resync_live, reader.resync_due = set(waiting), [(0, a) for a in waiting]
            reader.resync_order = collections.deque(waiting)
        reader.resync_scanned = state["resync_scanned"]
        reader.body = dict(state["body"], capture=index(state["body"]["capture"])) if state["body"] else None
        reader.frames, reader.decoded_bytes = state["frames"], state["decoded_bytes"]
        reader.skipped_bytes = state["skipped_bytes"]
        reader.walked_frames, reader.walked_sasl = state.get("walked_frames", 0), state.get("walked_sasl", 0)
        reader.undecoded_frames = state.get("undecoded_frames", 0)
        reader.opaque_kind = state.get("opaque_kind", reader.opaque_kind)


# -- the analytics objects: pickled, their links to this run's objects by name --------------------

def _persistent_id(analyzer, version):
    if analyzer is None:
        return lambda obj: None
    links = {id(analyzer.emit): "emit", id(analyzer.settings): "settings", id(analyzer.naming): ("naming", version)}

    def persistent_id(obj):
        return links.get(id(obj))
    return persistent_id


def _persistent_load(analytics):
    def persistent_load(link):
        if isinstance(link, tuple):  # the connection's protocol names, by its version
            return analytics.naming(link[1])
        return getattr(analytics, link)
    return persistent_load


class _Unpickler(pickle.Unpickler):
    """Only the types a saved state holds: a tampered blob cannot name anything else."""

    ALLOWED = {("collections", "deque"), ("datetime", "date"), ("datetime", "datetime"),
               ("datetime", "timezone"), ("datetime", "timedelta"), ("decimal", "Decimal"),
               ("builtins", "set"), ("builtins", "frozenset"), ("builtins", "bytearray"),
               ("copyreg", "_reconstructor"), ("copyreg", "__newobj__"), ("builtins", "object"),
               ("amqp_decode.fieldtable", "Timestamp")}

    def find_class(self, module: str, name: str):
        if (module, name) in self.ALLOWED or module.startswith("amqp_decode.analytics."):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"a saved state may not hold {module}.{name}")

