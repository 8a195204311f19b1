"""The decoder's records (amqpcap.connection.record) and the --jsonl writer (amqpcap.decodeview.jsonl):
a record reads as the mapping of the JSON contract's keys, in its order; the writer's line is
byte for byte orjson's line of that mapping, on every record of every sample, public capture and
fuzz reproducer, and on records holding the values a capture can put there (big and negative
integers, timestamps, decimals, bytes, text needing escapes); run compiled and interpreted."""

from __future__ import annotations

import datetime
import pickle
from decimal import Decimal

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqpcap.connection.decoder import CaptureDecoder
from amqpcap.connection.record import (
    CAPTURE_ISSUE,
    COMMON,
    KIND_KEYS,
    METHOD_MESSAGE,
    SHAPES,
    Record,
    add_message,
    from_dict,
    new_record,
)
from amqpcap.decodeview.ends import ConnectionEnds
from amqpcap.decodeview.jsonl import LineWriter, json_line, reference_line
from amqpcap.protocol.fieldtable import Timestamp
from tests.helpers.samples import EXPECTED, ROOT, SHARED, capture_for

CAPTURES = ([capture_for(p) for p in EXPECTED] + sorted((SHARED / "captures" / "public").glob("*.pcap"))
            + sorted(p for p in (ROOT / "tests" / "fuzz" / "corpus").iterdir() if p.name.startswith("stream-")))


def records_of(path) -> list:
    """A capture's records as `amqpcap decode` writes them: the decoder's, their ends made readable."""
    decoder = CaptureDecoder()
    ends = ConnectionEnds()
    out = []
    for batch in decoder.batches([str(path)], ends=True):
        out += ends.apply(batch, decoder.now_ns)
    return out


@pytest.mark.parametrize("path", CAPTURES, ids=[p.name for p in CAPTURES])
def test_the_writer_writes_what_orjson_writes_of_every_record(path):
    writer = LineWriter()  # (one per capture: what it remembers must never show)
    records = records_of(path)
    assert records and all(type(r) is Record for r in records)
    shapes = set()
    for record in records:
        expected = orjson.dumps(dict(record), default=_default, option=orjson.OPT_APPEND_NEWLINE)
        assert reference_line(record) == expected
        assert writer.line(record) == expected, record
        assert json_line(record) == expected
        shapes.add(record.shape)
    assert shapes  # (every shape the decoder makes is among the samples')


def test_the_samples_hold_every_shape_the_writer_knows():
    shapes = {record.shape for path in CAPTURES for record in records_of(path)}
    known = {SHAPES[kind] for kind in ("method", "header", "body", "heartbeat", "issue", "protocol-header")}
    assert known | {METHOD_MESSAGE, CAPTURE_ISSUE} <= shapes


def _default(value):
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        import base64
        return base64.b64encode(bytes(value)).decode()
    raise TypeError(type(value).__name__)


# values a record's fields can hold, from a capture and from the decoder
TEXT = st.one_of(st.none(), st.text(max_size=12), st.sampled_from(["C>S", "S>C", "127.0.0.1:5672", 'a"b\\c\n', "é€😀"]))
NUMBER = st.one_of(st.none(), st.integers(-2**63 + 1, 2**64 - 1), st.sampled_from([0, 9, 10, 99, 100, -1, -10,
                                                                                   2**63 - 1, 10**18, 10**19 - 1]))
VALUE = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**64 - 1), st.floats(allow_nan=False),
                               st.text(max_size=8), st.builds(Decimal, st.decimals(allow_nan=False,
                                                                                   allow_infinity=False).map(str)),
                               st.binary(max_size=6), st.integers(0, 2**40).map(Timestamp)),
                     lambda inner: st.one_of(st.lists(inner, max_size=3),
                                             st.dictionaries(st.text(max_size=5), inner, max_size=3)), max_leaves=8)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(kind=st.sampled_from(sorted(k for k in KIND_KEYS if k != "connection-end")), ts_ns=NUMBER,
       common=st.lists(st.one_of(TEXT, NUMBER), min_size=11, max_size=11),
       fields=st.lists(st.one_of(TEXT, NUMBER, VALUE), min_size=6, max_size=6), message=st.one_of(st.none(), VALUE))
def test_the_writer_writes_what_orjson_writes_of_any_values(kind, ts_ns, common, fields, message):
    if ts_ns is not None and ts_ns < 0:
        ts_ns = -ts_ns
    ts_ns = ts_ns if ts_ns is None or ts_ns < 2**63 else 2**63 - 1
    record = new_record(kind, ts_ns, *common, 0)
    for key, value in zip(KIND_KEYS[kind], fields):
        record[key] = value
    if kind == "method" and message is not None:
        add_message(record, {"body_size": 3, "properties": message})
    if kind == "issue" and message is not None:
        record.file_offset, record.file_end_offset, record.shape = 5, fields[0] if type(fields[0]) is int else 7, \
            CAPTURE_ISSUE
    try:
        expected = reference_line(record)
    except (TypeError, orjson.JSONEncodeError) as error:  # what orjson refuses, the writer refuses too
        with pytest.raises(type(error)):
            LineWriter().line(record)
        return
    assert LineWriter().line(record) == expected


@settings(max_examples=200, deadline=None, derandomize=True)
@given(ts_ns=NUMBER, common=st.lists(st.one_of(TEXT, NUMBER), min_size=11, max_size=11),
       facts=st.lists(st.one_of(TEXT, NUMBER, VALUE), min_size=len(KIND_KEYS["connection-end"]),
                      max_size=len(KIND_KEYS["connection-end"])))
def test_a_connection_end_is_written_as_orjson_writes_it(ts_ns, common, facts):
    """A connection's end (the common keys written by the writer, its facts by orjson after them),
    whatever its values; the view's own end records are among every capture's above."""
    ts_ns = None if ts_ns is None else min(abs(ts_ns), 2**63 - 1)
    record = new_record("connection-end", ts_ns, *common, 0)
    for key, value in zip(KIND_KEYS["connection-end"], facts):
        record[key] = value
    assert record.shape is SHAPES["connection-end"]
    try:
        expected = reference_line(record)
    except (TypeError, orjson.JSONEncodeError) as error:
        with pytest.raises(type(error)):
            LineWriter().line(record)
        return
    writer = LineWriter()
    assert writer.line(record) == writer.line(record) == expected


# values drawn from small pools, so that one writer meets the same ones again in other company
IDS_FEW = st.sampled_from(["c1", "c2", "c1", None, 1])
ENDPOINTS_FEW = st.sampled_from(["10.0.0.1:4000", "10.0.0.2:5672", "10.0.0.1:4000", None, 1])
DIRECTIONS_FEW = st.sampled_from(["C>S", "S>C", None, "?"])
NAMES_FEW = st.sampled_from(["basic.ack", "basic", "method", "", None, 1, True, 1.0])


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.sampled_from(["method", "header", "body", "issue"]), IDS_FEW, ENDPOINTS_FEW,
                          ENDPOINTS_FEW, DIRECTIONS_FEW, NAMES_FEW, NAMES_FEW), min_size=2, max_size=12))
def test_what_one_writer_remembers_renders_as_it_would_afresh(rows):
    """One writer for a run of records whose connection ids, endpoints, directions, kinds and
    method or class names recur in other combinations (and as other types: 1, True and 1.0 are
    equal keys): every line is what a fresh writer, and orjson, write of that record."""
    writer = LineWriter()
    for kind, connection, client, server, direction, name, shown_kind in rows:
        record = new_record(kind, 1_700_000_000_000_000_000, 1, "x.pcap", 1, 1, 0, connection, client, server,
                            direction, 1, 0, 8)
        record.kind = shown_kind  # (the key "kind" as any value, its shape still the kind's)
        if kind == "method":
            record.method, record.class_id, record.method_id, record.args = name, 60, 40, {}
        elif kind == "header":
            record.class_name, record.class_id, record.weight, record.body_size = name, 60, 0, 5
            record.property_flags, record.properties = [0], {}
        elif kind == "body":
            record.body_frame_size = 5
        else:
            record.issue_kind, record.detail, record.bytes_skipped = name, "d", 0
        assert writer.line(record) == LineWriter().line(record) == reference_line(record)


def test_a_record_reads_as_the_contracts_mapping():
    record = new_record("method", 1_700_000_000_123_456_789, 1_700_000_000_123_456_789, "x.pcap", 3, 4, 0, "c1",
                        "10.0.0.1:4000", "10.0.0.2:5672", "C>S", 1, 100, 30)
    record.method, record.class_id, record.method_id, record.args = "basic.publish", 60, 40, {"exchange": "e"}
    assert list(record) == list(COMMON) + ["method", "class_id", "method_id", "args"] == list(record.keys())
    assert record["ts"] == 1_700_000_000.1234567 and record["kind"] == "method" and record["args"] == {"exchange": "e"}
    assert "message" not in record and record.get("message") is None and record.get("nope", 5) == 5
    with pytest.raises(KeyError):
        record["class"]  # a header's key, not a method's
    add_message(record, {"body_size": 0})
    assert record.shape is METHOD_MESSAGE and record["message"] == {"body_size": 0}
    record["note"] = "kept"  # a key of its own goes last, as in a dict
    assert list(record)[-2:] == ["message", "note"] and record.extra == {"note": "kept"}
    as_dict = dict(record)
    assert record == as_dict and record.as_dict() == as_dict and from_dict(as_dict) == record
    assert list(from_dict(as_dict)) == list(as_dict)
    assert pickle.loads(pickle.dumps(record)) == record
    header = from_dict({"ts": 1.5, "kind": "header", "class": "basic"})
    assert header.class_name == "basic" and header["class"] == "basic" and list(header) == ["ts", "kind", "class"]


def test_records_after_the_decoder_are_records_of_the_contract():
    """Every decoder record of a sample has exactly its kind's keys, in the contract's order."""
    for path in CAPTURES[:8]:
        for record in CaptureDecoder().decode([str(path)], ends=True):
            if record.kind == "connection-end":
                assert list(record) == ["kind", "connection", "summary"]
                continue
            keys = COMMON + KIND_KEYS[record.kind]
            if record.kind == "method" and record.message is not None:
                keys += ("message",)
            if record.kind == "issue" and record.connection is None:
                keys += ("file_offset", "file_end_offset")
            assert record.keys() == keys


def test_a_view_end_record_is_written_as_orjson_writes_it():
    records = records_of(CAPTURES[0])
    end = [r for r in records if r["kind"] == "connection-end"][-1]
    assert end["end_reason"] and isinstance(end["directions"], dict)
    assert json_line(end) == orjson.dumps(dict(end), option=orjson.OPT_APPEND_NEWLINE)
    assert datetime.datetime.fromtimestamp(end["ts"], datetime.timezone.utc).year >= 2020


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1),
                 st.integers(min_value=-(1 << 100), max_value=1 << 100), st.none()))
def test_a_records_seconds_are_its_nanoseconds_divided_as_python_divides_them(ts_ns):
    """Compiled, ts is computed in C from a 64-bit int (record.pxd's _seconds): the same float as
    ts_ns / 1e9, rounding included; past 64 bits, Python's own division."""
    record = new_record("heartbeat", ts_ns, ts_ns, "c.pcap", 1, 1, 0, "id", "a", "b", "C>S", 0, 0, 8)
    expected = None if ts_ns is None else ts_ns / 1e9
    assert record.ts == expected and type(record.ts) is type(expected)
