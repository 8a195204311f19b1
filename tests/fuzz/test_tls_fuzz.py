"""Fuzz target 4, the TLS record layer (amqpcap.tls): the recorded TLS samples decoded with their
key logs, their TCP segments split, merged, moved, retransmitted (also with other bytes), dropped,
their payload bytes changed, TLS record headers corrupted, protected records' bytes flipped, the
capture cut short.

For every input: no exception escapes; every record follows the JSON Lines contract (a TLS
connection's say `"tls": true`) and renders; every byte is accounted at each layer (targets'
decode_capture, oracles.check_tls_accounting). Then what the mutation cannot have touched: the
same decode when the TCP streams are the original's; else every frame (of either direction)
completed by a packet earlier than the first one the mutation touched, and the issue the damage
must cause (a flipped protected record of a key-logged connection: tls-undecryptable)."""

from __future__ import annotations

import functools

import pytest

from tests.fuzz import harness, oracles, targets
from tests.fuzz.mutators import (
    TLS_MUTATORS,
    TLS_SEEDS,
    DrawChooser,
    conversation,
    endpoint,
    flip_ciphertext,
    write_pcap,
)
from tests.helpers.samples import SAMPLES, keys_for


@functools.lru_cache(maxsize=None)
def original(name: str) -> list[dict]:
    return targets.decode_capture(write_pcap(conversation(name).segments), "default", "original.pcap",
                                  keys=keys_for(SAMPLES / name))[0]


def _damage_ts(name: str, cut: dict) -> int | None:
    """When the first segment the mutation touched was sent (None: nothing is sure)."""
    times = []
    for s in conversation(name).segments:
        offset = cut.get((endpoint(s.src), endpoint(s.dst)))
        if offset is not None and s.payload and s.offset + len(s.payload) > offset:
            times.append(s.ts_ns)
    return min(times) if times else None


def check_tls_mutants(data):
    ch = DrawChooser(data)
    name = ch.pick(TLS_SEEDS)
    keys = keys_for(SAMPLES / name)
    before = original(name)
    mutator = ch.pick(TLS_MUTATORS)
    mutant = mutator(conversation(name), ch)
    capture = write_pcap(mutant.segments)
    what = f"{name}: {mutant.what}"
    with harness.example("tls-segments", capture, ".pcap"):
        records, _ = targets.decode_capture(capture, "default", keys=keys)
        if mutant.exact:
            lost = oracles.missing(oracles.frames(before, True), oracles.frames(records, True))
            added = oracles.missing(oracles.frames(records, True), oracles.frames(before, True))
            if lost or added:
                raise AssertionError(f"{what}: the streams are the original's, but {len(lost)} frames were not "
                                     f"decoded (first {lost[:2]}) and {len(added)} new ones (first {added[:2]})")
            return
        damage = _damage_ts(name, mutant.cut)
        if damage is not None:
            # (a content method's message may be completed by frames after the damage: not compared)
            safe = oracles.frames([r for r in before if r["kind"] in oracles.FRAME_KINDS and r["ts_last_ns"] < damage])
            lost = oracles.missing(safe, oracles.frames(records))
            if lost:
                raise AssertionError(f"{what}: {len(lost)} frames completed before the damage were lost (first {lost[:2]})")
        if mutator is flip_ciphertext and "byte" in mutant.what:
            (src, dst), = [k for k, v in mutant.cut.items() if v is not None]
            decrypted = any(r["kind"] in oracles.FRAME_KINDS and (r["client"], r["server"]) in ((src, dst), (dst, src))
                            for r in before)
            if decrypted and not any(r["kind"] == "issue" and r["issue_kind"] in ("tls-undecryptable", "tls-gap")
                                     for r in records):
                raise AssertionError(f"{what}: a flipped protected record of a decrypted connection was not reported")


@pytest.mark.parametrize("tier", harness.TIERS)
def test_tls_segments(tier):
    harness.run(check_tls_mutants, tier, examples=1200, share=0.15)


def test_the_seeds_decode_whole():
    """The rewritten seeds decode with their key logs to frames and no issue but alerts (the
    samples' stunnel and Erlang say decode_error and close_notify in theirs)."""
    for name in TLS_SEEDS:
        records = original(name)
        assert sum(r["kind"] == "method" for r in records) > 20, name
        assert {r["issue_kind"] for r in records if r["kind"] == "issue"} <= {"tls-alert", "tls-not-decoded"}, name
