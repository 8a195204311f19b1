"""Bad input raises the right typed error, with its offset, and nothing else."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amqpcap.protocol.errors import (
    BadFrameEnd,
    DecodeError,
    MalformedPayload,
    OversizeFrame,
    TruncatedFrame,
    UnknownClass,
    UnknownFrameType,
    UnknownMethod,
)
from tests.protocol.golden_0_9_1 import METHODS_0_9_1

GOLDEN = {name: bytes.fromhex(hexdata) for name, _, hexdata, _ in METHODS_0_9_1}
HEADER = bytes.fromhex(
    "0200070000007c003c000000000000000004d2fff8106170706c69636174696f6e2f6a736f6e04677a69700000"
    "0012016e62070574726163655300000003616263020906636f72722d31077265706c696573053630303030056d"
    "73672d31000000006553f1000d6f726465722e6372656174656407616d7170636170066f7264657273ce")
BODY = bytes.fromhex("0300070000000b68656c6c6f20776f726c64ce")
HEARTBEAT = bytes.fromhex("08000000000000ce")
FRAMES = {"connection.start-ok": GOLDEN["connection.start-ok"], "basic.deliver": GOLDEN["basic.deliver"],
          "queue.declare": GOLDEN["queue.declare"], "header": HEADER, "body": BODY, "heartbeat": HEARTBEAT}


def frame(frame_type: int, channel: int, payload: bytes, end: int = 0xCE) -> bytes:
    return struct.pack(">BHI", frame_type, channel, len(payload)) + payload + bytes([end])


@pytest.mark.parametrize("name", FRAMES)
def test_truncated_at_every_byte_boundary(codec, name):
    data = FRAMES[name]
    for cut in range(len(data)):
        with pytest.raises(TruncatedFrame) as caught:
            codec.decode_frame(data[:cut])
        assert caught.value.offset == 0


@pytest.mark.parametrize("name", FRAMES)
def test_truncated_second_frame_in_a_buffer(codec, name):
    data = HEARTBEAT + FRAMES[name]
    _, offset = codec.decode_frame(data[:-1])
    assert offset == len(HEARTBEAT)
    with pytest.raises(TruncatedFrame) as caught:
        codec.decode_frame(data[:-1], offset)
    assert caught.value.offset == offset


@pytest.mark.parametrize("name", FRAMES)
def test_corrupt_frame_end(codec, name):
    data = bytearray(FRAMES[name])
    data[-1] = 0xCD
    with pytest.raises(BadFrameEnd) as caught:
        codec.decode_frame(bytes(data))
    assert caught.value.offset == len(data) - 1
    assert caught.value.frame_end is None  # a framing error: the caller must resynchronise


@pytest.mark.parametrize("name", FRAMES)
def test_a_frame_reads_the_same_from_any_buffer_and_offset(codec, name):
    """bytes, bytearray or memoryview, at the start or after other bytes: one frame (the compiled
    build reads the header through a pointer to the buffer); an offset before the buffer is no frame."""
    data = FRAMES[name]
    expected, end = codec.decode_frame(data)
    assert end == len(data)
    padded = HEARTBEAT + data
    for buffer in (bytearray(data), memoryview(data), padded, bytearray(padded), memoryview(padded)):
        start = len(buffer) - len(data)
        assert codec.decode_frame(buffer, start) == (expected, len(buffer))
    with pytest.raises(TruncatedFrame):
        codec.decode_frame(padded, -len(data))


def test_unknown_frame_type(codec):
    with pytest.raises(UnknownFrameType) as caught:
        codec.decode_frame(frame(4, 0, b""))  # oob-method exists in 0-9, not in 0-9-1
    assert "frame type 4" in str(caught.value)


def test_0_9_knows_its_extra_frame_types(codec09):
    decoded, _ = codec09.decode_frame(frame(7, 0, b"trace"))
    assert (decoded.kind, decoded.type_name, decoded.size) == ("other", "trace", 5)


def test_oversize_frame_is_refused_before_waiting_for_it(codec):
    header_only = struct.pack(">BHI", 3, 1, 1 << 30)
    with pytest.raises(OversizeFrame):
        codec.decode_frame(header_only)
    with pytest.raises(OversizeFrame):
        codec.decode_frame(BODY, max_payload=10)


def test_unknown_class_and_method_keep_framing(codec):
    with pytest.raises(UnknownClass) as caught:
        codec.decode_frame(HEARTBEAT + frame(1, 2, struct.pack(">HH", 0xF001, 1)), len(HEARTBEAT))
    assert (caught.value.class_id, caught.value.frame_end, caught.value.channel) == (0xF001, 20, 2)
    with pytest.raises(UnknownMethod) as caught:
        codec.decode_frame(frame(1, 2, struct.pack(">HH", 60, 99)))
    assert (caught.value.class_id, caught.value.method_id, caught.value.frame_end) == (60, 99, 12)
    assert "basic" in str(caught.value)


@pytest.mark.parametrize("payload, offset", [
    (struct.pack(">HH", 60, 60) + b"\xff" + b"ctag", 11),  # consumer tag longer than the payload
    (struct.pack(">HH", 60, 80) + b"\x00\x00\x00", 11),  # delivery tag cut short
    (struct.pack(">HH", 10, 10) + b"\x00\x09" + struct.pack(">I", 999), 13),  # table past the end
    (b"\x00\x3c", 7),  # no method id
])
def test_malformed_payload_inside_a_good_frame(codec, payload, offset):
    data = frame(1, 1, payload)
    with pytest.raises(MalformedPayload) as caught:
        codec.decode_frame(data)
    assert caught.value.frame_end == len(data)
    assert 7 <= caught.value.offset <= len(data) - 1


def test_malformed_content_header(codec):
    with pytest.raises(MalformedPayload):
        codec.decode_frame(frame(2, 1, struct.pack(">HHQ", 60, 0, 5)))  # no flag word
    with pytest.raises(UnknownClass):
        codec.decode_frame(frame(2, 1, struct.pack(">HHQH", 90, 0, 5, 0)))  # tx has no properties


@given(st.binary(max_size=64), st.integers(min_value=0, max_value=8))
def test_any_bytes_either_decode_or_raise_a_decode_error(codec, data, offset):
    try:
        decoded, end = codec.decode_frame(data, offset)
    except DecodeError:
        return
    assert offset < end <= len(data)


@given(st.sampled_from(sorted(FRAMES)), st.integers(min_value=7), st.integers(min_value=0, max_value=255))
def test_any_single_byte_corruption_is_decoded_or_a_decode_error(codec, name, position, value):
    data = bytearray(FRAMES[name])
    data[position % len(data)] = value
    try:
        codec.decode_frame(bytes(data))
    except DecodeError:
        pass
