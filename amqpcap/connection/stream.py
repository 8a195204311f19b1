"""AMQP over one TCP connection: bytes of both directions in, one record per frame out.

`AmqpConnection` is the `StreamSink` the TCP layer feeds (and the `FrameSink` its two readers
report to). It decides whether the connection is AMQP at all and which side is the client (the side
that sent the protocol header; else the side that sent the SYN; else the side not on a configured
AMQP port; else the direction of the first method that travels only one way), picks the spec from
the client's protocol header, and runs one `FrameReader` per direction (amqpcap.connection.framing);
the frames they find become records, a content method's header and bodies gathered with it.

A TLS connection (on a TLS port, or whose client opens with a ClientHello on a port of no known
protocol) goes through its TLS layer first (amqpcap.tls.layer): the readers then get the
decrypted bytes, in the offsets of the decrypted stream, each record marked as TLS's; the TLS
layer's own issues (what could not be decrypted, bytes lost) have the TCP stream's offsets.

Records are amqpcap.connection.record.Record objects, in the JSON contract of `amqpcap decode --jsonl`
(see docs).
"""

from __future__ import annotations

import base64
import hashlib

from amqpcap.capture.packets import format_endpoint
from amqpcap.connection.framing import (
    NOT_DECODED,
    BodyFrame,
    FrameReader,
    FrameSink,
    ReaderState,
    plausible,
    starts_with_1_0_frames,
)
from amqpcap.connection.options import StreamOptions
from amqpcap.connection.record import TLS_SHAPES, Record, add_message, as_record, end_record, new_record
from amqpcap.protocol.codec import FRAME_HEADER_SIZE, Codec
from amqpcap.protocol.frame_start import frame_start_for
from amqpcap.protocol.frames import PROTOCOL_HEADER_SIZE, parse_protocol_header, protocol_header_texts
from amqpcap.protocol.other_protocols import name_protocol
from amqpcap.protocol.spec import CLIENT_TO_SERVER, SERVER_TO_CLIENT
from amqpcap.tls.layer import NOT_DECODED as TLS_NOT_DECODED
from amqpcap.tls.layer import TlsLayer, TlsSink

_EMPTY_SHA256 = hashlib.sha256()  # never updated: each message's hasher is a copy of it


def body_hasher(data=b""):
    """A SHA-256 of a message body, started with `data`: a copy of one made once, as
    `hashlib.sha256()` looks OpenSSL's digest up by name each time it is called (about a fifth of
    a small message's hashing, measured)."""
    hasher = _EMPTY_SHA256.copy()
    if data:
        hasher.update(data)
    return hasher


class _Content:
    """A content-bearing method waiting for its header and bodies on one channel."""

    def __init__(self, records: list | None = None, method: Record | None = None, body_size: int | None = None,
                 received: int = 0, frames: int = 0, intact: bool = True, hasher=None,
                 body: bytearray | None = None, received_bytes: bytes | None = None) -> None:
        self.records = records if records is not None else []
        self.method = method
        self.body_size = body_size
        # Folded content (StreamOptions.fold_content): no header record holds the properties, and
        # the time of the last content frame goes with the message instead
        self.properties = None
        self.last_ns = -1
        self.received = received
        self.frames = frames
        self.intact = intact
        self.hasher = hasher
        self.body = body
        # the body so far, kept only when connections are carried to the next run (the hash must be
        # resumable there, and hashlib's state cannot be saved); None past `resumable_body_cap`.
        # Kept as the frames' own payloads, joined only for a message still open when a run ends:
        # copying every body into one buffer as it came cost about 2% of a decode task.
        self.received_parts = None if received_bytes is None else [bytes(received_bytes)]
        self.received_size = 0 if received_bytes is None else len(received_bytes)

    def saved(self) -> dict:
        """As plain data for the next run: its records, counts and the body so far (which its hash
        resumes from)."""
        return {"records": [record.as_dict() for record in self.records], "body_size": self.body_size,
                "received": self.received, "frames": self.frames, "intact": self.intact,
                "body": bytes(self.body) if self.body is not None else None,
                "received_bytes": self.received_bytes()}

    @staticmethod
    def restored(state: dict, resumable: bool) -> "_Content":
        """The content as `saved` left it (its hash resumed from the body so far)."""
        received = state["received_bytes"]
        records = [as_record(record) for record in state["records"]]
        return _Content(records=records, method=records[0], body_size=state["body_size"], received=state["received"],
                        frames=state["frames"], intact=state["intact"],
                        hasher=body_hasher(received) if received is not None else None,
                        body=bytearray(state["body"]) if state["body"] is not None else None,
                        received_bytes=received if received is not None and resumable else None)

    def received_bytes(self) -> bytes | None:
        """The body so far, as kept for carrying (None: not kept)."""
        return None if self.received_parts is None else b"".join(self.received_parts)


class AmqpConnection(FrameSink):
    """The StreamSink for one TCP connection; appends finished records to `out`."""

    def __init__(self, tcp, connection_id: str, codecs: dict[str, Codec], settings: "StreamOptions",
                 out: list, capture_names: list[str], on_end=None, endpoints: tuple[str, str] | None = None) -> None:
        """`endpoints`: tcp.a and tcp.b as format_endpoint gives them, when the caller has them already."""
        self.tcp = tcp
        self.on_end = on_end
        self.id = connection_id
        self.codecs = codecs
        self.settings = settings
        self.out = out
        self.capture_names = capture_names
        self.endpoints = endpoints or (format_endpoint(*tcp.a), format_endpoint(*tcp.b))
        self.ports = (tcp.a[1], tcp.b[1])
        self.version: str | None = None
        self.codec = codecs[settings.default_version]
        self.frame_start = frame_start_for(self.codec, settings.resync_max_frame)
        self.readers = (FrameReader(self, 0), FrameReader(self, 1))
        self.client: int | None = None  # direction index of the client
        self.labels = ((None, None), (None, None))  # per direction: (client, server) once decided
        self.directions = (None, None)  # per direction: "C>S" / "S>C" once decided
        self.status = "undecided"  # -> "amqp", "not-amqp", "tls" (-> "amqp" once TLS gives plaintext)
        self.tls: TlsLayer | None = None  # a TLS connection's layer: TCP bytes go through it
        # What it speaks when that is not AMQP 0-9-1 or 0-9 though its bytes go to the readers:
        # "amqp-1.0" (walked), or another protocol its client's first bytes named ("http", ...)
        self.protocol: str | None = None
        self.pending: list[tuple[int, dict]] = []
        self.contents: dict[tuple[int, int], _Content] = {}
        self.ignored_bytes = 0
        # While undecided: what came, in order ((direction, offset, data, ts, capture, record)
        # and gaps (direction, offset, size, ts)), for the readers once the bytes tell.
        self.held: list[tuple] = []
        self.held_bytes = 0
        self.first_capture = -1  # file of the first byte: the capture for records tied to no packet
        self.client_reason: str | None = None
        self.end_reason: str | None = None
        self.headers_folded = self.bodies_folded = 0  # content frames that made no record (fold_content)

    # -- StreamSink -----------------------------------------------------------------------------

    def data(self, direction: int, offset: int, data: bytes, ts_ns: int, capture: int, record: int) -> None:
        if self.first_capture < 0:
            self.first_capture = capture
        if self.tls is not None:
            self.tls.data(direction, offset, data, ts_ns, capture, record)
            return
        if self.status == "undecided":
            self.held.append((direction, offset, data, ts_ns, capture, record))
            self.held_bytes += len(data)
            self._classify(direction)
            if self.status == "undecided":
                return
            self._replay_held()
            return
        if self.status != "amqp":
            self.ignored_bytes += len(data)
            return
        reader = self.readers[direction]  # (typed in stream.pxd: compiled, a C call)
        reader.data(offset, data, ts_ns, capture, record)

    def gap(self, direction: int, offset: int, size: int, ts_ns: int) -> None:
        if self.tls is not None:
            self.tls.gap(direction, offset, size, ts_ns)
        elif self.status == "amqp":
            reader = self.readers[direction]
            reader.gap(offset, size, ts_ns)
        elif self.status == "undecided":
            self.held.append((direction, offset, size, ts_ns))

    def conflict(self, direction: int, offset: int, size: int, ts_ns: int) -> None:
        if self.tls is not None:
            self.tls_issue(direction, "retransmission-conflict", f"a retransmission carried {size} bytes that differ "
                           "from the first copy; the first copy was decoded", 0, offset, offset + size,
                           (ts_ns, ts_ns, -1, 0, 0))
        elif self.status == "amqp":
            reader = self.readers[direction]
            self.issue(reader, "retransmission-conflict", f"a retransmission carried {size} bytes that differ "
                       "from the first copy; the first copy was decoded", 0, offset, offset + size, None,
                       (ts_ns, ts_ns, -1, 0, 0))

    def end(self, reason: str, ts_ns: int) -> None:
        self.end_reason = reason
        if self.status == "undecided" and self.held_bytes:  # the stream ended before its bytes told
            self._classify(-1)
            self._replay_held()
        if self.tls is not None:
            if self.client is None:
                client = self._port_guess(self.settings.tls_ports)
                self._decide_client(client if client is not None else self.tcp.syn_from, "TLS port")
            self.tls.finish(ts_ns)
        if self.status == "amqp":
            for reader in self.readers:
                reader.finish()
            for key in list(self.contents):
                self._close_content(key, complete=False, why="connection ended")
            if self.client is None:
                self._decide_client(self._port_guess(), "guessed from ports")
        # After every record of the connection: what consumes records learns of the end in order.
        self.out.append(end_record(self.id, self.summary()))
        if self.on_end is not None:
            self.on_end(self)
        # Its last use: the readers and this connection refer to each other, and it to its TCP
        # connection (amqpcap.capture.tcp.TcpConnection.end says why the cycles are broken here).
        for reader in self.readers:
            reader.connection = None
        self.tcp = None
        if self.tls is not None:  # (its layer, and the layer's record readers, refer back the same way)
            self.tls.release()

    # -- carried to the next run (amqpcap.onepass.state frames the blob) ---------------------------

    def may_send_secrets(self, direction: int) -> bool:
        """Credentials travel from the client: its direction, or either while the client is unknown."""
        return self.client is None or self.client == direction

    def saved(self, name) -> dict:
        """The AMQP side as plain data for the next run (`name`: capture index -> file name): its
        identity and what it decided, records waiting for the client's side, messages whose content
        is still arriving, each direction's framing (FrameReader.saved)."""
        return {"id": self.id, "version": self.version, "protocol": self.protocol, "client": self.client,
                "client_reason": self.client_reason, "status": self.status,
                "pending": [(direction, record.as_dict()) for direction, record in self.pending],
                "ignored_bytes": self.ignored_bytes, "first_capture": name(self.first_capture),
                "contents": {key: content.saved() for key, content in self.contents.items()},
                "readers": [reader.saved(name, self.may_send_secrets(reader.direction)) for reader in self.readers],
                "tls": self.tls.saved(name) if self.tls is not None else None}

    def restore(self, state: dict, index, flipped: bool) -> None:
        """The AMQP side as `saved` left it; `flipped`: this run saw the other side first (the saved
        directions are swapped)."""
        self.id = state["id"]
        version = state["version"]
        if version is not None and version in self.codecs:
            self.version = version
            self.codec = self.codecs[version]
            self.frame_start = frame_start_for(self.codec, self.settings.resync_max_frame)
        self.status, self.protocol = state["status"], state.get("protocol")
        if self.protocol == "amqp-1.0":
            self.version = version
        self.ignored_bytes = state["ignored_bytes"]
        self.first_capture = index(state["first_capture"])
        if state["client"] is not None:
            self._decide_client(1 - state["client"] if flipped else state["client"], state["client_reason"])
        self.pending = [((1 - d) if flipped else d, as_record(record)) for d, record in state["pending"]]
        self.contents = {((1 - direction) if flipped else direction, channel): _Content.restored(
            saved, self.settings.resumable) for (direction, channel), saved in state["contents"].items()}
        readers = state["readers"][::-1] if flipped else state["readers"]
        for reader, saved in zip(self.readers, readers):
            reader.restore(saved, index)
        if state.get("tls") is not None:  # (its keys from this run's key log: amqpcap.tls.layer)
            self.tls = TlsLayer(_TlsSide(self), self.settings.keys, self.settings.sessions)
            self.tls.restore(state["tls"], index, flipped)

    def earliest_pending(self, low: int) -> int:
        """The earliest time a record still to come from this connection can carry, if before
        `low`: its end (timed by its last packet) once closed, its out-of-order segments, its bytes
        held while undecided, its readers' partial frames and skipped bytes, its messages awaiting
        their content, its records awaiting the client's side. A TLS connection's one issue is
        timed by its first encrypted byte (late: amqpcap.decodeview.order knows); one not AMQP makes no record."""
        status = self.status
        if status == "not-amqp":
            return low
        tcp = self.tcp
        if tcp.closed_at is not None and tcp.last_ts_ns < low:
            low = tcp.last_ts_ns
        for half in tcp.halves:
            low = half.earliest_pending(low)
        if self.tls is not None:
            low = self.tls.earliest_pending(low)
            if status == "tls":
                return low
        if status == "undecided":
            for held in self.held:  # bytes (direction, offset, data, ts_ns, ...) and gaps (..., ts_ns)
                if held[3] < low:
                    low = held[3]
            return low
        for reader in self.readers:
            low = reader.earliest_pending(low)
        for content in self.contents.values():
            if content.method.ts_ns < low:
                low = content.method.ts_ns
        for _, record in self.pending:
            if record.ts_ns < low:
                low = record.ts_ns
        return low

    def speaks(self) -> str:
        """What the tables say the connection is (their `status`): amqp (0-9-1 or 0-9, decoded),
        amqp-1.0 (walked), another protocol its client spoke (http, tls, mqtt...: counted), tls (on
        a TLS port), not-amqp, or no-payload."""
        if self.status == "undecided":
            return "no-payload"
        if self.status == "amqp" and self.protocol is not None:
            return self.protocol
        return self.status

    def summary(self) -> dict:
        """Per-connection facts for reports and byte accounting (direction labels as in records)."""
        directions = {}
        for reader in self.readers:
            label = "?" if self.client is None else (
                CLIENT_TO_SERVER if reader.direction == self.client else SERVER_TO_CLIENT)
            half = self.tcp.halves[reader.direction]
            directions[label] = {"stream_bytes": half.next, "decoded_bytes": reader.decoded_bytes,
                                 "skipped_bytes": reader.skipped_bytes, "frames": reader.frames,
                                 "undecoded_frames": reader.undecoded_frames,
                                 "packets": half.packets, "duplicate_bytes": half.duplicate_bytes}
        client = self.client if self.client is not None else 0
        capture = self.tcp.first_capture
        summary = {"connection": self.id, "status": self.speaks(),
                "capture": self.capture_names[capture] if capture >= 0 else None, "client": self.endpoints[client],
                "server": self.endpoints[1 - client], "client_decided_by": self.client_reason,
                "version": self.version, "first_ts_ns": self.tcp.first_ts_ns,
                "last_ts_ns": self.tcp.last_ts_ns, "syn_seen": self.tcp.syn_from is not None,
                "end_reason": self.end_reason, "ignored_bytes": self.ignored_bytes,
                "directions": directions}
        if self.tls is not None:
            summary["tls"] = self.tls.summary(client)
        return summary

    # -- classification -------------------------------------------------------------------------

    def syn_seen(self, direction: int) -> bool:
        """Whether the direction's stream is seen from its start (a TLS one's decrypted stream is
        when its handshake was)."""
        if self.tls is not None:
            return self.tls.client_random is not None
        return self.tcp.halves[direction].syn

    def _classify(self, direction: int) -> None:
        """Decide what the connection carries, from its ports, else from the bytes held so far
        (`direction` sent the latest; -1: the stream ended, decide with what there is)."""
        if self.ports[0] in self.settings.tls_ports or self.ports[1] in self.settings.tls_ports:
            self._start_tls()
            return
        on_port = self.ports[0] in self.settings.amqp_ports or self.ports[1] in self.settings.amqp_ports
        if not on_port and self._opens_tls():
            self._start_tls()
            return
        verdict = True if on_port else self._looks_amqp(direction)
        if verdict is None:
            if direction >= 0 and self.held_bytes < UNDECIDED_HOLD:
                return  # too few bytes to tell yet: hold them
            verdict = False
        if not verdict:
            self.status = "not-amqp"
            return
        self.status = "amqp"
        if self.tcp.syn_from is not None:
            self._decide_client(self.tcp.syn_from, "SYN")
        elif on_port and not self._starts(b"AMQP"):
            port_client = self._port_guess()
            if port_client is not None:
                self._decide_client(port_client, "port")

    def _looks_amqp(self, direction: int):
        """On a port of no known protocol: True when a direction's first bytes are a protocol
        header or AMQP frames (a capture may begin mid-connection, or with the server's segment),
        False when they cannot be, None when more bytes are needed. A protocol header split over
        segments is waited for; frames must chain (two, or one ending exactly where the bytes do,
        a method the spec knows), so another binary protocol is not taken for AMQP."""
        undecided = False
        for side in (0, 1):
            head = self._head(side)
            if not head:
                continue
            if head[:4] == b"AMQP":
                return True
            if len(head) < 4 and b"AMQP".startswith(head):
                undecided = True
                continue
            verdict = self._frames_at_start(head)
            if verdict:
                return True
            if verdict is None:
                undecided = True
        return None if undecided else False

    def _frames_at_start(self, head: bytes):
        codec = self.codec
        first = plausible(codec, head, 0, self.settings.resync_max_frame)
        if first is None or first is False:
            return first
        if head[0] == 1:  # a method frame: its class and method must be the spec's
            if first - 1 < FRAME_HEADER_SIZE + 4:
                return False
            class_method = int.from_bytes(head[FRAME_HEADER_SIZE:FRAME_HEADER_SIZE + 4], "big")
            if class_method not in codec._methods:
                return False
        if first == len(head):
            return True if head[0] == 1 else None
        second = plausible(codec, head, first, self.settings.resync_max_frame)
        return second if second is None or second is False else True

    def _head(self, side: int) -> bytes:
        """The bytes held of one direction from its first held byte, up to a gap."""
        parts, expected = [], -1
        for item in self.held:
            if item[0] != side:
                continue
            if len(item) == 4 or (expected >= 0 and item[1] != expected):
                break
            parts.append(item[2])
            expected = item[1] + len(item[2])
        return b"".join(parts)

    def _opens_tls(self) -> bool:
        """Whether a side's first bytes are a TLS record carrying a ClientHello (AMQPS on a port
        of its own)."""
        for side in (0, 1):
            head = self._head(side)
            if len(head) >= 6 and head[0] == 0x16 and head[1] == 3 and head[2] <= 4 and head[5] == 1:
                return True
        return False

    def _start_tls(self) -> None:
        """From here the TCP bytes go through the TLS layer (the readers get what it decrypts)."""
        self.status = "tls"
        self.tls = TlsLayer(_TlsSide(self), self.settings.keys, self.settings.sessions)

    def _starts(self, prefix: bytes) -> bool:
        return any(self._head(side).startswith(prefix) for side in (0, 1))

    def _replay_held(self) -> None:
        """The held bytes and gaps, in their order, to the frame readers (or counted as ignored)."""
        held, self.held, self.held_bytes = self.held, [], 0
        for item in held:
            if self.tls is not None:
                if len(item) == 4:
                    self.tls.gap(item[0], item[1], item[2], item[3])
                else:
                    self.tls.data(item[0], item[1], item[2], item[3], item[4], item[5])
            elif len(item) == 4:
                if self.status == "amqp":
                    self.readers[item[0]].gap(*item[1:])
            elif self.status == "amqp":
                self.readers[item[0]].data(*item[1:])
            else:
                self.ignored_bytes += len(item[2])

    def _port_guess(self, server_ports: frozenset[int] | None = None) -> int | None:
        """The client's direction when exactly one side is on a server port."""
        server_ports = self.settings.amqp_ports if server_ports is None else server_ports
        a_amqp = self.ports[0] in server_ports
        b_amqp = self.ports[1] in server_ports
        if a_amqp != b_amqp:
            return 1 if a_amqp else 0
        return None

    def protocol_header(self, reader: FrameReader, header, offset: int) -> int:
        """A protocol header from `reader`'s side: a record (the client's picks the spec); returns
        the state the reader goes on in: framing, or for AMQP 1.0 walking its frames (its TLS
        layer: counting the TLS records that follow)."""
        version = header.version
        if self.client is None or self.client == reader.direction:
            if self.client is None:
                self._decide_client(reader.direction, "protocol header")
            if version in self.codecs:
                self.version = version
                self.codec = self.codecs[version]
                self.frame_start = frame_start_for(self.codec, self.settings.resync_max_frame)
            elif version == "1.0":
                self.version = version
                self.protocol = "amqp-1.0"
        record = self._record(reader, "protocol-header", offset, offset + PROTOCOL_HEADER_SIZE, None)
        description, raw = protocol_header_texts(header)
        record.version = version
        record.protocol_header = description
        record.raw = raw
        if header.is_amqp and version not in self.codecs and version != "1.0":
            self.issue(reader, "unsupported-version", f"{description}: no spec loaded for it; decoding as "
                       f"{self.codec.spec.version}", 0, offset, offset + PROTOCOL_HEADER_SIZE, None)
        reader.decoded_bytes += PROTOCOL_HEADER_SIZE
        reader.frames += 1
        if self.protocol != "amqp-1.0":
            return ReaderState.FRAMES
        if version == "1.0" and header.raw[4] == 2:  # AMQP 1.0's TLS layer: TLS records follow
            reader.opaque_kind = "tls-not-decoded"
            reader.skip_detail = "TLS inside AMQP 1.0 (its TLS layer): not decrypted"
            return ReaderState.OPAQUE
        return ReaderState.WALK

    def no_protocol_header(self, reader: FrameReader, buf, pos: int) -> int:
        """A stream seen from its start that does not begin with 'AMQP'; returns the state its
        reader goes on in. From a server that is normal (its first frame), unless its client spoke
        another protocol. From the client it is another protocol, reported with its first bytes and
        named when they tell which (amqpcap.protocol.other_protocols): its bytes are then counted, not
        framed; unnamed, framing resynchronises (a client that skipped its header may still talk AMQP)."""
        if reader.direction != self.tcp.syn_from:
            if self.protocol is not None and self.protocol != "amqp-1.0":
                return self._counted(reader, "from the server of a client that spoke " + self.protocol)
            return ReaderState.FRAMES
        first = bytes(buf[pos:pos + 64])
        header = parse_protocol_header(first[:PROTOCOL_HEADER_SIZE].ljust(PROTOCOL_HEADER_SIZE, b"\0"))
        named = name_protocol(first)
        if named is None:
            self.issue(reader, "not-amqp-header", f"the client's first bytes are not an AMQP protocol header: "
                       f"{header.description}", 0, pos + reader.buffer.base, pos + reader.buffer.base, None)
            return ReaderState.RESYNC
        self.protocol, name = named
        self.issue(reader, "not-amqp-header", f"the client speaks {name}, not AMQP (its first bytes: "
                   f"{first[:PROTOCOL_HEADER_SIZE].hex(' ')})", 0, pos + reader.buffer.base, pos + reader.buffer.base, None)
        return self._counted(reader, f"{name} from the client")

    def _counted(self, reader: FrameReader, what: str) -> int:
        reader.opaque_kind = "tls-not-decoded" if self.protocol == "tls" else NOT_DECODED
        reader.skip_detail = f"{what}: counted, not decoded"
        return ReaderState.OPAQUE

    def mid_stream_start(self, reader: FrameReader, buf, pos: int) -> int:
        """The state a reader whose stream began mid-connection starts in: walking AMQP 1.0 when
        its first bytes are 1.0 frames (or the connection is 1.0 already: then counting, as its
        frames cannot be found again), else resynchronising onto 0-9-1 frames."""
        if starts_with_1_0_frames(buf, pos, self.settings.max_frame):
            if self.protocol is None:
                self.protocol, self.version = "amqp-1.0", "1.0"
            return ReaderState.WALK
        if self.protocol == "amqp-1.0":
            reader.opaque_kind = NOT_DECODED
            reader.skip_detail = "AMQP 1.0 begun before the capture, not at a frame's start: counted, not decoded"
            return ReaderState.OPAQUE
        return ReaderState.RESYNC

    def _decide_client(self, direction: int | None, how: str) -> None:
        if direction is None:
            direction = 0
            how = "unknown: assumed the first source seen"
        self.client = direction
        self.client_reason = how
        ends = (self.endpoints[direction], self.endpoints[1 - direction])
        self.labels = (ends, ends)
        self.directions = (CLIENT_TO_SERVER, SERVER_TO_CLIENT) if direction == 0 else (SERVER_TO_CLIENT, CLIENT_TO_SERVER)
        pending, self.pending = self.pending, []
        for record_direction, record in pending:
            self._label(record_direction, record)
            self.out.append(record)

    # -- frames -> records ---------------------------------------------------------------------

    def frame(self, reader: FrameReader, frame, start: int, end: int) -> None:
        kind = frame.kind
        channel = frame.channel
        if kind == "method":
            method_frame = frame  # (typed as its subclass in stream.pxd: compiled, its reads are C)
            method = method_frame.method
            if self.client is None and len(method.directions) == 1:
                sent_by_client = CLIENT_TO_SERVER in method.directions
                self._decide_client(reader.direction if sent_by_client else 1 - reader.direction,
                                    f"direction of {method.full_name}")
            key = (reader.direction, channel)
            if self.contents and key in self.contents:
                self._close_content(key, complete=False, why=f"{method.full_name} on the same channel")
            record = self._record(reader, "method", start, end, channel, hold=True)
            record.method = method.full_name
            record.class_id = method.class_id
            record.method_id = method.method_id
            record.args = method_frame.args
            if not method.content:
                self._release(reader.direction, record)
            else:
                self.contents[key] = _Content(records=[record], method=record,
                                              hasher=body_hasher(),
                                              body=bytearray() if self.settings.capture_bodies else None,
                                              received_bytes=bytearray() if self.settings.resumable else None)
        elif kind == "header":
            header = frame  # (typed as its subclass, as above)
            content = self.contents.get((reader.direction, channel))
            if content is not None and content.body_size is None and self.settings.fold_content:
                self._fold(reader, content, start, end)
                self.headers_folded += 1
                content.properties = header.properties
                content.body_size = header.body_size
                if header.body_size == 0:
                    self._close_content((reader.direction, channel), complete=True)
                self._warn(reader, frame, start, end, channel)
                return
            orphan = content is None or content.body_size is not None
            record = self._record(reader, "header", start, end, channel, hold=not orphan)
            record.class_name = header.class_name
            record.class_id = header.class_id
            record.weight = header.weight
            record.body_size = header.body_size
            record.property_flags = list(header.property_flags)
            record.properties = header.properties
            if orphan:
                self.issue(reader, "unexpected-header", "content header without its content method (not captured, "
                           "or a protocol error)", 0, start, end, channel)
            else:
                content.records.append(record)
                content.body_size = header.body_size
                if header.body_size == 0:
                    self._close_content((reader.direction, channel), complete=True)
        elif kind == "body":
            body = frame  # (typed as its subclass, as above)
            self._body(reader, channel, body.payload, start, end)
        elif kind == "heartbeat":
            self._record(reader, "heartbeat", start, end, channel)
        else:  # a frame type the spec defines but nothing here interprets (0-9 trace, oob-*)
            self.issue(reader, "uninterpreted-frame", f"{frame.type_name} frame (type {frame.frame_type}) of "
                       f"{frame.size} bytes: framed, not interpreted", 0, start, end, channel)
        self._warn(reader, frame, start, end, channel)

    def _warn(self, reader: FrameReader, frame, start: int, end: int, channel) -> None:
        """An issue record per warning the frame's decoding gave."""
        warnings = frame.warnings
        if warnings:
            for warning in warnings:
                self.issue(reader, warning.kind, warning.detail, 0, start, end, channel)

    def _body(self, reader: FrameReader, channel: int, payload, start: int, end: int,
              intact: bool = True, ts=None) -> None:
        key = (reader.direction, channel)
        content = self.contents.get(key)
        size = end - start - 8
        if content is None or content.body_size is None:
            record = self._record(reader, "body", start, end, channel)
            record.body_frame_size = size
            self.issue(reader, "unexpected-body", "content body without its method and header (not captured, or "
                       "a protocol error)", 0, start, end, channel)
            return
        if payload is not None:
            self._hash(content, payload)
        content.received += size
        content.frames += 1
        content.intact &= intact
        if self.settings.fold_content:
            self._fold(reader, content, start, end, ts)
            self.bodies_folded += 1
        else:
            record = self._record(reader, "body", start, end, channel, hold=True, ts=ts)
            record.body_frame_size = size
            content.records.append(record)
        if content.received >= content.body_size:
            self._close_content(key, complete=content.received == content.body_size)

    def body_bytes(self, reader: FrameReader, channel: int, data) -> None:
        """Part of a large body frame, as it streams in."""
        content = self.contents.get((reader.direction, channel))
        if content is not None and content.body_size is not None:
            self._hash(content, data)

    def body_mark(self, reader: FrameReader, channel: int):
        """Where a large body frame's bytes start in its message's kept bytes: (body, bytes kept
        for carrying; -1 for none), to take them out again if the frame is lost."""
        content = self.contents.get((reader.direction, channel))
        if content is None or content.body_size is None:
            return None
        return (len(content.body) if content.body is not None else -1,
                len(content.received_parts) if content.received_parts is not None else -1)

    def body_lost(self, reader: FrameReader, body: BodyFrame) -> None:
        """A large body frame streamed in part, then lost (bad frame-end, a gap past it, the
        stream's end): its bytes leave the message's body, and the message cannot be complete."""
        content = self.contents.get((reader.direction, body.channel))
        mark = body.mark
        if content is None or mark is None:
            return
        content.intact = False
        if content.body is not None and mark[0] >= 0:
            del content.body[mark[0]:]
        if content.received_parts is not None and mark[1] >= 0:
            del content.received_parts[mark[1]:]
            content.received_size = sum([len(part) for part in content.received_parts])

    def streamed_body(self, reader: FrameReader, body: BodyFrame, end: int) -> None:
        last = reader.buffer.timestamps(end - 1, end)
        self._body(reader, body.channel, None, body.start, end, intact=body.intact,
                   ts=(body.first_ts, last[1], body.capture, body.record, last[4] if last[2] == body.capture else 0))
        reader.frames += 1
        reader.decoded_bytes += body.size + 8 - body.lost

    def _hash(self, content: _Content, data) -> None:
        if content.hasher is not None:  # (None: resumed without its start, the hash is lost)
            content.hasher.update(data)
        if content.received_parts is not None:
            if content.received_size + len(data) <= self.settings.resumable_body_cap:
                # (a frame's payload is bytes of its own; a streamed part is a view of the reader's
                # buffer, which changes: copied)
                content.received_parts.append(data if type(data) is bytes else bytes(data))
                content.received_size += len(data)
            else:
                content.received_parts = None  # too big to carry: its hash will not be resumable
        if content.body is not None and len(content.body) < self.settings.body_cap:
            content.body += data[:self.settings.body_cap - len(content.body)]

    def _fold(self, reader: FrameReader, content: _Content, start: int, end: int, ts=None) -> None:
        """A content frame that makes no record (StreamOptions.fold_content): only its time is kept,
        the latest of the message's for its `last_frame_ns`."""
        first = ts[0] if ts is not None else reader.buffer.timestamps(start, end)[0]
        if first > content.last_ns:
            content.last_ns = first

    def _close_content(self, key, complete: bool, why: str = "") -> None:
        content = self.contents.pop(key)
        complete = complete and content.intact and content.body_size is not None
        header = content.records[1] if len(content.records) > 1 else None
        summary = {"body_size": content.body_size, "body_received": content.received,
                   "body_frames": content.frames, "complete": complete,
                   "body_sha256": content.hasher.hexdigest() if complete and content.hasher is not None else None,
                   "properties": header.properties if header is not None else content.properties}
        if content.last_ns >= 0:
            summary["last_frame_ns"] = content.last_ns
        if content.body is not None:
            summary["body_b64"] = base64.b64encode(bytes(content.body)).decode()
            summary["body_truncated"] = content.received > len(content.body)
        method = content.method
        add_message(method, summary)
        direction, channel = key
        if method.dir is not None:  # labelled when made: the client was known already
            self.out.extend(content.records)
        else:
            for record in content.records:
                self._release(direction, record)
        if not complete and why:
            reader = self.readers[direction]
            self.issue(reader, "content-incomplete", f"{method.method} content ended after {content.received} of "
                       f"{content.body_size if content.body_size is not None else '?'} body bytes ({why})", 0,
                       method.offset, method.offset, channel)

    def issue(self, reader: FrameReader, kind: str, detail: str, skipped: int, start: int, end: int,
              channel, ts=None) -> None:
        record = self._record(reader, "issue", start, end, channel, ts=ts)
        record.issue_kind = kind
        record.detail = detail
        record.bytes_skipped = skipped

    def _record(self, reader: FrameReader, kind: str, start: int, end: int, channel, hold: bool = False,
                ts=None) -> Record:
        """A record in the JSON Lines contract (docs/decode.md) with the common keys; the caller sets
        its kind's. Labelled with the client and direction now, or once the client side is known.
        `hold`: the caller releases it (a content method's records wait for its content)."""
        first, last, capture, first_record, last_record = ts if ts is not None else reader.buffer.timestamps(start, end)
        if capture < 0:
            capture = self.first_capture
        ends = self.labels[reader.direction]
        record = new_record(kind, first, last, self.capture_names[capture] if capture >= 0 else None,
                            first_record or None, last_record or None, self.tcp.streams.get(capture), self.id,
                            ends[0], ends[1], self.directions[reader.direction], channel, start, end - start)
        if self.tls is not None:
            record.tls = True
            record.shape = TLS_SHAPES[kind]
        if not hold:
            if self.client is None:
                self._release(reader.direction, record)
            else:
                self.out.append(record)
        return record

    def _release(self, direction: int, record: Record) -> None:
        if self.client is None:
            self.pending.append((direction, record))
            if len(self.pending) > self.settings.pending_records:
                self._decide_client(self._port_guess(), "guessed from ports")
            return
        self._label(direction, record)
        self.out.append(record)

    def _label(self, direction: int, record: Record) -> None:
        ends = self.labels[direction]
        record.client = ends[0]
        record.server = ends[1]
        record.dir = self.directions[direction]


    # -- the TLS layer's side (it reports through _TlsSide) -----------------------------------------

    def tls_client(self, direction: int) -> None:
        if self.client is None:
            self._decide_client(direction, "TLS ClientHello")

    def tls_plaintext(self, direction: int, offset: int, data: bytes, ts_ns: int, capture: int, record: int) -> None:
        if self.status == "tls":  # the first decrypted bytes: framed as AMQP from here
            self.status = "amqp"
        reader = self.readers[direction]
        reader.data(offset, data, ts_ns, capture, record)

    def tls_lost(self, direction: int, offset: int, size: int, ts_ns: int) -> None:
        if self.status == "amqp":
            reader = self.readers[direction]
            reader.gap(offset, size, ts_ns)

    def tls_issue(self, direction: int, kind: str, detail: str, skipped: int, start: int, end: int, ts) -> None:
        if kind == TLS_NOT_DECODED:
            self.ignored_bytes += skipped
        self.issue(self.readers[direction], kind, detail, skipped, start, end, None, ts)


class _TlsSide(TlsSink):
    """The TLS layer's sink: its connection (a class apart, as the compiled connection has one base)."""

    def __init__(self, connection: AmqpConnection) -> None:
        self.connection = connection

    def tls_client(self, direction: int) -> None:
        self.connection.tls_client(direction)

    def tls_plaintext(self, direction: int, offset: int, data: bytes, ts_ns: int, capture: int, record: int) -> None:
        self.connection.tls_plaintext(direction, offset, data, ts_ns, capture, record)

    def tls_lost(self, direction: int, offset: int, size: int, ts_ns: int) -> None:
        self.connection.tls_lost(direction, offset, size, ts_ns)

    def tls_issue(self, direction: int, kind: str, detail: str, skipped: int, start: int, end: int, ts) -> None:
        self.connection.tls_issue(direction, kind, detail, skipped, start, end, ts)


UNDECIDED_HOLD = 1 << 16  # bytes held on a port of no known protocol before deciding it is not AMQP
