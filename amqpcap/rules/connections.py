"""The `connections` table: one row per TCP connection, emitted when it ends: its AMQP handshake
(milestones, durations, peers, authentication, negotiated limits, virtual host), how it ended,
and what it carried. The TCP facts come from the decoder's `streams` row of the connection; the
AMQP facts from its frames as they pass (only first occurrences and counters are held)."""

from __future__ import annotations

from amqpcap.protocol.spec import CLIENT_TO_SERVER
from amqpcap.rules.common import Emit, arguments, micros, side, text_of, to_int
from amqpcap.rules.naming import Naming
from amqpcap.tables.registry import CONNECTIONS
from amqpcap.tables.rows import FrameRow

MILESTONES = {"connection.start": "start_at", "connection.start-ok": "start_ok_at",
              "connection.tune": "tune_at", "connection.tune-ok": "tune_ok_at",
              "connection.open": "open_at", "connection.open-ok": "open_ok_at"}
COUNTS = {"channel.open-ok": "channels_opened", "basic.publish": "messages_published",
          "basic.deliver": "messages_delivered", "basic.get-ok": "messages_delivered"}


def _start(args: dict) -> dict:
    server = args.get("server_properties") or {}
    return {"server_product": text_of(server.get("product")), "server_version": text_of(server.get("version")),
            "server_platform": text_of(server.get("platform"))}


def _start_ok(args: dict) -> dict:
    client = args.get("client_properties") or {}
    return {"client_product": text_of(client.get("product")), "client_version": text_of(client.get("version")),
            "client_platform": text_of(client.get("platform")),
            "connection_name": text_of(client.get("connection_name")),
            "client_capabilities_json": text_of(client.get("capabilities")),
            "auth_mechanism": text_of(args.get("mechanism")), "auth_user": text_of(args.get("auth_user")),
            "locale": text_of(args.get("locale"))}


def _tune(args: dict) -> dict:
    return {"channel_max_proposed": to_int(args.get("channel_max")),
            "frame_max_proposed": to_int(args.get("frame_max")),
            "heartbeat_proposed": to_int(args.get("heartbeat"))}


def _tune_ok(args: dict) -> dict:
    return {"channel_max": to_int(args.get("channel_max")), "frame_max": to_int(args.get("frame_max")),
            "heartbeat": to_int(args.get("heartbeat"))}


def _open(args: dict) -> dict:
    return {"vhost": text_of(args.get("virtual_host"))}


# method -> the connection facts its first occurrence (by time) gives
FIRST_FACTS = {"connection.start": _start, "connection.start-ok": _start_ok, "connection.tune": _tune,
               "connection.tune-ok": _tune_ok, "connection.open": _open}
# C-typed twins of the tables above, what the rules read (compiled: a C variable, not a module
# global looked up by name per method; connections.pxd). The public names stay Python objects.
_MILESTONES, _FIRST_FACTS, _COUNTS = MILESTONES, FIRST_FACTS, COUNTS


class ConnectionRules:
    """One connection's facts, held until it ends."""

    __slots__ = ("naming", "emit", "frames", "milestones", "facts", "close", "closed_cleanly",
                 "last_client_frame_ns", "protocol_header_ns", "counts")

    def __init__(self, naming: Naming, emit: Emit) -> None:
        self.naming = naming
        self.emit = emit
        self.frames = 0
        self.milestones: dict[str, int] = {}  # column -> earliest ts_ns
        self.facts: dict[str, tuple[int, dict]] = {}  # method -> (ts_ns, facts) of its earliest frame
        # (ts_ns, (direction, reply code, reply text, failing class id, failing method id)) of the
        # earliest connection.close (a saved state of an earlier version holds its frames row there)
        self.close: tuple | None = None
        self.closed_cleanly = False
        self.last_client_frame_ns: int | None = None
        self.protocol_header_ns: int | None = None
        self.counts = dict.fromkeys(_COUNTS.values(), 0)

    def frame(self, row: FrameRow) -> None:
        self.frames += 1
        ts = row.ts_ns
        if row.direction == CLIENT_TO_SERVER:
            if self.last_client_frame_ns is None or ts > self.last_client_frame_ns:
                self.last_client_frame_ns = ts
            if row.kind == "protocol-header" and (self.protocol_header_ns is None or ts < self.protocol_header_ns):
                self.protocol_header_ns = ts

    def method(self, row: FrameRow) -> None:
        method, ts = row.method, row.ts_ns
        column = _MILESTONES.get(method)
        if column is not None and (column not in self.milestones or ts < self.milestones[column]):
            self.milestones[column] = ts
        facts = _FIRST_FACTS.get(method)
        if facts is not None and (method not in self.facts or ts < self.facts[method][0]):
            self.facts[method] = (ts, facts(arguments(row)))
        counted = _COUNTS.get(method)
        if counted is not None:
            self.counts[counted] += 1
        elif method == "connection.close":
            if self.close is None or ts < self.close[0]:
                self.close = (ts, (row.direction, row.reply_code, row.reply_text, row.failing_class_id,
                                   row.failing_method_id))
        elif method == "connection.close-ok":
            self.closed_cleanly = True

    @property
    def heartbeat(self) -> int | None:
        tune_ok = self.facts.get("connection.tune-ok")
        return tune_ok[1]["heartbeat"] if tune_ok else None

    def end(self, stream: dict) -> None:
        """`stream`: the connection's `streams` row."""
        row = {name: stream.get(name) for name in ("date", "connection", "capture", "client", "server",
                                                   "status", "version")}
        row.update(saw_start=stream.get("syn_seen"), started_at=stream.get("first_ts"),
                   ended_at=stream.get("last_ts"), tls=stream.get("tls"))
        for name in _MILESTONES.values():
            row[name] = micros(self.milestones.get(name))
        row["protocol_header_at"] = micros(self.protocol_header_ns)
        for _, facts in self.facts.values():
            row.update(facts)
        close = self.close[1] if self.close else None
        if type(close) is dict:  # saved by an earlier version: the frames row itself
            close = (close["direction"], close["reply_code"], close["reply_text"], close["failing_class_id"],
                     close["failing_method_id"])
        row.update(close_initiator=side(close[0]) if close else None,
                   close_code=close[1] if close else None,
                   close_text=close[2] if close else None,
                   close_failing_method=self.naming.method_name(close[3], close[4]) if close else None)
        started, ph, ok = row["start_at"], row["protocol_header_at"], row["open_ok_at"]
        handshake_from = ph if ph is not None else started
        row["handshake_ms"] = (ok - handshake_from) / 1000.0 if ok is not None and handshake_from is not None else None
        tune = row["tune_at"]
        row["auth_ms"] = (tune - started) / 1000.0 if tune is not None and started is not None else None
        row["end_reason"] = self._end_reason(stream)
        row.update(c2s_frames=stream.get("c2s_frames"), c2s_bytes=stream.get("c2s_stream_bytes"),
                   s2c_frames=stream.get("s2c_frames"), s2c_bytes=stream.get("s2c_stream_bytes"))
        if self.frames:
            row.update(self.counts)
        self.emit(CONNECTIONS, row)

    def _end_reason(self, stream: dict) -> str | None:
        if self.closed_cleanly:
            return "close"
        heartbeat, last, client = self.heartbeat, stream.get("last_ts"), micros(self.last_client_frame_ns)
        if heartbeat is not None and heartbeat > 0 and last is not None and client is not None \
                and (last - client) / 1e6 >= 2 * heartbeat:
            return "heartbeat-timeout"
        return stream.get("end_reason")
