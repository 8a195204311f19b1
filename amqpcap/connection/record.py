"""The decoder's records: one object per frame, protocol header, issue or connection end, in the
JSON Lines contract of `amqpcap decode --jsonl` (docs/decode.md has every key).

    record.kind, record.ts_ns, record.method, record.args ...   # the fields (compiled: C members)
    record["method"], record.get("message"), "message" in record, dict(record)   # the contract's keys

A record's keys depend on its kind: `shape` holds them in the contract's order (the order JSON
writes them in), each the name of a field ("class" is `class_name`), or of a value in `extra` (keys
beyond the declared ones, e.g. a view's connection-end facts). Setting a key the record does not
have yet adds it at the end, as a dict would. The decoder, the tables and the views read the
fields; tests, `--where` and tools read the keys. (A record used to be a dict: building one per
frame, with a dozen and a half keys, cost more than decoding the frame's arguments.)
"""

from __future__ import annotations

# The decoder's end of a connection ({"kind", "connection", "summary"}): amqpcap decode turns it
# into the contract's `connection-end` record (amqpcap.decodeview.ends); the tables into a
# `streams` row.
CONNECTION_END = "connection-end"

COMMON = ("ts", "ts_ns", "ts_last_ns", "capture", "pcap_record", "pcap_record_last", "tcp_stream",
          "connection", "client", "server", "dir", "channel", "kind", "offset", "size")
# The keys after the common ones, by kind (a content method gets `message` once its content is
# complete; a capture file's issue `file_offset` and `file_end_offset`)
KIND_KEYS = {
    "method": ("method", "class_id", "method_id", "args"),
    "header": ("class", "class_id", "weight", "body_size", "property_flags", "properties"),
    "body": ("body_frame_size",),
    "heartbeat": (),
    "issue": ("issue_kind", "detail", "bytes_skipped"),
    "protocol-header": ("version", "protocol_header", "raw"),
    # how a connection ended (amqpcap.connection.record's decoder end, made readable by amqpcap decode)
    "connection-end": ("end_reason", "tcp_end", "status", "version", "first_ts_ns", "last_ts_ns", "duration_s",
                       "heartbeat", "last_client_frame_ns", "close", "syn_seen", "client_decided_by", "directions"),
}
SHAPES = {kind: COMMON + keys for kind, keys in KIND_KEYS.items()}
# the same objects for every record of a shape: a writer can tell a shape by identity
METHOD_MESSAGE = SHAPES["method"] + ("message",)
CAPTURE_ISSUE = SHAPES["issue"] + ("file_offset", "file_end_offset")
END_SHAPE = ("kind", "connection", "summary")
# A record of a TLS connection says so (`"tls": true`, after the common keys): its kind's shape
# with that key, one object per shape as above (and `TLS_OF`: the plain shape of each)
TLS_SHAPES = {kind: COMMON + ("tls",) + keys for kind, keys in KIND_KEYS.items() if kind != "connection-end"}
TLS_METHOD_MESSAGE = TLS_SHAPES["method"] + ("message",)
TLS_OF = {SHAPES[kind]: shape for kind, shape in TLS_SHAPES.items()}
# A TLS connection's connection-end: its facts, then its handshake's ("tls": the tls_connections row)
TLS_CONNECTION_END = SHAPES[CONNECTION_END] + ("tls",)

# every key that is a field, and the field's name where it differs
FIELDS = frozenset(COMMON + ("tls", "method", "class_id", "method_id", "args", "message", "class", "weight", "body_size",
                             "property_flags", "properties", "body_frame_size", "issue_kind", "detail",
                             "bytes_skipped", "file_offset", "file_end_offset", "version", "protocol_header", "raw",
                             "summary"))
_ATTRIBUTE = {"class": "class_name"}
COMPILED = __file__.endswith((".so", ".pyd"))


class Record:
    """One record. Fields a kind does not use are None (and not among its keys)."""

    __slots__ = ("shape", "extra",
                 "ts", "ts_ns", "ts_last_ns", "capture", "pcap_record", "pcap_record_last", "tcp_stream",
                 "connection", "client", "server", "dir", "channel", "kind", "offset", "size", "tls",
                 "method", "class_id", "method_id", "args", "message",
                 "class_name", "weight", "body_size", "property_flags", "properties",
                 "body_frame_size", "issue_kind", "detail", "bytes_skipped", "file_offset", "file_end_offset",
                 "version", "protocol_header", "raw", "summary")

    # -- the mapping of the contract's keys ---------------------------------------------------------

    def __getitem__(self, key):
        if key not in self.shape:
            raise KeyError(key)
        return self._value(key)

    def get(self, key, default=None):
        if key not in self.shape:
            return default
        return self._value(key)

    def _value(self, key):
        if key in FIELDS:
            return getattr(self, _ATTRIBUTE.get(key, key))
        return self.extra[key]

    def __setitem__(self, key, value) -> None:
        if key in FIELDS:
            setattr(self, _ATTRIBUTE.get(key, key), value)
        else:
            if self.extra is None:
                self.extra = {}
            self.extra[key] = value
        if key not in self.shape:
            self.shape = self.shape + (key,)

    def __contains__(self, key) -> bool:
        return key in self.shape

    def __iter__(self):
        return iter(self.shape)

    def __len__(self) -> int:
        return len(self.shape)

    def keys(self) -> tuple:
        return self.shape

    def values(self) -> list:
        return [self._value(key) for key in self.shape]

    def items(self) -> list:
        return [(key, self._value(key)) for key in self.shape]

    def as_dict(self) -> dict:
        """The record as a dict of its keys, in order (what JSON writes)."""
        return {key: self._value(key) for key in self.shape}

    def copy(self) -> Record:
        return from_dict(self.as_dict())

    def __eq__(self, other) -> bool:
        if type(other) is Record:
            other = other.as_dict()
        return isinstance(other, dict) and self.as_dict() == other

    def __ne__(self, other) -> bool:
        return not self == other

    def __repr__(self) -> str:
        return f"Record({self.as_dict()!r})"

    def __reduce__(self):
        return from_dict, (self.as_dict(),)


def new_record(kind: str, ts_ns, ts_last_ns, capture, pcap_record, pcap_record_last, tcp_stream, connection,
               client, server, direction, channel, offset, size) -> Record:
    """A record of `kind` with the common keys; the caller sets its kind's fields (KIND_KEYS)."""
    record = Record.__new__(Record)
    if not COMPILED:  # (compiled, every field of a new object is None already)
        _clear(record)
    record.shape = SHAPES[kind]
    if COMPILED and type(ts_ns) is int:  # (record.pxd's C function: the same float, without int / float's dispatch)
        record.ts = _seconds(ts_ns)  # noqa: F821
    else:
        record.ts = ts_ns / 1e9 if ts_ns is not None else None
    record.ts_ns = ts_ns
    record.ts_last_ns = ts_last_ns
    record.capture = capture
    record.pcap_record = pcap_record
    record.pcap_record_last = pcap_record_last
    record.tcp_stream = tcp_stream
    record.connection = connection
    record.client = client
    record.server = server
    record.dir = direction
    record.channel = channel
    record.kind = kind
    record.offset = offset
    record.size = size
    return record


def mark_tls(record: Record) -> None:
    """The record came from a TLS connection: it says so (its shape's twin with "tls")."""
    record.tls = True
    record.shape = TLS_OF.get(record.shape) or (record.shape[:len(COMMON)] + ("tls",) + record.shape[len(COMMON):])


def add_message(record: Record, message: dict) -> None:
    """A content method's `message`, once its content is complete (or abandoned)."""
    record.message = message
    if record.shape is SHAPES["method"]:  # (the usual case: its key goes last)
        record.shape = METHOD_MESSAGE
    elif record.shape is TLS_SHAPES["method"]:
        record.shape = TLS_METHOD_MESSAGE
    elif "message" not in record.shape:
        record.shape = record.shape + ("message",)


def end_record(connection: str, summary: dict) -> Record:
    """The decoder's end of a connection (CONNECTION_END), after its last record."""
    record = Record.__new__(Record)
    if not COMPILED:
        _clear(record)
    record.shape = END_SHAPE
    record.kind = CONNECTION_END
    record.connection = connection
    record.summary = summary
    return record


def from_dict(values: dict) -> Record:
    """A record of the keys of `values`, in their order (a test's record, a saved state's)."""
    record = Record.__new__(Record)
    if not COMPILED:
        _clear(record)
    record.shape = ()
    for key, value in values.items():
        record[key] = value
    return record


def as_record(value) -> Record:
    """`value` if it is a Record, else the Record of a dict's keys."""
    return value if type(value) is Record else from_dict(value)


def _clear(record: Record) -> None:
    for name in Record.__slots__:
        setattr(record, name, None)
