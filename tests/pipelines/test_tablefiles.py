"""Rows to Parquet on the executors (pipelines.tablefiles): what the files hold equals the rows,
with the table's schema, one file per date, whatever the batch size."""

from __future__ import annotations

import datetime
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from amqp_decode.rows import RawRows
from amqp_decode.tables import FRAMES
from pipelines.tablefiles import TableFiles, rows_to_batch
from tests.capture.conftest import EXPECTED, decoded


@pytest.mark.parametrize("batch_rows", [7, 10_000])
def test_files_hold_the_rows_per_date_in_order(tmp_path, batch_rows):
    path = next(p for p in EXPECTED if p.name == "confirms.expected.json")
    builder = RawRows("run-1")
    rows = [builder.frame_row(r) for r in decoded(path)[1] if r["kind"] != "issue"]
    for seq, row in enumerate(rows):
        row["connection_seq"] = seq
    # A night that crosses midnight: every third row a day later, interleaved with the others.
    later = rows[0]["date"] + datetime.timedelta(days=1)
    for row in rows[::3]:
        row["date"] = later
    writer = TableFiles(str(tmp_path), "run-1", batch_rows=batch_rows)
    for row in rows:
        writer.add(FRAMES, row)
    files = writer.close()
    assert {f["date"] for f in files} == {rows[1]["date"].isoformat(), later.isoformat()}
    for day in {row["date"] for row in rows}:
        written = [f for f in files if f["date"] == day.isoformat()]
        assert len(written) == 1 and written[0]["path"].startswith(f"date={day.isoformat()}/")
        table = pq.read_table(tmp_path / "frames" / written[0]["path"])
        expected = rows_to_batch(FRAMES, [r for r in rows if r["date"] == day], {"run_id": "run-1"},
                                 without=("date",))
        assert table.schema.equals(FRAMES.arrow(("date",)))
        assert table.equals(pa.Table.from_batches([expected]))
        assert written[0]["rows"] == table.num_rows


def test_columns_null_in_a_whole_batch_or_only_at_its_ends(tmp_path):
    """A batch's column that is null in every row is written without converting each value; one
    null only in its first and last rows keeps the values between (and run_id is every row's)."""
    builder = RawRows("run-1")
    path = next(p for p in EXPECTED if p.name == "confirms.expected.json")
    rows = [builder.frame_row(r) for r in decoded(path)[1] if r["kind"] == "method"][:5]
    for seq, row in enumerate(rows):
        row["connection_seq"] = seq
        row["queue"] = row["exchange_type"] = None
    rows[2]["queue"] = "orders"  # null, null, "orders", null, null
    writer = TableFiles(str(tmp_path), "run-1", batch_rows=5)
    for row in rows:
        writer.add(FRAMES, row)
    [written] = writer.close()
    table = pq.read_table(tmp_path / "frames" / written["path"])
    assert table.column("queue").to_pylist() == [None, None, "orders", None, None]
    assert table.column("exchange_type").null_count == 5
    assert table.column("run_id").to_pylist() == ["run-1"] * 5
    assert table.equals(pa.Table.from_batches([rows_to_batch(FRAMES, rows, {"run_id": "run-1"}, without=("date",))]))


def test_a_task_with_many_rows_writes_several_files_holding_them_all(tmp_path):
    """A file is closed after `file_rows` rows and the next begun (a Parquet writer holds every
    row group's metadata until it closes): together the files hold every row once, in order, each
    with its own row count and captures."""
    path = next(p for p in EXPECTED if p.name == "confirms.expected.json")
    builder = RawRows("run-1")
    rows = [builder.frame_row(r) for r in decoded(path)[1] if r["kind"] != "issue"]
    for seq, row in enumerate(rows):
        row["connection_seq"] = seq
        row["date"] = rows[0]["date"]
        row["source"] = f"file:///night/{seq // 40}.pcap"  # frames are replaced by the file that made them
    assert len(rows) > 100
    writer = TableFiles(str(tmp_path), "run-1", batch_rows=7, file_rows=30)
    for row in rows:
        writer.add(FRAMES, row)
    files = writer.close()
    assert len(files) == -(-len(rows) // 35)  # whole batches of 7: a file closes at 35 rows
    tables = [pq.read_table(tmp_path / "frames" / f["path"]) for f in files]
    assert [f["rows"] for f in files] == [t.num_rows for t in tables]
    expected = rows_to_batch(FRAMES, rows, {"run_id": "run-1"}, without=("date",))
    assert pa.concat_tables(tables).equals(pa.Table.from_batches([expected]))
    for f, table in zip(files, tables):
        assert sorted(json.loads(f["captures"])) == sorted(set(table.column("source").to_pylist()))
