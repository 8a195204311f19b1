"""Decoder records to rows of the raw tables (`frames`, `messages`, `decode_issues`, `streams`).

One decoded record becomes one `frames` row (or one `decode_issues` row for an issue), and each
content-carrying method also one `messages` row; a connection's end becomes its `streams` row.
Typed columns hold the arguments people filter on; `args_json` keeps all of them. The analytics
state machines read these same rows (amqpcap.rules); amqpcap.lake.tablefiles turns them into
Arrow batches with each table's exact schema.
"""

from __future__ import annotations

import base64
import datetime
import sys
from decimal import Decimal

import orjson
import pyarrow as pa

from amqpcap.columnar.columns import TypedRow
from amqpcap.connection.record import Record
from amqpcap.protocol.spec import CLIENT_TO_SERVER, SERVER_TO_CLIENT
from amqpcap.tables.registry import DECODE_ISSUES, FRAMES, MESSAGES

INT64_MAX = 2**63 - 1
_EPOCH = datetime.date(1970, 1, 1)

# The typed `frames` columns of method arguments: the spec's argument name (snake_case, as decoded)
# -> the column holding it, whatever the method (a test checks every bundled spec's arguments of
# these names against the columns' types, and the columns' comments against the methods carrying
# them). Mostly the same name; a word too generic for a column gets its class as a prefix, and
# 0-9's spelling of no-wait is an alias.
ARGUMENT_COLUMNS = {
    "exchange": "exchange", "routing_key": "routing_key", "queue": "queue", "consumer_tag": "consumer_tag",
    "delivery_tag": "delivery_tag", "multiple": "multiple", "requeue": "requeue", "redelivered": "redelivered",
    "mandatory": "mandatory", "immediate": "immediate", "no_ack": "no_ack", "no_wait": "no_wait",
    "nowait": "no_wait", "no_local": "no_local", "exclusive": "exclusive", "passive": "passive",
    "durable": "durable", "auto_delete": "auto_delete", "internal": "internal", "type": "exchange_type",
    "if_unused": "if_unused", "if_empty": "if_empty", "prefetch_size": "prefetch_size",
    "prefetch_count": "prefetch_count", "global": "qos_global", "message_count": "message_count",
    "consumer_count": "consumer_count", "reply_code": "reply_code", "reply_text": "reply_text",
}
_INT_RANGES = {pa.int32(): (-2**31, 2**31 - 1), pa.int64(): (-2**63, INT64_MAX)}


def _argument_plan(name: str) -> tuple:
    """(column, Python type, lowest, highest) for an argument: a value of another type (a foreign
    spec could type a name otherwise) or out of the column's range is null (args_json keeps it)."""
    column = ARGUMENT_COLUMNS[name]
    arrow_type = FRAMES.arrow().field(column).type
    if arrow_type == pa.bool_():
        return column, bool, None, None
    if arrow_type == pa.string():
        return column, str, None, None
    low, high = _INT_RANGES[arrow_type]
    return column, int, low, high


_ARGUMENTS = {name: _argument_plan(name) for name in ARGUMENT_COLUMNS}
_CLOSES = ("connection.close", "channel.close")


def _json_default(value):
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode()
    raise TypeError(type(value).__name__)


_DUMPS = orjson.dumps  # (compiled: a C variable, not a module attribute looked up per value)


def to_json(value) -> str | None:
    if value is None:
        return None
    text = _DUMPS(value, default=_json_default)
    return text.decode()  # (compiled: UTF-8 decoded in C, as `text` is typed bytes)


def as_text(value) -> str:
    """A field-table value as text, for map<string,string> columns."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, Decimal)):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode()
    return to_json(value) if value is not None else ""


def _int64(value):
    """Unsigned 64-bit AMQP values beyond bigint's range are null (args_json keeps them)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value <= INT64_MAX else None


def message_key(connection: str | None, direction: str | None, stream_offset: int | None) -> str | None:
    """A message's key (messages.message_key): its connection, who sent it and the stream offset of
    its content method, e.g. '5f3c0e2a9b1d4e77-c1234' (a publish), '...-s5678' (a delivery)."""
    if connection is None or stream_offset is None:
        return None
    side = "c" if direction == CLIENT_TO_SERVER else "s" if direction == SERVER_TO_CLIENT else "x"
    return f"{connection}-{side}{stream_offset}"


_DAYS: dict[int, datetime.date] = {}  # day number -> its date (made once: rows come by the million)
_DAY_NS = 86_400_000_000_000  # (a C integer when compiled, as _DAYS is a typed dict: rows.pxd)


# The day of the last _date asked for and its date (a night's rows are of a day or two): no lookup
# for the next row of the same day. The first day is one no int64 time falls on.
_LAST_DAY = -1 << 62
_LAST_DATE = None


def _date(ts_ns: int) -> datetime.date:
    global _LAST_DAY, _LAST_DATE
    days = ts_ns // _DAY_NS
    if days == _LAST_DAY:
        return _LAST_DATE
    date = _DAYS.get(days)
    if date is None:
        date = _DAYS[days] = _EPOCH + datetime.timedelta(days=days)
    _LAST_DAY, _LAST_DATE = days, date
    return date


# A row of `frames` or `messages`, the tables that get a row per frame or per message: typed objects,
# not dicts. The analytics read their fields (compiled: C reads, where a dict lookup per field
# cost more than the rules themselves), and the table writer takes their values in column order
# in one call (amqpcap.columnar.columns.ColumnBuffer.add_values) rather than walking a dict. Declared
# once: the fields are the table's columns (tables.py); a test holds the classes to them.
COMPILED = __file__.endswith((".so", ".pyd"))
FRAME_FIELDS = tuple(FRAMES.names)
MESSAGE_FIELDS = tuple(MESSAGES.names)


class TableRow(TypedRow):
    """What every typed row (these, amqpcap.rules.table_rows) offers besides its fields: a
    mapping of column name to value (`row["method"]`, `row.get(...)`, `row.items()`, `dict(row)`,
    `row.update(source=...)`), for tests and tools, never the hot path; equal to a dict of the same
    columns."""

    @classmethod
    def from_dict(cls, values: dict):
        """A row given as a dict (a test's, or read back from the lake): absent columns are null."""
        row = cls.__new__(cls)
        for name in row.fields():
            setattr(row, name, values.get(name))
        return row

    def fields(self) -> tuple:
        """The columns, in the table's order."""
        raise NotImplementedError

    def get(self, name: str, default=None):
        if name not in self.fields():
            return default
        return getattr(self, name)

    def __getitem__(self, name: str):
        if name not in self.fields():
            raise KeyError(name)
        return getattr(self, name)

    def __contains__(self, name) -> bool:
        return name in self.fields()

    def __iter__(self):
        return iter(self.fields())

    def __len__(self) -> int:
        return len(self.fields())

    def keys(self) -> tuple:
        return self.fields()

    def update(self, values=(), **more) -> None:
        """Columns set from a mapping or (name, value) pairs and keywords, as dict.update (a name that
        is not a column: KeyError)."""
        for name, value in [*(values.items() if hasattr(values, "items") else values), *more.items()]:
            if name not in self.fields():
                raise KeyError(name)
            setattr(self, name, value)

    def items(self) -> list:
        return [(name, getattr(self, name)) for name in self.fields()]

    def as_dict(self) -> dict:
        return {name: getattr(self, name) for name in self.fields()}

    def __eq__(self, other) -> bool:
        if isinstance(other, TableRow):
            other = other.as_dict()
        return isinstance(other, dict) and self.as_dict() == other

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.as_dict()!r})"


class RecordRow(TableRow):
    """A `frames` or `messages` row: made from a decoder record, beginning with where it was."""

    def place(self, record: Record) -> None:
        """The columns saying where `record` was: its day, connection, capture, pcap records, TCP
        stream, time, ends, direction and channel."""
        ts_ns = record.ts_ns
        self.date = _date(ts_ns or 0)
        self.connection = record.connection
        self.capture = record.capture
        self.pcap_record = record.pcap_record
        self.pcap_record_last = record.pcap_record_last
        self.tcp_stream = record.tcp_stream
        self.ts = ts_ns // 1000 if ts_ns is not None else None
        self.ts_ns = ts_ns
        self.client = record.client
        self.server = record.server
        self.direction = record.dir
        self.channel = record.channel


class FrameRow(RecordRow):
    """One `frames` row (tables.FRAMES). Fields not set are null; `parsed_args` caches the parsed
    args_json for the rules that need more than the typed argument columns."""

    def fields(self) -> tuple:
        return FRAME_FIELDS

    def column_values(self) -> tuple:
        """Every column's value, in the table's column order."""
        return (self.date, self.connection, self.capture, self.pcap_record, self.pcap_record_last,
                self.tcp_stream, self.ts, self.ts_ns, self.ts_last_ns, self.client, self.server, self.direction,
                self.channel, self.kind, self.stream_offset, self.frame_bytes, self.method, self.class_id,
                self.method_id, self.exchange, self.routing_key, self.queue, self.consumer_tag,
                self.delivery_tag, self.multiple, self.requeue, self.redelivered, self.mandatory, self.immediate,
                self.no_ack, self.no_wait, self.no_local, self.exclusive, self.passive, self.durable,
                self.auto_delete, self.internal, self.exchange_type, self.if_unused, self.if_empty,
                self.prefetch_size, self.prefetch_count, self.qos_global, self.message_count,
                self.consumer_count, self.reply_code, self.reply_text, self.failing_class_id,
                self.failing_method_id, self.args_json, self.body_size, self.properties_json,
                self.protocol_version, self.protocol_header, self.connection_seq, self.tls, self.source,
                self.provisional, self.run_id)


class MessageRow(RecordRow):
    """One `messages` row (tables.MESSAGES). Fields not set are null."""

    def fields(self) -> tuple:
        return MESSAGE_FIELDS

    def column_values(self) -> tuple:
        """Every column's value, in the table's column order."""
        return (self.date, self.connection, self.capture, self.pcap_record, self.pcap_record_last,
                self.tcp_stream, self.ts, self.ts_ns, self.client, self.server, self.direction, self.channel,
                self.method, self.stream_offset, self.message_key, self.exchange, self.routing_key,
                self.delivery_tag, self.consumer_tag, self.redelivered, self.mandatory, self.reply_code,
                self.reply_text, self.content_type, self.content_encoding, self.headers, self.headers_json,
                self.delivery_mode, self.priority, self.correlation_id, self.reply_to, self.expiration,
                self.message_id, self.timestamp, self.type, self.user_id, self.app_id, self.body_size,
                self.body_received, self.body_frames, self.complete, self.body_sha256, self.body, self.source,
                self.provisional, self.run_id)


def _set_argument(row: FrameRow, column: str, value) -> None:
    setattr(row, column, value)  # (compiled: the type's cached member descriptor; a few per method)


if not COMPILED:  # interpreted, a field never set reads the class's None (compiled: every field starts None)
    for _row, _fields in ((FrameRow, FRAME_FIELDS + ("parsed_args",)), (MessageRow, MESSAGE_FIELDS)):
        for _name in _fields:
            setattr(_row, _name, None)
    del _row, _fields, _name


def _template(table) -> dict:
    """Every column of `table`, null, in its schema's order (`date` first), keys interned."""
    return dict.fromkeys(sys.intern(name) for name in table.arrow().names)


# An issue row starts as a copy of its table's template: filling it then only replaces values, where
# growing a dict key by key resized it several times per row; and its keys stay in the columns'
# order, which amqpcap.columnar.columns reads without a lookup per column.
_ISSUE = _template(DECODE_ISSUES)


class RawRows:
    """Builds the raw tables' rows of one run from decoder records."""

    def __init__(self, run_id: str | None = None) -> None:
        self.run_id = run_id

    def frame_row(self, record: Record) -> FrameRow:
        kind = record.kind
        row = FrameRow.__new__(FrameRow)
        row.place(record)
        row.ts_last_ns = record.ts_last_ns
        row.kind = kind
        row.stream_offset = record.offset
        row.frame_bytes = record.size
        row.tls = record.tls
        row.run_id = self.run_id
        if kind == "method":
            args = record.args
            method = record.method
            row.method = method
            row.class_id = record.class_id
            row.method_id = record.method_id
            row.args_json = to_json(args)
            for name, value in args.items():
                plan = _ARGUMENTS.get(name)
                if plan is not None and type(value) is plan[1] and (plan[2] is None or plan[2] <= value <= plan[3]):
                    _set_argument(row, plan[0], value)
            if method in _CLOSES:
                row.failing_class_id = args.get("class_id")
                row.failing_method_id = args.get("method_id")
        elif kind == "header":
            row.class_id = record.class_id
            row.body_size = _int64(record.body_size)
            row.properties_json = to_json(record.properties)
        elif kind == "protocol-header":
            row.protocol_version = record.version
            row.protocol_header = record.protocol_header
        return row

    def message_row(self, record: Record) -> MessageRow:
        row = MessageRow.__new__(MessageRow)
        row.place(record)
        offset = record.offset
        row.stream_offset = offset
        row.run_id = self.run_id
        row.message_key = message_key(row.connection, row.direction, offset)
        args, message = record.args, record.message
        properties = message.get("properties") or {}
        headers = properties.get("headers")
        timestamp = properties.get("timestamp")
        row.method = record.method
        row.exchange = args.get("exchange")
        row.routing_key = args.get("routing_key")
        row.delivery_tag = _int64(args.get("delivery_tag"))
        row.consumer_tag = args.get("consumer_tag")
        row.redelivered = args.get("redelivered")
        row.mandatory = args.get("mandatory")
        row.reply_code = args.get("reply_code")
        row.reply_text = args.get("reply_text")
        if headers is not None:
            row.headers = [(str(k), as_text(v)) for k, v in headers.items()]
            row.headers_json = to_json(headers)
        if isinstance(timestamp, int) and timestamp < 2**43:
            row.timestamp = timestamp * 1_000_000
        row.body_size = _int64(message["body_size"])
        row.body_received = message["body_received"]
        row.body_frames = message["body_frames"]
        row.complete = message["complete"]
        row.body_sha256 = message["body_sha256"]
        if "body_b64" in message:
            row.body = base64.b64decode(message["body_b64"])
        if properties:
            row.content_type = properties.get("content_type")
            row.content_encoding = properties.get("content_encoding")
            row.delivery_mode = properties.get("delivery_mode")
            row.priority = properties.get("priority")
            row.correlation_id = properties.get("correlation_id")
            row.reply_to = properties.get("reply_to")
            row.expiration = properties.get("expiration")
            row.message_id = properties.get("message_id")
            row.type = properties.get("type")
            row.user_id = properties.get("user_id")
            row.app_id = properties.get("app_id")
        return row

    def issue_row(self, record: Record) -> dict:
        row = _ISSUE.copy()
        ts_ns = record.ts_ns
        row["date"] = _date(ts_ns or 0)
        row["connection"] = record.connection
        row["capture"] = record.capture
        row["pcap_record"] = record.pcap_record
        row["pcap_record_last"] = record.pcap_record_last
        row["tcp_stream"] = record.tcp_stream
        row["ts"] = ts_ns // 1000 if ts_ns is not None else None
        row["ts_ns"] = ts_ns
        row["client"] = record.client
        row["server"] = record.server
        row["direction"] = record.dir
        row["channel"] = record.channel
        row["stream_offset"] = record.offset
        row["run_id"] = self.run_id
        row["issue_kind"] = record.issue_kind
        row["detail"] = record.detail
        row["bytes_skipped"] = record.bytes_skipped
        row["file_offset"] = record.file_offset
        row["tls"] = record.tls
        return row

    def stream_row(self, summary: dict) -> dict:
        """A TCP connection's summary (the decoder's connection-end record) as its streams row."""
        row = {"date": _date(summary["first_ts_ns"]), "connection": summary["connection"],
               "capture": summary["capture"], "client": summary["client"], "server": summary["server"],
               "status": summary["status"], "version": summary["version"],
               "client_decided_by": summary["client_decided_by"], "syn_seen": summary["syn_seen"],
               "first_ts": summary["first_ts_ns"] // 1000, "last_ts": summary["last_ts_ns"] // 1000,
               "end_reason": summary["end_reason"], "tls": "tls" in summary, "run_id": self.run_id}
        for label, prefix in ((CLIENT_TO_SERVER, "c2s"), (SERVER_TO_CLIENT, "s2c")):
            facts = summary["directions"].get(label, {})
            for name in ("stream_bytes", "decoded_bytes", "skipped_bytes", "frames", "packets", "undecoded_frames"):
                row[f"{prefix}_{name}"] = facts.get(name)
        return row

    def tls_row(self, summary: dict) -> dict | None:
        """A TLS connection's summary as its tls_connections row (None: not TLS)."""
        tls = summary.get("tls")
        if tls is None:
            return None
        row = {"date": _date(summary["first_ts_ns"]), "connection": summary["connection"],
               "capture": summary["capture"], "client": summary["client"], "server": summary["server"],
               "end_reason": summary["end_reason"], "run_id": self.run_id}
        for name in ("version", "cipher_suite", "sni", "alpn_offered", "alpn", "resumed", "hello_retry",
                     "encrypt_then_mac", "extended_master_secret", "handshake_ms", "cert_subject", "cert_issuer",
                     "cert_sha256", "key_logged", "decrypted", "tickets_issued", "alerts"):
            row[name] = tls[name]
        for name, key in (("client_hello_at", "client_hello_ns"), ("server_hello_at", "server_hello_ns"),
                          ("handshake_done_at", "handshake_done_ns")):
            row[name] = tls[key] // 1000 if tls[key] is not None else None
        row["cert_not_before"], row["cert_not_after"] = tls["cert_not_before_us"], tls["cert_not_after_us"]
        for label, prefix in ((CLIENT_TO_SERVER, "c2s"), (SERVER_TO_CLIENT, "s2c")):
            facts = tls["directions"].get(label, {})
            row[f"{prefix}_records"] = facts.get("records")
            row[f"{prefix}_bytes"] = summary["directions"].get(label, {}).get("stream_bytes")
            row[f"{prefix}_plaintext_bytes"] = facts.get("plaintext_bytes")
            row[f"{prefix}_skipped_bytes"] = facts.get("skipped_bytes")
            row[f"{prefix}_key_updates"] = facts.get("key_updates")
        return row
