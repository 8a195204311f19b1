"""The readable view of `amqpcap decode`: one line per message (or per frame with --frames).

    2026-11-21 20:29:03.151026 #18 3156629e 127.0.0.1:54308 -> 127.0.0.1:5672 ch2 basic.publish exchange=x routing_key=k mandatory=false immediate=false | 4 bytes, content_type=text/plain, sha256=76f75e6129fe

Every line starts with the packet time (UTC, microseconds), the capture's record number when the
decoder gives it (`#N`, `#N-M` for a frame over several packets), the connection (the first 8
characters of its id: `--connection` takes them), client, `->` (client to server) or `<-`, server,
and the channel. Values are written by a small type dispatch (`value_text`): strings bare unless
they need quotes, booleans and null as in JSON, field tables as {k=v, ...}, timestamps as UTC times,
byte arrays in hex; each argument cut to `width` characters unless `width` is None. Reply codes
carry their spec names (404 NOT_FOUND) and a close's failing method is named (failing_method=queue.declare).

No json.dumps and no datetime per line: the formatted second is cached and the microseconds appended.
"""

from __future__ import annotations

import re
import time
from decimal import Decimal

from amqpcap.connection.record import Record, as_record
from amqpcap.protocol.fieldtable import Timestamp
from amqpcap.rules.naming import naming_for

_PLAIN = re.compile(r'[^\s"=,{}\[\]\\|]+\Z').match  # strings written without quotes
_CLOSES = frozenset({"channel.close", "connection.close"})
_DIGITS = tuple(f"{n:03d}" for n in range(1000))
_NO_SECOND = -(1 << 62)  # before any time a 64-bit nanosecond count can hold


def value_text(value) -> str:
    """A decoded value as readable text (no cut)."""
    kind = type(value)
    if kind is str:
        if value and _PLAIN(value) and value.isprintable():
            return value
        return _quoted(value)
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return str(value)
    if value is None:
        return "null"
    if kind is dict:
        return "{" + ", ".join([f"{_key(k)}={value_text(v)}" for k, v in value.items()]) + "}"
    if kind is list:
        return "[" + ", ".join([value_text(v) for v in value]) + "]"
    if kind is Timestamp:
        return value.isoformat()
    if kind is float or kind is Decimal:
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "0x" + bytes(value).hex()
    return str(value)


def _key(key) -> str:
    key = str(key)
    return key if key and _PLAIN(key) and key.isprintable() else _quoted(key)


def _quoted(text: str) -> str:
    text = text.replace("\\", "\\\\").replace('"', '\\"')
    if not text.isprintable():
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return '"' + text + '"'


class Readable:
    """Renders records (already filtered and ordered) as lines of UTF-8 bytes."""

    def __init__(self, frames: bool = False, width: int | None = 80, versions=None) -> None:
        self.frames = frames
        self.width = width
        self.versions = versions  # connection -> protocol version (for names), e.g. ConnectionEnds.version
        self._second = _NO_SECOND
        self._second_text = ""
        self._heads: dict[tuple, str] = {}
        self._naming: dict = {}
        self._said: dict = {}  # key -> {string value -> "key=value" as written}: names, tags repeat
        self._flags: dict = {}  # key -> its "key=false", "key=true" and "key=null" as written

    # -- the common start of a line --------------------------------------------------------------

    def _time(self, ts_ns: int) -> str:
        second = ts_ns // 1_000_000_000  # (C integers compiled: the decoder's times are 64-bit)
        fraction = ts_ns - second * 1_000_000_000
        if second != self._second:
            self._second = second
            try:
                self._second_text = time.strftime("%Y-%m-%d %H:%M:%S.", time.gmtime(second))
            except (OverflowError, OSError, ValueError):
                self._second_text = f"{second}."
        micros = fraction // 1000  # as two 3-digit groups: a format spec (:06d) per line cost more
        return self._second_text + _DIGITS[micros // 1000] + _DIGITS[micros % 1000]

    def _head(self, record: Record) -> str:
        key = (record.connection, record.dir, record.channel)
        head = self._heads.get(key)
        if head is None:
            if len(self._heads) > 50_000:
                self._heads.clear()
            direction = record.dir
            arrow = "->" if direction == "C>S" else "<-" if direction == "S>C" else "--"
            channel = record.channel
            head = self._heads[key] = (f"{record.connection[:8]} {record.client} {arrow} {record.server} "
                                       f"ch{channel if channel is not None else '-'} ")
        first = record.pcap_record
        if first is None:
            return f"{self._time(record.ts_ns)} {head}"
        last = record.pcap_record_last
        if type(first) is int and (last is None or type(last) is int):  # (formatted as C integers)
            number = first
            if last is None or last == first:
                return f"{self._time(record.ts_ns)} #{number} {head}"
            last_number = last
            return f"{self._time(record.ts_ns)} #{number}-{last_number} {head}"
        number_text = f"#{first}-{last} " if last is not None and last != first else f"#{first} "
        return f"{self._time(record.ts_ns)} {number_text}{head}"

    # -- values ------------------------------------------------------------------------------------

    def _cut(self, text: str) -> str:
        width = self.width
        if width is not None and len(text) > width:
            return text[:max(width - 3, 0)] + "..."
        return text

    def _pair(self, key: str, value) -> str:
        """`key=value`, the value cut. A string value (exchange, routing key, queue, consumer tag,
        content type...), a boolean or a null is rendered once per key and remembered: most lines
        repeat them."""
        kind = type(value)
        if kind is bool or value is None:
            flags = self._flags.get(key)
            if flags is None:
                flags = self._flags[key] = (key + "=" + self._cut(value_text(False)),
                                            key + "=" + self._cut(value_text(True)),
                                            key + "=" + self._cut(value_text(None)))
            return flags[2] if value is None else flags[1] if value else flags[0]
        if kind is not str:
            return key + "=" + self._cut(value_text(value))
        said = self._said.get(key)
        if said is None:
            said = self._said[key] = {}
        text = said.get(value)
        if text is None:
            if len(said) >= 4096:  # unbounded values (message ids...): keep the memory bounded
                said.clear()
            text = said[value] = key + "=" + self._cut(value_text(value))
        return text

    def _pairs(self, values: dict, sep: str = " ") -> str:
        return sep.join([self._pair(key, value) for key, value in values.items()])

    def _names(self, record: Record):
        version = self.versions(record.connection) if self.versions is not None else None
        names = self._naming.get(version)
        if names is None:
            names = self._naming[version] = naming_for(version)
        return names

    def _args(self, record: Record) -> str:
        args = record.args
        method = record.method
        if "reply_code" not in args:
            return self._pairs(args)
        names = self._names(record)
        parts = []
        for key, value in args.items():
            if key == "reply_code":
                name = names.reply_codes.get(value)
                parts.append(f"reply_code={value} {name[0]}" if name else f"reply_code={value}")
            elif method in _CLOSES and key in ("class_id", "method_id"):
                if key == "class_id":
                    parts.append(_failing(names, args.get("class_id"), args.get("method_id")))
            else:
                parts.append(self._pair(key, value))
        return " ".join([part for part in parts if part])

    def _message(self, message: dict) -> str:
        size, received = message["body_size"], message["body_received"]
        if size is None:
            text = f"{received} bytes, no content header"
        elif received == size:
            text = f"{size} bytes"
        else:
            text = f"{received} of {size} bytes"
        frames = message["body_frames"]
        if frames > 1:
            text += f" in {frames} frames"
        if not message["complete"]:
            text += ", incomplete"
        properties = message["properties"]
        if properties and not self.frames:
            text += ", " + self._pairs(properties, ", ")
        digest = message["body_sha256"]
        if digest:
            return f"{text}, sha256={digest[:12]}"
        return text

    # -- lines -----------------------------------------------------------------------------------------

    def line(self, value: Record) -> str | None:
        """The line of one record (None: shown as part of its message's line). A dict of a record
        is taken too."""
        record = as_record(value)
        kind = record.kind
        if kind == "method":
            args = self._args(record)
            text = record.method + (" " + args if args else "")
            message = record.message
            if message is not None:
                text += " | " + self._message(message)
        elif kind == "header":
            properties = self._pairs(record.properties)
            text = f"header {record.class_name} body_size={record.body_size}" + (" " + properties if properties else "")
        elif kind == "body":
            text = f"body {record.body_frame_size} bytes"
        elif kind == "heartbeat":
            text = "heartbeat"
        elif kind == "protocol-header":
            text = f"protocol header {record.protocol_header}"
        elif kind == "issue":
            if record.connection is None:  # damage to the capture file itself
                return (f"{self._time(record.ts_ns) if record.ts_ns is not None else '-'} capture "
                        f"{record.capture} at byte {record.file_offset}: ISSUE {record.issue_kind}: "
                        f"{record.detail}\n")
            text = f"ISSUE {record.issue_kind}: {record.detail}" + \
                   (f" ({record.bytes_skipped} bytes skipped)" if record.bytes_skipped else "")
        elif kind == "connection-end":
            text = self._end(record)
        else:
            text = kind
        return self._head(record) + text + "\n"

    def _end(self, record: Record) -> str:
        parts = [f"connection end: {record['end_reason']}"]
        if record["end_reason"] != record["tcp_end"]:
            parts[0] += f" ({record['tcp_end']})"
        parts[0] += f" after {record['duration_s']:.3f} s"
        close = record["close"]
        if close is not None:
            names = self._names(record)
            code = close["reply_code"]
            name = names.reply_codes.get(code)
            text = f"closed by {'client' if close['dir'] == 'C>S' else 'server'} {code}" + (f" {name[0]}" if name else "")
            failing = _failing(names, close["class_id"], close["method_id"])
            if failing:
                text += " " + failing
            if close["reply_text"]:
                text += " " + self._cut(value_text(close["reply_text"]))
            parts.append(text)
        for label, facts in record["directions"].items():
            part = f"{label} {facts['frames']} frames {facts['stream_bytes']} bytes"
            if facts["skipped_bytes"]:
                part += f" ({facts['skipped_bytes']} skipped)"
            parts.append(part)
        if record["status"] != "amqp":
            parts.append(record["status"])
        tls = record.get("tls")
        if tls is not None:
            facts = [tls["version"] or "TLS", tls["cipher_suite"], f"sni {tls['sni']}" if tls["sni"] else None,
                     f"resumed ({tls['resumed']})" if tls["resumed"] else None,
                     "decrypted" if tls["decrypted"] else "not decrypted" + ("" if tls["key_logged"] else " (no key)")]
            parts.append(" ".join([f for f in facts if f]))
        return "; ".join(parts)


def _failing(names, class_id, method_id) -> str:
    if not class_id and not method_id:
        return ""
    name = names.method_name(class_id, method_id)
    return f"failing_method={name}" if name else f"failing_method={class_id}.{method_id}"
