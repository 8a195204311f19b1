"""Hand-built rows for the rule tests: `frames` rows from a few fields each, everything else null,
one nanosecond apart (or at given times), run through the analytics of one connection."""

from __future__ import annotations

import datetime
from collections import defaultdict

from amqpcap.rules import Analytics
from amqpcap.settings import AnalyticsSection
from amqpcap.tables.registry import FRAMES, STREAMS

DAY = datetime.date(2026, 11, 21)
S, C = "S>C", "C>S"


def frame(i: int, fields: dict) -> dict:
    row = {**dict.fromkeys(FRAMES.names), "date": DAY, "connection": "c1", "capture": "x.pcap", "ts_ns": i,
           "ts": i // 1000, "client": "a", "server": "b", "kind": "method", "channel": 1,
           "stream_offset": i, **fields}
    if "ts" in fields and "ts_ns" not in fields:
        row["ts_ns"] = fields["ts"] * 1000
    return row


def stream(connection: str = "c1", end_reason: str = "capture-end", last_ts: int | None = None, **fields) -> dict:
    return {**dict.fromkeys(STREAMS.names), "date": DAY, "connection": connection, "capture": "x.pcap",
            "status": "amqp", "syn_seen": True, "end_reason": end_reason, "first_ts": 0, "last_ts": last_ts,
            **fields}


def analyse(rows: list[dict], streams: list[dict] | None = None, messages: dict[int, dict] | None = None,
            settings: AnalyticsSection = AnalyticsSection()) -> dict[str, list[dict]]:
    """Every table's rows from `rows` (field dicts, frame() fills the rest); `messages`: the
    messages row of the frame at that index. The connections end with `streams` (default: one
    capture-end stream per connection seen)."""
    out: dict[str, list[dict]] = defaultdict(list)
    analytics = Analytics(lambda table, row: out[table.name].append(row), settings)
    seen = []
    for i, fields in enumerate(rows):
        row = frame(i, fields)
        if row["connection"] not in seen:
            seen.append(row["connection"])
        analytics.frame(row, (messages or {}).get(i))
    for end in streams if streams is not None else [stream(c) for c in seen]:
        analytics.end(end)
    return out
