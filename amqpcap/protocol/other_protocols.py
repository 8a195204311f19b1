"""What a client speaks when its first bytes on an AMQP port are not an AMQP protocol header: a
misconfigured client, a health check, a scanner, a TLS client on the plain port. Told by the first
bytes each protocol must send, so that the connection is named and its bytes counted, never
framed as AMQP (resynchronising over an HTTP request can find frames that were never sent).

`name_protocol(first)` -> (status, name) or None when the bytes say nothing: `status` is what the
streams and connections tables say (`http`, `tls`, `mqtt`, ...), `name` how an issue says it.
"""

from __future__ import annotations

import re

# HTTP/1.x request lines (RFC 9110's methods and WebDAV's), and HTTP/2's connection preface
_HTTP = re.compile(rb"(GET|HEAD|POST|PUT|DELETE|CONNECT|OPTIONS|TRACE|PATCH|PROPFIND|MKCOL|COPY|MOVE|LOCK|UNLOCK)"
                   rb" ")
_HTTP2 = b"PRI * HTTP/2.0"


def name_protocol(first: bytes) -> tuple[str, str] | None:
    """The protocol whose opening these bytes are (at least the first 8 of the stream)."""
    if first.startswith(_HTTP2[:len(first)]) and len(first) >= 8:
        return "http", "HTTP/2"
    if _HTTP.match(first):
        return "http", "HTTP"
    if len(first) >= 3 and first[0] == 0x16 and first[1] == 0x03 and first[2] <= 0x04:
        return "tls", "TLS (a handshake record: a TLS client on the plain port)"
    if len(first) >= 3 and first[0] == 0x80 and first[2] == 0x01:  # an SSLv2-framed ClientHello
        return "tls", "TLS (an SSLv2-framed hello)"
    mqtt = _mqtt_connect(first)
    if mqtt:
        return "mqtt", mqtt
    if first.startswith((b"CONNECT\n", b"CONNECT\r\n", b"STOMP\n", b"STOMP\r\n")):
        return "stomp", "STOMP"
    if first.startswith(b"SSH-"):
        return "ssh", "SSH"
    if first.startswith(b"PROXY ") or (len(first) >= 8 and first.startswith(b"\r\n\r\n\x00\r\nQUIT\n"[:len(first)])):
        return "proxy", "the PROXY protocol (a load balancer's header before the client's bytes)"
    if first[:1] in (b"*", b"$") and b"\r\n" in first[:16]:
        return "redis", "Redis (RESP)"
    return None


def _mqtt_connect(first: bytes) -> str | None:
    """An MQTT CONNECT packet: type 1, a remaining length, then the protocol name MQTT (3.1.1, 5)
    or MQIsdp (3.1)."""
    if len(first) < 8 or first[0] != 0x10:
        return None
    i = 1
    while i < 5 and i < len(first) and first[i] & 0x80:  # the remaining length: 1 to 4 octets
        i += 1
    name = first[i + 1:i + 3 + 6]
    if name.startswith(b"\x00\x04MQTT"):
        return "MQTT"
    if name.startswith(b"\x00\x06MQIsdp"):
        return "MQTT 3.1"
    return None
