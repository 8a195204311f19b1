"""A lake table as comparable lines: what the tests that run the job two ways (S3 and disk, wheel and
checkout, two engines, one JVM or several) compare."""

from __future__ import annotations

import datetime
import json
from typing import Callable

# columns that name a capture: a comparison across places maps them (`rename`)
CAPTURE_COLUMNS = ("capture", "source", "path", "saved_by")


def lake_rows(lake, table: str, rename: Callable[[str], str] | None = None) -> list[str]:
    """The table's rows at the lake's snapshot (amqpcap.lake.arrow), as `canonical` lines."""
    from amqpcap.lake import arrow
    return canonical(arrow(str(lake), table).to_pylist(), rename)


def canonical(rows: list[dict], rename: Callable[[str], str] | None = None) -> list[str]:
    """Rows as sorted JSON lines, run ids left out, values in one form whichever reader gave them."""
    lines = []
    for row in rows:
        out = {}
        for key, value in row.items():
            if key == "run_id":
                continue
            if rename is not None and key in CAPTURE_COLUMNS and isinstance(value, str):
                value = rename(value)
            elif rename is not None and key == "state" and isinstance(value, bytes):
                value = saved_state(value, rename)
            out[key] = normal(value)
        lines.append(json.dumps(out, default=str, sort_keys=True))
    return sorted(lines)


def saved_state(blob: bytes, rename: Callable[[str], str]) -> list:
    """A carried state (connection_state.state) as its pickle's operations, the captures it names
    (where an issue began, in an earlier file) renamed: the same state saved from captures in
    another place. (Frame lengths, which the names' lengths change, left out.)"""
    import pickletools
    import zlib
    ops = []
    for op, arg, _ in pickletools.genops(zlib.decompress(blob)):
        if op.name == "FRAME":
            continue
        if isinstance(arg, str) and "://" in arg:
            arg = rename(arg)
        ops.append([op.name, arg.hex() if isinstance(arg, bytes) else arg])
    return ops


def normal(value):
    """A time as UTC without its zone (Spark's session zone is UTC, Arrow's times carry theirs), a
    map as a dict (Arrow gives pairs, Spark a dict)."""
    if isinstance(value, datetime.datetime):
        return (value.astimezone(datetime.timezone.utc).replace(tzinfo=None) if value.tzinfo else value).isoformat()
    if isinstance(value, list) and value and all(isinstance(p, tuple) and len(p) == 2 for p in value):
        return dict(value)
    return value
