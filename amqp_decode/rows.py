"""Decoder records to rows of the raw tables (`frames`, `messages`, `decode_issues`, `streams`).

One decoded record becomes one `frames` row (or one `decode_issues` row for an issue), and each
content-carrying method also one `messages` row; a connection's end becomes its `streams` row.
Typed columns hold the arguments people filter on; `args_json` keeps all of them. The analytics
state machines read these same rows (amqp_decode.analytics), and `rows_to_batch` turns a table's
rows into an Arrow batch with the table's exact schema.
"""

from __future__ import annotations

import base64
import datetime
from decimal import Decimal

import orjson
import pyarrow as pa

from amqp_decode.tables import FRAMES, Table

INT64_MAX = 2**63 - 1
_EPOCH = datetime.date(1970, 1, 1)

# typed frames columns filled straight from the argument of the same name
_ARG_COLUMNS = ("exchange", "routing_key", "queue", "consumer_tag", "delivery_tag", "multiple",
                "requeue", "redelivered", "mandatory", "immediate", "no_ack", "no_wait", "reply_code",
                "reply_text")
_ARG_TYPES = {name: (bool if FRAMES.arrow().field(name).type == pa.bool_() else
                     str if FRAMES.arrow().field(name).type == pa.string() else int)
              for name in _ARG_COLUMNS}
_CLOSES = ("connection.close", "channel.close")
_PROPERTIES = ("content_type", "content_encoding", "delivery_mode", "priority", "correlation_id",
               "reply_to", "expiration", "message_id", "type", "user_id", "app_id")


def _json_default(value):
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode()
    raise TypeError(type(value).__name__)


def to_json(value) -> str | None:
    return None if value is None else orjson.dumps(value, default=_json_default).decode()


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


def _date(ts_ns: int) -> datetime.date:
    return _EPOCH + datetime.timedelta(days=ts_ns // 86_400_000_000_000)


class RawRows:
    """Builds the raw tables' rows of one run from decoder records."""

    def __init__(self, run_id: str | None = None) -> None:
        self.run_id = run_id

    def _common(self, record: dict) -> dict:
        ts_ns = record["ts_ns"]
        return {"date": _date(ts_ns or 0), "connection": record["connection"], "capture": record["capture"],
                "ts": ts_ns // 1000 if ts_ns is not None else None, "ts_ns": ts_ns, "client": record["client"],
                "server": record["server"], "direction": record["dir"], "channel": record["channel"],
                "stream_offset": record["offset"], "run_id": self.run_id}

    def frame_row(self, record: dict) -> dict:
        row = self._common(record)
        row.update(ts_last_ns=record["ts_last_ns"], kind=record["kind"], frame_bytes=record["size"])
        kind = record["kind"]
        if kind == "method":
            args = record["args"]
            row.update(method=record["method"], class_id=record["class_id"], method_id=record["method_id"],
                       args_json=to_json(args))
            for name in _ARG_COLUMNS:
                value = args.get(name)
                row[name] = value if isinstance(value, _ARG_TYPES[name]) else None  # a foreign spec could type a name otherwise
            row["delivery_tag"] = _int64(row["delivery_tag"])
            if record["method"] in _CLOSES:
                row.update(failing_class_id=args.get("class_id"), failing_method_id=args.get("method_id"))
            else:
                row.update(failing_class_id=None, failing_method_id=None)
        elif kind == "header":
            row.update(class_id=record["class_id"], body_size=_int64(record["body_size"]),
                       properties_json=to_json(record["properties"]))
        elif kind == "protocol-header":
            row.update(protocol_version=record["version"], protocol_header=record["protocol_header"])
        return row

    def message_row(self, record: dict) -> dict:
        row = self._common(record)
        args, message = record["args"], record["message"]
        properties = message.get("properties") or {}
        headers = properties.get("headers")
        timestamp = properties.get("timestamp")
        row.update(
            method=record["method"], exchange=args.get("exchange"), routing_key=args.get("routing_key"),
            delivery_tag=_int64(args.get("delivery_tag")), consumer_tag=args.get("consumer_tag"),
            redelivered=args.get("redelivered"), mandatory=args.get("mandatory"),
            reply_code=args.get("reply_code"), reply_text=args.get("reply_text"),
            headers=None if headers is None else [(str(k), as_text(v)) for k, v in headers.items()],
            headers_json=to_json(headers),
            timestamp=timestamp * 1_000_000 if isinstance(timestamp, int) and timestamp < 2**43 else None,
            body_size=_int64(message["body_size"]), body_received=message["body_received"],
            body_frames=message["body_frames"], complete=message["complete"],
            body_sha256=message["body_sha256"],
            body=base64.b64decode(message["body_b64"]) if "body_b64" in message else None)
        for name in _PROPERTIES:
            row[name] = properties.get(name)
        return row

    def issue_row(self, record: dict) -> dict:
        row = self._common(record)
        row.update(issue_kind=record["issue_kind"], detail=record["detail"],
                   bytes_skipped=record["bytes_skipped"], file_offset=record.get("file_offset"))
        return row

    def stream_row(self, summary: dict) -> dict:
        """A TCP connection's summary (the decoder's connection-end record) as its streams row."""
        row = {"date": _date(summary["first_ts_ns"]), "connection": summary["connection"],
               "capture": summary["capture"], "client": summary["client"], "server": summary["server"],
               "status": summary["status"], "version": summary["version"],
               "client_decided_by": summary["client_decided_by"], "syn_seen": summary["syn_seen"],
               "first_ts": summary["first_ts_ns"] // 1000, "last_ts": summary["last_ts_ns"] // 1000,
               "end_reason": summary["end_reason"], "run_id": self.run_id}
        for label, prefix in (("C>S", "c2s"), ("S>C", "s2c")):
            facts = summary["directions"].get(label, {})
            for name in ("stream_bytes", "decoded_bytes", "skipped_bytes", "frames", "packets"):
                row[f"{prefix}_{name}"] = facts.get(name)
        return row


def rows_to_batch(table: Table, rows: list[dict]) -> pa.RecordBatch:
    schema = table.arrow()
    columns = [pa.array([row.get(field.name) for row in rows], type=field.type) for field in schema]
    return pa.RecordBatch.from_arrays(columns, schema=schema)
