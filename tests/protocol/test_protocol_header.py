from __future__ import annotations

import pytest

from amqpcap.protocol.errors import TruncatedFrame
from amqpcap.protocol.frames import looks_like_protocol_header, parse_protocol_header


@pytest.mark.parametrize("raw, version, description", [
    (b"AMQP\x00\x00\x09\x01", "0-9-1", "AMQP 0 0 9 1 (0-9-1)"),
    (b"AMQP\x01\x01\x00\x09", "0-9", "AMQP 1 1 0 9 (0-9)"),
    (b"AMQP\x01\x01\x08\x00", "0-8", "AMQP 1 1 8 0 (0-8)"),
    (b"AMQP\x02\x00\x01\x01", None, "AMQP 2 0 1 1 (unknown version)"),
    (b"AMQP\x01\x01\x00\x0a", "0-10", "AMQP 1 1 0 10 (0-10)"),
    (b"AMQP\x03\x01\x00\x00", "1.0", "AMQP 3 1 0 0 (1.0, SASL)"),
    (b"AMQP\x00\x01\x00\x00", "1.0", "AMQP 0 1 0 0 (1.0, AMQP)"),
    (b"AMQP\x02\x01\x00\x00", "1.0", "AMQP 2 1 0 0 (1.0, TLS)"),
    (b"HTTP/1.1", None, "not AMQP: 48 54 54 50 2f 31 2e 31"),
])
def test_protocol_headers(raw, version, description):
    header = parse_protocol_header(raw)
    assert (header.raw, header.version, header.description) == (raw, version, description)
    assert header.is_amqp == raw.startswith(b"AMQP") == looks_like_protocol_header(raw)


def test_short_protocol_header_is_truncated():
    with pytest.raises(TruncatedFrame):
        parse_protocol_header(b"AMQP\x00\x00")


def test_a_header_met_again_is_the_same_frozen_object_and_junk_is_not_hoarded():
    from amqpcap.protocol import frames
    first = parse_protocol_header(bytearray(b"AMQP\x00\x00\x09\x01"))
    assert parse_protocol_header(b"AMQP\x00\x00\x09\x01extra") is first
    junk = [i.to_bytes(8, "big") for i in range(3 * frames._PARSED_HELD)]
    assert [parse_protocol_header(raw).raw for raw in junk] == junk
    assert len(frames._PARSED) <= frames._PARSED_HELD
    assert parse_protocol_header(b"AMQP\x00\x00\x09\x01").version == "0-9-1"
    for _ in range(2):  # (a short one is never kept: it raises each time)
        with pytest.raises(TruncatedFrame):
            parse_protocol_header(b"AMQP\x00\x00")
