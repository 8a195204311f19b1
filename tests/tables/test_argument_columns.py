"""The method arguments promoted to typed `frames` columns (rows.ARGUMENT_COLUMNS): they follow the
spec (names, wire types, the methods each column's comment names) and equal the arguments
(`args_json`) on every frame of every capture, and of every golden frame of both bundled specs."""

from __future__ import annotations

import functools
import json
import os
import re

import pytest

from amqpcap.capture.inputs import expand_inputs
from amqpcap.connection.decoder import CaptureDecoder
from amqpcap.connection.record import Record, from_dict
from amqpcap.lake.tablefiles import rows_to_batch
from amqpcap.protocol.codec import Codec
from amqpcap.protocol.spec import load_spec
from amqpcap.tables.registry import FRAMES
from amqpcap.tables.rows import ARGUMENT_COLUMNS, RawRows
from tests.helpers.samples import ROOT, SHARED
from tests.protocol.golden_0_9 import METHODS_0_9
from tests.protocol.golden_0_9_1 import METHODS_0_9_1

COLUMNS = sorted(set(ARGUMENT_COLUMNS.values()))
ARGUMENTS_OF = {column: sorted(a for a, c in ARGUMENT_COLUMNS.items() if c == column) for column in COLUMNS}
# which column types hold which wire types (long is unsigned 32-bit: it needs a bigint)
HOLDS = {"boolean": {"bit"}, "string": {"shortstr", "longstr"}, "int": {"octet", "short"},
         "bigint": {"octet", "short", "long", "longlong"}}
COMMENT = re.compile(r"argument '(?P<argument>\w+)' of (?P<methods>[a-z0-9.\-]+(?:, [a-z0-9.\-]+)*)")
CORPORA = {"samples": ROOT / "data" / "samples", "public": SHARED / "captures" / "public"}
PATHS = {f"{name}/{os.path.relpath(p, corpus)}": p for name, corpus in CORPORA.items() for p in expand_inputs([str(corpus)])}


def expected(args: dict, column: str):
    """What the column should hold: the argument of that name, as args_json has it (a delivery tag
    beyond bigint's range is null, tested in test_rows)."""
    values = [args[a] for a in ARGUMENTS_OF[column] if a in args]
    return values[0] if values else None


def test_argument_columns_follow_the_spec():
    columns = {c.name: c for c in FRAMES.columns}
    declared = {name for name, c in columns.items() if c.comment.startswith("argument '")}
    assert declared == set(COLUMNS), "every argument column is mapped, and only those"
    spec = load_spec("0-9-1")
    for column in COLUMNS:
        match = COMMENT.match(columns[column].comment)
        assert match, columns[column].comment
        argument = match["argument"]
        assert ARGUMENT_COLUMNS[argument] == column
        carrying = [m.full_name for m in spec.methods() if any(f.key == argument and not f.reserved for f in m.fields)]
        assert match["methods"].split(", ") == carrying, column
    seen = set()
    for version in ("0-9-1", "0-9"):
        for method in load_spec(version).methods():
            for field in method.fields:
                if field.key in ARGUMENT_COLUMNS and not field.reserved:
                    seen.add(field.key)
                    column = columns[ARGUMENT_COLUMNS[field.key]]
                    assert field.type in HOLDS[column.type], (version, method.full_name, field.key, column.type)
    assert seen == set(ARGUMENT_COLUMNS), "every mapped name is an argument of a bundled spec"


@functools.lru_cache(maxsize=None)
def capture_frames(path: str) -> list[dict]:
    builder = RawRows("test")
    return [builder.frame_row(r) for r in CaptureDecoder().decode([path]) if r["kind"] == "method"]


@pytest.mark.parametrize("path", PATHS.values(), ids=PATHS.keys())
def test_argument_columns_equal_args_json_on_every_captured_frame(path):
    frames = capture_frames(path)
    for row in frames:
        args = json.loads(row["args_json"])
        got = {column: row[column] for column in COLUMNS}
        want = {column: expected(args, column) for column in COLUMNS}
        assert got == want, (row["method"], row["stream_offset"])
    if frames:
        assert rows_to_batch(FRAMES, frames).num_rows == len(frames)  # the declared types hold them


def test_the_captures_fill_the_columns_people_filter_on():
    """The captures exercise most argument columns with real clients' values (true, for flags)."""
    filled = {column for path in PATHS.values() for row in capture_frames(path) for column in COLUMNS
              if row[column] is True or (row[column] is not None and not isinstance(row[column], bool))}
    # never set by the clients recorded (the golden frames below cover them)
    assert set(COLUMNS) - filled == {"if_unused", "if_empty", "internal", "no_local"}  # (qos_global: deprecated_features.pcap)


@pytest.mark.parametrize("version, cases", [("0-9-1", METHODS_0_9_1), ("0-9", METHODS_0_9)], ids=["0-9-1", "0-9"])
def test_argument_columns_equal_the_arguments_of_every_golden_frame(version, cases):
    codec = Codec.for_version(version)
    builder = RawRows("test")
    for name, channel, hexdata, args in cases:
        frame, _ = codec.decode_frame(bytes.fromhex(hexdata))
        row = builder.frame_row(_record(frame))
        assert {c: row[c] for c in COLUMNS} == {c: expected(args, c) for c in COLUMNS}, name


def test_0_9_nowait_is_no_wait():
    """0-9 spells the argument 'nowait': it fills the same column (the deliveries rules read it on
    basic.consume)."""
    name, channel, hexdata, args = next(case for case in METHODS_0_9 if case[0] == "exchange.declare")
    flags = "0666616e6f75740e"  # 'fanout', then the bits: durable, auto_delete, internal
    assert hexdata.count(flags) == 1
    frame, _ = Codec.for_version("0-9").decode_frame(bytes.fromhex(hexdata.replace(flags, flags[:-2] + "1e")))
    assert frame.args["nowait"] is True
    row = RawRows("test").frame_row(_record(frame))
    assert (row["no_wait"], row["exchange_type"], row["durable"], row["auto_delete"], row["internal"],
            row["passive"]) == (True, "fanout", True, True, True, False)


def _record(frame) -> Record:
    return from_dict({"kind": "method", "ts_ns": 10**18, "ts_last_ns": 10**18, "capture": "x", "connection": "c",
                      "client": "a", "server": "b", "dir": "C>S", "channel": frame.channel, "offset": 0, "size": 8,
                      "method": frame.name, "class_id": frame.method.class_id, "method_id": frame.method.method_id,
                      "args": frame.args})
