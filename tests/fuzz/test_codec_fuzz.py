"""Fuzz target 1, the frame codec: `decode_frame` on real frames (mutated: sizes, types, channels,
frame-ends, truncation, insertions, splices), on generated frames whose field tables have random
tags, lengths and nesting, and on random bytes; in every codec (0-9-1 in both field-table
dialects, 0-9), at an offset into the buffer.

Only the typed DecodeErrors may escape (never IndexError, struct.error, RecursionError,
UnicodeError...); an accepted frame re-checks (frame-end octet, size, channel, kind); an error
inside a well-framed payload says where the next frame starts; the fields render as
`amqpcap decode` renders them (JSON Lines and readable); bytes and bytearray decode alike."""

from __future__ import annotations

import pytest

from tests.fuzz import harness, targets
from tests.fuzz.mutators import DrawChooser, codec_input


def check_codec_frames(data):
    ch = DrawChooser(data)
    buf = codec_input(ch)
    name = ch.pick(targets.CODEC_NAMES)
    prefix = ch.raw(ch.int(0, 3)) if ch.chance(4) else b""
    with harness.example("codec", buf, ".frame"):
        targets.check_codec(targets.codec(name), prefix + buf, len(prefix))


@pytest.mark.parametrize("tier", harness.TIERS)
def test_codec(tier):
    harness.run(check_codec_frames, tier, examples=5000, share=0.2)
