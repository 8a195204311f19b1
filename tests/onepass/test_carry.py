"""Connections carried from one run to the next (amqpcap.onepass.state, amqpcap.onepass.carry), without
Spark: the long recorded connection of data/samples cut into three nights (the first cut inside a
large body frame, with a publish unconfirmed and a delivery unacked) gives the same rows as one run
over the whole capture."""

from __future__ import annotations

import json
import struct
from collections import defaultdict

import pytest

from amqpcap.capture.packets import PacketParser
from amqpcap.capture.readers import read_records
from amqpcap.onepass.carry import NOT_RESUMED, CarryingDecoder
from amqpcap.settings import Settings
from amqpcap.tables.registry import CONNECTION_TABLES, DECODE_ISSUES, FRAMES, MESSAGES, STREAMS
from tests.helpers.samples import SAMPLES

LONG = SAMPLES / "long_connection.pcap.gz"
FACTS = json.loads((SAMPLES / "long_connection.expected.json").read_text())
CUTS = [cut["index"] for cut in FACTS["cuts"]]
TABLES = [t.name for t in (FRAMES, MESSAGES, DECODE_ISSUES, STREAMS) + CONNECTION_TABLES]
IGNORED = {"capture", "source", "provisional", "run_id"}  # which file a row came from differs, nothing else


def write_nights(folder, cuts=CUTS):
    """The capture cut at record indices: night0.pcap, night1.pcap..."""
    records = list(read_records(str(LONG)))
    edges = [0, *cuts, len(records)]
    paths = []
    for n, (start, end) in enumerate(zip(edges, edges[1:])):
        path = folder / f"night{n}.pcap"
        with open(path, "wb") as out:
            out.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1))
            for ts, _, data in records[start:end]:
                out.write(struct.pack("<IIII", ts // 10**9, ts % 10**9, len(data), len(data)) + data)
        paths.append(str(path))
    return paths


def run(path: str, saved: dict, settings: Settings = Settings()):
    """One night: (rows per table, states it saves, connections it resumed)."""
    rows = defaultdict(list)
    decoder = CarryingDecoder(settings, [path], lambda table, row: rows[table.name].append(row), saved=saved)
    parser, last = PacketParser(), None
    for ts, link, data in read_records(path):
        segment = parser.parse(ts, link, data)
        if segment is not None:
            decoder.feed(segment, 0)
        last = ts
    states = decoder.finish(last, path)
    return rows, states, {r.connection for r in decoder.resumed}


def nightly(paths, settings: Settings = Settings()) -> dict[str, list[dict]]:
    """The lake after running the nights in order: each resumed connection's provisional rows of
    the night before are replaced."""
    lake = defaultdict(list)
    saved: list = []
    for path in paths:
        rows, saved, resumed = run(path, saved, settings)
        for table in lake:
            lake[table] = [r for r in lake[table] if not (r.get("provisional") and r.get("connection") in resumed)]
        for table, new in rows.items():
            lake[table] += new
    return lake


def comparable(rows: list[dict]) -> list[str]:
    return sorted(json.dumps({k: v for k, v in r.items() if k not in IGNORED}, sort_keys=True, default=str)
                  for r in rows)


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    (path,) = write_nights(tmp_path_factory.mktemp("whole"), cuts=[])
    return nightly([path])


@pytest.fixture(scope="module")
def nights(tmp_path_factory):
    return nightly(write_nights(tmp_path_factory.mktemp("nights")))


@pytest.mark.parametrize("table", TABLES)
def test_three_nights_give_the_tables_of_one_run(whole, nights, table):
    assert comparable(nights[table]) == comparable(whole[table])


def test_the_carried_connection_is_one_connection_with_its_whole_story(nights):
    assert len({r["connection"] for r in nights["frames"]}) == 1
    (connection,) = nights["connections"]
    assert connection["end_reason"] == "close" and not connection["provisional"]
    publishes = nights["publishes"]
    assert len(publishes) == FACTS["messages"]["published"]
    assert all(p["confirm_outcome"] == "ack" and p["confirm_latency_ms"] is not None for p in publishes)
    assert all(d["queue"] is not None for d in nights["deliveries"])
    cut = FACTS["cuts"][0]["unacked_deliveries"][0]
    carried = [d for d in nights["deliveries"] if d["delivery_tag"] == cut["delivery_tag"] and d["channel"] == cut["channel"]]
    assert [d["outcome"] for d in carried] == ["ack"] and carried[0]["settle_latency_ms"] > 0
    assert not [r for rows in nights.values() for r in rows if r.get("provisional")]


def test_a_night_ends_with_provisional_rows_the_next_one_replaces(tmp_path):
    first, *_ = write_nights(tmp_path)
    rows, saved, _ = run(first, [])
    assert len(saved) == 1
    provisional = {table for table, new in rows.items() if any(r["provisional"] for r in new)}
    assert {"connections", "channels", "deliveries", "publishes", "streams", "heartbeats"} <= provisional
    (publish,) = [p for p in rows["publishes"] if p["provisional"]]
    assert publish["confirm_outcome"] == "unconfirmed"
    assert not any(r["provisional"] for r in rows["frames"] if r["kind"] == "method" and r["method"] == "basic.deliver")


def test_state_that_does_not_fit_starts_afresh_and_says_why(tmp_path):
    first, second, _ = write_nights(tmp_path)
    _, saved, _ = run(first, [])
    strict = Settings().replace(state={"max_gap_seconds": 0.000001})
    rows, _, resumed = run(second, saved, strict)
    assert resumed == set()
    (issue,) = [r for r in rows["decode_issues"] if r["issue_kind"] == NOT_RESUMED]
    assert "silent for" in issue["detail"] and "was not resumed" in issue["detail"]
    for state in saved:
        state.blob = state.blob[:-1]  # damaged: cannot be read
    rows, _, resumed = run(second, saved)
    assert resumed == set() and any(r["issue_kind"] == NOT_RESUMED for r in rows["decode_issues"])


def test_a_resumption_names_the_state_and_the_file_that_continued_it(tmp_path):
    first, second, _ = write_nights(tmp_path)
    _, saved, _ = run(first, [])
    decoder = CarryingDecoder(Settings(), [second], lambda table, row: None, saved=saved)
    parser = PacketParser()
    for ts, link, data in read_records(second):
        segment = parser.parse(ts, link, data)
        if segment is not None:
            decoder.feed(segment, 0)
    (resumption,) = decoder.resumed
    assert (resumption.saved_by, resumption.capture) == (first, second)
    assert resumption.connection == saved[0].connection


def test_a_credentials_frame_cut_by_the_end_of_a_run_is_not_saved():
    """A connection.start-ok split across two runs: its first part is never saved (it may hold the
    password); the next run skips the rest with an issue, and the connection goes on."""
    import zlib

    from amqpcap.capture.packets import Segment
    segments, parser = [], PacketParser()
    for ts, link, data in read_records(str(LONG)):
        segment = parser.parse(ts, link, data)
        if segment is not None:
            segments.append(segment)
    (n, start_ok), = [(i, s) for i, s in enumerate(segments) if s.payload[:3] == b"\x01\x00\x00"
                      and s.payload[7:11] == b"\x00\x0a\x00\x0b"]
    response = start_ok.payload.index(b"PLAIN") + 9  # PLAIN's response: "\0user\0password"
    cut = response + 14  # in the middle of the password
    head = Segment(start_ok.ts_ns, start_ok.src, start_ok.sport, start_ok.dst, start_ok.dport, start_ok.seq,
                   start_ok.ack, start_ok.flags, start_ok.payload[:cut])
    tail = Segment(start_ok.ts_ns + 1000, start_ok.src, start_ok.sport, start_ok.dst, start_ok.dport,
                   (start_ok.seq + cut) % 2**32, start_ok.ack, start_ok.flags, start_ok.payload[cut:])
    first = CarryingDecoder(Settings(), ["a.pcap"], lambda table, row: None)
    for segment in segments[:n] + [head]:
        first.feed(segment, 0)
    (state,) = first.finish(head.ts_ns, "a.pcap")
    secret = start_ok.payload[response + 9:cut]
    assert len(secret) == 5 and secret not in zlib.decompress(state.blob)
    rows = defaultdict(list)
    second = CarryingDecoder(Settings(), ["b.pcap"], lambda table, row: rows[table.name].append(row), saved=[state])
    for segment in [tail] + segments[n + 1:]:
        second.feed(segment, 0)
    second.finish(None, "b.pcap")
    assert [r.connection for r in second.resumed] == [state.connection]
    (issue,) = [r for r in rows["decode_issues"] if "credentials" in (r["detail"] or "")]
    assert issue["bytes_skipped"] == len(start_ok.payload) and issue["issue_kind"] == "gap"
    methods = [r["method"] for r in rows["frames"] if r["kind"] == "method"]
    assert "connection.tune-ok" in methods and "connection.start-ok" not in methods


def test_the_carried_body_keeps_the_frames_received_not_a_lost_one(tmp_path):
    """A message still open when a run ends carries the body it has so far (its hash resumes from
    it next run): a body frame's bytes, not those of a large frame that streamed in and was then
    lost (a bad frame-end octet)."""
    import io
    import pickle
    import zlib

    from tests.fuzz.corpus import build as crafted
    first = bytes(range(256)) * 4
    lost = crafted.frame(3, 1, bytes(70_000))[:-1] + b"\x00"  # streamed (64 KiB or more), then wrong
    stream = (crafted.HEADER + crafted.publish() + crafted.content_header(len(first) + 70_000 + 10)
              + crafted.frame(3, 1, first) + lost)
    segments = crafted.conversation([stream[i:i + 1448] for i in range(0, len(stream), 1448)])
    path = tmp_path / "open.pcap"
    path.write_bytes(crafted.write_pcap([s for s in segments if not s.flags & crafted.FIN]))  # left open
    _, (state,), _ = run(str(path), [])
    unpickler = pickle.Unpickler(io.BytesIO(zlib.decompress(state.blob)))
    unpickler.persistent_load = lambda _: None  # (the analytics objects: not looked at here)
    data, _ = unpickler.load()
    (content,) = data["amqp"]["contents"].values()
    assert (content["received"], content["intact"]) == (len(first), False)
    assert content["received_bytes"] == first


def test_a_connection_whose_next_run_sees_the_server_first_resumes_the_right_way_round():
    """The saved connection's endpoint A is the side its run saw first; a next run whose first
    packet comes from the other side has its directions swapped: the halves, the readers, the
    client, the SYN's side and the FINs are restored the other way round, and the two runs give the
    frames and stream facts one run over the whole conversation gives."""
    from amqpcap.capture.packets import Segment
    from tests.fuzz.corpus.build import HEADER, content_header, method, publish, shortstr
    from tests.fuzz.mutators import frame
    client = (bytes([10, 0, 0, 1]), 40000)
    server = (bytes([10, 0, 0, 2]), 5672)
    start = method(10, 10, b"\x00\x09" + struct.pack(">I", 0) + struct.pack(">I", 5) + b"PLAIN"
                   + struct.pack(">I", 5) + b"en_US")
    talk = [(client, HEADER), (server, start), (client, method(10, 40, shortstr(b"/") + shortstr(b"") + b"\x00")),
            (server, method(10, 41, shortstr(b""))), (client, publish() + content_header(5) + frame(3, 1, b"hello")),
            (server, frame(8, 0, b"")), (client, frame(8, 0, b""))]
    seq = {client: 1000, server: 5000}
    segments = [Segment(1_700_000_000 * 10**9, *client, *server, 999, 0, 0x02, b""),
                Segment(1_700_000_000 * 10**9 + 500, *server, *client, 4999, 1000, 0x12, b"")]
    for n, (side, data) in enumerate(talk):
        other = server if side == client else client
        t = 1_700_000_000 * 10**9 + 1000 * (n + 1)
        segments.append(Segment(t, *side, *other, seq[side], seq[other], 0x18, data))
        seq[side] += len(data)
    segments.append(Segment(1_700_000_001 * 10**9, *client, *server, seq[client], seq[server], 0x11, b""))
    cut = 7  # night 2 begins with the server's heartbeat

    def night(items, name, saved=()):
        rows = defaultdict(list)
        decoder = CarryingDecoder(Settings(), [name], lambda table, row: rows[table.name].append(dict(row)),
                                  saved=saved)
        for item in items:
            decoder.feed(item, 0)
        return rows, decoder.finish(items[-1].ts_ns, name), decoder

    assert segments[cut].sport == 5672
    whole, _, _ = night(segments, "whole.pcap")
    first, states, _ = night(segments[:cut], "a.pcap")
    second, _, resumed = night(segments[cut:], "b.pcap", saved=states)
    assert resumed.resumed
    frames = [(r["direction"], r["kind"], r["method"], r["stream_offset"]) for r in first["frames"] + second["frames"]]
    assert frames == [(r["direction"], r["kind"], r["method"], r["stream_offset"]) for r in whole["frames"]]
    facts = ("client", "server", "client_decided_by", "syn_seen", "end_reason", "c2s_stream_bytes",
             "c2s_decoded_bytes", "s2c_stream_bytes", "s2c_decoded_bytes", "c2s_frames", "s2c_frames")
    (one,), (two,) = whole["streams"], second["streams"]
    assert {k: two[k] for k in facts} == {k: one[k] for k in facts}


def test_a_state_saved_by_0_2_0_names_its_classes_where_they_lived_then():
    """Before the package had wings, the saved analytics objects' classes were amqp_decode.analytics.*
    and field-table timestamps amqp_decode.fieldtable.Timestamp: a lake carried across the upgrade
    still resumes them; anything else stays refused."""
    import io
    import pickle

    from amqpcap.onepass.state import _Unpickler
    from amqpcap.protocol.fieldtable import Timestamp
    from amqpcap.rules.deliveries import DeliveryRules
    old_timestamp = b"camqp_decode.fieldtable\nTimestamp\n(I1700000000\ntR."  # protocol 0: GLOBAL, then a call
    value = _Unpickler(io.BytesIO(old_timestamp)).load()
    assert type(value) is Timestamp and value == 1700000000
    assert _Unpickler(io.BytesIO(b"camqp_decode.analytics.deliveries\nDeliveryRules\n.")).load() is DeliveryRules
    with pytest.raises(pickle.UnpicklingError):
        _Unpickler(io.BytesIO(b"cos\nsystem\n.")).load()
    with pytest.raises(pickle.UnpicklingError):
        _Unpickler(io.BytesIO(b"camqp_decode.state\nSavedState\n.")).load()


def test_a_finding_carried_across_nights_is_one_finding(tmp_path):
    """With limits the long connection crosses (its RPCs, bodies, silences and deliveries held), each
    finding is provisional in the nights that end with the connection open and, in the lake, one row
    equal to a single run's: not one per night."""
    loud = Settings().replace(findings={"slow_rpc_ms": 0.001, "large_message_bytes": 1000, "ack_held_seconds": 0.001,
                                        "missed_heartbeat_intervals": 0.001})
    for folder in ("whole", "nights"):
        (tmp_path / folder).mkdir()
    (path,) = write_nights(tmp_path / "whole", cuts=[])
    once = nightly([path], loud)["findings"]
    nights = nightly(write_nights(tmp_path / "nights"), loud)["findings"]
    assert {f["kind"] for f in once} >= {"slow-rpc", "large-message", "consumer-ack-timeout"}
    assert comparable(nights) == comparable(once)
    assert len({f["finding_id"] for f in nights}) == len(nights) and not any(f["provisional"] for f in nights)
    first, *_ = write_nights(tmp_path / "nights")
    rows, _, _ = run(first, [], loud)
    assert rows["findings"] and all(f["provisional"] for f in rows["findings"])
