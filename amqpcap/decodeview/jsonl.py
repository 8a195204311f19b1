"""The `--jsonl` view: each record as one line of JSON (docs/decode.md has the records' shapes).

A record's line is written from its fields into one reused buffer (`LineWriter`): its keys are
constants of its shape, integers are written two digits at a time, the runs of keys and strings
that repeat from line to line (a connection's id, endpoints and direction; the capture's path; the
kind; the method's name) are rendered once and copied, and what orjson writes best goes to orjson:
the time (a float, remembered while records share it) and each nested value (arguments, content
properties, a message's summary: always the shape's last keys), as they are. That is exactly
orjson's output for the record as a dict (`reference_line`), and a test holds the two equal on
every sample, public and damaged capture. Building a dict per record only for orjson to walk it
cost more than the writing.
"""

from __future__ import annotations

import base64
from decimal import Decimal

import orjson

from amqpcap.connection.record import (
    CAPTURE_ISSUE,
    COMMON,
    CONNECTION_END,
    METHOD_MESSAGE,
    SHAPES,
    TLS_CONNECTION_END,
    TLS_METHOD_MESSAGE,
    TLS_SHAPES,
    Record,
)

_NEWLINE = orjson.OPT_APPEND_NEWLINE
_DUMPS = orjson.dumps  # (compiled: a C variable, not a module attribute looked up per line)
# Compiled, this module is an extension file (amqpcap.columnar.arrow_layout says why it is told so)
COMPILED = __file__.endswith((".so", ".pyd"))


def _json_default(value):
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode()
    raise TypeError(f"cannot render {type(value).__name__}")


def reference_line(record) -> bytes:
    """The record's line as orjson writes the record as a dict (a Record's keys in order)."""
    values = record.as_dict() if type(record) is Record else record
    return orjson.dumps(values, default=_json_default, option=_NEWLINE)


# The shapes the writer knows (the decoder's records), told by identity: amqpcap.connection.record makes
# every record of a shape with the same tuple
_METHOD, _METHOD_MESSAGE = SHAPES["method"], METHOD_MESSAGE
_HEADER, _BODY, _HEARTBEAT = SHAPES["header"], SHAPES["body"], SHAPES["heartbeat"]
_ISSUE, _PROTOCOL_HEADER, _CAPTURE_ISSUE = SHAPES["issue"], SHAPES["protocol-header"], CAPTURE_ISSUE
_CONNECTION_END = SHAPES[CONNECTION_END]  # (amqpcap decode's, made by amqpcap.decodeview.ends)
_TLS_CONNECTION_END = TLS_CONNECTION_END
# the same with "tls": a TLS connection's records (amqpcap.connection.record.TLS_SHAPES)
_TLS_METHOD, _TLS_METHOD_MESSAGE = TLS_SHAPES["method"], TLS_METHOD_MESSAGE
_TLS_HEADER, _TLS_BODY, _TLS_HEARTBEAT = TLS_SHAPES["header"], TLS_SHAPES["body"], TLS_SHAPES["heartbeat"]
_TLS_ISSUE, _TLS_PROTOCOL_HEADER = TLS_SHAPES["issue"], TLS_SHAPES["protocol-header"]
_COMMON_KEYS = len(COMMON)
_PIECES_HELD = 8192  # runs of keys and values remembered per table (LineWriter._piece); past that it starts over
_TO_SERVER, _TO_CLIENT = "C>S", "S>C"  # (amqpcap.protocol.spec's directions)
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_PAIRS = "".join(f"{i:02d}" for i in range(100)).encode()  # the digits of 0 to 99, two each

# The keys as written, each after the value before it (the first one opens the object)
_TS = b'{"ts":'
_TS_NS, _TS_LAST_NS, _CAPTURE = b',"ts_ns":', b',"ts_last_ns":', b',"capture":'
_PCAP_RECORD, _PCAP_RECORD_LAST, _TCP_STREAM = b',"pcap_record":', b',"pcap_record_last":', b',"tcp_stream":'
_CONNECTION, _CLIENT, _SERVER, _DIR = b',"connection":', b',"client":', b',"server":', b',"dir":'
_CHANNEL, _KIND, _OFFSET, _SIZE = b',"channel":', b',"kind":', b',"offset":', b',"size":'
_METHOD_KEY, _CLASS_ID, _METHOD_ID = b',"method":', b',"class_id":', b',"method_id":'
_CLASS, _WEIGHT, _BODY_SIZE = b',"class":', b',"weight":', b',"body_size":'
_BODY_FRAME_SIZE = b',"body_frame_size":'
_PROPERTY_FLAGS, _PROPERTIES, _ARGS, _MESSAGE = b',"property_flags":', b',"properties":', b',"args":', b',"message":'
_ISSUE_KIND, _DETAIL, _BYTES_SKIPPED = b',"issue_kind":', b',"detail":', b',"bytes_skipped":'
_FILE_OFFSET, _FILE_END_OFFSET = b',"file_offset":', b',"file_end_offset":'
_VERSION, _PROTOCOL_HEADER_KEY, _RAW = b',"version":', b',"protocol_header":', b',"raw":'
_NULL, _END = b"null", b"}\n"
_TLS = b',"tls":true'


class LineWriter:
    """Writes records as JSON lines (`line`) into one buffer it keeps between records. The runs of
    keys and string values that repeat from record to record are rendered once and remembered:
    a capture's path, a connection's ids and endpoints with a direction, a kind, a method's name."""

    def __init__(self) -> None:
        self.buf = bytearray(4096)
        self.data = self.buf  # (compiled: a pointer to its bytes)
        self.capacity = len(self.buf)
        self.n = 0
        # what a run of keys and values renders as (see _piece), by the string it holds: a kind, a
        # method's name, a class's name; a connection's (client, server, run) by its id, one table
        # per direction
        self.kinds: dict = {}
        self.methods: dict = {}
        self.classes: dict = {}
        self.to_server: dict = {}
        self.to_client: dict = {}
        self.undirected: dict = {}  # (a connection's end has no direction)
        # the last link (a connection's id and endpoints are strings: an object of its own matches none)
        self.link_connection = self.link_client = self.link_server = self.link_direction = object()
        self.link_piece = b""
        self.capture = None  # the last capture named, and its run: ,"capture":"...","pcap_record":
        self.capture_piece = _CAPTURE + _NULL + _PCAP_RECORD
        self.float_value = None  # the last time written, and its JSON (a packet's records share it)
        self.float_text = b"null"

    def line(self, record: Record) -> bytes:
        """The record's line, newline included: what reference_line gives."""
        if not self._write(record):
            return reference_line(record)  # (a record given keys of its own)
        return self._line()

    def line_into(self, record: Record, chunk: bytearray, fill: int) -> int:
        """The record's line written into `chunk` from `fill` on: the new fill, or -(its size)
        when it does not fit (amqpcap.decodeview.order.TimeOrder's `into`)."""
        if not self._write(record):
            return _line_into(reference_line(record), chunk, fill)
        n = self.n
        if fill + n > len(chunk):
            return -n
        if COMPILED:  # (memcpy and PyByteArray_AS_STRING: C functions jsonl.pxd declares)
            memcpy(PyByteArray_AS_STRING(chunk) + fill, self.data, n)  # noqa: F821
        else:
            chunk[fill:fill + n] = memoryview(self.buf)[:n]
        return fill + n

    def _write(self, record: Record) -> bool:
        """The record's line into the buffer (its first self.n bytes); False for a record of a
        shape the writer does not know."""
        shape = record.shape
        # ("tls": true after the common keys; a TLS connection's end has its handshake's facts last)
        tls = record.tls is not None and shape is not _TLS_CONNECTION_END
        if tls:
            shape = _plain_shape(shape, record.tls)
        nested = shape is _METHOD or shape is _METHOD_MESSAGE or shape is _HEADER
        if not nested and shape is not _BODY and shape is not _HEARTBEAT and shape is not _ISSUE and \
                shape is not _CAPTURE_ISSUE and shape is not _PROTOCOL_HEADER and shape is not _CONNECTION_END \
                and shape is not _TLS_CONNECTION_END:
            return False
        self.n = 0
        self._put(_TS)
        value = record.ts
        if type(value) is not float or value != self.float_value or value == 0.0:  # (0.0 and -0.0 are equal)
            self.float_value = value
            self.float_text = _DUMPS(value)  # (a float or None: no default needed, no keywords to pass)
        self._put(self.float_text)
        self._put(_TS_NS)
        first = self.n
        self._number(record.ts_ns)
        digits = self.n - first
        self._put(_TS_LAST_NS)
        if record.ts_last_ns is record.ts_ns:  # (a frame in one packet: the same int) its digits again
            self._put_own(first, digits)
        else:
            self._number(record.ts_last_ns)
        capture = record.capture
        if capture is not self.capture:
            self.capture = capture
            self.capture_piece = _CAPTURE + _rendered(capture) + _PCAP_RECORD
        self._put(self.capture_piece)
        self._number(record.pcap_record)
        self._put(_PCAP_RECORD_LAST)
        self._number(record.pcap_record_last)
        self._put(_TCP_STREAM)
        self._number(record.tcp_stream)
        self._put(self._link(record.connection, record.client, record.server, record.dir))
        self._number(record.channel)
        self._put(self._piece(self.kinds, _KIND, record.kind, _OFFSET))
        self._number(record.offset)
        self._put(_SIZE)
        self._number(record.size)
        if tls:
            self._put(_TLS)
        if nested:  # the nested values last, each as orjson writes it
            if shape is _HEADER:
                self._put(self._piece(self.classes, _CLASS, record.class_name, _CLASS_ID))
                self._number(record.class_id)
                self._put(_WEIGHT)
                self._number(record.weight)
                self._put(_BODY_SIZE)
                self._number(record.body_size)
                self._put(_PROPERTY_FLAGS)
                self._numbers(record.property_flags)
                self._put(_PROPERTIES)
                self._put(_DUMPS(record.properties, default=_json_default))
            else:
                self._put(self._piece(self.methods, _METHOD_KEY, record.method, _CLASS_ID))
                self._number(record.class_id)
                self._put(_METHOD_ID)
                self._number(record.method_id)
                self._put(_ARGS)
                self._put(_DUMPS(record.args, default=_json_default))
                if shape is _METHOD_MESSAGE:
                    self._put(_MESSAGE)
                    self._put(_DUMPS(record.message, default=_json_default))
            self._put(_END)
            return True
        if shape is _BODY:
            self._put(_BODY_FRAME_SIZE)
            self._number(record.body_frame_size)
        elif shape is _ISSUE or shape is _CAPTURE_ISSUE:
            self._put(_ISSUE_KIND)
            self._put(_rendered(record.issue_kind))
            self._put(_DETAIL)
            self._put(_rendered(record.detail))
            self._put(_BYTES_SKIPPED)
            self._number(record.bytes_skipped)
            if shape is _CAPTURE_ISSUE:
                self._put(_FILE_OFFSET)
                self._number(record.file_offset)
                self._put(_FILE_END_OFFSET)
                self._number(record.file_end_offset)
        elif shape is _PROTOCOL_HEADER:
            self._put(_VERSION)
            self._put(_rendered(record.version))
            self._put(_PROTOCOL_HEADER_KEY)
            self._put(_rendered(record.protocol_header))
            self._put(_RAW)
            self._put(_rendered(record.raw))
        elif shape is _CONNECTION_END or shape is _TLS_CONNECTION_END:
            # the facts after the common keys, as orjson writes them, "{" made ","
            tail = _rendered({key: record._value(key) for key in shape[_COMMON_KEYS:]})
            self._put(b",")
            self._put_part(tail, 1, len(tail))
            self._put(b"\n")
            return True
        self._put(_END)
        return True

    # -- pieces ----------------------------------------------------------------------------------

    def _piece(self, pieces: dict, key: bytes, value, after: bytes) -> bytes:
        """key + value + after, remembered in `pieces` when value is a string: ,"kind":"...","offset":
        ,"method":"...","class_id":   ,"class":"...","class_id":"""
        if type(value) is not str:  # (None, or a value no capture puts there: rendered each time)
            return key + _rendered(value) + after
        piece = pieces.get(value)
        if piece is None:
            piece = key + _rendered(value) + after
            if len(pieces) >= _PIECES_HELD:
                pieces.clear()
            pieces[value] = piece
        return piece

    def _link(self, connection, client, server, direction) -> bytes:
        ""","connection":...,"client":...,"server":...,"dir":...,"channel": remembered by the
        connection's id, per direction (or none), while its endpoints stay the same; the last one
        also by the very objects it was made from (records come in runs of a connection's, which
        then need no lookup in a table of thousands)."""
        if connection is self.link_connection and client is self.link_client and server is self.link_server \
                and direction is self.link_direction:
            return self.link_piece
        if type(connection) is not str or type(client) is not str or type(server) is not str:
            return _render_link(connection, client, server, direction)
        if direction == _TO_SERVER:
            links = self.to_server
        elif direction == _TO_CLIENT:
            links = self.to_client
        elif direction is None:
            links = self.undirected
        else:
            return _render_link(connection, client, server, direction)
        entry = links.get(connection)
        if entry is not None and entry[0] == client and entry[1] == server:
            piece = entry[2]
        else:
            piece = _render_link(connection, client, server, direction)
            if len(links) >= _PIECES_HELD:
                links.clear()
            links[connection] = (client, server, piece)
        self.link_connection, self.link_client, self.link_server = connection, client, server
        self.link_direction, self.link_piece = direction, piece
        return piece

    # -- writing ---------------------------------------------------------------------------------

    def _line(self) -> bytes:
        """The line written, as bytes (compiled: one copy, no slice object)."""
        if COMPILED:  # (PyBytes_FromStringAndSize: a C function jsonl.pxd declares)
            return PyBytes_FromStringAndSize(self.data, self.n)  # noqa: F821
        return bytes(memoryview(self.buf)[:self.n])

    def _put(self, piece: bytes) -> None:
        self._put_part(piece, 0, len(piece))

    def _put_part(self, piece: bytes, start: int, stop: int) -> None:
        """piece[start:stop] (within piece)."""
        size = stop - start
        n = self.n
        if n + size > self.capacity:
            self._grow(n + size)
        if COMPILED:  # (memcpy and PyBytes_AS_STRING: C functions jsonl.pxd declares)
            memcpy(self.data + n, PyBytes_AS_STRING(piece) + start, size)  # noqa: F821
        else:
            self.buf[n:n + size] = piece[start:stop]
        self.n = n + size

    def _put_own(self, start: int, size: int) -> None:
        """The buffer's own bytes at `start` (before self.n), again."""
        n = self.n
        if n + size > self.capacity:
            self._grow(n + size)
        if COMPILED:  # (memcpy: the two stretches do not overlap)
            memcpy(self.data + n, self.data + start, size)  # noqa: F821
        else:
            self.buf[n:n + size] = self.buf[start:start + size]
        self.n = n + size

    def _grow(self, need: int) -> None:
        buf = bytearray(max(need, 2 * self.capacity))
        buf[:self.n] = self.buf[:self.n]
        self.buf = buf
        self.data = buf
        self.capacity = len(buf)

    def _numbers(self, values) -> None:
        """A list of ints as orjson writes it (anything else: by orjson itself)."""
        if type(values) is not list:
            self._put(_rendered(values))
            return
        self._put(b"[")
        for i in range(len(values)):
            if i:
                self._put(b",")
            self._number(values[i])
        self._put(b"]")

    def _number(self, value) -> None:
        """An int as orjson writes it (an int subclass such as Timestamp, or one past 64 bits: by
        orjson itself), None as null."""
        if value is None:
            self._put(_NULL)
            return
        if type(value) is not int:
            self._put(_rendered(value))
            return
        if COMPILED:  # (_int64: a C function jsonl.pxd defines; nothing raised, nothing to catch)
            signed = _int64(value)  # noqa: F821
        else:
            signed = value if _INT64_MIN < value <= _INT64_MAX else _INT64_MIN
        if signed == _INT64_MIN:  # past 64 signed bits
            self._put(_rendered(value))  # (what it writes of 64-bit unsigned values, or refuses)
            return
        n = self.n
        if n + 21 > self.capacity:
            self._grow(n + 21)
        data = self.data
        if signed < 0:
            data[n] = 45  # "-"
            n += 1
            number = -signed  # (compiled: a C unsigned long long, whose // and % are C's)
        else:
            number = signed
        # the digits written backwards from n + 20, two at a time, then moved to n
        pairs = _PAIRS
        end = n + 20
        i = end
        while number >= 100:
            pair = (number % 100) * 2
            number //= 100
            i -= 2
            data[i] = pairs[pair]
            data[i + 1] = pairs[pair + 1]
        if number >= 10:
            i -= 2
            data[i] = pairs[number * 2]
            data[i + 1] = pairs[number * 2 + 1]
        else:
            i -= 1
            data[i] = 48 + number
        size = end - i
        if COMPILED:  # (memmove: a C function jsonl.pxd declares)
            memmove(data + n, data + i, size)  # noqa: F821
        else:
            self.buf[n:n + size] = self.buf[i:end]
        self.n = n + size


def _plain_shape(shape: tuple, tls) -> tuple | None:
    """The plain shape of a TLS record's (None: a shape the writer does not know, or a "tls"
    other than true)."""
    if tls is not True:
        return None
    if shape is _TLS_METHOD:
        return _METHOD
    if shape is _TLS_METHOD_MESSAGE:
        return _METHOD_MESSAGE
    if shape is _TLS_HEADER:
        return _HEADER
    if shape is _TLS_BODY:
        return _BODY
    if shape is _TLS_HEARTBEAT:
        return _HEARTBEAT
    if shape is _TLS_ISSUE:
        return _ISSUE
    if shape is _TLS_PROTOCOL_HEADER:
        return _PROTOCOL_HEADER
    return None


def _rendered(value) -> bytes:
    return _DUMPS(value, default=_json_default)


def _render_link(connection, client, server, direction) -> bytes:
    return (_CONNECTION + _rendered(connection) + _CLIENT + _rendered(client) + _SERVER + _rendered(server) + _DIR
            + _rendered(direction) + _CHANNEL)


_WRITER = LineWriter()


def json_line(record) -> bytes:
    """The record's line (a Record, or a dict of one), newline included. Decimal and bytes go
    through _json_default; integers beyond 64 bits do not occur (longlong is unsigned 64); a
    Timestamp (an int) is its seconds."""
    if type(record) is Record:
        return _WRITER.line(record)
    return reference_line(record)


def json_line_into(record, chunk: bytearray, fill: int) -> int:
    """json_line's line written into `chunk` from `fill` on (LineWriter.line_into)."""
    if type(record) is Record:
        return _WRITER.line_into(record, chunk, fill)
    return _line_into(reference_line(record), chunk, fill)


def _line_into(line: bytes, chunk: bytearray, fill: int) -> int:
    """A line made apart written into `chunk` from `fill` on, as LineWriter.line_into writes its own."""
    if fill + len(line) > len(chunk):
        return -len(line)
    chunk[fill:fill + len(line)] = line
    return fill + len(line)
