"""A tiny raw-socket AMQP 0-9-1 client: hand-encoded frames, every byte under our control.

Used for what client libraries cannot or will not send (every field-table tag, protocol
header variants, malformed frames, pipelining, unopened channels, mid-stream captures).
Each method it sends is counted in the scenario's Expect (C>S); each method the scenario
*requires* the broker to answer is asserted with expect() and counted (S>C).
"""
from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass

FRAME_METHOD, FRAME_HEADER, FRAME_BODY, FRAME_HEARTBEAT = 1, 2, 3, 8
FRAME_END = 0xCE
PROTOCOL_0_9_1 = b"AMQP\x00\x00\x09\x01"

# name: (class_id, method_id, argument types).  "bit" arguments that follow each other are
# packed into one octet, as the spec says.
METHODS = {
    "connection.start": (10, 10, ["octet", "octet", "table", "longstr", "longstr"]),
    "connection.start-ok": (10, 11, ["table", "shortstr", "longstr", "shortstr"]),
    "connection.secure": (10, 20, ["longstr"]),
    "connection.secure-ok": (10, 21, ["longstr"]),
    "connection.tune": (10, 30, ["short", "long", "short"]),
    "connection.tune-ok": (10, 31, ["short", "long", "short"]),
    "connection.open": (10, 40, ["shortstr", "shortstr", "bit"]),
    "connection.open-ok": (10, 41, ["shortstr"]),
    "connection.close": (10, 50, ["short", "shortstr", "short", "short"]),
    "connection.close-ok": (10, 51, []),
    "connection.blocked": (10, 60, ["shortstr"]),
    "connection.unblocked": (10, 61, []),
    "connection.update-secret": (10, 70, ["longstr", "shortstr"]),
    "connection.update-secret-ok": (10, 71, []),
    "channel.open": (20, 10, ["shortstr"]),
    "channel.open-ok": (20, 11, ["longstr"]),
    "channel.flow": (20, 20, ["bit"]),
    "channel.flow-ok": (20, 21, ["bit"]),
    "channel.close": (20, 40, ["short", "shortstr", "short", "short"]),
    "channel.close-ok": (20, 41, []),
    "access.request": (30, 10, ["shortstr", "bit", "bit", "bit", "bit", "bit"]),
    "access.request-ok": (30, 11, ["short"]),
    "exchange.declare": (40, 10, ["short", "shortstr", "shortstr", "bit", "bit", "bit", "bit", "bit", "table"]),
    "exchange.declare-ok": (40, 11, []),
    "exchange.delete": (40, 20, ["short", "shortstr", "bit", "bit"]),
    "exchange.delete-ok": (40, 21, []),
    "exchange.bind": (40, 30, ["short", "shortstr", "shortstr", "shortstr", "bit", "table"]),
    "exchange.bind-ok": (40, 31, []),
    "exchange.unbind": (40, 40, ["short", "shortstr", "shortstr", "shortstr", "bit", "table"]),
    "exchange.unbind-ok": (40, 51, []),
    "queue.declare": (50, 10, ["short", "shortstr", "bit", "bit", "bit", "bit", "bit", "table"]),
    "queue.declare-ok": (50, 11, ["shortstr", "long", "long"]),
    "queue.bind": (50, 20, ["short", "shortstr", "shortstr", "shortstr", "bit", "table"]),
    "queue.bind-ok": (50, 21, []),
    "queue.purge": (50, 30, ["short", "shortstr", "bit"]),
    "queue.purge-ok": (50, 31, ["long"]),
    "queue.delete": (50, 40, ["short", "shortstr", "bit", "bit", "bit"]),
    "queue.delete-ok": (50, 41, ["long"]),
    "queue.unbind": (50, 50, ["short", "shortstr", "shortstr", "shortstr", "table"]),
    "queue.unbind-ok": (50, 51, []),
    "basic.qos": (60, 10, ["long", "short", "bit"]),
    "basic.qos-ok": (60, 11, []),
    "basic.consume": (60, 20, ["short", "shortstr", "shortstr", "bit", "bit", "bit", "bit", "table"]),
    "basic.consume-ok": (60, 21, ["shortstr"]),
    "basic.cancel": (60, 30, ["shortstr", "bit"]),
    "basic.cancel-ok": (60, 31, ["shortstr"]),
    "basic.publish": (60, 40, ["short", "shortstr", "shortstr", "bit", "bit"]),
    "basic.return": (60, 50, ["short", "shortstr", "shortstr", "shortstr"]),
    "basic.deliver": (60, 60, ["shortstr", "longlong", "bit", "shortstr", "shortstr"]),
    "basic.get": (60, 70, ["short", "shortstr", "bit"]),
    "basic.get-ok": (60, 71, ["longlong", "bit", "shortstr", "shortstr", "long"]),
    "basic.get-empty": (60, 72, ["shortstr"]),
    "basic.ack": (60, 80, ["longlong", "bit"]),
    "basic.reject": (60, 90, ["longlong", "bit"]),
    "basic.recover-async": (60, 100, ["bit"]),
    "basic.recover": (60, 110, ["bit"]),
    "basic.recover-ok": (60, 111, []),
    "basic.nack": (60, 120, ["longlong", "bit", "bit"]),
    "confirm.select": (85, 10, ["bit"]),
    "confirm.select-ok": (85, 11, []),
    "tx.select": (90, 10, []),
    "tx.select-ok": (90, 11, []),
    "tx.commit": (90, 20, []),
    "tx.commit-ok": (90, 21, []),
    "tx.rollback": (90, 30, []),
    "tx.rollback-ok": (90, 31, []),
}
BY_ID = {(c, m): name for name, (c, m, _) in METHODS.items()}


# ---------------------------------------------------------------- field tables
class FV:
    """An explicitly tagged field value: FV("u", 65535)."""

    def __init__(self, tag: str, value=None):
        self.tag, self.value = tag, value


def _enc_value(v) -> bytes:
    if not isinstance(v, FV):  # convenience defaults
        if isinstance(v, bool):
            v = FV("t", v)
        elif isinstance(v, int):
            v = FV("l", v)
        elif isinstance(v, float):
            v = FV("d", v)
        elif isinstance(v, (bytes, str)):
            v = FV("S", v)
        elif isinstance(v, dict):
            v = FV("F", v)
        elif isinstance(v, list):
            v = FV("A", v)
        elif v is None:
            v = FV("V")
        else:
            raise TypeError(v)
    t, x = v.tag, v.value
    tb = t.encode()
    simple = {"t": ">B", "b": ">b", "B": ">B", "s": ">h", "u": ">H", "I": ">i", "i": ">I",
              "l": ">q", "L": ">Q", "f": ">f", "d": ">d", "T": ">Q"}
    if t in simple:
        return tb + struct.pack(simple[t], int(x) if t in "tT" else x)
    if t in "Sx":
        b = x.encode() if isinstance(x, str) else x
        return tb + struct.pack(">I", len(b)) + b
    if t == "D":  # x = (scale, signed int32 value)
        scale, val = x
        return tb + struct.pack(">Bi", scale, val)
    if t == "F":
        return tb + encode_table(x)
    if t == "A":
        body = b"".join(_enc_value(i) for i in x)
        return tb + struct.pack(">I", len(body)) + body
    if t == "V":
        return tb
    raise ValueError(t)


def encode_table(d) -> bytes:
    items = d.items() if isinstance(d, dict) else d
    body = b""
    for k, v in items:
        kb = k.encode()
        body += struct.pack(">B", len(kb)) + kb + _enc_value(v)
    return struct.pack(">I", len(body)) + body


# ---------------------------------------------------------------- methods
def encode_args(types, args) -> bytes:
    out, bits, nbits = b"", 0, 0
    for typ, a in zip(types, args):
        if typ == "bit":
            bits |= (1 if a else 0) << nbits
            nbits += 1
            continue
        if nbits:
            out += bytes([bits]); bits = nbits = 0
        if typ == "octet":
            out += struct.pack(">B", a)
        elif typ == "short":
            out += struct.pack(">H", a)
        elif typ == "long":
            out += struct.pack(">I", a)
        elif typ == "longlong":
            out += struct.pack(">Q", a)
        elif typ == "shortstr":
            b = a.encode() if isinstance(a, str) else a
            out += struct.pack(">B", len(b)) + b
        elif typ == "longstr":
            b = a.encode() if isinstance(a, str) else a
            out += struct.pack(">I", len(b)) + b
        elif typ == "table":
            out += a if isinstance(a, bytes) else encode_table(a or {})
        else:
            raise ValueError(typ)
    if nbits:
        out += bytes([bits])
    return out


def decode_args(types, data: bytes) -> list:
    out, pos, bitpos = [], 0, 8
    for typ in types:
        if typ == "bit":
            if bitpos == 8:
                byte, pos, bitpos = data[pos], pos + 1, 0
            out.append(bool(byte >> bitpos & 1)); bitpos += 1
            continue
        bitpos = 8
        if typ == "octet":
            out.append(data[pos]); pos += 1
        elif typ == "short":
            out.append(struct.unpack_from(">H", data, pos)[0]); pos += 2
        elif typ == "long":
            out.append(struct.unpack_from(">I", data, pos)[0]); pos += 4
        elif typ == "longlong":
            out.append(struct.unpack_from(">Q", data, pos)[0]); pos += 8
        elif typ == "shortstr":
            n = data[pos]; out.append(data[pos + 1:pos + 1 + n].decode("utf-8", "replace")); pos += 1 + n
        elif typ in ("longstr", "table"):
            n = struct.unpack_from(">I", data, pos)[0]; out.append(data[pos + 4:pos + 4 + n]); pos += 4 + n
    return out


def frame(ftype: int, channel: int, payload: bytes, end: int = FRAME_END) -> bytes:
    return struct.pack(">BHI", ftype, channel, len(payload)) + payload + bytes([end])


def method_frame(channel: int, name: str, *args) -> bytes:
    c, m, types = METHODS[name]
    return frame(FRAME_METHOD, channel, struct.pack(">HH", c, m) + encode_args(types, args))


PROPS = ["content-type", "content-encoding", "headers", "delivery-mode", "priority",
         "correlation-id", "reply-to", "expiration", "message-id", "timestamp", "type",
         "user-id", "app-id", "cluster-id"]
PROP_TYPES = ["shortstr", "shortstr", "table", "octet", "octet", "shortstr", "shortstr",
              "shortstr", "shortstr", "longlong", "shortstr", "shortstr", "shortstr", "shortstr"]


def header_payload(body_size: int, props: dict | None = None, class_id: int = 60) -> bytes:
    props = props or {}
    flags, vals = 0, b""
    for i, (name, typ) in enumerate(zip(PROPS, PROP_TYPES)):
        if name in props:
            flags |= 1 << (15 - i)
            vals += encode_args([typ], [props[name]])
    return struct.pack(">HHQH", class_id, 0, body_size, flags) + vals


def content_frames(channel: int, body: bytes, props: dict | None, frame_max: int) -> bytes:
    out = frame(FRAME_HEADER, channel, header_payload(len(body), props))
    chunk = frame_max - 8
    for i in range(0, len(body), chunk):
        out += frame(FRAME_BODY, channel, body[i:i + chunk])
    return out


@dataclass
class Frame:
    type: int
    channel: int
    payload: bytes

    @property
    def name(self) -> str | None:
        if self.type != FRAME_METHOD:
            return {FRAME_HEADER: "<header>", FRAME_BODY: "<body>", FRAME_HEARTBEAT: "<heartbeat>"}.get(self.type)
        c, m = struct.unpack_from(">HH", self.payload)
        return BY_ID.get((c, m), f"?{c}.{m}")

    @property
    def args(self) -> list:
        return decode_args(METHODS[self.name][2], self.payload[4:])


class ProtocolError(AssertionError):
    pass


class RawClient:
    """exp: the scenario's Expect; every method sent is counted C>S there."""

    def __init__(self, exp, host="127.0.0.1", port=5672, timeout=10.0, label="raw-socket"):
        self.exp = exp
        fam = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(fam, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.connect((host, port))
        self.buf = b""
        self.frame_max = 131072
        self.pending: list[Frame] = []
        exp.connection(label, ip=6 if fam == socket.AF_INET6 else 4)

    # -- sending
    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_method(self, channel: int, name: str, *args, flush=True) -> bytes:
        self.exp.c(name)
        if name in ("connection.close", "channel.close"):
            self.exp.reply_code(name, args[0])
        data = method_frame(channel, name, *args)
        if flush:
            self.send_raw(data)
        return data

    def publish(self, channel, exchange, rkey, body: bytes, props=None, mandatory=False, flush=True) -> bytes:
        data = self.send_method(channel, "basic.publish", 0, exchange, rkey, mandatory, False, flush=False)
        data += content_frames(channel, body, props, self.frame_max)
        self.exp.msg("published")
        self.exp.max_body(len(body))
        if flush:
            self.send_raw(data)
        return data

    def heartbeat(self) -> None:
        self.send_raw(frame(FRAME_HEARTBEAT, 0, b""))
        self.exp.heartbeat("C>S")

    # -- receiving
    def _read(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("peer closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv_frame(self) -> Frame:
        if self.pending:
            return self.pending.pop(0)
        t, ch, size = struct.unpack(">BHI", self._read(7))
        payload = self._read(size)
        end = self._read(1)[0]
        if end != FRAME_END:
            raise ProtocolError("bad frame end")
        return Frame(t, ch, payload)

    def confirms_until(self, tag: int) -> tuple[int, int]:
        """Read the broker's publisher confirms until one covers delivery tag `tag` (how many the
        broker sends, and with multiple=1, depends on timing): -> (basic.ack frames, of them with
        multiple=1). The caller states them in its expectations."""
        covered = frames = multiple_frames = 0
        while covered < tag:
            f = self.recv_frame()
            if f.type != FRAME_METHOD:
                continue
            assert f.name == "basic.ack", f.name
            covered, multiple = f.args
            frames += 1
            multiple_frames += multiple
        return frames, multiple_frames

    def expect(self, name: str, channel: int | None = None, code: int | None = None) -> Frame:
        """Read the next method frame (skipping heartbeats) and require it to be `name`."""
        while True:
            f = self.recv_frame()
            if f.type == FRAME_HEARTBEAT:
                continue
            break
        if f.name != name or (channel is not None and f.channel != channel):
            raise ProtocolError(f"expected {name} on ch {channel}, got {f.name} on ch {f.channel}"
                                + (f" {f.args}" if f.type == FRAME_METHOD and f.name in METHODS else ""))
        self.exp.s(name)
        if name in ("connection.close", "channel.close"):
            got = f.args[0]
            if code is not None and got != code:
                raise ProtocolError(f"{name}: expected code {code}, got {got} {f.args[1]}")
            self.exp.reply_code(name, got)
        if name == "basic.return":
            got = f.args[0]
            if code is not None and got != code:
                raise ProtocolError(f"basic.return code {got}")
            self.exp.reply_code(name, got)
        return f

    def expect_content(self) -> tuple[bytes, bytes]:
        """Read a content header + body frames; returns (header payload, body)."""
        h = self.recv_frame()
        assert h.type == FRAME_HEADER, h
        size = struct.unpack_from(">Q", h.payload, 4)[0]
        body = b""
        while len(body) < size:
            f = self.recv_frame()
            assert f.type == FRAME_BODY, f
            body += f.payload
        return h.payload, body

    def expect_eof(self, timeout=10.0) -> bytes:
        """Read until the broker closes the socket; returns the bytes received."""
        self.sock.settimeout(timeout)
        data = self.buf
        self.buf = b""
        while True:
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            data += chunk
        self.sock.close()
        return data

    # -- conveniences
    def handshake(self, user, password, vhost, frame_max=131072, heartbeat=0, mechanism="PLAIN",
                  header=PROTOCOL_0_9_1, product="amqpcap-recorder raw-socket", stop_after_start_ok=False):
        self.send_raw(header)
        start = self.expect("connection.start")
        caps = {"publisher_confirms": True, "consumer_cancel_notify": True,
                "exchange_exchange_bindings": True, "basic.nack": True,
                "connection.blocked": True, "authentication_failure_close": True}
        props = {"product": product, "version": "1.0", "platform": "Python",
                 "capabilities": FV("F", caps)}
        if mechanism == "PLAIN":
            resp = b"\x00" + user.encode() + b"\x00" + password.encode()
        else:  # AMQPLAIN: a field table without its length prefix
            resp = encode_table({"LOGIN": user, "PASSWORD": password})[4:]
        self.exp.auth(mechanism, user)
        self.send_method(0, "connection.start-ok", props, mechanism, resp, "en_US")
        if stop_after_start_ok:
            return start
        tune = self.expect("connection.tune")
        ch_max, fmax, _hb = tune.args
        self.frame_max = min(fmax, frame_max) if fmax else frame_max
        self.send_method(0, "connection.tune-ok", ch_max, self.frame_max, heartbeat)
        self.send_method(0, "connection.open", vhost, "", False)
        return start

    def open(self, user, password, vhost, **kw):
        self.handshake(user, password, vhost, **kw)
        self.expect("connection.open-ok")
        return self

    def channel(self, ch: int):
        self.send_method(ch, "channel.open", "")
        self.expect("channel.open-ok", ch)
        self.exp.channels_opened += 1

    def rpc(self, ch: int, name: str, *args, reply: str | None = None) -> Frame:
        self.send_method(ch, name, *args)
        return self.expect(reply or name + "-ok", ch)

    def close(self):
        self.send_method(0, "connection.close", 200, "bye", 0, 0)
        self.expect("connection.close-ok")
        self.sock.close()

    def close_channel(self, ch: int):
        self.send_method(ch, "channel.close", 200, "bye", 0, 0)
        self.expect("channel.close-ok", ch)

    def answer_channel_close(self, ch: int, code: int):
        """Broker closed channel `ch` with `code`: acknowledge with channel.close-ok."""
        self.expect("channel.close", ch, code=code)
        self.send_method(ch, "channel.close-ok")

    def answer_connection_close(self, code: int):
        self.expect("connection.close", 0, code=code)
        self.send_method(0, "connection.close-ok")
        # the broker closes the socket after close-ok
        self.expect_eof()

    def sleep(self, seconds: float):
        time.sleep(seconds)
