"""Every table of a set of captures, computed without Spark: the decoder, the row builders and the
analytics state machines in one pass (amqpcap.onepass.tabulate), message_flows by its rule per key."""

from __future__ import annotations

import datetime
import functools
import json
import os
from collections import defaultdict
from pathlib import Path
from urllib.parse import unquote

import pytest

from amqpcap.capture.inputs import expand_inputs
from amqpcap.connection.decoder import CaptureDecoder
from amqpcap.onepass.tabulate import Tabulator
from amqpcap.rules.findings.churn import ConnectionChurn
from amqpcap.rules.findings.visibility import CaptureDamage
from amqpcap.rules.message_flows import DELIVERY_COLUMNS, PUBLISH_COLUMNS, flow_key, flows, side_order
from amqpcap.settings import Settings
from amqpcap.tables.registry import DELIVERIES, MESSAGE_FLOWS, PUBLISHES, TABLES


def tabulate(paths: list[str]) -> dict[str, list[dict]]:
    tables: dict[str, list[dict]] = defaultdict(list)
    tabulator = Tabulator(lambda table, row: tables[table.name].append(row), run_id="test")
    for record in CaptureDecoder().decode(paths, ends=True):
        tabulator.record(record)
    tables[MESSAGE_FLOWS.name] = message_flows(tables[PUBLISHES.name], tables[DELIVERIES.name])
    churn = ConnectionChurn(Settings().findings)  # (the job's one finding across connections)
    for row in tables["connections"]:
        churn.add(row)
    damage = CaptureDamage()  # (and of the capture files themselves)
    for row in tables["decode_issues"]:
        damage.add(row)
    tables["findings"] += churn.rows() + damage.rows()
    return dict(tables)


def message_flows(publishes: list[dict], deliveries: list[dict]) -> list[dict]:
    keyed: dict[str, list[dict]] = defaultdict(list)
    for row in publishes:
        side = {name: row.get(name) for name in PUBLISH_COLUMNS}
        keyed[flow_key(side)].append(side)
    for row in deliveries:
        side = {name: row.get(name) for name in DELIVERY_COLUMNS}
        keyed[flow_key(side)].append(side)
    return [row for sides in keyed.values() for row in flows(sorted(sides, key=side_order))]


@functools.lru_cache(maxsize=4)
def tabulated_folder(folder: str, only: tuple[str, ...] | None = None) -> dict[str, list[dict]]:
    """Every table of the captures in `folder` (only those named in `only`, relative paths). A
    folder without them fails the test by name: empty tables would only say 0 rows != N."""
    paths = expand_inputs([folder]) if os.path.isdir(folder) else []
    if only is not None:
        paths = [p for p in paths if os.path.relpath(p, folder) in only]
    if not paths:
        pytest.fail(f"no captures at {folder}" + (f" (of {len(only)} named)" if only else "")
                    + ": the shared reference material is beside the checkout, at ../shared")
    return tabulate(paths)


def canonical(table: str, rows: list[dict], root: str, columns: list[str] | None = None) -> list[str]:
    """Rows as sorted JSON lines, the way tools/golden_tables.py writes golden copies; only
    `columns` (default: the table's, without run_id)."""
    names = columns or [n for n in TABLES[table].names if n != "run_id"]
    root = os.path.abspath(root)
    lines = []
    for row in rows:
        out = {}
        for name in names:
            value = row.get(name)
            if isinstance(value, datetime.date):
                value = value.isoformat()
            elif isinstance(value, bytes):
                value = value.hex()
            elif isinstance(value, list) and value and isinstance(value[0], tuple):
                value = sorted([list(pair) for pair in value])
            elif isinstance(value, str) and name in ("capture", "path"):
                value = os.path.relpath(os.path.abspath(unquote(value.removeprefix("file://"))), root)
            out[name] = value
        lines.append(json.dumps(out, sort_keys=True))
    return sorted(lines)


def golden(folder: Path, table: str) -> list[str]:
    import gzip
    with gzip.open(folder / f"{table}.jsonl.gz", "rt") as f:
        return [line for line in f.read().splitlines() if line]
