"""Dump every table of a lake as canonical JSON Lines, for golden comparisons.

    python tools/golden_tables.py LAKE OUT_DIR [--root data/samples]

Each table becomes OUT_DIR/<table>.jsonl.gz: one JSON object per row, keys sorted, rows sorted,
`run_id` left out, timestamps as integer microseconds, capture paths made relative to --root
(so a golden copy does not depend on where the checkout lives).
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import os
import sys
from pathlib import Path

import pyarrow.parquet as pq


def canonical_rows(lake: str, table: str, root: str) -> list[str]:
    from deltalake import DeltaTable
    files = DeltaTable(f"{lake}/{table}").file_uris()
    root = os.path.abspath(root)
    lines = []
    for uri in files:
        path = uri.removeprefix("file://")
        day = next((part.split("=", 1)[1] for part in path.split("/") if part.startswith("date=")), None)
        for row in pq.read_table(path).to_pylist():
            row.pop("run_id", None)
            row["date"] = day
            lines.append(json.dumps({k: _plain(k, v, root) for k, v in row.items()}, sort_keys=True))
    return sorted(lines)


def _plain(key, value, root):
    if isinstance(value, datetime.datetime):
        value = value if value.tzinfo else value.replace(tzinfo=datetime.timezone.utc)
        return int(value.timestamp()) * 1_000_000 + value.microsecond
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, list) and value and isinstance(value[0], tuple):
        return sorted([list(pair) for pair in value])
    if isinstance(value, str) and key in ("capture", "path"):
        from urllib.parse import unquote
        path = unquote(value.removeprefix("file://"))
        if path.startswith(root) or not path.startswith("/"):
            return os.path.relpath(os.path.abspath(path), root)
    return value


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lake")
    parser.add_argument("out", type=Path)
    parser.add_argument("--root", default="data/samples")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for entry in sorted(os.listdir(args.lake)):
        if not os.path.isdir(os.path.join(args.lake, entry, "_delta_log")):
            continue
        rows = canonical_rows(args.lake, entry, args.root)
        with gzip.open(args.out / f"{entry}.jsonl.gz", "wt") as f:
            f.write("".join(line + "\n" for line in rows))
        print(f"{entry}: {len(rows)} rows", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
