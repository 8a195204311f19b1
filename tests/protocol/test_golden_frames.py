"""Golden frames: fixed bytes in, known values out, for every 0-9-1 method and a sample of 0-9."""

from __future__ import annotations

import pytest

from amqpcap.protocol.frames import ContentBody, ContentHeader, Heartbeat, MethodFrame
from tests.protocol.golden_0_9 import HEADER_0_9, METHODS_0_9
from tests.protocol.golden_0_9_1 import METHODS_0_9_1


def _decode_whole(codec, hexdata: str):
    data = bytes.fromhex(hexdata)
    frame, end = codec.decode_frame(data)
    assert end == len(data), "the frame must consume exactly its bytes"
    return frame


@pytest.mark.parametrize("name, channel, hexdata, expected", METHODS_0_9_1,
                         ids=[case[0] for case in METHODS_0_9_1])
def test_0_9_1_method(codec, name, channel, hexdata, expected):
    frame = _decode_whole(codec, hexdata)
    assert isinstance(frame, MethodFrame)
    assert (frame.name, frame.channel) == (name, channel)
    assert frame.args == expected
    assert frame.warnings == []


def test_golden_frames_cover_every_0_9_1_method(codec):
    assert {case[0] for case in METHODS_0_9_1} == {m.full_name for m in codec.spec.methods()}


@pytest.mark.parametrize("name, channel, hexdata, expected", METHODS_0_9,
                         ids=[case[0] for case in METHODS_0_9])
def test_0_9_method(codec09, name, channel, hexdata, expected):
    frame = _decode_whole(codec09, hexdata)
    assert (frame.name, frame.channel, frame.args, frame.warnings) == (name, channel, expected, [])


def test_0_9_file_content_header(codec09):
    class_name, channel, hexdata, expected = HEADER_0_9
    frame = _decode_whole(codec09, hexdata)
    assert isinstance(frame, ContentHeader)
    assert (frame.class_name, frame.channel, frame.body_size) == (class_name, channel, 12345)
    assert frame.properties == expected


def test_basic_header_with_thirteen_properties(codec):
    # pamqp-encoded; every basic property but the reserved 14th (pamqp omits it when empty)
    frame = _decode_whole(codec, (
        "0200070000007c003c000000000000000004d2fff8106170706c69636174696f6e2f6a736f6e04677a69700000"
        "0012016e62070574726163655300000003616263020906636f72722d31077265706c696573053630303030056d"
        "73672d31000000006553f1000d6f726465722e6372656174656407616d7170636170066f7264657273ce"))
    assert (frame.channel, frame.class_id, frame.class_name, frame.weight, frame.body_size) == \
        (7, 60, "basic", 0, 1234)
    assert frame.property_flags == (0xFFF8,)
    assert frame.properties == {
        "content_type": "application/json", "content_encoding": "gzip",
        "headers": {"n": 7, "trace": "abc"}, "delivery_mode": 2, "priority": 9,
        "correlation_id": "corr-1", "reply_to": "replies", "expiration": "60000",
        "message_id": "msg-1", "timestamp": 1700000000, "type": "order.created",
        "user_id": "amqpcap", "app_id": "orders"}


def test_basic_header_reserved_fourteenth_property(codec):
    # flag 0x0004: 0-9-1's reserved property (0-9's cluster-id), which pamqp will not encode
    frame = _decode_whole(codec, "02000100000013" "003c" "0000" "0000000000000003" "0004" "0463312d61" "ce")
    assert (frame.property_flags, frame.properties) == ((0x0004,), {"reserved": "c1-a"})


def test_basic_header_without_properties(codec):
    frame = _decode_whole(codec, "0200070000000e003c000000000000000000000000ce")
    assert (frame.body_size, frame.property_flags, frame.properties) == (0, (0,), {})


def test_header_flag_continuation_words_are_kept(codec):
    # content-type flagged in word 1, bit 0 set, then a second (empty) flag word
    payload = bytes.fromhex("003c0000" "0000000000000005" "8001" "0000" "0474657874")
    frame = _decode_whole(codec, "02000100000015" + payload.hex() + "ce")
    assert frame.property_flags == (0x8001, 0x0000)
    assert frame.properties == {"content_type": "text"}
    assert frame.warnings == []


def test_header_with_undefined_property_flag_is_reported(codec):
    # bit 1 is not a basic property: the defined ones decode, the rest is flagged, never guessed
    payload = bytes.fromhex("003c0000" "0000000000000001" "8002" "0474657874" "ffff")
    frame = _decode_whole(codec, "0200010000" + f"{len(payload):04x}" + payload.hex() + "ce")
    assert frame.properties == {"content_type": "text"}
    assert [w.kind for w in frame.warnings] == ["unknown-property"]


def test_body_and_heartbeat(codec):
    body = _decode_whole(codec, "0300070000000b68656c6c6f20776f726c64ce")
    assert isinstance(body, ContentBody)
    assert (body.channel, body.payload, body.size) == (7, b"hello world", 11)
    heartbeat = _decode_whole(codec, "08000000000000ce")
    assert isinstance(heartbeat, Heartbeat)
    assert (heartbeat.channel, heartbeat.warnings) == (0, [])


def test_frames_decode_back_to_back_from_one_buffer(codec):
    stream = bytes.fromhex("08000000000000ce" "0300070000000b68656c6c6f20776f726c64ce"
                           "08000000000000ce")
    kinds, offset = [], 0
    while offset < len(stream):
        frame, offset = codec.decode_frame(stream, offset)
        kinds.append(frame.kind)
    assert kinds == ["heartbeat", "body", "heartbeat"]


def test_trailing_bytes_after_last_field_are_a_warning(codec):
    # basic.ack (tag 1, multiple) plus two bytes no field accounts for
    frame = _decode_whole(codec, "0100010000000f003c0050000000000000000101beefce")
    assert frame.args == {"delivery_tag": 1, "multiple": True}
    assert [w.kind for w in frame.warnings] == ["trailing-bytes"]
