"""`amqpcap decode` as a focused tshark: filters, time order, connection ends, the readable view.

Every filter is checked against an independent computation over the unfiltered --jsonl output of
real captures (the samples and the public captures in ../shared/captures/public)."""

from __future__ import annotations

import bisect
import json
from collections import Counter, defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqpcap.cli import main
from amqpcap.connection.decoder import CaptureDecoder
from amqpcap.connection.record import CONNECTION_END
from amqpcap.decodeview.ends import ConnectionEnds
from amqpcap.decodeview.order import TimeOrder
from amqpcap.decodeview.readable import Readable, value_text
from amqpcap.decodeview.where import WhereError, compile_where
from tests.helpers.captures import ALL_SAMPLES, sample_id
from tests.helpers.samples import SAMPLES, SHARED

PUBLIC = sorted((SHARED / "captures" / "public").glob("*.pcap"))
CAPTURES = ALL_SAMPLES + PUBLIC
IDS = [sample_id(p) if p.is_relative_to(SAMPLES) else p.name for p in CAPTURES]


def run(capfdbinary, *argv):
    code = main(["decode", *map(str, argv)])
    out, err = capfdbinary.readouterr()
    return code, out.decode(), err.decode()


def jsonl(capfdbinary, *argv) -> list[dict]:
    code, out, err = run(capfdbinary, "--jsonl", "--quiet", *argv)
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines()]


def canonical(records) -> Counter:
    return Counter(json.dumps(r, sort_keys=True) for r in records)


# -- time order -----------------------------------------------------------------------------------

@pytest.mark.parametrize("capture", CAPTURES, ids=IDS)
def test_time_order_is_the_same_records_sorted(capfdbinary, capture):
    ordered = jsonl(capfdbinary, capture)
    unordered = jsonl(capfdbinary, "--no-sort", capture)
    times = [r["ts_ns"] for r in ordered]
    assert times == sorted(times)
    assert canonical(ordered) == canonical(unordered)


@pytest.mark.parametrize("capture", CAPTURES, ids=IDS)
def test_the_watermark_never_releases_a_record_too_early(capture):
    """A watermark after every batch (the CLI takes one every few hundred records): nothing comes
    later than what was released, so nothing is late, on every capture; but for the one kind
    amqpcap.decodeview.order names: a run of encrypted records not decrypted, told as one issue
    when it ends, timed by its first record (here, TLS samples decoded without their key logs)."""
    decoder = CaptureDecoder()
    order = TimeOrder(decoder, cap=10**9, every=1)
    ends = ConnectionEnds()
    written, released_early = [], 0
    for batch in decoder.batches([str(capture)], ends=True):
        released = order.feed(ends.apply(batch, decoder.now_ns), lambda r: r)
        released_early += len(released)
        written += released
    written += order.finish()
    late, latest = [], -1
    for record in written:
        if record.ts_ns < latest:
            late.append(record)
        latest = max(latest, record.ts_ns)
    assert order.late == len(late)
    assert all(r.kind == "issue" and r["issue_kind"] in ("tls-not-decoded", "tls-undecryptable") for r in late)
    assert bool(late) <= (capture.parent.name == "tls")
    if capture.name in ("concurrent.pcap", "rabbitmq_c.pcap", "long_connection.pcap.gz"):
        assert released_early > 0  # the watermark did release records before the end


def test_a_full_buffer_writes_the_oldest_and_counts_what_comes_late(capfdbinary):
    # (records come sorted within a batch of the decoder's: what comes late comes in a later batch,
    # here the connections' ends, made after the close grace but timed by their last packets)
    capture = SAMPLES / "connection_errors.pcap"
    code, out, err = run(capfdbinary, "--jsonl", "--sort-buffer", "3", capture)
    records = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and canonical(records) == canonical(jsonl(capfdbinary, capture))
    times = [r["ts_ns"] for r in records]
    late = sum(1 for i, t in enumerate(times) if t < max(times[:i], default=t))
    assert late > 0 and f"{late} records written out of time order" in err


def test_an_untimed_record_keeps_its_place_among_the_held():
    """Damage at the very end of a file, with no packet after it, has no time: it goes after the
    latest record held (or the last written), neither first nor lost."""
    from amqpcap.connection.decoder import CaptureDecoder
    order = TimeOrder(CaptureDecoder(), cap=2)  # a decoder that has read nothing: no watermark, only the cap releases
    assert order.feed([{"ts_ns": 5}, {"ts_ns": 3}, {"ts_ns": None, "n": 1}], lambda r: (r["ts_ns"], r.get("n"))) \
        == [(3, None)]
    assert order.forced == 1 and order.finish() == [(5, None), (None, 1)]
    assert order.feed([{"ts_ns": None, "n": 2}, {"ts_ns": 9}], lambda r: (r["ts_ns"], r.get("n"))) == []
    assert order.finish() == [(None, 2), (9, None)] and order.late == 0


def _Quiet():
    """A decoder at packet time `now_ns` (set it) with no connection open: its watermark is now_ns."""
    from amqpcap.connection.decoder import CaptureDecoder, SegmentDecoder
    from amqpcap.settings import Settings
    decoder = CaptureDecoder()
    decoder.segments = SegmentDecoder(Settings(), [])
    return decoder


class _OneList:
    """The time order as one sorted list into which every record is inserted after those of its
    time (bisect_right), the watermark and the cap releasing its front: what TimeOrder must give."""

    def __init__(self, cap):
        self.cap, self.times, self.held, self.last, self.late, self.forced = cap, [], [], None, 0, 0

    def feed(self, batch, low):
        top = self.times[-1] if self.times else -1
        for record in batch:
            ts = record["ts_ns"] if record["ts_ns"] is not None else top if top >= 0 else (self.last or 0)
            at = bisect.bisect_right(self.times, ts)
            self.times.insert(at, ts)
            self.held.insert(at, record["n"])
            top = max(top, ts)
        out = self._release(bisect.bisect_right(self.times, low)) if low is not None else []
        if len(self.times) > self.cap:
            self.forced += len(self.times) - self.cap
            out += self._release(len(self.times) - self.cap)
        return out

    def _release(self, end):
        if end and self.last is not None:
            self.late += sum(1 for t in self.times[:end] if t < self.last)
        if end:
            self.last = max(self.times[end - 1], self.last if self.last is not None else self.times[end - 1])
        out, self.times, self.held = self.held[:end], self.times[end:], self.held[end:]
        return out


@settings(max_examples=300, deadline=None, derandomize=True)
@given(batches=st.lists(st.tuples(st.lists(st.one_of(st.none(), st.integers(0, 30)), min_size=1, max_size=8),
                                  st.one_of(st.none(), st.integers(0, 30))), max_size=12),
       cap=st.sampled_from([1, 2, 3, 5, 8, 10**6]))
def test_the_time_order_is_one_sorted_list_with_late_records_inserted(batches, cap):
    """Records that come after later ones are held apart and merged in when released: the output,
    batch by batch, and the counts of late and forced records are those of one list into which
    each record is inserted in its place."""
    decoder = _Quiet()
    order, reference = TimeOrder(decoder, cap=cap, every=1), _OneList(cap)
    for batch, now in _numbered(batches):
        decoder.now_ns = now
        assert order.feed(batch, lambda r: r["n"]) == reference.feed(batch, now)
    assert order.finish() == reference._release(len(reference.times))
    assert (order.late, order.forced) == (reference.late, reference.forced)


def _numbered(batches):
    """(batch of records {"ts_ns", "n"}, the watermark after it) for (times, watermark) pairs,
    the records numbered from 1 across the batches."""
    n = 0
    for times, now in batches:
        batch = []
        for ts in times:
            n += 1
            batch.append({"ts_ns": ts, "n": n})
        yield batch, now


def _into(record, chunk, fill):
    """Record n's rendering, b"<n>;" (none for n = 0), as TimeOrder's `into` writes one."""
    if record["n"] == 0:
        return fill
    text = f"{record['n']};".encode()
    if fill + len(text) > len(chunk):
        return -len(text)
    chunk[fill:fill + len(text)] = text
    return fill + len(text)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(batches=st.lists(st.tuples(st.lists(st.one_of(st.none(), st.integers(0, 30)), min_size=1, max_size=8),
                                  st.one_of(st.none(), st.integers(0, 30))), max_size=12),
       cap=st.sampled_from([1, 2, 3, 5, 8, 10**6]), chunk_bytes=st.sampled_from([1, 3, 8, 64, 1 << 20]))
def test_renderings_held_in_runs_come_out_as_one_sorted_list_gives_them(batches, cap, chunk_bytes):
    """With `into`, the renderings of records that come in order are written one after another
    into chunks (a rendering bigger than a chunk gets one of its own) and given out as views of
    them: joined, batch by batch, the bytes of the reference's renderings; the late and forced
    counts the same."""
    decoder = _Quiet()
    order, reference = TimeOrder(decoder, cap=cap, every=1, into=_into, chunk_bytes=chunk_bytes), _OneList(cap)

    def text(numbers):
        return b"".join(f"{k};".encode() for k in numbers)

    for batch, now in _numbered(batches):
        decoder.now_ns = now
        out = order.feed(batch, lambda r: f"{r['n']};".encode())
        assert b"".join(out) == text(reference.feed(batch, now))
    assert b"".join(order.finish()) == text(reference._release(len(reference.times)))
    assert (order.late, order.forced) == (reference.late, reference.forced)


def test_a_record_into_writes_nothing_for_is_dropped():
    decoder = _Quiet()
    order = TimeOrder(decoder, cap=10**6, every=1, into=_into, chunk_bytes=4)
    decoder.now_ns = 10
    out = order.feed([{"ts_ns": 1, "n": 1}, {"ts_ns": 2, "n": 0}, {"ts_ns": 3, "n": 3}], lambda r: None)
    assert b"".join(out) == b"1;3;" and order.seq == 2


@pytest.mark.parametrize("into, chunk_bytes", [(_into, 16), (_into, 4096), (_into, 1 << 20), (None, 0)])
def test_the_order_stays_right_past_the_forgetting_of_what_was_given_out(into, chunk_bytes):
    """Thousands of records, some late, released a few hundred at a time: what was given out is
    forgotten now and then (the times, the renderings, the chunks of runs), and every rendering
    or view given out, kept to the end, still holds what it held."""
    decoder = _Quiet()
    order, reference = TimeOrder(decoder, cap=10**6, every=1, into=into, chunk_bytes=chunk_bytes), _OneList(10**6)
    given, expected, n = [], [], 0
    for step in range(60):
        batch = []
        for k in range(200):
            n += 1
            ts = step * 200 + k - (150 if k % 50 == 7 else 0)  # every fiftieth comes late
            batch.append({"ts_ns": ts, "n": n})
        decoder.now_ns = step * 200 - 300
        given += order.feed(batch, lambda r: f"{r['n']};".encode())
        expected += reference.feed(batch, decoder.now_ns)
    given += order.finish()
    expected += reference._release(len(reference.times))
    assert order.late == reference.late
    assert b"".join(given) == b"".join(f"{k};".encode() for k in expected)
    assert sorted(expected) == list(range(1, n + 1))


# -- connection ends --------------------------------------------------------------------------------

def test_a_port_reuses_end_is_timed_by_the_reusing_syn_however_records_are_batched(tmp_path, capfdbinary):
    """The decoder hands records on in batches of many packets; a batch ends at the packet that
    ended a connection, whose time the connection-end record of a port reuse takes. Here the
    reuse comes a tenth of a second into a batch, and another connection's heartbeats follow."""
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw
    from scapy.utils import wrpcap

    header, heartbeat = b"AMQP\x00\x00\x09\x01", b"\x08\x00\x00\x00\x00\x00\x00\xce"
    packets = []

    def add(t, sport, flags, seq, ack=0, payload=b"", reply=False):
        ip = IP(src="127.0.0.1", dst="127.0.0.2")
        tcp = TCP(sport=sport, dport=5672, flags=flags, seq=seq, ack=ack)
        if reply:
            ip = IP(src="127.0.0.2", dst="127.0.0.1")
            tcp = TCP(sport=5672, dport=sport, flags=flags, seq=seq, ack=ack)
        packet = Ether() / ip / tcp / Raw(payload) if payload else Ether() / ip / tcp
        packet.time = 1_700_000_001 + t
        packets.append(packet)

    for sport, t in ((40000, 0.0), (40001, 0.01)):
        add(t, sport, "S", 1000)
        add(t + 0.001, sport, "SA", 5000, 1001, reply=True)
        add(t + 0.002, sport, "A", 1001, 5001)
        add(t + 0.003, sport, "PA", 1001, 5001, header)
    add(0.1, 40000, "S", 900_000)  # 40000 again, a new ISN: the first connection ends (port reuse)
    for i in range(3):
        add(0.2 + 0.1 * i, 40001, "PA", 1009 + 8 * i, 5001, heartbeat)
    capture = tmp_path / "reuse.pcap"
    wrpcap(str(capture), packets)

    ends = [r for r in jsonl(capfdbinary, capture) if r["kind"] == "connection-end"]
    reused = [r for r in ends if r["end_reason"] == "port-reuse"]
    assert len(reused) == 1 and reused[0]["client"] == "127.0.0.1:40000"
    assert reused[0]["ts_ns"] == 1_700_000_001_100_000_000  # the reusing SYN, not a later packet
    assert sorted(r["ts_ns"] for r in ends) == [1_700_000_001_100_000_000, 1_700_000_001_400_000_000]


def test_every_amqp_connection_ends_once_after_its_records(capfdbinary):
    from tests.helpers.tabulated import tabulate
    for capture in CAPTURES:
        records = jsonl(capfdbinary, capture)
        ends = [r for r in records if r["kind"] == "connection-end"]
        connections = {r["connection"] for r in records if r["connection"] is not None}
        assert sorted(e["connection"] for e in ends) == sorted(connections), capture
        position = {e["connection"]: i for i, e in enumerate(records) if e["kind"] == "connection-end"}
        assert all(i < position[r["connection"]] for i, r in enumerate(records)
                   if r["connection"] is not None and r["kind"] != "connection-end"), capture
        # the same reason as the lake's connections table, which computes it from the rows (it
        # also has the connections that carried nothing, e.g. a refused SYN: no end record there)
        table = {row["connection"]: row["end_reason"] for row in tabulate([str(capture)])["connections"]
                 if row["connection"] in connections}
        assert {e["connection"]: e["end_reason"] for e in ends} == table, capture
        for end in ends:
            assert end["ts_ns"] == end["ts_last_ns"] >= end["first_ts_ns"]
            assert set(end["directions"]) <= {"C>S", "S>C", "?"}


def test_end_record_contents(capfdbinary):
    ends = {r["end_reason"]: r for r in jsonl(capfdbinary, SAMPLES / "connection_errors.pcap")
            if r["kind"] == "connection-end" and r["close"] and r["close"]["reply_code"] == 320}
    forced = ends["close"]
    assert forced["close"]["dir"] == "S>C" and forced["tcp_end"] in ("fin", "rst")
    assert forced["directions"]["C>S"]["frames"] > 0 and forced["duration_s"] > 0
    killed = [r for r in jsonl(capfdbinary, SAMPLES / "abrupt_kill.pcap") if r["kind"] == "connection-end"]
    assert [(k["end_reason"], k["close"]) for k in killed] == [("rst", None)]
    _, out, _ = run(capfdbinary, "--quiet", SAMPLES / "abrupt_kill.pcap")
    assert out.splitlines()[-1].endswith("connection end: rst after 0.312 s; C>S 16 frames 702 bytes; "
                                         "S>C 8 frames 676 bytes")


# -- filters ----------------------------------------------------------------------------------------

def decode_jsonl(*argv) -> list[dict]:
    """`amqpcap decode --jsonl --quiet ARGV` in this process (for module-scoped fixtures)."""
    import contextlib
    import io
    import sys

    class Stdout:
        buffer = io.BytesIO()
    saved = sys.stdout
    sys.stdout = Stdout()
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            assert main(["decode", "--jsonl", "--quiet", *map(str, argv)]) == 0
    finally:
        sys.stdout = saved
    return [json.loads(line) for line in Stdout.buffer.getvalue().splitlines()]


@pytest.fixture(scope="module")
def everything():
    """Unfiltered records of all samples and public captures (each decoded on its own)."""
    return {capture: decode_jsonl(capture) for capture in CAPTURES}


def content_frames(records: list[dict]) -> dict[int, int]:
    """Index of each content header/body -> index of its method, found from stream offsets alone:
    per connection, direction and channel, a header or body belongs to the content method before
    it unless the decoder reported it as unexpected (an issue at its offset)."""
    unexpected = {(r["connection"], r["dir"], r["offset"]) for r in records
                  if r["kind"] == "issue" and r["issue_kind"] in ("unexpected-header", "unexpected-body")}
    lanes = defaultdict(list)
    for i, r in enumerate(records):
        if r["kind"] in ("method", "header", "body"):
            lanes[(r["connection"], r["dir"], r["channel"])].append(i)
    owner = {}
    for indices in lanes.values():
        current = None
        for i in sorted(indices, key=lambda i: records[i]["offset"]):
            r = records[i]
            if r["kind"] == "method":
                current = i if "message" in r else None
            elif current is not None and (r["connection"], r["dir"], r["offset"]) not in unexpected:
                owner[i] = current
            else:
                current = None
    return owner


def expected(records, test):
    """What a filter must give: the records the test selects, content frames with their method."""
    owner = content_frames(records)
    return [r for i, r in enumerate(records) if (test(records[owner[i]]) if i in owner else test(r))]


def is_error(r):
    if r["kind"] == "issue":
        return True
    if r["kind"] == "connection-end":
        return r["end_reason"] not in ("close", "capture-end")
    if r["kind"] != "method":
        return False
    if r["method"] in ("channel.close", "connection.close"):
        return r["args"]["reply_code"] not in (0, 200)
    return r["method"] == "basic.return" or (r["method"] == "basic.nack" and r["dir"] == "S>C")


FILTERS = [
    (["--channel", "1"], lambda r: r["channel"] == 1),
    (["--channel", "0", "--channel", "2"], lambda r: r["channel"] in (0, 2)),
    (["--method", "basic.*"], lambda r: r["kind"] == "method" and r["method"].startswith("basic.")),
    (["--method", "queue.declare*", "--method", "*.close"],
     lambda r: r["kind"] == "method" and (r["method"] in ("queue.declare", "queue.declare-ok")
                                         or r["method"].endswith(".close"))),
    (["--queue", "amqpcap.*"], lambda r: r["kind"] == "method" and r["args"].get("queue", "").startswith("amqpcap.")),
    (["--exchange", ""], lambda r: r["kind"] == "method" and "" in (r["args"].get("exchange"),
                                                                     r["args"].get("source"), r["args"].get("destination"))),
    (["--exchange", "amqpcap.src"], lambda r: r["kind"] == "method" and "amqpcap.src" in (
        r["args"].get("exchange"), r["args"].get("source"), r["args"].get("destination"))),
    (["--exchange", "amq.t?pic"], lambda r: r["kind"] == "method" and r["args"].get("exchange") == "amq.topic"),
    (["--errors"], is_error),
    (["--where", 'args.reply_code >= 400 and method == "channel.close"'],
     lambda r: r.get("method") == "channel.close" and r["args"]["reply_code"] >= 400),
    (["--where", "message.body_size > 1000 or kind == 'heartbeat'"],
     lambda r: r["kind"] == "heartbeat" or ((r.get("message") or {}).get("body_size") or 0) > 1000),
    (["--where", 'message.properties.headers["x-death"] != null or message.properties.timestamp'],
     lambda r: bool(r.get("message") and r["message"]["properties"]
                    and ("x-death" in (r["message"]["properties"].get("headers") or {})
                         or r["message"]["properties"].get("timestamp")))),
    (["--where", 'not (dir == "C>S") and kind in ["method", "heartbeat"] and channel != 0'],
     lambda r: r["dir"] != "C>S" and r["kind"] in ("method", "heartbeat") and r["channel"] != 0),
    (["--where", 'method ~ "*.*-ok" and detail == null', "--channel", "1"],
     lambda r: r["channel"] == 1 and r["kind"] == "method" and r["method"].endswith("-ok")),
    (["--where", 'detail =~ "^[0-9]+ bytes not captured"'],
     lambda r: r["kind"] == "issue" and r["detail"].split(" ")[0].isdigit() and " bytes not captured" in r["detail"]),
]


@pytest.mark.parametrize("argv, test", FILTERS, ids=[" ".join(f[0]) for f in FILTERS])
def test_each_filter_selects_what_the_unfiltered_output_says(capfdbinary, everything, argv, test):
    selected_somewhere = False
    for capture, records in everything.items():
        want = expected(records, test)
        got = jsonl(capfdbinary, *argv, capture)
        assert got == want, (capture, len(got), len(want))
        selected_somewhere |= bool(got)
    assert selected_somewhere


def test_connection_filter_takes_the_printed_prefix(capfdbinary, everything):
    records = everything[SAMPLES / "rabbitmq_c.pcap"]
    ids = sorted({r["connection"] for r in records})
    assert len(ids) > 3
    for connection in ids:
        got = jsonl(capfdbinary, "--connection", connection[:8], SAMPLES / "rabbitmq_c.pcap")
        assert got == [r for r in records if r["connection"] == connection]
    _, out, _ = run(capfdbinary, "--quiet", "--connection", ids[0][:6], SAMPLES / "rabbitmq_c.pcap")
    assert out and all(f" {ids[0][:8]} " in line for line in out.splitlines())


def test_errors_in_the_readable_view(capfdbinary):
    _, out, _ = run(capfdbinary, "--quiet", "--errors", SAMPLES / "returns_nack_reject.pcap")
    lines = out.splitlines()
    assert len(lines) == 1 and "basic.return reply_code=312 NO_ROUTE" in lines[0] and "| 11 bytes" in lines[0]


def test_bad_expressions_and_option_clashes_are_usage_errors(capfdbinary):
    capture = SAMPLES / "heartbeats.pcap"
    for argv, message in [
        (["--where", "args.reply_code >="], "--where: expected a field name or a value at column 19, found the end"),
        (["--where", "method == 'a' junk"], "--where: unexpected 'junk' at column 15"),
        (["--where", "method ~ args"], "takes a string literal"),
        (["--where", "detail =~ '('"], "bad regular expression"),
        (["--where", "a = 1"], "unexpected '=' at column 3"),
        (["--stats", "--errors"], "--errors: --stats summarises every connection"),
        (["--json"], "--json goes with --stats"),
        (["--jsonl", "--width", "20"], "--width: only for the readable view"),
        (["--jsonl", "--frames"], "--frames: only for the readable view"),
    ]:
        code, out, err = run(capfdbinary, *argv, capture)
        assert code == 2 and not out and message in err and err.count("\n") == 1, (argv, err)


def test_where_grammar():
    record = {"kind": "method", "method": "channel.close", "channel": 3, "dir": "S>C",
              "args": {"reply_code": 404, "reply_text": "NOT_FOUND - no queue 'q'", "flag": True,
                       "table": {"x-death": [{"count": 2}]}}}
    for text, want in [
        ("args.reply_code == 404", True), ("args.reply_code == 404.0", True), ("args.flag == 1", False),
        ("args.flag", True), ("not args.missing", True), ("args.missing == null", True),
        ("args.reply_code > 'a'", False), ("args.reply_text ~ 'NOT_FOUND*'", True),
        ("args.reply_text =~ 'queue .q.$'", True), ('"no queue" in args.reply_text', True),
        ("channel in [1, 2, 3]", True), ("channel not in [1, 2, 3]", False),
        ('"x-death" in args.table', True), ('args.table["x-death"][0].count >= 2', True),
        ("args.table.x-death[5].count", False), ("(channel == 3 or channel == 4) and dir == 'S>C'", True),
        ("channel == 4 or channel == 3 and dir == 'C>S'", False), ("args.reply_text == 'a\\'b'", False),
    ]:
        assert compile_where(text)(record) is want, text
    for bad in ["", "(", "a ==", "a b", "[1, 2", "a.1", "x in", "a ~ 'x' ~ 'y'", "'unterminated"]:
        with pytest.raises(WhereError):
            compile_where(bad)


# -- the readable view --------------------------------------------------------------------------------

def test_one_line_per_message_and_every_frame_with_frames(capfdbinary, everything):
    capture = SAMPLES / "rich_properties.pcap"
    records = everything[capture]
    owned = len(content_frames(records))
    _, out, _ = run(capfdbinary, "--quiet", capture)
    assert len(out.splitlines()) == len(records) - owned
    _, frames, _ = run(capfdbinary, "--quiet", "--frames", capture)
    assert len(frames.splitlines()) == len(records)
    publish = next(line for line in out.splitlines() if "basic.publish" in line and "| 21 bytes" in line)
    assert ("basic.publish exchange=\"\" routing_key=amqpcap.rich mandatory=false immediate=false | 21 bytes, "
            "content_type=application/json, content_encoding=identity, headers={S_longstr=\"héllo wörld\", "
            "T_timestamp=2023-11-14T22:13:20Z, b_int8=-128,") in publish
    assert "timestamp=2023-11-14T22:13:20Z, type=rich.test" in publish and ", sha256=9de240cb58f9" in publish
    assert any(line.endswith("header basic body_size=0") for line in frames.splitlines())
    assert any(line.endswith("body 21 bytes") for line in frames.splitlines())


@pytest.mark.parametrize("capture", CAPTURES, ids=IDS)
def test_folded_content_is_every_record_but_the_content_frames(capture):
    """The one-line-per-message view's decoder (fold_content) makes no record of a content
    method's header and body frames. Everything else is as the full decoder makes it, the method's
    message adds when its last content frame came, the stats count the frames as before, and every
    connection ends the same (the client's last frame may be a body)."""
    full, folded = CaptureDecoder(), CaptureDecoder(fold_content=True)
    records = list(full.decode([str(capture)], ends=True))
    owner = content_frames(records)
    last: dict[int, int] = {}
    for frame, method in owner.items():
        last[method] = max(last.get(method, -1), records[frame]["ts_ns"])
    expected = [{**r, "message": {**r["message"], "last_frame_ns": last[i]}} if i in last else r
                for i, r in enumerate(records) if i not in owner]
    got = list(folded.decode([str(capture)], ends=True))
    assert got == expected
    assert folded.stats.records == full.stats.records
    ends = [[r for r in ConnectionEnds().apply(each, None) if r["kind"] == "connection-end"] for each in (got, records)]
    assert ends[0] == ends[1]


def test_folding_content_and_saving_connections_exclude_each_other():
    from amqpcap.connection.decoder import SegmentDecoder
    from amqpcap.settings import Settings
    with pytest.raises(ValueError, match="cannot be folded"):
        SegmentDecoder(Settings(), [], resumable=True, fold_content=True)


def test_a_folded_body_is_the_clients_last_frame():
    """A heartbeat timeout is judged from the client's last frame, which the content frames a
    folded message made no records of can be: the message's last_frame_ns stands in for them."""
    second = 10**9
    common = {"connection": "c1", "dir": "C>S", "channel": 1, "tcp_stream": 0}
    tune_ok = {**common, "kind": "method", "ts_ns": 0, "method": "connection.tune-ok", "args": {"heartbeat": 2}}
    publish = {**common, "kind": "method", "ts_ns": 1 * second, "method": "basic.publish", "args": {},
               "message": {"body_size": 9, "body_frames": 1, "last_frame_ns": 6 * second}}
    summary = {"connection": "c1", "status": "amqp", "end_reason": "fin", "last_ts_ns": 9 * second,
               "first_ts_ns": 0, "capture": "x.pcap", "client": "a", "server": "b", "version": "0-9-1",
               "syn_seen": True, "client_decided_by": "syn", "directions": {}}
    end = {"kind": CONNECTION_END, "connection": "c1", "summary": summary}

    def ended(*records):
        return ConnectionEnds().apply([*records, end], None)[-1]
    assert ended(tune_ok, publish)["end_reason"] == "fin"  # 3 s after the body: under 2 x 2 s
    assert ended(tune_ok, publish)["last_client_frame_ns"] == 6 * second
    unfolded = {**publish, "message": {k: v for k, v in publish["message"].items() if k != "last_frame_ns"}}
    assert ended(tune_ok, unfolded)["end_reason"] == "heartbeat-timeout"  # 8 s after the method


def test_names_instead_of_ids(capfdbinary):
    _, out, _ = run(capfdbinary, "--quiet", "--method", "channel.close", SAMPLES / "channel_errors.pcap")
    assert ("<- 127.0.0.1:5672 ch1 channel.close reply_code=404 NOT_FOUND reply_text=\"NOT_FOUND - no queue "
            "'amqpcap.missing' in vhost 'amqpcap'\" failing_method=queue.declare") in out
    assert "failing_method=basic.publish" in out and "class_id" not in out and "method_id" not in out
    _, out, _ = run(capfdbinary, "--quiet", "--where", "args.reply_code == 530", SAMPLES / "connection_errors.pcap")
    assert "connection.close reply_code=530 NOT_ALLOWED" in out and "failing_method=connection.open" in out


def test_width_and_full(capfdbinary):
    capture = SAMPLES / "rich_properties.pcap"
    _, default, _ = run(capfdbinary, "--quiet", "--method", "connection.start", capture)
    properties = default.split(" server_properties=")[1].split(" mechanisms=")[0]
    assert len(properties) == 80 and properties.endswith("...")
    _, narrow, _ = run(capfdbinary, "--quiet", "--width", "12", "--method", "connection.start", capture)
    assert " server_properties={capabili... mechanisms=\"AMQPLAIN... locales=en_US" in narrow
    _, full, _ = run(capfdbinary, "--quiet", "--full", "--method", "connection.start", capture)
    properties = full.split(" server_properties=")[1].split(" mechanisms=")[0]
    assert len(properties) > 200 and "..." not in properties and properties.endswith("}")
    assert "cluster_name=" in properties


def test_value_text():
    from decimal import Decimal

    from amqpcap.protocol.fieldtable import Timestamp
    assert value_text({"a b": ["x", 1, None, True, Decimal("-1.50"), b"\x00\xff", 1.5, {}], "k": ""}) == \
        '{"a b"=[x, 1, null, true, -1.50, 0x00ff, 1.5, {}], k=""}'
    assert value_text('say "hi"\n') == '"say \\"hi\\"\\n"' and value_text("a=b") == '"a=b"'
    assert value_text(Timestamp(0)) == "1970-01-01T00:00:00Z" and value_text(0) == "0"


def test_pcap_record_numbers_shown_when_the_decoder_gives_them():
    base = {"ts_ns": 1_700_000_000_123_456_789, "connection": "0123456789abcdef", "client": "a:1", "server": "b:2",
            "dir": "C>S", "channel": 0, "kind": "heartbeat"}
    view = Readable()
    assert view.line(base) == "2023-11-14 22:13:20.123456 01234567 a:1 -> b:2 ch0 heartbeat\n"
    assert view.line({**base, "pcap_record": 12, "pcap_record_last": 12}).startswith("2023-11-14 22:13:20.123456 #12 0123")
    assert " #12-15 " in view.line({**base, "pcap_record": 12, "pcap_record_last": 15})


def test_remembered_values_render_as_they_would_afresh():
    """String arguments and properties are rendered once per key and remembered (bounded): every line
    still shows its own values, cut to the view's width, past the bound too."""
    base = {"ts_ns": 1_700_000_000_000_000_000, "connection": "0123456789abcdef", "client": "a:1", "server": "b:2",
            "dir": "C>S", "channel": 1, "kind": "method", "method": "basic.publish"}
    view, fresh = Readable(width=12), None
    for round_ in range(2):
        for i in range(5000):
            key = f"orders.{i}.created" + ("=x" if i % 7 == 0 else "")
            record = {**base, "args": {"exchange": "shop", "routing_key": key, "mandatory": i % 2 == 0,
                                       "queue": key}}
            fresh = Readable(width=12)  # nothing remembered
            line = view.line(record)
            assert line == fresh.line(record), (round_, i)
            shown = value_text(key)
            cut = shown if len(shown) <= 12 else shown[:9] + "..."
            assert f" routing_key={cut} " in line and f" queue={cut}\n" in line[-30:]
            assert f"mandatory={'true' if i % 2 == 0 else 'false'}" in line


def test_remembered_flags_render_as_they_would_afresh():
    """Booleans and nulls are rendered once per key too, cut to the view's width like any value."""
    base = {"ts_ns": 1_700_000_000_000_000_000, "connection": "0123456789abcdef", "client": "a:1", "server": "b:2",
            "dir": "C>S", "channel": 1, "kind": "method", "method": "queue.declare"}
    for width in (4, 5, 80, None):
        view = Readable(width=width)
        for flags in ((True, False, None), (False, None, True), (None, True, False), (True, False, None)):
            record = {**base, "args": dict(zip(("durable", "exclusive", "no_wait"), flags))}
            line = view.line(record)
            assert line == Readable(width=width).line(record)
            shown = ["null" if v is None else "true" if v else "false" for v in flags]
            if width == 4:
                shown = [s if len(s) <= 4 else s[:1] + "..." for s in shown]
            assert line.endswith(f"queue.declare durable={shown[0]} exclusive={shown[1]} no_wait={shown[2]}\n")


def test_line_times_are_utc_to_the_microsecond():
    import datetime
    import random
    view = Readable()
    rng = random.Random(7)
    moments = [0, 999_999_999, 1_000_000_000, 1_700_000_000_999_999_000, -1_000, -1_500_000_000]
    moments += [rng.randrange(-10**18, 4 * 10**18) for _ in range(2000)]
    for ts_ns in sorted(moments) + moments:  # in order (the cached second reused) and not
        second, fraction = divmod(ts_ns, 10**9)
        expected = (datetime.datetime(1970, 1, 1) + datetime.timedelta(seconds=second)).strftime("%Y-%m-%d %H:%M:%S")
        assert view._time(ts_ns) == f"{expected}.{fraction // 1000:06d}", ts_ns


def test_the_decoders_time_after_the_last_batch_is_the_last_packets():
    """The connection ends still open when the input ends are timed by the last packet read (as
    `now_ns`), also when that packet completed no record (a bare ACK closing most captures)."""
    from amqpcap.capture.readers import read_records
    for capture in (SAMPLES / "abrupt_kill.pcap", SAMPLES / "channel_errors.pcap"):
        last = max(ts for ts, _, _ in read_records(str(capture)))
        decoder = CaptureDecoder()
        times = []
        for _ in decoder.batches([str(capture)]):
            times.append(decoder.now_ns)
        assert decoder.now_ns == last and times == sorted(times) and decoder.stats.packets > 0


def test_timestamps_in_json_are_the_wires_seconds(capfdbinary):
    records = jsonl(capfdbinary, "--method", "basic.publish", SAMPLES / "rich_properties.pcap")
    properties = records[0]["message"]["properties"]
    assert properties["timestamp"] == 1700000000 and properties["headers"]["T_timestamp"] == 1700000000


def test_filters_keep_time_order_and_ends_in_the_readable_view(capfdbinary):
    _, out, _ = run(capfdbinary, "--quiet", "--errors", SAMPLES)
    lines = out.splitlines()
    assert lines == sorted(lines, key=lambda line: line[:26])
    assert any("connection end: rst" in line for line in lines)
    assert not any("connection end: close" in line for line in lines)


def test_stats_still_work(capfdbinary):
    code, out, _ = run(capfdbinary, "--stats", "--json", "--quiet", SAMPLES / "channel_errors.pcap")
    assert code == 0 and json.loads(out)


def test_readable_lines_carry_the_wireshark_frame_number(capfdbinary, everything):
    capture = SAMPLES / "channel_errors.pcap"
    closes = [r for r in everything[capture] if r.get("method") == "channel.close"]
    _, out, _ = run(capfdbinary, "--quiet", "--method", "channel.close", capture)
    numbers = [line.split(" ")[2] for line in out.splitlines()]
    assert numbers == [f"#{r['pcap_record']}" if r["pcap_record"] == r["pcap_record_last"]
                       else f"#{r['pcap_record']}-{r['pcap_record_last']}" for r in closes]
    ends = [r for r in everything[capture] if r["kind"] == "connection-end"]
    assert ends and all(isinstance(r["tcp_stream"], int) and r["pcap_record"] is None for r in ends)


@pytest.mark.parametrize("capture", CAPTURES, ids=IDS)
def test_the_stats_count_the_records_made_by_kind(capture):
    """decode's summary counts (DecodeStats.records, issues and bytes skipped) are the records made."""
    decoder = CaptureDecoder()
    records = list(decoder.decode([str(capture)]))
    assert decoder.stats.records == Counter(r["kind"] for r in records)
    issues = [r for r in records if r["kind"] == "issue"]
    assert decoder.stats.issues == Counter(r["issue_kind"] for r in issues)
    assert decoder.stats.bytes_skipped == sum(r["bytes_skipped"] for r in issues)


def test_json_lines_are_written_whole_however_little_each_write_takes(monkeypatch, tmp_path):
    """decode --jsonl writes its lines with os.writev, unjoined: a write that takes only part of
    them (a pipe) goes on from the byte where it stopped, across line boundaries."""
    import os

    from amqpcap.cli import decode
    takes = []

    def stingy(fd, parts):  # at most 7 bytes a call
        takes.append(len(parts))
        return os.write(fd, b"".join(parts)[:7])
    monkeypatch.setattr(decode.os, "writev", stingy)
    lines = [b"first line\n", b"", b"x" * 30 + b"\n", b"last\n"] * 5
    with open(tmp_path / "out", "wb") as file:
        decode._write_all(file.fileno(), list(lines))
    assert (tmp_path / "out").read_bytes() == b"".join(lines) and len(takes) > 10


def test_json_lines_go_out_in_order_in_any_number_and_to_any_output(tmp_path):
    """More lines than one writev takes, after what was written to the output before; an output
    without a file descriptor gets them joined."""
    import io

    from amqpcap.cli import decode
    lines = [f'{{"n":{i}}}\n'.encode() for i in range(5000)]
    with open(tmp_path / "out", "wb") as file:
        file.write(b"before\n")
        write = decode._line_writer(file)
        write(lines[:3000])
        write(lines[3000:])
    assert (tmp_path / "out").read_bytes() == b"before\n" + b"".join(lines)
    buffer = io.BytesIO()
    decode._line_writer(buffer)(lines)
    assert buffer.getvalue() == b"".join(lines)


def test_records_trickling_in_are_released_once_half_a_second_has_passed(monkeypatch):
    """Few records, far from the count that pays for a watermark: held until half a second has
    passed on the clock (live input), then released up to the watermark; packet time alone, which
    a file's runs through far faster, does not trigger one."""
    from amqpcap.decodeview import order as order_module
    clock = [100.0]
    monkeypatch.setattr(order_module.time, "monotonic", lambda: clock[0])
    decoder = _Quiet()
    order = TimeOrder(decoder, cap=10**9)
    decoder.now_ns = 10
    assert order.feed([{"ts_ns": 1}, {"ts_ns": 2}], lambda r: r["ts_ns"]) == []
    decoder.now_ns = 10 * 10**9  # ten seconds of packet time later
    assert order.feed([{"ts_ns": 3}], lambda r: r["ts_ns"]) == []
    clock[0] += 0.6
    assert order.feed([{"ts_ns": 4}], lambda r: r["ts_ns"]) == [1, 2, 3, 4]
    assert order.feed([{"ts_ns": 5}], lambda r: r["ts_ns"]) == []
