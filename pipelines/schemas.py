"""The lake's tables, declared once: every column with its type and what it means.

Writers, readers and tests import these; `docs/tables.md` is generated from them
(`python -m pipelines.schemas > docs/tables.md`; a test fails when it is stale).
Types are Spark SQL names; each maps to one Arrow type, so a column has exactly one type
everywhere (AMQP field tables become `map<string,string>` plus a JSON column for full fidelity).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import pyarrow as pa

_ARROW = {
    "string": pa.string(), "bigint": pa.int64(), "int": pa.int32(), "boolean": pa.bool_(),
    "double": pa.float64(), "date": pa.date32(), "binary": pa.binary(),
    "timestamp": pa.timestamp("us", tz="UTC"), "array<string>": pa.list_(pa.string()),
    "map<string,string>": pa.map_(pa.string(), pa.string()),
}


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    comment: str


@dataclass(frozen=True)
class Table:
    name: str
    description: str
    columns: tuple[Column, ...]

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def arrow(self) -> pa.Schema:
        return pa.schema([pa.field(c.name, _ARROW[c.type], metadata={"comment": c.comment})
                          for c in self.columns])

    def task_output(self, without: tuple[str, ...] = ("run_id",)) -> tuple[pa.Schema, str]:
        """(Arrow schema, Spark DDL) of the table's columns but `without`, with no comments: what
        an applyInArrow/mapInArrow task producing the table's rows declares."""
        columns = [c for c in self.columns if c.name not in without]
        schema = pa.schema([pa.field(c.name, _ARROW[c.type]) for c in columns])
        return schema, ", ".join(f"{c.name} {c.type}" for c in columns)

    def ddl(self) -> str:
        """The schema as Spark DDL, with comments (what mapInArrow and CREATE TABLE take)."""
        return ", ".join(f"`{c.name}` {c.type} COMMENT '{c.comment.replace(chr(39), chr(39) * 2)}'"
                         for c in self.columns)

    def spark(self):
        from pyspark.sql import types as T
        simple = {"string": T.StringType(), "bigint": T.LongType(), "int": T.IntegerType(),
                  "boolean": T.BooleanType(), "double": T.DoubleType(), "date": T.DateType(),
                  "binary": T.BinaryType(), "timestamp": T.TimestampType(),
                  "array<string>": T.ArrayType(T.StringType()),
                  "map<string,string>": T.MapType(T.StringType(), T.StringType())}
        return T.StructType([T.StructField(c.name, simple[c.type], True, {"comment": c.comment})
                             for c in self.columns])


def _c(name: str, type_: str, comment: str) -> Column:
    if type_ not in _ARROW:
        raise ValueError(f"column {name}: unknown type {type_}")
    return Column(name, type_, comment)


DATE = _c("date", "date", "UTC date of the traffic (the partition column)")
RUN = _c("run_id", "string", "the run that wrote the row")
CONNECTION = _c("connection", "string", "connection id: hash of both endpoints and the connection's first "
                "packet time; stable across reruns")
CAPTURE = _c("capture", "string", "capture file holding the row's first byte")
CLIENT = _c("client", "string", "client endpoint, ip:port ([ip6]:port for IPv6)")
SERVER = _c("server", "string", "server endpoint, ip:port")
DIRECTION = _c("direction", "string", "'C>S' (client to server) or 'S>C'")
CHANNEL = _c("channel", "int", "AMQP channel (0 for the connection itself); null when not tied to a frame")
TS = _c("ts", "timestamp", "packet time of the first byte (microseconds)")
TS_NS = _c("ts_ns", "bigint", "packet time of the first byte, nanoseconds since the epoch")
TS_LAST_NS = _c("ts_last_ns", "bigint", "packet time of the last byte, nanoseconds since the epoch")

CAPTURES = Table("captures", "One row per input file and run: what was read and how it went.", (
    DATE, RUN,
    _c("path", "string", "the file as given (local path or URI)"),
    _c("size_bytes", "bigint", "file size"),
    _c("format", "string", "pcap, pcap-ns or pcapng, with +gzip when compressed"),
    _c("link_types", "array<string>", "link-layer types seen (EN10MB, LINUX_SLL2, ...)"),
    _c("packets", "bigint", "packet records read"),
    _c("captured_bytes", "bigint", "bytes of all packet records"),
    _c("first_ts", "timestamp", "time of the first packet"),
    _c("last_ts", "timestamp", "time of the last packet"),
    _c("status", "string", "'ok', 'partial' (damaged but partly read) or 'failed'"),
    _c("error", "string", "why the file is partial or failed; null when ok"),
))

FRAMES = Table("frames", "One row per AMQP frame and protocol header, in stream order per direction.", (
    DATE, CONNECTION, CAPTURE, TS, TS_NS, TS_LAST_NS, CLIENT, SERVER, DIRECTION, CHANNEL,
    _c("kind", "string", "'protocol-header', 'method', 'header', 'body' or 'heartbeat'"),
    _c("stream_offset", "bigint", "offset of the frame's first byte in its direction's TCP stream"),
    _c("frame_bytes", "bigint", "bytes on the wire, header and frame-end included"),
    _c("method", "string", "class.method by spec name ('basic.publish'); null for other kinds"),
    _c("class_id", "int", "AMQP class id (methods and content headers)"),
    _c("method_id", "int", "AMQP method id"),
    _c("exchange", "string", "argument 'exchange' (also exchange.bind 'destination' is in args_json)"),
    _c("routing_key", "string", "argument 'routing_key'"),
    _c("queue", "string", "argument 'queue'"),
    _c("consumer_tag", "string", "argument 'consumer_tag'"),
    _c("delivery_tag", "bigint", "argument 'delivery_tag' (deliver, get-ok, ack, nack, reject)"),
    _c("multiple", "boolean", "argument 'multiple' (ack, nack)"),
    _c("requeue", "boolean", "argument 'requeue' (reject, nack, recover)"),
    _c("redelivered", "boolean", "argument 'redelivered' (deliver, get-ok)"),
    _c("mandatory", "boolean", "argument 'mandatory' (publish)"),
    _c("immediate", "boolean", "argument 'immediate' (publish)"),
    _c("no_ack", "boolean", "argument 'no_ack' (consume, get)"),
    _c("no_wait", "boolean", "argument 'no_wait'"),
    _c("reply_code", "int", "argument 'reply_code' (close, return)"),
    _c("reply_text", "string", "argument 'reply_text'"),
    _c("failing_class_id", "int", "close: class id of the method that caused it (0 when none)"),
    _c("failing_method_id", "int", "close: method id of the method that caused it"),
    _c("args_json", "string", "every argument as JSON (spec names in snake_case; credentials redacted)"),
    _c("body_size", "bigint", "content header: total body size announced"),
    _c("properties_json", "string", "content header: the properties present, as JSON"),
    _c("protocol_version", "string", "protocol header: '0-9-1', '0-9', '0-8' or null when unknown"),
    _c("protocol_header", "string", "protocol header as read ('AMQP 0 0 9 1 (0-9-1)', or its bytes)"),
    RUN,
))

MESSAGES = Table("messages", "One row per content-carrying method (publish, deliver, get-ok, return) "
                 "with its properties and body summary.", (
    DATE, CONNECTION, CAPTURE, TS, TS_NS, CLIENT, SERVER, DIRECTION, CHANNEL,
    _c("method", "string", "basic.publish, basic.deliver, basic.get-ok or basic.return"),
    _c("stream_offset", "bigint", "offset of the method frame in its direction's stream"),
    _c("exchange", "string", "exchange the message was published to"),
    _c("routing_key", "string", "routing key"),
    _c("delivery_tag", "bigint", "deliver, get-ok: the delivery tag"),
    _c("consumer_tag", "string", "deliver: the consumer tag"),
    _c("redelivered", "boolean", "deliver, get-ok: the redelivered flag"),
    _c("mandatory", "boolean", "publish: the mandatory flag"),
    _c("reply_code", "int", "return: why the message came back (312 NO_ROUTE...)"),
    _c("reply_text", "string", "return: the reply text"),
    _c("content_type", "string", "property content-type"),
    _c("content_encoding", "string", "property content-encoding"),
    _c("headers", "map<string,string>", "property headers, values rendered as text"),
    _c("headers_json", "string", "property headers as JSON, full fidelity (nested tables, arrays)"),
    _c("delivery_mode", "int", "property delivery-mode: 1 transient, 2 persistent"),
    _c("priority", "int", "property priority"),
    _c("correlation_id", "string", "property correlation-id"),
    _c("reply_to", "string", "property reply-to"),
    _c("expiration", "string", "property expiration (text, as on the wire)"),
    _c("message_id", "string", "property message-id"),
    _c("timestamp", "timestamp", "property timestamp (seconds on the wire)"),
    _c("type", "string", "property type"),
    _c("user_id", "string", "property user-id"),
    _c("app_id", "string", "property app-id"),
    _c("body_size", "bigint", "body size announced by the content header; null if the header was lost"),
    _c("body_received", "bigint", "body bytes seen"),
    _c("body_frames", "int", "body frames seen"),
    _c("complete", "boolean", "header and every body byte seen"),
    _c("body_sha256", "string", "SHA-256 of the body, hex; null unless complete"),
    _c("body", "binary", "the body, capped; only when bodies.capture is on"),
    RUN,
))

DECODE_ISSUES = Table("decode_issues", "Every problem met while decoding: where, what, how many bytes were "
                      "skipped. Every stream byte is in a frame or in some bytes_skipped.", (
    DATE, CAPTURE, CONNECTION, TS, TS_NS, CLIENT, SERVER, DIRECTION, CHANNEL,
    _c("stream_offset", "bigint", "where in its direction's stream"),
    _c("issue_kind", "string", "gap, resync, framing, truncated, malformed-payload, unknown-method, ... "
       "(docs/decode.md lists them)"),
    _c("detail", "string", "what happened, in words"),
    _c("bytes_skipped", "bigint", "stream bytes not decoded because of it"),
    RUN,
))

RAW_TABLES = (CAPTURES, FRAMES, MESSAGES, DECODE_ISSUES)

STREAMS = Table("streams", "One row per TCP connection seen: how it started and ended, and what its bytes "
                "became (AMQP or not).", (
    DATE, CONNECTION, CAPTURE, CLIENT, SERVER,
    _c("status", "string", "amqp, tls (on a TLS port: not decoded), not-amqp or no-payload"),
    _c("version", "string", "protocol version from the client's header (null when not captured)"),
    _c("client_decided_by", "string", "how the client side was told: protocol header, SYN, port, a "
       "method's direction, or a guess"),
    _c("syn_seen", "boolean", "the capture saw the connection's SYN (it saw the start)"),
    _c("first_ts", "timestamp", "first packet of the connection"),
    _c("last_ts", "timestamp", "last packet of the connection"),
    _c("end_reason", "string", "fin, rst, port-reuse (a new SYN on the same 4-tuple) or capture-end"),
    _c("c2s_stream_bytes", "bigint", "client to server: TCP stream bytes (gaps included)"),
    _c("c2s_decoded_bytes", "bigint", "client to server: bytes in decoded frames"),
    _c("c2s_skipped_bytes", "bigint", "client to server: bytes counted in issues"),
    _c("c2s_frames", "bigint", "client to server: frames (protocol header included)"),
    _c("c2s_packets", "bigint", "client to server: TCP segments"),
    _c("s2c_stream_bytes", "bigint", "server to client: TCP stream bytes (gaps included)"),
    _c("s2c_decoded_bytes", "bigint", "server to client: bytes in decoded frames"),
    _c("s2c_skipped_bytes", "bigint", "server to client: bytes counted in issues"),
    _c("s2c_frames", "bigint", "server to client: frames"),
    _c("s2c_packets", "bigint", "server to client: TCP segments"),
    RUN,
))

RAW_TABLES = (CAPTURES, FRAMES, MESSAGES, DECODE_ISSUES, STREAMS)

ERRORS = Table("errors", "Every error the protocol signalled: connection.close and channel.close with a "
               "reply code other than 200 (or 0), every basic.return, every basic.nack from the broker.", (
    DATE, CONNECTION, CAPTURE, TS, TS_NS, CLIENT, SERVER, CHANNEL,
    _c("method", "string", "connection.close, channel.close, basic.return or basic.nack"),
    _c("initiator", "string", "'server' or 'client': who sent it"),
    _c("scope", "string", "'connection' (hard: the connection is closed) or 'channel' (soft: the channel "
       "is closed); for basic.return and basic.nack the message's channel"),
    _c("reply_code", "int", "reply code (basic.nack: null)"),
    _c("reply_name", "string", "the reply code's name in the spec (NOT_FOUND, PRECONDITION_FAILED...); "
       "null for codes the spec lacks"),
    _c("code_class", "string", "the spec's class of that code: soft-error or hard-error (a soft code in a "
       "connection.close, or the reverse, is a broker's choice worth noticing)"),
    _c("reply_text", "string", "reply text"),
    _c("failing_method", "string", "close: the method that caused it, by spec name; null when none"),
    _c("delivery_tag", "bigint", "basic.nack: the confirm sequence number nacked"),
    _c("multiple", "boolean", "basic.nack: whether every outstanding tag up to it is nacked"),
    RUN,
))

DELIVERIES = Table("deliveries", "One row per basic.deliver and basic.get-ok: how and when the consumer "
                   "settled it (ack latency).", (
    DATE, CONNECTION, CAPTURE, CLIENT, SERVER, CHANNEL,
    _c("channel_instance", "int", "which lifetime of the channel number (1 = first channel.open seen; 0 = "
       "opened before the capture began)"),
    _c("method", "string", "basic.deliver or basic.get-ok"),
    _c("delivery_tag", "bigint", "the delivery tag"),
    _c("consumer_tag", "string", "deliver: the consumer it went to"),
    _c("queue", "string", "the consumed queue (from basic.consume or basic.get); null if not captured"),
    _c("exchange", "string", "exchange the message was published to"),
    _c("routing_key", "string", "routing key"),
    _c("redelivered", "boolean", "the redelivered flag"),
    _c("delivered_at", "timestamp", "time of the deliver / get-ok frame"),
    _c("delivered_ns", "bigint", "the same, nanoseconds since the epoch"),
    _c("outcome", "string", "ack, nack, reject, auto-ack (no_ack consumer or get), unsettled (still "
       "outstanding when the capture ended), channel-closed or connection-closed (outstanding when it "
       "closed, by a close method or by the TCP connection's FIN or RST: the broker requeues it)"),
    _c("requeue", "boolean", "nack / reject: the requeue flag"),
    _c("settled_at", "timestamp", "time of the settling ack / nack / reject (or of the close)"),
    _c("settle_latency_ms", "double", "settled_at - delivered_at, in milliseconds"),
    _c("settled_by_multiple", "boolean", "settled by an ack or nack with multiple set"),
    RUN,
))

PUBLISHES = Table("publishes", "One row per basic.publish: whether and when the broker confirmed it "
                  "(confirm latency), whether it came back (basic.return), and its transaction's outcome.", (
    DATE, CONNECTION, CAPTURE, CLIENT, SERVER, CHANNEL,
    _c("channel_instance", "int", "which lifetime of the channel number (0 = opened before the capture)"),
    _c("published_at", "timestamp", "time of the basic.publish frame"),
    _c("published_ns", "bigint", "the same, nanoseconds since the epoch"),
    _c("exchange", "string", "exchange"),
    _c("routing_key", "string", "routing key"),
    _c("mandatory", "boolean", "the mandatory flag"),
    _c("message_id", "string", "property message-id"),
    _c("correlation_id", "string", "property correlation-id"),
    _c("body_size", "bigint", "body size"),
    _c("body_sha256", "string", "SHA-256 of the body; null unless complete"),
    _c("confirm_seq", "bigint", "confirm sequence number (1, 2, ... after confirm.select on the channel); "
       "null when the channel is not in confirm mode (or entered it before the capture)"),
    _c("confirm_outcome", "string", "ack, nack or unconfirmed (no confirm seen); null when not in confirm mode"),
    _c("confirmed_at", "timestamp", "time of the broker's basic.ack / basic.nack"),
    _c("confirm_latency_ms", "double", "confirmed_at - published_at, in milliseconds"),
    _c("confirmed_by_multiple", "boolean", "confirmed by an ack or nack with multiple set"),
    _c("returned", "boolean", "the broker returned it (basic.return)"),
    _c("return_code", "int", "basic.return reply code (312 NO_ROUTE...)"),
    _c("return_text", "string", "basic.return reply text"),
    _c("tx_outcome", "string", "on a tx channel: committed, rolled-back or uncommitted; else null"),
    RUN,
))

RPC_CALLS = Table("rpc_calls", "Every synchronous request paired with its reply on the same channel "
                  "(queue.declare -> declare-ok, basic.consume -> consume-ok, closes...), in order per "
                  "channel, so pipelined requests and several channels pair correctly.", (
    DATE, CONNECTION, CAPTURE, CLIENT, SERVER, CHANNEL,
    _c("channel_instance", "int", "which lifetime of the channel number (0 = opened before the capture)"),
    _c("requester", "string", "'client' or 'server'"),
    _c("request", "string", "the request, by spec name"),
    _c("reply", "string", "the reply that answered it (declare-ok, get-empty...), or the error close"),
    _c("request_at", "timestamp", "time of the request"),
    _c("reply_at", "timestamp", "time of the reply"),
    _c("latency_ms", "double", "reply_at - request_at, in milliseconds"),
    _c("outcome", "string", "ok, error (a channel.close or connection.close with an error code answered "
       "it) or no-reply (none seen: the capture ended, or the connection closed first)"),
    _c("error_code", "int", "the reply code of the answering error close"),
    _c("error_text", "string", "its reply text"),
    RUN,
))

CONNECTIONS = Table("connections", "One row per TCP connection: its AMQP handshake, who the peers were, "
                    "what they agreed, how it ended, and what it carried.", (
    DATE, CONNECTION, CAPTURE, CLIENT, SERVER,
    _c("status", "string", "amqp, tls, not-amqp or no-payload (from streams)"),
    _c("version", "string", "protocol version from the client's header"),
    _c("saw_start", "boolean", "the capture saw the connection's start (its SYN)"),
    _c("started_at", "timestamp", "first packet (the SYN when seen)"),
    _c("protocol_header_at", "timestamp", "the client's protocol header"),
    _c("start_at", "timestamp", "connection.start"),
    _c("start_ok_at", "timestamp", "connection.start-ok"),
    _c("tune_at", "timestamp", "connection.tune"),
    _c("tune_ok_at", "timestamp", "connection.tune-ok"),
    _c("open_at", "timestamp", "connection.open"),
    _c("open_ok_at", "timestamp", "connection.open-ok"),
    _c("handshake_ms", "double", "protocol header (or start) to open-ok, in milliseconds"),
    _c("auth_ms", "double", "start to tune (the SASL exchange), in milliseconds"),
    _c("server_product", "string", "server properties: product"),
    _c("server_version", "string", "server properties: version"),
    _c("server_platform", "string", "server properties: platform"),
    _c("client_product", "string", "client properties: product"),
    _c("client_version", "string", "client properties: version"),
    _c("client_platform", "string", "client properties: platform"),
    _c("connection_name", "string", "client properties: connection_name"),
    _c("client_capabilities_json", "string", "client properties: capabilities, as JSON"),
    _c("auth_mechanism", "string", "SASL mechanism chosen (PLAIN, AMQPLAIN, EXTERNAL...)"),
    _c("auth_user", "string", "the login name (never a password)"),
    _c("locale", "string", "locale chosen"),
    _c("channel_max_proposed", "int", "connection.tune channel-max"),
    _c("frame_max_proposed", "bigint", "connection.tune frame-max"),
    _c("heartbeat_proposed", "int", "connection.tune heartbeat, seconds"),
    _c("channel_max", "int", "agreed (tune-ok) channel-max"),
    _c("frame_max", "bigint", "agreed frame-max"),
    _c("heartbeat", "int", "agreed heartbeat, seconds (0: none)"),
    _c("vhost", "string", "virtual host opened"),
    _c("ended_at", "timestamp", "last packet"),
    _c("end_reason", "string", "close (close handshake completed), heartbeat-timeout (no client traffic for "
       "twice the heartbeat before the end), fin, rst, port-reuse or capture-end"),
    _c("close_initiator", "string", "who sent connection.close: client or server"),
    _c("close_code", "int", "its reply code"),
    _c("close_text", "string", "its reply text"),
    _c("close_failing_method", "string", "the method that caused it, by spec name"),
    _c("c2s_frames", "bigint", "client to server frames"),
    _c("c2s_bytes", "bigint", "client to server TCP stream bytes"),
    _c("s2c_frames", "bigint", "server to client frames"),
    _c("s2c_bytes", "bigint", "server to client TCP stream bytes"),
    _c("channels_opened", "bigint", "channel.open-ok seen"),
    _c("messages_published", "bigint", "basic.publish seen"),
    _c("messages_delivered", "bigint", "basic.deliver and basic.get-ok seen"),
    RUN,
))

HEARTBEATS = Table("heartbeats", "Per connection and direction: the agreed heartbeat, heartbeats seen, and "
                   "silences (any frame counts as a sign of life).", (
    DATE, CONNECTION, CAPTURE, CLIENT, SERVER, DIRECTION,
    _c("heartbeat_s", "int", "agreed heartbeat interval in seconds (tune-ok); 0 or null: none"),
    _c("heartbeats", "bigint", "heartbeat frames sent in this direction"),
    _c("frames", "bigint", "frames sent in this direction"),
    _c("longest_silence_s", "double", "longest time between two frames of this direction, or from the "
       "last one to the connection's end"),
    _c("long_silences", "bigint", "silences longer than twice the agreed interval"),
    _c("final_silence_s", "double", "from this direction's last frame to the connection's last packet"),
    _c("ended_after_silence", "boolean", "the connection ended after a final silence longer than twice "
       "the interval (a heartbeat timeout)"),
    RUN,
))

FLOW_CONTROL = Table("flow_control", "Intervals of flow control: channel.flow active=false ... active=true, "
                     "and RabbitMQ's connection.blocked ... unblocked.", (
    DATE, CONNECTION, CAPTURE, CLIENT, SERVER, CHANNEL,
    _c("mechanism", "string", "channel.flow or connection.blocked"),
    _c("initiator", "string", "who stopped the flow: client or server"),
    _c("reason", "string", "connection.blocked: the broker's reason"),
    _c("started_at", "timestamp", "flow stopped (active=false, or blocked)"),
    _c("ended_at", "timestamp", "flow resumed (active=true, or unblocked); null if never in the capture"),
    _c("duration_ms", "double", "ended_at - started_at, in milliseconds"),
    RUN,
))

CHANNELS = Table("channels", "One row per channel lifetime (a channel number reused after close is a new "
                 "row): how it was used and how it ended.", (
    DATE, CONNECTION, CAPTURE, CLIENT, SERVER, CHANNEL,
    _c("channel_instance", "int", "which lifetime of the number (0 = opened before the capture began)"),
    _c("opened_at", "timestamp", "channel.open (null when opened before the capture)"),
    _c("closed_at", "timestamp", "channel.close; null if still open at the end"),
    _c("close_initiator", "string", "who sent channel.close: client or server"),
    _c("close_code", "int", "its reply code"),
    _c("close_text", "string", "its reply text"),
    _c("confirm_mode_at", "timestamp", "confirm.select; null if never"),
    _c("tx_mode_at", "timestamp", "tx.select; null if never"),
    _c("prefetch_count", "int", "the last basic.qos prefetch-count"),
    _c("prefetch_size", "bigint", "the last basic.qos prefetch-size"),
    _c("prefetch_scope", "string", "per-consumer (global=false) or per-channel (global=true), RabbitMQ's reading"),
    _c("consumers_json", "string", "consumers: tag, queue, no_ack, started_at, cancelled_at and by whom (JSON)"),
    _c("flow_events", "bigint", "channel.flow frames"),
    _c("publishes", "bigint", "basic.publish frames"),
    _c("deliveries", "bigint", "basic.deliver and basic.get-ok frames"),
    _c("acks", "bigint", "client basic.ack frames"),
    _c("nacks", "bigint", "client basic.nack frames"),
    _c("rejects", "bigint", "basic.reject frames"),
    _c("confirms", "bigint", "broker basic.ack and basic.nack frames (publisher confirms)"),
    RUN,
))

MESSAGE_FLOWS = Table("message_flows", "Publisher to consumer across connections: one row per (publish, delivery) "
                      "pair, fan-out and redeliveries included; a publish never delivered in the capture, or a "
                      "delivery whose publish is outside it, keeps the other side empty.", (
    DATE, CAPTURE,
    _c("match", "string", "how the pair was matched: message_id, or body (SHA-256 with exchange and routing "
       "key), in time order per consumer; null for a side left alone"),
    _c("message_id", "string", "property message-id"),
    _c("body_sha256", "string", "SHA-256 of the body"),
    _c("exchange", "string", "exchange published to"),
    _c("routing_key", "string", "routing key"),
    _c("publisher_connection", "string", "connection of the basic.publish"),
    _c("publisher_channel", "int", "its channel"),
    _c("published_at", "timestamp", "time of the publish"),
    _c("consumer_connection", "string", "connection of the basic.deliver / get-ok"),
    _c("consumer_channel", "int", "its channel"),
    _c("consumer_tag", "string", "consumer tag (deliver)"),
    _c("queue", "string", "queue consumed from (when its consume or get was captured)"),
    _c("delivery_tag", "bigint", "delivery tag"),
    _c("redelivered", "boolean", "the delivery's redelivered flag"),
    _c("delivered_at", "timestamp", "time of the deliver / get-ok"),
    _c("settled_at", "timestamp", "when the consumer settled it (deliveries.settled_at)"),
    _c("outcome", "string", "the delivery's outcome (deliveries.outcome)"),
    _c("publish_to_deliver_ms", "double", "delivered_at - published_at, in milliseconds"),
    _c("deliver_to_settle_ms", "double", "settled_at - delivered_at, in milliseconds"),
    _c("end_to_end_ms", "double", "settled_at - published_at, in milliseconds"),
    RUN,
))

ANALYTICS_TABLES = (ERRORS, DELIVERIES, PUBLISHES, RPC_CALLS, CONNECTIONS, CHANNELS, HEARTBEATS, FLOW_CONTROL,
                    MESSAGE_FLOWS)


def markdown(tables=RAW_TABLES + ANALYTICS_TABLES) -> str:
    lines = ["# Tables", "",
             "Generated from `pipelines/schemas.py` (`python -m pipelines.schemas > docs/tables.md`); "
             "do not edit by hand. All tables are Delta, partitioned by `date` (UTC date of the "
             "traffic).", ""]
    for table in tables:
        lines += [f"## `{table.name}`", "", table.description, "", "| column | type | meaning |",
                  "|---|---|---|"]
        lines += [f"| `{c.name}` | `{c.type}` | {c.comment} |" for c in table.columns]
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(markdown())
