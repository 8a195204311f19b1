"""Fuzz target 2, the stream decoder: whole captures through CaptureDecoder (TCP reassembly, AMQP
framing and resynchronisation, content assembly, records), under four settings (defaults, bodies
kept, the spec's field-table dialect, small limits: frame and resync caps, reassembly window,
pending records, close grace).

For every input: no exception escapes; every record follows the JSON Lines contract of
docs/decode.md and renders as `amqpcap decode` renders it; per connection and direction
stream_bytes == decoded_bytes + skipped_bytes, the issues' bytes_skipped add up to the summary's,
and no record lies past the stream's end (targets.decode_capture).

Then what each mutation cannot have touched, with frames identified by (sender, receiver, stream
offset, size, kind, channel, method, arguments), which neither the connection id (it hashes the
first packet's time) nor the choice of client side (damage may change it) enters:

- TCP segments of the clean samples (`test_stream_segments`), rewritten as a pcap: split into
  pieces, merged with the next one, retransmitted (also with different bytes), moved later: the
  reassembled streams are the original's, so the decode is the same (frames with their message
  summaries, and issues), except a conflicting retransmission, which must be reported; a move
  past three peer ACKs may be declared a gap, and then only what lies before it is compared.
  Dropped segments, changed payload bytes, AMQP frames with a corrupted type, channel, size or
  frame-end octet: every frame before the damage in that direction survives, and every frame of
  the other direction (unless the damage hit the protocol header, which picks the spec); a
  dropped segment with data after it is a `gap`, a bad frame-end or an undefined frame type a
  `framing` issue at that frame. The same conversations also run with the server on a port that
  is no AMQP port (found by the protocol header alone).
- Mutated capture files (`test_stream_captures`, the reader's mutants): the frames lying wholly in
  the stream bytes of the packet records before the first one the mutation touched survive (in a
  direction that needed resynchronisation, only if the frame after them does too: it confirmed
  them).
"""

from __future__ import annotations

import functools

import pytest

from tests.fuzz import harness, oracles, targets
from tests.fuzz.mutators import (
    CLEAN_SEEDS,
    PUBLIC_SEEDS,
    SEGMENT_MUTATORS,
    DrawChooser,
    conversation,
    corrupt_frame,
    endpoint,
    load,
    mutate_file,
    retarget,
    seeds,
    write_pcap,
)

SETTINGS = list(targets.SETTINGS)
OTHER_PORT = 15999


@functools.lru_cache(maxsize=None)
def original_segments(name: str, settings: str, port: int | None) -> list[dict]:
    segments = conversation(name).segments
    if port is not None:
        segments = retarget(segments, port)
    return targets.decode_capture(write_pcap(segments), settings, "original.pcap")[0]


@functools.lru_cache(maxsize=None)
def original_capture(name: str, settings: str) -> list[dict]:
    return targets.decode_capture(load(name).data, settings, "original.pcap")[0]


def _frames_for_corruption(records: list[dict]) -> list:
    return [(*oracles.sender(r), r["offset"], r["size"]) for r in records
            if r["kind"] in ("method", "header", "body", "heartbeat")]


def check_segment_mutants(data):
    ch = DrawChooser(data)
    name = ch.pick(CLEAN_SEEDS + [s for s in PUBLIC_SEEDS if s in seeds()])
    settings = ch.pick(SETTINGS)
    port = OTHER_PORT if ch.chance(5) else None
    original = original_segments(name, settings, port)
    conv = conversation(name)
    mutator = ch.pick(SEGMENT_MUTATORS)
    if mutator is corrupt_frame:
        mutant = corrupt_frame(conv, ch, _frames_for_corruption(original))
    else:
        mutant = mutator(conv, ch)
    segments = retarget(mutant.segments, port) if port is not None else mutant.segments
    if port is not None:
        remap = {endpoint(s.src): endpoint(t.src) for s, t in zip(conv.segments, retarget(conv.segments, port))}
        remap.update({endpoint(s.dst): endpoint(t.dst) for s, t in zip(conv.segments, retarget(conv.segments, port))})
        mutant.cut = {(remap[a], remap[b]): v for (a, b), v in mutant.cut.items()}
        mutant.expect = [(remap[a], remap[b], k, o) for a, b, k, o in mutant.expect]
    exact = mutant.exact and settings != "small-limits"  # its reassembly window is smaller than a move
    if port is not None and any(v is not None and v < 8 for v in mutant.cut.values()):
        # on no AMQP port only the protocol header makes a connection AMQP: damage there may
        # rightly leave the whole connection undecoded
        mutant.cut, mutant.expect = {}, []
    capture = write_pcap(segments)
    what = f"{name} ({settings}{f', server port {port}' if port else ''}): {mutant.what}"
    with harness.example("stream-segments", capture, ".pcap"):
        records, _ = targets.decode_capture(capture, settings)
        if exact:
            ignore = {"retransmission-conflict"}
            lost = oracles.missing(oracles.frames(original, True), oracles.frames(records, True))
            added = oracles.missing(oracles.frames(records, True), oracles.frames(original, True))
            if lost or added:
                raise AssertionError(f"{what}: the streams are the original's, but {len(lost)} frames were not "
                                     f"decoded (first {lost[:2]}) and {len(added)} new ones (first {added[:2]})")
            if oracles.issues(original, ignore) != oracles.issues(records, ignore):
                raise AssertionError(f"{what}: the streams are the original's, but the issues differ: "
                                     f"{oracles.missing(oracles.issues(records, ignore), oracles.issues(original, ignore))[:3]} "
                                     f"new, {oracles.missing(oracles.issues(original, ignore), oracles.issues(records, ignore))[:3]} gone")
        elif mutant.cut:
            targets.check_superset(original, records, mutant.cut, what, targets.without_syn(segments))
        decoded = {oracles.sender(r) for r in original if r["kind"] in oracles.FRAME_KINDS}
        expect = [e for e in mutant.expect if e[:2] in decoded
                  # with no close grace, a retransmission after the FINs may open a new connection
                  and not (settings == "small-limits" and e[2] == "retransmission-conflict")]
        targets.check_expected_issues(records, expect, what)


def check_capture_mutants(data):
    ch = DrawChooser(data)
    name = ch.pick(seeds())
    settings = ch.pick(SETTINGS)
    capture = load(name)
    mutant = mutate_file(capture, ch)
    suffix = ".pcap.gz" if mutant.data[:2] == b"\x1f\x8b" else ".pcapng" if capture.parsed.kind == "pcapng" else ".pcap"
    with harness.example("stream-captures", mutant.data, suffix):
        records, _ = targets.decode_capture(mutant.data, settings)
        if name in CLEAN_SEEDS + PUBLIC_SEEDS:
            segments = conversation(name).segments
            cut = targets.prefix_cut(segments, mutant.intact)
            targets.check_superset(original_capture(name, settings), records, cut, f"{name} ({settings}): {mutant.what}",
                                   targets.without_syn(segments))


@pytest.mark.parametrize("tier", harness.TIERS)
def test_stream_segments(tier):
    harness.run(check_segment_mutants, tier, examples=2000, share=0.2)


@pytest.mark.parametrize("tier", harness.TIERS)
def test_stream_captures(tier):
    harness.run(check_capture_mutants, tier, examples=1800, share=0.2)


def test_rewritten_samples_decode_as_the_samples():
    """The segment tests compare against the samples rewritten by write_pcap: that rewrite must
    decode to the sample's own frames and issues."""
    for name in CLEAN_SEEDS + [s for s in PUBLIC_SEEDS if s in seeds()]:
        rewritten = original_segments(name, "default", None)
        sample = original_capture(name, "default")
        assert oracles.frames(rewritten, True) == oracles.frames(sample, True), name
        assert oracles.issues(rewritten) == oracles.issues(sample), name
