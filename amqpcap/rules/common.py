"""Small helpers the rule sets share: time units, the date partition, method arguments."""

from __future__ import annotations

import datetime
from typing import Callable

import orjson

from amqpcap.protocol.spec import CLIENT_TO_SERVER
from amqpcap.tables.registry import Table
from amqpcap.tables.rows import FrameRow

# Where finished rows go: the decode task's table writers, a test's lists, `decode --stats`. The
# rules read `frames` and `messages` rows as typed rows (amqpcap.tables.rows) and emit dicts.
Emit = Callable[[Table, dict], None]

_EPOCH = datetime.date(1970, 1, 1)
_DAY_NS = 86_400_000_000_000


def micros(ts_ns: int | None) -> int | None:
    """Nanoseconds to the microseconds timestamp columns hold (floor, as the raw tables do)."""
    return None if ts_ns is None else ts_ns // 1000


def day(ts_ns: int) -> datetime.date:
    return _EPOCH + datetime.timedelta(days=ts_ns // _DAY_NS)


def side(direction: str | None) -> str:
    """Who sent a frame: 'client' or 'server'."""
    return "client" if direction == CLIENT_TO_SERVER else "server"


def arguments(row: FrameRow) -> dict:
    """A method's arguments (frames.args_json), for the few rules that need more than the typed
    columns. Cached on the row: several rule sets may ask for the same frame's."""
    parsed = row.parsed_args
    if parsed is None:
        text = row.args_json
        parsed = orjson.loads(text) if text else {}
        row.parsed_args = parsed
    return parsed


def text_of(value) -> str | None:
    """A JSON value as text, the way a JSON path lookup renders it: strings as they are, anything
    else (numbers, booleans, objects) as compact JSON."""
    if value is None or isinstance(value, str):
        return value
    return orjson.dumps(value).decode()


def to_int(value) -> int | None:
    """A JSON value as an integer column (null when it is not one)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def where_from(row: FrameRow) -> dict:
    """The columns every per-connection analytics row copies from the frame that made it."""
    return {"date": row.date, "connection": row.connection, "capture": row.capture,
            "client": row.client, "server": row.server}
