"""How each connection ended, as a `connection-end` record (docs/decode.md has its shape).

The decoder's own end-of-connection record (stream.CONNECTION_END) carries the TCP facts: why the
stream ended (fin, rst, port-reuse, capture-end) and per-direction byte accounting. The AMQP facts
come from the connection's records, watched as they pass: a completed close handshake makes the
reason `close`; a client silent for at least twice the negotiated heartbeat before the stream
ended makes it `heartbeat-timeout` (the same rule as the `connections` table's end_reason).
"""

from __future__ import annotations

from amqpcap.connection.record import CONNECTION_END, TLS_CONNECTION_END, Record, as_record, new_record
from amqpcap.protocol.spec import CLIENT_TO_SERVER

END = "connection-end"
# reasons that are not a normal end (for --errors): the close handshake was not done
ABNORMAL = frozenset({"rst", "fin", "heartbeat-timeout", "port-reuse"})


class _Facts:
    __slots__ = ("version", "last_client_ns", "close", "close_ok", "heartbeat", "tcp_stream")

    def __init__(self, tcp_stream=None) -> None:
        self.tcp_stream = tcp_stream  # Wireshark's tcp.stream in the file of its first record
        self.version = None  # from the client's protocol header
        self.last_client_ns = None  # the client's last frame
        self.close = None  # the first connection.close record (a Record)
        self.close_ok = False
        self.heartbeat = None  # seconds, from connection.tune-ok


class ConnectionEnds:
    """Watches every record (`observe`) and turns the decoder's end records into `connection-end`
    records (`end`). State is kept per open connection only."""

    def __init__(self) -> None:
        self.facts: dict[str, _Facts] = {}
        # the last connection's facts, by its id object: records come in runs of a connection's
        self.last_connection = None
        self.last_facts: _Facts | None = None

    def version(self, connection: str | None) -> str | None:
        facts = self.facts.get(connection)
        return facts.version if facts is not None else None

    def observe(self, value: Record) -> None:
        """A record (or a dict of one) as it passes."""
        record = as_record(value)
        connection = record.connection
        if connection is None:
            return
        if connection is self.last_connection:
            facts = self.last_facts
        else:
            facts = self.facts.get(connection)
            if facts is None:
                facts = self.facts[connection] = _Facts(record.tcp_stream)
            self.last_connection, self.last_facts = connection, facts
        kind = record.kind
        client = record.dir == CLIENT_TO_SERVER  # (the decoder's own string: equal by identity, not compared)
        if client and kind != "issue":
            ts = record.ts_ns
            if facts.last_client_ns is None or ts > facts.last_client_ns:
                facts.last_client_ns = ts
            if kind == "protocol-header" and facts.version is None:
                facts.version = record.version
        if kind == "method":
            method = record.method
            message = record.message
            if message is not None and client:
                # content frames folded into their method (CaptureDecoder's fold_content) made no
                # records: the message says when its last frame came
                last = message.get("last_frame_ns")
                if last is not None and (facts.last_client_ns is None or last > facts.last_client_ns):
                    facts.last_client_ns = last
            if method.startswith("connection."):
                if method == "connection.close":
                    if facts.close is None or record.ts_ns < facts.close.ts_ns:
                        facts.close = record
                elif method == "connection.close-ok":
                    facts.close_ok = True
                elif method == "connection.tune-ok" and facts.heartbeat is None:
                    facts.heartbeat = record.args.get("heartbeat")

    def apply(self, batch: list, now_ns: int | None) -> list:
        """A batch of the decoder's records, every one observed, its CONNECTION_END records replaced
        by their `connection-end` records (or dropped: `end`). `now_ns`: as for `end`. (Dicts of
        records are taken too, and come out as Records.)"""
        out = batch
        for i in range(len(batch)):
            item = batch[i]
            record = as_record(item)
            if record is not item and out is batch:
                out = batch[:i]
            if record.kind == CONNECTION_END:
                if out is batch:
                    out = batch[:i]
                end = self.end(record, now_ns)
                if end is not None:
                    out.append(end)
                continue
            self.observe(record)
            if out is not batch:
                out.append(record)
        return out

    def end(self, value: Record, now_ns: int | None) -> Record | None:
        """The `connection-end` record for the decoder's CONNECTION_END `record` (None for
        connections that made no record: not-amqp, no payload). `now_ns`: the time of the packet
        the decoder was at when it ended the connection."""
        record = as_record(value)
        summary = record.summary
        self.last_connection = self.last_facts = None
        facts = self.facts.pop(record.connection, None) or _Facts()
        status = summary["status"]
        if status == "not-amqp" or status == "no-payload":
            return None
        tcp_end, last = summary["end_reason"], summary["last_ts_ns"]
        # fin/rst: the connection's last packet; port-reuse: the SYN that reused it; capture-end:
        # the last packet read (the decoder is there when it ends connections still open)
        ts = last if tcp_end in ("fin", "rst") or now_ns is None else max(now_ns, last)
        reason = tcp_end
        heartbeat = facts.heartbeat
        if facts.close_ok:
            reason = "close"
        elif heartbeat and facts.last_client_ns is not None and last - facts.last_client_ns >= 2 * heartbeat * 10**9:
            reason = "heartbeat-timeout"
        close = None
        closing = facts.close
        if closing is not None:
            args = closing.args
            close = {"dir": closing.dir, "reply_code": args.get("reply_code"), "reply_text": args.get("reply_text"),
                     "class_id": args.get("class_id"), "method_id": args.get("method_id")}
        directions = summary["directions"]
        end = new_record(END, ts, ts, summary["capture"], None, None, facts.tcp_stream, summary["connection"],
                         summary["client"], summary["server"], None, None, None, 0)
        end.version = summary["version"] or facts.version
        end.extra = {"end_reason": reason, "tcp_end": tcp_end, "status": status,
                     "first_ts_ns": summary["first_ts_ns"], "last_ts_ns": last,
                     "duration_s": (last - summary["first_ts_ns"]) / 1e9, "heartbeat": heartbeat,
                     "last_client_frame_ns": facts.last_client_ns, "close": close,
                     "syn_seen": summary["syn_seen"], "client_decided_by": summary["client_decided_by"],
                     "directions": {label: dict(directions[label]) for label in sorted(directions)}}
        if "tls" in summary:  # (a TLS connection's: its handshake, as the tls_connections table has it)
            end.tls = summary["tls"]
            end.shape = TLS_CONNECTION_END
        return end

