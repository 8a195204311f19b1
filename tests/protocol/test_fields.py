"""The two ways arguments and properties are decoded from the spec agree: the straight-line
decoders compiler.py generates per method (what the interpreted build runs) and the loops over
field types of amqpcap.protocol.fields (what the compiled build runs). Compared through the codec, on
every golden frame of both specs, every truncation and random corruptions: same values, same
warnings, same errors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqpcap.protocol import codec as codec_module
from amqpcap.protocol.codec import Codec
from amqpcap.protocol.errors import DecodeError
from tests.protocol.golden_0_9 import HEADER_0_9, METHODS_0_9
from tests.protocol.golden_0_9_1 import METHODS_0_9_1

CODECS = {"0-9-1": Codec.for_version("0-9-1"), "0-9": Codec.for_version("0-9")}
FRAMES = [("0-9-1", case[2]) for case in METHODS_0_9_1] + [("0-9", case[2]) for case in METHODS_0_9]
def _header() -> str:
    """A basic content header with every property set (encoded by pamqp, an independent encoder)."""
    import datetime

    from pamqp import commands, frame, header
    properties = commands.Basic.Properties(
        content_type="text/plain", content_encoding="gzip", headers={"a": 1, "b": "x", "c": [1, "y"]},
        delivery_mode=2, priority=9, correlation_id="c-1", reply_to="r", expiration="60000",
        message_id="m-1", timestamp=datetime.datetime(2026, 11, 21, tzinfo=datetime.timezone.utc),
        message_type="t", user_id="u", app_id="app", cluster_id="")
    return frame.marshal(header.ContentHeader(0, 1234, properties), 1).hex()


PROPERTIES = _header()


def outcome(version: str, data: bytes, loops: bool):
    """What decoding gives: (kind, args or properties, warnings) or (error kind, detail, offset)."""
    before = codec_module.COMPILED
    codec_module.COMPILED = loops
    try:
        frame, end = CODECS[version].decode_frame(data)
    except DecodeError as error:
        return ("error", type(error).__name__, error.detail, error.offset, error.frame_end)
    finally:
        codec_module.COMPILED = before
    values = frame.args if frame.kind == "method" else getattr(frame, "properties", None)
    return (frame.kind, end, repr(values), [(type(w).__name__, w.detail, w.offset) for w in frame.warnings])


def agree(version: str, data: bytes) -> None:
    assert outcome(version, data, True) == outcome(version, data, False)


@pytest.mark.parametrize("version, hexdata", FRAMES)
def test_every_golden_frame_and_every_truncation_of_its_payload(version, hexdata, ):
    frame = bytes.fromhex(hexdata)
    agree(version, frame, )
    for cut in range(8, len(frame) - 1):  # the payload shortened, the frame re-sized
        payload = frame[7:cut]
        agree(version, frame[:3] + len(payload).to_bytes(4, "big") + payload + b"\xce", )


def test_content_headers():
    agree("0-9-1", bytes.fromhex(PROPERTIES), )
    agree("0-9", bytes.fromhex(HEADER_0_9[2]))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.sampled_from(FRAMES + [("0-9-1", PROPERTIES)]), st.data())
def test_corrupted_payloads(frame, data, ):
    version, hexdata = frame
    raw = bytearray(bytes.fromhex(hexdata))
    if len(raw) > 12:
        for _ in range(data.draw(st.integers(1, 4))):
            raw[data.draw(st.integers(11, len(raw) - 2))] = data.draw(st.integers(0, 255))
    agree(version, bytes(raw), )


def test_timestamps_are_typed_in_both_decoders():
    """The `timestamp` property (and any field of the spec's timestamp domain) is a Timestamp,
    from the generated decoders and from the loops alike."""
    from amqpcap.protocol.fieldtable import Timestamp
    data = bytes.fromhex(PROPERTIES)
    for loops in (True, False):
        before = codec_module.COMPILED
        codec_module.COMPILED = loops
        try:
            frame, _ = CODECS["0-9-1"].decode_frame(data)
        finally:
            codec_module.COMPILED = before
        stamp = frame.properties["timestamp"]
        assert type(stamp) is Timestamp and stamp.isoformat() == "2026-11-21T00:00:00Z", loops


def test_generated_decoders_are_made_only_by_the_build_that_runs_them():
    """The compiled build decodes with the loops and makes no generated decoder at start-up (they
    cost ~40 ms per process); the interpreted build makes them all up front."""
    codec = Codec.for_version("0-9-1")
    made = [entry[1] is not None for entry in codec._methods.values()]
    made += [entry[1] is not None for entry in codec._properties.values()]
    assert made and (not any(made) if codec_module.COMPILED else all(made))
