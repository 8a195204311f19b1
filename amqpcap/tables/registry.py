"""The lake's tables, declared once: each table is a TypedDict of its rows, every column annotated
with its SQL type and what it means.

    FRAMES.names, FRAMES.arrow()        # the columns, the Arrow schema
    row: FramesRow = {...}              # what row builders, analytics and the CLI pass around

The row TypedDicts are the shapes that cross boundaries: the decode task builds `FramesRow`s, the
analytics state machines read them and emit `DeliveriesRow`s..., the writers take them per table.
Everything else derives from this module: the Arrow schemas the executors write, the Delta schemas
the driver commits, Spark's (`Table.ddl`), `docs/tables.md` (`python -m
amqpcap.tables.registry > docs/tables.md`; a test fails when it is stale) and the tests' table lists.

Types are Spark SQL names, each mapped to exactly one Arrow type. Timestamps travel in rows as
integer microseconds since the epoch; `date` as `datetime.date`. AMQP field tables become
`map<string,string>` plus a JSON column for full fidelity.
"""

from __future__ import annotations

import datetime
import sys
from dataclasses import dataclass
from typing import Annotated, TypedDict, get_type_hints

import pyarrow as pa

ARROW_TYPES = {
    "string": pa.string(), "bigint": pa.int64(), "int": pa.int32(), "boolean": pa.bool_(),
    "double": pa.float64(), "date": pa.date32(), "binary": pa.binary(),
    "timestamp": pa.timestamp("us", tz="UTC"), "array<string>": pa.list_(pa.string()),
    "map<string,string>": pa.map_(pa.string(), pa.string()),
}


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # Spark SQL type name, a key of ARROW_TYPES
    comment: str


@dataclass(frozen=True)
class Table:
    name: str
    description: str
    columns: tuple[Column, ...]
    row: type  # the TypedDict of its rows
    replace_key: str = "capture"  # the column naming where a row came from: what a rerun replaces by

    @classmethod
    def of(cls, name: str, row: type, replace_key: str = "capture") -> "Table":
        hints = get_type_hints(row, include_extras=True)
        columns = []
        for column, hint in hints.items():
            sql, comment = hint.__metadata__
            if sql not in ARROW_TYPES:
                raise ValueError(f"{name}.{column}: unknown SQL type {sql!r}")
            columns.append(Column(column, sql, comment))
        description = " ".join((row.__doc__ or "").split())
        return cls(name, description, tuple(columns), row, replace_key)

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def arrow(self, without: tuple[str, ...] = ()) -> pa.Schema:
        """The table's Arrow schema, with each column's comment as field metadata."""
        return pa.schema([pa.field(c.name, ARROW_TYPES[c.type], metadata={"comment": c.comment})
                          for c in self.columns if c.name not in without])

    def ddl(self, without: tuple[str, ...] = (), comments: bool = False) -> str:
        """Spark DDL of the columns: what a mapInArrow task producing the rows declares, and (with
        each column's comment) the schema Spark reads the table's files with. The types are Spark's
        own names, so Spark needs no other mapping (and the lake no pyspark import)."""
        def comment(c: Column) -> str:
            return " COMMENT '" + c.comment.replace("\\", "\\\\").replace("'", "\\'") + "'" if comments else ""
        return ", ".join(f"`{c.name}` {c.type}{comment(c)}" for c in self.columns if c.name not in without)


Date = Annotated[datetime.date | None, "date", "UTC date of the traffic (the partition column)"]
Run = Annotated[str | None, "string", "the run that wrote the row"]
Connection = Annotated[str | None, "string",
                       "connection id: hash of both endpoints and the connection's first packet time; "
                       "stable across reruns"]
Capture = Annotated[str | None, "string", "capture file holding the row's first byte"]
PcapRecord = Annotated[int | None, "bigint",
                      "number of the packet record holding the first byte in its capture file, from 1: "
                      "Wireshark's frame.number (null when tied to no packet)"]
PcapRecordLast = Annotated[int | None, "bigint",
                           "number of the packet record holding the last byte (null when it is in another "
                           "file than the first byte)"]
TcpStream = Annotated[int | None, "bigint",
                      "index of the TCP connection in that capture file, from 0: Wireshark's tcp.stream"]
Client = Annotated[str | None, "string", "client endpoint, ip:port ([ip6]:port for IPv6)"]
Server = Annotated[str | None, "string", "server endpoint, ip:port"]
Direction = Annotated[str | None, "string", "'C>S' (client to server) or 'S>C'"]
Channel = Annotated[int | None, "int",
                    "AMQP channel (0 for the connection itself); null when not tied to a frame"]
Ts = Annotated[int | None, "timestamp", "packet time of the first byte (microseconds)"]
TsNs = Annotated[int | None, "bigint", "packet time of the first byte, nanoseconds since the epoch"]
Source = Annotated[str | None, "string",
                   "the capture file whose decoding produced the row, what a rerun of it replaces: the "
                   "row's own capture, or the later file that finished it (a connection carried into a "
                   "later run: docs/state.md)"]
Provisional = Annotated[bool | None, "boolean",
                        "true for what a connection still open at the end of the run looked like then (its "
                        "open channels, unsettled deliveries...): replaced by the run that resumes it"]
TsLastNs = Annotated[int | None, "bigint", "packet time of the last byte, nanoseconds since the epoch"]


class CapturesRow(TypedDict, total=False):
    """One row per input file and run: what was read and how it went."""

    date: Date
    run_id: Run
    path: Annotated[str | None, "string", "the file as given (local path or URI)"]
    size_bytes: Annotated[int | None, "bigint", "file size"]
    format: Annotated[str | None, "string", "pcap, pcap-ns or pcapng, with +gzip when compressed"]
    link_types: Annotated[list[str] | None, "array<string>",
                          "link-layer types seen (EN10MB, LINUX_SLL2, ...)"]
    packets: Annotated[int | None, "bigint", "packet records read"]
    captured_bytes: Annotated[int | None, "bigint", "bytes of all packet records"]
    dropped_packets: Annotated[int | None, "bigint",
                               "packets the capture lost, as its pcapng interface statistics say (isb_ifdrop + "
                               "isb_osdrop); null when the file does not say (classic pcap: tcpdump prints them)"]
    first_ts: Annotated[int | None, "timestamp", "time of the first packet"]
    last_ts: Annotated[int | None, "timestamp", "time of the last packet"]
    fingerprint: Annotated[str | None, "string",
                           "SHA-256 of the file's size and first and last MiB: the same bytes under another "
                           "name replace this row (and the rows it produced) instead of adding to them"]
    status: Annotated[str | None, "string", "'ok', 'partial' (damaged but partly read) or 'failed'"]
    error: Annotated[str | None, "string", "why the file is partial or failed; null when ok"]


class FramesRow(TypedDict, total=False):
    """One row per AMQP frame and protocol header, in stream order per direction."""

    date: Date
    connection: Connection
    capture: Capture
    pcap_record: PcapRecord
    pcap_record_last: PcapRecordLast
    tcp_stream: TcpStream
    ts: Ts
    ts_ns: TsNs
    ts_last_ns: TsLastNs
    client: Client
    server: Server
    direction: Direction
    channel: Channel
    kind: Annotated[str | None, "string", "'protocol-header', 'method', 'header', 'body' or 'heartbeat'"]
    stream_offset: Annotated[int | None, "bigint",
                             "offset of the frame's first byte in its direction's TCP stream"]
    frame_bytes: Annotated[int | None, "bigint", "bytes on the wire, header and frame-end included"]
    method: Annotated[str | None, "string",
                      "class.method by spec name ('basic.publish'); null for other kinds"]
    class_id: Annotated[int | None, "int", "AMQP class id (methods and content headers)"]
    method_id: Annotated[int | None, "int", "AMQP method id"]
    # Method arguments (rows.ARGUMENT_COLUMNS maps the spec's argument names to these columns; each
    # comment names the 0-9-1 methods that carry the argument, checked against the spec by a test).
    # Null where the method has no such argument.
    exchange: Annotated[str | None, "string",
                        "argument 'exchange' of exchange.declare, exchange.delete, queue.bind, queue.unbind, "
                        "basic.publish, basic.return, basic.deliver, basic.get-ok (exchange.bind's "
                        "'destination' and 'source' are in args_json)"]
    routing_key: Annotated[str | None, "string",
                           "argument 'routing_key' of exchange.bind, exchange.unbind, queue.bind, "
                           "queue.unbind, basic.publish, basic.return, basic.deliver, basic.get-ok"]
    queue: Annotated[str | None, "string",
                     "argument 'queue' of queue.declare, queue.declare-ok, queue.bind, queue.unbind, "
                     "queue.purge, queue.delete, basic.consume, basic.get"]
    consumer_tag: Annotated[str | None, "string",
                            "argument 'consumer_tag' of basic.consume, basic.consume-ok, basic.cancel, "
                            "basic.cancel-ok, basic.deliver"]
    delivery_tag: Annotated[int | None, "bigint",
                            "argument 'delivery_tag' of basic.deliver, basic.get-ok, basic.ack, basic.reject, "
                            "basic.nack (null above bigint's range; args_json keeps it)"]
    multiple: Annotated[bool | None, "boolean", "argument 'multiple' of basic.ack, basic.nack"]
    requeue: Annotated[bool | None, "boolean",
                       "argument 'requeue' of basic.reject, basic.recover-async, basic.recover, basic.nack"]
    redelivered: Annotated[bool | None, "boolean", "argument 'redelivered' of basic.deliver, basic.get-ok"]
    mandatory: Annotated[bool | None, "boolean", "argument 'mandatory' of basic.publish"]
    immediate: Annotated[bool | None, "boolean", "argument 'immediate' of basic.publish"]
    no_ack: Annotated[bool | None, "boolean", "argument 'no_ack' of basic.consume, basic.get"]
    no_wait: Annotated[bool | None, "boolean",
                       "argument 'no_wait' of exchange.declare, exchange.delete, exchange.bind, "
                       "exchange.unbind, queue.declare, queue.bind, queue.purge, queue.delete, basic.consume, "
                       "basic.cancel, confirm.select (0-9 spells it 'nowait')"]
    no_local: Annotated[bool | None, "boolean", "argument 'no_local' of basic.consume"]
    exclusive: Annotated[bool | None, "boolean",
                         "argument 'exclusive' of access.request, queue.declare, basic.consume"]
    passive: Annotated[bool | None, "boolean",
                       "argument 'passive' of access.request, exchange.declare, queue.declare (only check "
                       "that it exists)"]
    durable: Annotated[bool | None, "boolean", "argument 'durable' of exchange.declare, queue.declare"]
    auto_delete: Annotated[bool | None, "boolean", "argument 'auto_delete' of exchange.declare, queue.declare"]
    internal: Annotated[bool | None, "boolean", "argument 'internal' of exchange.declare"]
    exchange_type: Annotated[str | None, "string",
                             "argument 'type' of exchange.declare: direct, fanout, topic, headers..."]
    if_unused: Annotated[bool | None, "boolean", "argument 'if_unused' of exchange.delete, queue.delete"]
    if_empty: Annotated[bool | None, "boolean", "argument 'if_empty' of queue.delete"]
    prefetch_size: Annotated[int | None, "bigint", "argument 'prefetch_size' of basic.qos (octets)"]
    prefetch_count: Annotated[int | None, "int", "argument 'prefetch_count' of basic.qos (messages)"]
    qos_global: Annotated[bool | None, "boolean",
                          "argument 'global' of basic.qos (RabbitMQ: true per channel, false per consumer)"]
    message_count: Annotated[int | None, "bigint",
                             "argument 'message_count' of queue.declare-ok, queue.purge-ok, queue.delete-ok, "
                             "basic.get-ok"]
    consumer_count: Annotated[int | None, "bigint", "argument 'consumer_count' of queue.declare-ok"]
    reply_code: Annotated[int | None, "int",
                          "argument 'reply_code' of connection.close, channel.close, basic.return"]
    reply_text: Annotated[str | None, "string",
                          "argument 'reply_text' of connection.close, channel.close, basic.return"]
    failing_class_id: Annotated[int | None, "int",
                                "close: class id of the method that caused it (0 when none)"]
    failing_method_id: Annotated[int | None, "int", "close: method id of the method that caused it"]
    args_json: Annotated[str | None, "string",
                         "every argument as JSON (spec names in snake_case; credentials redacted)"]
    body_size: Annotated[int | None, "bigint", "content header: total body size announced"]
    properties_json: Annotated[str | None, "string", "content header: the properties present, as JSON"]
    protocol_version: Annotated[str | None, "string",
                                "protocol header: '0-9-1', '0-9', '0-8' or null when unknown"]
    protocol_header: Annotated[str | None, "string",
                               "protocol header as read ('AMQP 0 0 9 1 (0-9-1)', or its bytes)"]
    connection_seq: Annotated[int | None, "bigint",
                              "position of the frame in its connection's decoding order (0, 1, 2...): the order "
                              "the analytics consumed it in, and what `amqpcap analyze` replays"]
    tls: Annotated[bool | None, "boolean",
                   "true: decrypted from TLS (stream_offset is then the decrypted stream's; the connection's "
                   "tls_connections row says how); null: sent in clear"]
    source: Source
    provisional: Provisional
    run_id: Run


class MessagesRow(TypedDict, total=False):
    """One row per content-carrying method (publish, deliver, get-ok, return) with its properties and body
    summary.
    """

    date: Date
    connection: Connection
    capture: Capture
    pcap_record: PcapRecord
    pcap_record_last: PcapRecordLast
    tcp_stream: TcpStream
    ts: Ts
    ts_ns: TsNs
    client: Client
    server: Server
    direction: Direction
    channel: Channel
    method: Annotated[str | None, "string", "basic.publish, basic.deliver, basic.get-ok or basic.return"]
    stream_offset: Annotated[int | None, "bigint", "offset of the method frame in its direction's stream"]
    message_key: Annotated[str | None, "string",
                           "the message's key, what deliveries, publishes and message_flows join on: "
                           "'<connection>-c<stream_offset>' for a message the client sent (publish), "
                           "'<connection>-s<stream_offset>' for one the server sent (deliver, get-ok, return); "
                           "unique, and stable across reruns and across runs (a connection carried into the "
                           "next run keeps its id and its stream offsets)"]
    exchange: Annotated[str | None, "string", "exchange the message was published to"]
    routing_key: Annotated[str | None, "string", "routing key"]
    delivery_tag: Annotated[int | None, "bigint", "deliver, get-ok: the delivery tag"]
    consumer_tag: Annotated[str | None, "string", "deliver: the consumer tag"]
    redelivered: Annotated[bool | None, "boolean", "deliver, get-ok: the redelivered flag"]
    mandatory: Annotated[bool | None, "boolean", "publish: the mandatory flag"]
    reply_code: Annotated[int | None, "int", "return: why the message came back (312 NO_ROUTE...)"]
    reply_text: Annotated[str | None, "string", "return: the reply text"]
    content_type: Annotated[str | None, "string", "property content-type"]
    content_encoding: Annotated[str | None, "string", "property content-encoding"]
    headers: Annotated[list[tuple[str, str]] | None, "map<string,string>",
                       "property headers, values rendered as text"]
    headers_json: Annotated[str | None, "string",
                            "property headers as JSON, full fidelity (nested tables, arrays)"]
    delivery_mode: Annotated[int | None, "int", "property delivery-mode: 1 transient, 2 persistent"]
    priority: Annotated[int | None, "int", "property priority"]
    correlation_id: Annotated[str | None, "string", "property correlation-id"]
    reply_to: Annotated[str | None, "string", "property reply-to"]
    expiration: Annotated[str | None, "string", "property expiration (text, as on the wire)"]
    message_id: Annotated[str | None, "string", "property message-id"]
    timestamp: Annotated[int | None, "timestamp", "property timestamp (seconds on the wire)"]
    type: Annotated[str | None, "string", "property type"]
    user_id: Annotated[str | None, "string", "property user-id"]
    app_id: Annotated[str | None, "string", "property app-id"]
    body_size: Annotated[int | None, "bigint",
                         "body size announced by the content header; null if the header was lost"]
    body_received: Annotated[int | None, "bigint", "body bytes seen"]
    body_frames: Annotated[int | None, "int", "body frames seen"]
    complete: Annotated[bool | None, "boolean", "header and every body byte seen"]
    body_sha256: Annotated[str | None, "string", "SHA-256 of the body, hex; null unless complete"]
    body: Annotated[bytes | None, "binary", "the body, capped; only when bodies.capture is on"]
    source: Source
    provisional: Provisional
    run_id: Run


class DecodeIssuesRow(TypedDict, total=False):
    """Every problem met while decoding: where, what, how many bytes were skipped. Every stream byte is in
    a frame or in some bytes_skipped.
    """

    date: Date
    capture: Capture
    pcap_record: PcapRecord
    pcap_record_last: PcapRecordLast
    tcp_stream: TcpStream
    connection: Connection
    ts: Ts
    ts_ns: TsNs
    client: Client
    server: Server
    direction: Direction
    channel: Channel
    stream_offset: Annotated[int | None, "bigint", "where in its direction's stream"]
    issue_kind: Annotated[str | None, "string",
                          "gap, resync, framing, truncated, malformed-payload, unknown-method, ... "
                          "(docs/decode.md lists them)"]
    detail: Annotated[str | None, "string", "what happened, in words"]
    bytes_skipped: Annotated[int | None, "bigint", "stream bytes not decoded because of it"]
    file_offset: Annotated[int | None, "bigint",
                           "damage to the capture file itself (damaged-record-header, truncated-file, "
                           "gzip-damaged...): the byte offset in the file where it starts; null for stream issues"]
    tls: Annotated[bool | None, "boolean",
                   "true: on a TLS connection (the tls-* kinds are its TLS layer's, their stream_offset and "
                   "bytes_skipped the TCP stream's; the others' the decrypted stream's); null otherwise"]
    source: Source
    provisional: Provisional
    run_id: Run


class StreamsRow(TypedDict, total=False):
    """One row per TCP connection seen: how it started and ended, and what its bytes became (AMQP or not)."""

    date: Date
    connection: Connection
    capture: Capture
    client: Client
    server: Server
    status: Annotated[str | None, "string",
                      "amqp (0-9-1 or 0-9: decoded, over TLS too when its keys were logged: tls true), amqp-1.0 "
                      "(its frames walked and counted, not decoded), tls (TLS, on a TLS port or an AMQP one, "
                      "without its keys: counted, not decoded), http, mqtt, stomp, "
                      "ssh, proxy or redis (what a client on an AMQP port spoke instead: counted, not "
                      "decoded), not-amqp or no-payload"]
    version: Annotated[str | None, "string",
                       "protocol version from the client's header: 0-9-1, 0-9, 1.0... (null when not captured)"]
    client_decided_by: Annotated[str | None, "string",
                                 "how the client side was told: protocol header, SYN, port, a method's "
                                 "direction, or a guess"]
    syn_seen: Annotated[bool | None, "boolean", "the capture saw the connection's SYN (it saw the start)"]
    first_ts: Annotated[int | None, "timestamp", "first packet of the connection"]
    last_ts: Annotated[int | None, "timestamp", "last packet of the connection"]
    end_reason: Annotated[str | None, "string",
                          "fin, rst, port-reuse (a new SYN on the same 4-tuple) or capture-end"]
    c2s_stream_bytes: Annotated[int | None, "bigint", "client to server: TCP stream bytes (gaps included)"]
    c2s_decoded_bytes: Annotated[int | None, "bigint", "client to server: bytes in decoded frames"]
    c2s_skipped_bytes: Annotated[int | None, "bigint", "client to server: bytes counted in issues"]
    c2s_frames: Annotated[int | None, "bigint", "client to server: frames (protocol header included)"]
    c2s_packets: Annotated[int | None, "bigint", "client to server: TCP segments"]
    c2s_undecoded_frames: Annotated[int | None, "bigint",
                                    "client to server: frames walked by their headers, not decoded (AMQP 1.0)"]
    s2c_stream_bytes: Annotated[int | None, "bigint", "server to client: TCP stream bytes (gaps included)"]
    s2c_decoded_bytes: Annotated[int | None, "bigint", "server to client: bytes in decoded frames"]
    s2c_skipped_bytes: Annotated[int | None, "bigint", "server to client: bytes counted in issues"]
    s2c_frames: Annotated[int | None, "bigint", "server to client: frames"]
    s2c_packets: Annotated[int | None, "bigint", "server to client: TCP segments"]
    s2c_undecoded_frames: Annotated[int | None, "bigint",
                                    "server to client: frames walked by their headers, not decoded (AMQP 1.0)"]
    tls: Annotated[bool | None, "boolean",
                   "true: the connection ran over TLS (its tls_connections row says how); then decoded_bytes and "
                   "skipped_bytes count the decrypted stream's bytes, stream_bytes the TCP stream's; false: in clear"]
    source: Source
    provisional: Provisional
    run_id: Run


class TlsConnectionsRow(TypedDict, total=False):
    """One row per TLS connection (AMQPS), with or without its keys: the handshake (what the client asked
    for, what was agreed, whether a session was resumed), the server's certificate, whether the key log
    let it be decrypted, and its records per direction.
    """

    date: Date
    connection: Connection
    capture: Capture
    client: Client
    server: Server
    version: Annotated[str | None, "string", "TLSv1.2, TLSv1.3...: the version the ServerHello chose (null: none seen)"]
    cipher_suite: Annotated[str | None, "string",
                            "the suite chosen, by its IANA name (TLS_AES_128_GCM_SHA256, "
                            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256...)"]
    sni: Annotated[str | None, "string", "server name the client asked for (SNI)"]
    alpn_offered: Annotated[list[str] | None, "array<string>", "application protocols the client offered (ALPN)"]
    alpn: Annotated[str | None, "string",
                    "the protocol the server chose (TLS 1.3 says it encrypted: null without keys)"]
    resumed: Annotated[str | None, "string",
                       "session-id, ticket (TLS 1.2) or psk (TLS 1.3): the session resumed; null: a full handshake"]
    hello_retry: Annotated[bool | None, "boolean", "the server asked for another ClientHello (HelloRetryRequest)"]
    encrypt_then_mac: Annotated[bool | None, "boolean", "TLS 1.2 CBC suites: encrypt-then-MAC (RFC 7366) agreed"]
    extended_master_secret: Annotated[bool | None, "boolean", "TLS 1.2: the extended master secret (RFC 7627) agreed"]
    client_hello_at: Annotated[int | None, "timestamp", "the ClientHello"]
    server_hello_at: Annotated[int | None, "timestamp", "the ServerHello"]
    handshake_done_at: Annotated[int | None, "timestamp",
                                 "the handshake's end: the client's Finished (TLS 1.3), the later Finished (1.2); "
                                 "without keys, the record that carries it"]
    handshake_ms: Annotated[float | None, "double", "ClientHello to the handshake's end, in milliseconds"]
    cert_subject: Annotated[str | None, "string",
                            "the server certificate's subject (RFC 4514; TLS 1.3 sends it encrypted: null without keys)"]
    cert_issuer: Annotated[str | None, "string", "its issuer"]
    cert_not_before: Annotated[int | None, "timestamp", "its validity's start"]
    cert_not_after: Annotated[int | None, "timestamp", "its validity's end"]
    cert_sha256: Annotated[str | None, "string", "SHA-256 of the certificate (DER), hex"]
    key_logged: Annotated[bool | None, "boolean", "the key logs had secrets for this connection's client random"]
    decrypted: Annotated[bool | None, "boolean", "application data was decrypted (its frames are in frames, tls true)"]
    tickets_issued: Annotated[int | None, "bigint", "NewSessionTicket messages the server sent"]
    alerts: Annotated[list[str] | None, "array<string>", "alerts seen, in order ('close_notify from the client')"]
    c2s_records: Annotated[int | None, "bigint", "client to server: TLS records"]
    c2s_bytes: Annotated[int | None, "bigint", "client to server: TCP stream bytes"]
    c2s_plaintext_bytes: Annotated[int | None, "bigint", "client to server: application data decrypted"]
    c2s_skipped_bytes: Annotated[int | None, "bigint",
                                 "client to server: TCP stream bytes in the TLS layer's issues (not decrypted, lost)"]
    c2s_key_updates: Annotated[int | None, "bigint", "client to server: TLS 1.3 KeyUpdates"]
    s2c_records: Annotated[int | None, "bigint", "server to client: TLS records"]
    s2c_bytes: Annotated[int | None, "bigint", "server to client: TCP stream bytes"]
    s2c_plaintext_bytes: Annotated[int | None, "bigint", "server to client: application data decrypted"]
    s2c_skipped_bytes: Annotated[int | None, "bigint",
                                 "server to client: TCP stream bytes in the TLS layer's issues (not decrypted, lost)"]
    s2c_key_updates: Annotated[int | None, "bigint", "server to client: TLS 1.3 KeyUpdates"]
    end_reason: Annotated[str | None, "string", "how the TCP connection ended (from streams)"]
    source: Source
    provisional: Provisional
    run_id: Run


class ErrorsRow(TypedDict, total=False):
    """Every error the protocol signalled: connection.close and channel.close with a reply code other than
    200 (or 0), every basic.return, every basic.nack from the broker.
    """

    date: Date
    connection: Connection
    capture: Capture
    ts: Ts
    ts_ns: TsNs
    client: Client
    server: Server
    channel: Channel
    method: Annotated[str | None, "string", "connection.close, channel.close, basic.return or basic.nack"]
    initiator: Annotated[str | None, "string", "'server' or 'client': who sent it"]
    scope: Annotated[str | None, "string",
                     "'connection' (hard: the connection is closed) or 'channel' (soft: the channel is "
                     "closed); for basic.return and basic.nack the message's channel"]
    reply_code: Annotated[int | None, "int", "reply code (basic.nack: null)"]
    reply_name: Annotated[str | None, "string",
                          "the reply code's name in the spec (NOT_FOUND, PRECONDITION_FAILED...); null for"
                          " codes the spec lacks"]
    code_class: Annotated[str | None, "string",
                          "the spec's class of that code: soft-error or hard-error (a soft code in a "
                          "connection.close, or the reverse, is a broker's choice worth noticing)"]
    reply_text: Annotated[str | None, "string", "reply text"]
    failing_method: Annotated[str | None, "string",
                              "close: the method that caused it, by spec name; null when none"]
    delivery_tag: Annotated[int | None, "bigint", "basic.nack: the confirm sequence number nacked"]
    multiple: Annotated[bool | None, "boolean",
                        "basic.nack: whether every outstanding tag up to it is nacked"]
    source: Source
    provisional: Provisional
    run_id: Run


class DeliveriesRow(TypedDict, total=False):
    """One row per basic.deliver and basic.get-ok: how and when the consumer settled it (ack latency)."""

    date: Date
    connection: Connection
    capture: Capture
    client: Client
    server: Server
    channel: Channel
    channel_instance: Annotated[int | None, "int",
                                "which lifetime of the channel number (1 = first channel.open seen; 0 = "
                                "opened before the capture began)"]
    method: Annotated[str | None, "string", "basic.deliver or basic.get-ok"]
    message_key: Annotated[str | None, "string",
                           "the delivered message's key: its messages row (messages.message_key) and its "
                           "message_flows row (message_flows.message_key)"]
    delivery_tag: Annotated[int | None, "bigint", "the delivery tag"]
    consumer_tag: Annotated[str | None, "string", "deliver: the consumer it went to"]
    queue: Annotated[str | None, "string",
                     "the consumed queue (from basic.consume or basic.get); null if not captured"]
    exchange: Annotated[str | None, "string", "exchange the message was published to"]
    routing_key: Annotated[str | None, "string", "routing key"]
    redelivered: Annotated[bool | None, "boolean", "the redelivered flag"]
    delivered_at: Annotated[int | None, "timestamp", "time of the deliver / get-ok frame"]
    delivered_ns: Annotated[int | None, "bigint", "the same, nanoseconds since the epoch"]
    outcome: Annotated[str | None, "string",
                       "ack, nack, reject, auto-ack (no_ack consumer or get), unsettled (still outstanding"
                       " when the capture ended), channel-closed or connection-closed (outstanding when it"
                       " closed, by a close method or by the TCP connection's FIN or RST: the broker "
                       "requeues it)"]
    requeue: Annotated[bool | None, "boolean", "nack / reject: the requeue flag"]
    settled_at: Annotated[int | None, "timestamp",
                          "time of the settling ack / nack / reject (or of the close)"]
    settled_ns: Annotated[int | None, "bigint", "settled_at in nanoseconds since the epoch"]
    settle_latency_ms: Annotated[float | None, "double", "settled_at - delivered_at, in milliseconds"]
    settled_by_multiple: Annotated[bool | None, "boolean", "settled by an ack or nack with multiple set"]
    message_id: Annotated[str | None, "string", "property message-id of the delivered message"]
    correlation_id: Annotated[str | None, "string", "property correlation-id"]
    app_id: Annotated[str | None, "string", "property app-id"]
    body_size: Annotated[int | None, "bigint", "body size"]
    body_sha256: Annotated[str | None, "string", "SHA-256 of the body; null unless complete"]
    death_exchange: Annotated[str | None, "string",
                              "a dead-lettered message: the exchange it was published to before it was first "
                              "dead-lettered (its x-first-death-exchange header); null for others"]
    death_queue: Annotated[str | None, "string",
                           "the queue it was first dead-lettered from (x-first-death-queue)"]
    death_reason: Annotated[str | None, "string",
                            "why: rejected, expired, maxlen or delivery_limit (x-first-death-reason)"]
    source: Source
    provisional: Provisional
    run_id: Run


class PublishesRow(TypedDict, total=False):
    """One row per basic.publish: whether and when the broker confirmed it (confirm latency), whether it
    came back (basic.return), and its transaction's outcome.
    """

    date: Date
    connection: Connection
    capture: Capture
    client: Client
    server: Server
    channel: Channel
    channel_instance: Annotated[int | None, "int",
                                "which lifetime of the channel number (0 = opened before the capture)"]
    message_key: Annotated[str | None, "string",
                           "the published message's key: its messages row (messages.message_key) and its "
                           "message_flows rows (message_flows.publish_message_key)"]
    published_at: Annotated[int | None, "timestamp", "time of the basic.publish frame"]
    published_ns: Annotated[int | None, "bigint", "the same, nanoseconds since the epoch"]
    exchange: Annotated[str | None, "string", "exchange"]
    routing_key: Annotated[str | None, "string", "routing key"]
    mandatory: Annotated[bool | None, "boolean", "the mandatory flag"]
    message_id: Annotated[str | None, "string", "property message-id"]
    correlation_id: Annotated[str | None, "string", "property correlation-id"]
    app_id: Annotated[str | None, "string", "property app-id"]
    body_size: Annotated[int | None, "bigint", "body size"]
    body_sha256: Annotated[str | None, "string", "SHA-256 of the body; null unless complete"]
    confirm_seq: Annotated[int | None, "bigint",
                           "confirm sequence number (1, 2, ... after confirm.select on the channel); null "
                           "when the channel is not in confirm mode (or entered it before the capture)"]
    confirm_outcome: Annotated[str | None, "string",
                               "ack, nack or unconfirmed (no confirm seen); null when not in confirm mode"]
    confirmed_at: Annotated[int | None, "timestamp", "time of the broker's basic.ack / basic.nack"]
    confirmed_ns: Annotated[int | None, "bigint", "confirmed_at in nanoseconds since the epoch"]
    confirm_latency_ms: Annotated[float | None, "double", "confirmed_at - published_at, in milliseconds"]
    confirmed_by_multiple: Annotated[bool | None, "boolean",
                                     "confirmed by an ack or nack with multiple set"]
    returned: Annotated[bool | None, "boolean", "the broker returned it (basic.return)"]
    return_code: Annotated[int | None, "int", "basic.return reply code (312 NO_ROUTE...)"]
    return_text: Annotated[str | None, "string", "basic.return reply text"]
    tx_outcome: Annotated[str | None, "string",
                          "on a tx channel: committed, rolled-back or uncommitted; else null"]
    source: Source
    provisional: Provisional
    run_id: Run


class RpcCallsRow(TypedDict, total=False):
    """Every synchronous request paired with its reply on the same channel (queue.declare -> declare-ok,
    basic.consume -> consume-ok, closes...), in order per channel, so pipelined requests and several
    channels pair correctly.
    """

    date: Date
    connection: Connection
    capture: Capture
    client: Client
    server: Server
    channel: Channel
    channel_instance: Annotated[int | None, "int",
                                "which lifetime of the channel number (0 = opened before the capture)"]
    requester: Annotated[str | None, "string", "'client' or 'server'"]
    request: Annotated[str | None, "string", "the request, by spec name"]
    reply: Annotated[str | None, "string",
                     "the reply that answered it (declare-ok, get-empty...), or the error close"]
    request_at: Annotated[int | None, "timestamp", "time of the request"]
    reply_at: Annotated[int | None, "timestamp", "time of the reply"]
    latency_ms: Annotated[float | None, "double", "reply_at - request_at, in milliseconds"]
    outcome: Annotated[str | None, "string",
                       "ok, error (a channel.close or connection.close with an error code answered it) or "
                       "no-reply (none seen: the capture ended, or the connection closed first)"]
    error_code: Annotated[int | None, "int", "the reply code of the answering error close"]
    error_text: Annotated[str | None, "string", "its reply text"]
    source: Source
    provisional: Provisional
    run_id: Run


class ConnectionsRow(TypedDict, total=False):
    """One row per TCP connection: its AMQP handshake, who the peers were, what they agreed, how it ended,
    and what it carried.
    """

    date: Date
    connection: Connection
    capture: Capture
    client: Client
    server: Server
    status: Annotated[str | None, "string",
                      "amqp, amqp-1.0, tls, another protocol (http, mqtt...), not-amqp or no-payload "
                      "(from streams)"]
    version: Annotated[str | None, "string", "protocol version from the client's header"]
    saw_start: Annotated[bool | None, "boolean", "the capture saw the connection's start (its SYN)"]
    started_at: Annotated[int | None, "timestamp", "first packet (the SYN when seen)"]
    protocol_header_at: Annotated[int | None, "timestamp", "the client's protocol header"]
    start_at: Annotated[int | None, "timestamp", "connection.start"]
    start_ok_at: Annotated[int | None, "timestamp", "connection.start-ok"]
    tune_at: Annotated[int | None, "timestamp", "connection.tune"]
    tune_ok_at: Annotated[int | None, "timestamp", "connection.tune-ok"]
    open_at: Annotated[int | None, "timestamp", "connection.open"]
    open_ok_at: Annotated[int | None, "timestamp", "connection.open-ok"]
    handshake_ms: Annotated[float | None, "double",
                            "protocol header (or start) to open-ok, in milliseconds"]
    auth_ms: Annotated[float | None, "double", "start to tune (the SASL exchange), in milliseconds"]
    server_product: Annotated[str | None, "string", "server properties: product"]
    server_version: Annotated[str | None, "string", "server properties: version"]
    server_platform: Annotated[str | None, "string", "server properties: platform"]
    client_product: Annotated[str | None, "string", "client properties: product"]
    client_version: Annotated[str | None, "string", "client properties: version"]
    client_platform: Annotated[str | None, "string", "client properties: platform"]
    connection_name: Annotated[str | None, "string", "client properties: connection_name"]
    client_capabilities_json: Annotated[str | None, "string", "client properties: capabilities, as JSON"]
    auth_mechanism: Annotated[str | None, "string", "SASL mechanism chosen (PLAIN, AMQPLAIN, EXTERNAL...)"]
    auth_user: Annotated[str | None, "string", "the login name (never a password)"]
    locale: Annotated[str | None, "string", "locale chosen"]
    channel_max_proposed: Annotated[int | None, "int", "connection.tune channel-max"]
    frame_max_proposed: Annotated[int | None, "bigint", "connection.tune frame-max"]
    heartbeat_proposed: Annotated[int | None, "int", "connection.tune heartbeat, seconds"]
    channel_max: Annotated[int | None, "int", "agreed (tune-ok) channel-max"]
    frame_max: Annotated[int | None, "bigint", "agreed frame-max"]
    heartbeat: Annotated[int | None, "int", "agreed heartbeat, seconds (0: none)"]
    vhost: Annotated[str | None, "string", "virtual host opened"]
    ended_at: Annotated[int | None, "timestamp", "last packet"]
    end_reason: Annotated[str | None, "string",
                          "close (close handshake completed), heartbeat-timeout (no client traffic for "
                          "twice the heartbeat before the end), fin, rst, port-reuse or capture-end"]
    close_initiator: Annotated[str | None, "string", "who sent connection.close: client or server"]
    close_code: Annotated[int | None, "int", "its reply code"]
    close_text: Annotated[str | None, "string", "its reply text"]
    close_failing_method: Annotated[str | None, "string", "the method that caused it, by spec name"]
    c2s_frames: Annotated[int | None, "bigint", "client to server frames"]
    c2s_bytes: Annotated[int | None, "bigint", "client to server TCP stream bytes"]
    s2c_frames: Annotated[int | None, "bigint", "server to client frames"]
    s2c_bytes: Annotated[int | None, "bigint", "server to client TCP stream bytes"]
    channels_opened: Annotated[int | None, "bigint", "channel.open-ok seen"]
    messages_published: Annotated[int | None, "bigint", "basic.publish seen"]
    messages_delivered: Annotated[int | None, "bigint", "basic.deliver and basic.get-ok seen"]
    tls: Annotated[bool | None, "boolean", "true: over TLS (AMQPS), its tls_connections row says how; false: in clear (from streams)"]
    source: Source
    provisional: Provisional
    run_id: Run


class ChannelsRow(TypedDict, total=False):
    """One row per channel lifetime (a channel number reused after close is a new row): how it was used and
    how it ended.
    """

    date: Date
    connection: Connection
    capture: Capture
    client: Client
    server: Server
    channel: Channel
    channel_instance: Annotated[int | None, "int",
                                "which lifetime of the number (0 = opened before the capture began)"]
    opened_at: Annotated[int | None, "timestamp", "channel.open (null when opened before the capture)"]
    closed_at: Annotated[int | None, "timestamp", "channel.close; null if still open at the end"]
    close_initiator: Annotated[str | None, "string", "who sent channel.close: client or server"]
    close_code: Annotated[int | None, "int", "its reply code"]
    close_text: Annotated[str | None, "string", "its reply text"]
    confirm_mode_at: Annotated[int | None, "timestamp", "confirm.select; null if never"]
    tx_mode_at: Annotated[int | None, "timestamp", "tx.select; null if never"]
    prefetch_count: Annotated[int | None, "int", "the last basic.qos prefetch-count"]
    prefetch_size: Annotated[int | None, "bigint", "the last basic.qos prefetch-size"]
    prefetch_scope: Annotated[str | None, "string",
                              "per-consumer (global=false) or per-channel (global=true), RabbitMQ's "
                              "reading"]
    consumers_json: Annotated[str | None, "string",
                              "consumers: tag, queue, no_ack, started_at, cancelled_at and by whom (JSON)"]
    flow_events: Annotated[int | None, "bigint", "channel.flow frames"]
    publishes: Annotated[int | None, "bigint", "basic.publish frames"]
    deliveries: Annotated[int | None, "bigint", "basic.deliver and basic.get-ok frames"]
    acks: Annotated[int | None, "bigint", "client basic.ack frames"]
    nacks: Annotated[int | None, "bigint", "client basic.nack frames"]
    rejects: Annotated[int | None, "bigint", "basic.reject frames"]
    confirms: Annotated[int | None, "bigint", "broker basic.ack and basic.nack frames (publisher confirms)"]
    source: Source
    provisional: Provisional
    run_id: Run


class HeartbeatsRow(TypedDict, total=False):
    """Per connection and direction: the agreed heartbeat, heartbeats seen, and silences (any frame counts
    as a sign of life).
    """

    date: Date
    connection: Connection
    capture: Capture
    client: Client
    server: Server
    direction: Direction
    heartbeat_s: Annotated[int | None, "int",
                           "agreed heartbeat interval in seconds (tune-ok); 0 or null: none"]
    heartbeats: Annotated[int | None, "bigint", "heartbeat frames sent in this direction"]
    frames: Annotated[int | None, "bigint", "frames sent in this direction"]
    longest_silence_s: Annotated[float | None, "double",
                                 "longest time between two frames of this direction, or from the last one "
                                 "to the connection's end"]
    long_silences: Annotated[int | None, "bigint", "silences longer than twice the agreed interval"]
    final_silence_s: Annotated[float | None, "double",
                               "from this direction's last frame to the connection's last packet"]
    ended_after_silence: Annotated[bool | None, "boolean",
                                   "the connection ended after a final silence longer than twice the "
                                   "interval (a heartbeat timeout)"]
    source: Source
    provisional: Provisional
    run_id: Run


class FlowControlRow(TypedDict, total=False):
    """Intervals of flow control: channel.flow active=false ... active=true, and RabbitMQ's
    connection.blocked ... unblocked.
    """

    date: Date
    connection: Connection
    capture: Capture
    client: Client
    server: Server
    channel: Channel
    mechanism: Annotated[str | None, "string", "channel.flow or connection.blocked"]
    initiator: Annotated[str | None, "string", "who stopped the flow: client or server"]
    reason: Annotated[str | None, "string", "connection.blocked: the broker's reason"]
    started_at: Annotated[int | None, "timestamp", "flow stopped (active=false, or blocked)"]
    ended_at: Annotated[int | None, "timestamp",
                        "flow resumed (active=true, or unblocked); null if never in the capture"]
    duration_ms: Annotated[float | None, "double", "ended_at - started_at, in milliseconds"]
    source: Source
    provisional: Provisional
    run_id: Run


class FindingsRow(TypedDict, total=False):
    """What needs attention, diagnosed from the other tables by the findings rules (amqpcap.rules.findings):
    one row per problem and what it is about (a consumer, a queue, an exchange and routing key, a
    channel, a connection, a client host), with the measured number, the limit it crossed, one line in
    plain words and the evidence to open. A connection carried across runs has its findings once.
    """

    date: Date
    kind: Annotated[str | None, "string",
                    "consumer-ack-timeout, redelivery-loop, unroutable, publish-nacked, heartbeat-timeout, "
                    "missed-heartbeats, publisher-blocked, flow-stopped, connection-churn, channel-churn, "
                    "unbounded-prefetch, slow-consumer, slow-rpc, channel-error, connection-error, large-message, "
                    "deprecated-feature, capture-loss, tls-not-decoded (docs/findings.md)"]
    severity: Annotated[str | None, "string", "info, warning or error"]
    finding_id: Annotated[str | None, "string",
                          "stable id of the finding (kind, connection or client host, and what it is about): the "
                          "same across reruns and carried runs"]
    capture: Capture
    connection: Connection
    client: Client
    server: Server
    channel: Channel
    consumer_tag: Annotated[str | None, "string", "the consumer it is about"]
    queue: Annotated[str | None, "string", "the queue it is about"]
    exchange: Annotated[str | None, "string", "the exchange it is about"]
    routing_key: Annotated[str | None, "string", "the routing key it is about"]
    first_at: Annotated[int | None, "timestamp", "its first occurrence"]
    first_ns: Annotated[int | None, "bigint", "the same, nanoseconds since the epoch"]
    last_at: Annotated[int | None, "timestamp", "its last occurrence"]
    last_ns: Annotated[int | None, "bigint", "the same, nanoseconds since the epoch"]
    count: Annotated[int | None, "bigint", "occurrences (deliveries, publishes, closes, silences, connections...)"]
    value: Annotated[float | None, "double", "the measured number (the largest, where there are several), in `unit`"]
    threshold: Annotated[float | None, "double", "the limit it crossed, in `unit` (settings [findings]); null when "
                                                 "any occurrence counts"]
    unit: Annotated[str | None, "string", "of value and threshold: s, ms, bytes, per-minute, redeliveries, ..."]
    summary: Annotated[str | None, "string", "one line in plain words"]
    evidence_json: Annotated[str | None, "string",
                             "what to open (JSON): Wireshark frame numbers (`frames`, of `capture`), delivery tags, "
                             "message keys (messages.message_key), reply codes and texts, connections; lists cut at "
                             "20 items"]
    source: Source
    provisional: Provisional
    run_id: Run


class MessageFlowsRow(TypedDict, total=False):
    """Publisher to consumer across connections: one row per (publish, delivery) pair, fan-out and
    redeliveries included; a publish never delivered in the capture, or a delivery whose publish is
    outside it, keeps the other side empty.
    """

    date: Date
    capture: Capture
    match: Annotated[str | None, "string",
                     "how the pair was matched, in time order per consumer: message_id or body (its SHA-256), "
                     "a delivery with the exchange and routing key of the publish (the broker copies them "
                     "into basic.deliver); message_id-dead-letter or body-dead-letter, a dead-lettered "
                     "delivery (its exchange and routing key rewritten) with the publish to the exchange its "
                     "x-first-death-exchange header names; null for a side left alone"]
    message_key: Annotated[str | None, "string",
                           "the delivery's message key (deliveries.message_key, messages.message_key): one row "
                           "per delivery, so unique where set; null for a publish never delivered"]
    publish_message_key: Annotated[str | None, "string",
                                   "the publish's message key (publishes.message_key, messages.message_key); "
                                   "repeated on every delivery of a fan-out; null for a delivery whose publish "
                                   "is outside the capture"]
    message_id: Annotated[str | None, "string", "property message-id"]
    body_sha256: Annotated[str | None, "string", "SHA-256 of the body"]
    exchange: Annotated[str | None, "string", "exchange published to"]
    routing_key: Annotated[str | None, "string", "routing key"]
    publisher_connection: Annotated[str | None, "string", "connection of the basic.publish"]
    publisher_channel: Annotated[int | None, "int", "its channel"]
    published_at: Annotated[int | None, "timestamp", "time of the publish"]
    consumer_connection: Annotated[str | None, "string", "connection of the basic.deliver / get-ok"]
    consumer_channel: Annotated[int | None, "int", "its channel"]
    consumer_tag: Annotated[str | None, "string", "consumer tag (deliver)"]
    queue: Annotated[str | None, "string", "queue consumed from (when its consume or get was captured)"]
    delivery_tag: Annotated[int | None, "bigint", "delivery tag"]
    redelivered: Annotated[bool | None, "boolean", "the delivery's redelivered flag"]
    delivered_at: Annotated[int | None, "timestamp", "time of the deliver / get-ok"]
    settled_at: Annotated[int | None, "timestamp", "when the consumer settled it (deliveries.settled_at)"]
    outcome: Annotated[str | None, "string", "the delivery's outcome (deliveries.outcome)"]
    publish_to_deliver_ms: Annotated[float | None, "double", "delivered_at - published_at, in milliseconds"]
    deliver_to_settle_ms: Annotated[float | None, "double", "settled_at - delivered_at, in milliseconds"]
    end_to_end_ms: Annotated[float | None, "double", "settled_at - published_at, in milliseconds"]
    journey: Annotated[str | None, "string",
                       "one message's way through the brokers: the message key of its first publish the capture "
                       "saw (publishes.message_key; of its first delivery when that publish is outside it), on "
                       "every flow of its hops: the publish and its deliveries, a shovel's or federation "
                       "link's or any forwarder's re-publish after a delivery and that one's deliveries, a "
                       "dead-lettered delivery"]
    hop: Annotated[int | None, "int",
                   "the flow's hop on the journey: 1 for the first publish's (or the first delivery's), one more "
                   "for each re-publish (after the delivery it forwards) and each dead-lettering"]
    hop_ms: Annotated[float | None, "double",
                      "the hop's latency: from its publish (a dead-lettering's: from the reject or nack that "
                      "caused it, else from the publish) to the delivery, in milliseconds"]
    journey_ms: Annotated[float | None, "double",
                          "from the journey's first publish to this delivery, in milliseconds (on the last hop: "
                          "end to end across every hop)"]
    source: Source
    provisional: Provisional
    run_id: Run


class RunsRow(TypedDict, total=False):
    """The run log: one row per run that completed (its row is written after every table commit of
    the run, and is what makes the run visible to readers)."""

    date: Date
    run_id: Run
    kind: Annotated[str | None, "string", "run (amqpcap run), analyze (a rebuild), repair or maintain"]
    started_at: Annotated[int | None, "timestamp", "when the run began"]
    finished_at: Annotated[int | None, "timestamp", "when its last table commit was done"]
    captures: Annotated[list[str] | None, "array<string>", "the captures it read"]
    replaced: Annotated[list[str] | None, "array<string>",
                        "the captures whose rows it replaced (its own, and earlier names of the same bytes)"]
    versions: Annotated[list[tuple[str, str]] | None, "map<string,string>",
                        "table -> the Delta version the run committed"]
    summary_json: Annotated[str | None, "string", "the run's summary (amqpcap run --summary-json), as JSON"]


class ConnectionStateRow(TypedDict, total=False):
    """Connections still open when a run's captures ended, as that run left them: what the next run
    resumes (amqpcap.onepass.state, docs/state.md). One row per connection and run."""

    date: Date
    sensor: Annotated[str | None, "string", "what captured it (state.sensor): other sensors never resume it"]
    tuple_key: Annotated[str | None, "string", "both endpoints, sorted: 'ip:port|ip:port'"]
    connection: Connection
    last_ts_ns: Annotated[int | None, "bigint", "its last packet in that run"]
    source: Source
    state: Annotated[bytes | None, "binary", "the saved state (decoder, analytics, partial frame and message)"]
    run_id: Run


class ResumptionsRow(TypedDict, total=False):
    """Which run resumed which saved connection: a rerun of the run that saved it then leaves out
    the provisional rows the later run replaced (docs/state.md)."""

    date: Date
    connection: Connection
    saved_by: Annotated[str | None, "string", "the source of the state resumed (connection_state.source)"]
    source: Source
    run_id: Run


CAPTURES = Table.of("captures", CapturesRow, replace_key="path")
FRAMES = Table.of("frames", FramesRow, replace_key="source")
MESSAGES = Table.of("messages", MessagesRow, replace_key="source")
DECODE_ISSUES = Table.of("decode_issues", DecodeIssuesRow, replace_key="source")
STREAMS = Table.of("streams", StreamsRow, replace_key="source")
TLS_CONNECTIONS = Table.of("tls_connections", TlsConnectionsRow, replace_key="source")
ERRORS = Table.of("errors", ErrorsRow, replace_key="source")
DELIVERIES = Table.of("deliveries", DeliveriesRow, replace_key="source")
PUBLISHES = Table.of("publishes", PublishesRow, replace_key="source")
RPC_CALLS = Table.of("rpc_calls", RpcCallsRow, replace_key="source")
CONNECTIONS = Table.of("connections", ConnectionsRow, replace_key="source")
CHANNELS = Table.of("channels", ChannelsRow, replace_key="source")
HEARTBEATS = Table.of("heartbeats", HeartbeatsRow, replace_key="source")
FLOW_CONTROL = Table.of("flow_control", FlowControlRow, replace_key="source")
MESSAGE_FLOWS = Table.of("message_flows", MessageFlowsRow, replace_key="source")
FINDINGS = Table.of("findings", FindingsRow, replace_key="source")
RUNS = Table.of("runs", RunsRow, replace_key="run_id")
CONNECTION_STATE = Table.of("connection_state", ConnectionStateRow, replace_key="source")
RESUMPTIONS = Table.of("resumptions", ResumptionsRow, replace_key="source")

# The registry: every table of the lake, in the order the docs list them.
RAW_TABLES = (CAPTURES, FRAMES, MESSAGES, DECODE_ISSUES, STREAMS, TLS_CONNECTIONS)
# Written by the decode task's state machines, one connection at a time.
CONNECTION_TABLES = (ERRORS, DELIVERIES, PUBLISHES, RPC_CALLS, CONNECTIONS, CHANNELS, HEARTBEATS, FLOW_CONTROL,
                     FINDINGS)
# Across connections: built after decoding from the per-message rows of publishes and deliveries.
ANALYTICS_TABLES = CONNECTION_TABLES + (MESSAGE_FLOWS,)
# Connections carried between runs (amqpcap.onepass.state).
STATE_TABLES = (CONNECTION_STATE, RESUMPTIONS)
# The run log (amqpcap.lake.runlog): never replaced, only appended.
LOG_TABLES = (RUNS,)
TABLES = {t.name: t for t in RAW_TABLES + ANALYTICS_TABLES + STATE_TABLES + LOG_TABLES}


def markdown(tables=RAW_TABLES + ANALYTICS_TABLES + STATE_TABLES + LOG_TABLES) -> str:
    lines = ["# Tables", "",
             "Generated from `amqpcap/tables/registry.py` (`python -m amqpcap.tables.registry > docs/tables.md`); "
             "do not edit by hand. All tables are Delta, partitioned by `date` (UTC date of the "
             "traffic). Where tshark's and Packetbeat's AMQP fields are: [`fields.md`](fields.md); the join "
             "keys: [`queries.md`](queries.md).", ""]
    for table in tables:
        lines += [f"## `{table.name}`", "", table.description, "", "| column | type | meaning |",
                  "|---|---|---|"]
        lines += [f"| `{c.name}` | `{c.type}` | {c.comment} |" for c in table.columns]
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(markdown())
