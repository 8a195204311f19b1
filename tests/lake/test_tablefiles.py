"""Rows to Parquet on the executors (amqpcap.lake.tablefiles): what the files hold equals the rows,
with the table's schema, one file per date, whatever the batch size."""

from __future__ import annotations

import datetime
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from amqpcap.lake import tablefiles
from amqpcap.lake.tablefiles import TableFiles, rows_to_batch
from amqpcap.tables.registry import FRAMES
from amqpcap.tables.rows import RawRows
from tests.helpers.samples import EXPECTED, decoded


@pytest.mark.parametrize("batch_rows", [7, 10_000])
def test_files_hold_the_rows_per_date_in_order(tmp_path, batch_rows):
    path = next(p for p in EXPECTED if p.name == "confirms.expected.json")
    builder = RawRows("run-1")
    rows = [builder.frame_row(r) for r in decoded(path)[1] if r["kind"] != "issue"]
    for seq, row in enumerate(rows):
        row.connection_seq = seq
    # A night that crosses midnight: every third row a day later, interleaved with the others.
    later = rows[0].date + datetime.timedelta(days=1)
    for row in rows[::3]:
        row.date = later
    writer = TableFiles(str(tmp_path), "run-1", batch_rows=batch_rows)
    for row in rows:
        writer.add(FRAMES, row)
    files = writer.close()
    assert {f.date for f in files} == {rows[1]["date"].isoformat(), later.isoformat()}
    for day in {row["date"] for row in rows}:
        written = [f for f in files if f.date == day.isoformat()]
        assert len(written) == 1 and written[0].path.startswith(f"date={day.isoformat()}/")
        table = pq.read_table(tmp_path / "frames" / written[0].path)
        expected = rows_to_batch(FRAMES, [r.as_dict() for r in rows if r.date == day], {"run_id": "run-1"},
                                 without=("date",))
        assert table.schema.equals(FRAMES.arrow(("date",)))
        assert table.equals(pa.Table.from_batches([expected]))
        assert written[0].rows == table.num_rows


def test_columns_null_in_a_whole_batch_or_only_at_its_ends(tmp_path):
    """A batch's column that is null in every row is written without converting each value; one
    null only in its first and last rows keeps the values between (and run_id is every row's)."""
    builder = RawRows("run-1")
    path = next(p for p in EXPECTED if p.name == "confirms.expected.json")
    rows = [builder.frame_row(r) for r in decoded(path)[1] if r["kind"] == "method"][:5]
    for seq, row in enumerate(rows):
        row.connection_seq = seq
        row.queue = row.exchange_type = None
    rows[2].queue = "orders"  # null, null, "orders", null, null
    writer = TableFiles(str(tmp_path), "run-1", batch_rows=5)
    for row in rows:
        writer.add(FRAMES, row)
    [written] = writer.close()
    table = pq.read_table(tmp_path / "frames" / written.path)
    assert table.column("queue").to_pylist() == [None, None, "orders", None, None]
    assert table.column("exchange_type").null_count == 5
    assert table.column("run_id").to_pylist() == ["run-1"] * 5
    assert table.equals(pa.Table.from_batches([rows_to_batch(FRAMES, [r.as_dict() for r in rows], {"run_id": "run-1"},
                                                             without=("date",))]))


def _frames_of_one_day():
    path = next(p for p in EXPECTED if p.name == "confirms.expected.json")
    builder = RawRows("run-1")
    rows = [builder.frame_row(r) for r in decoded(path)[1] if r["kind"] != "issue"]
    for seq, row in enumerate(rows):
        row.connection_seq = seq
        row.date = rows[0].date
    return rows


def test_a_task_with_many_rows_writes_several_files_holding_them_all(tmp_path):
    """A file is closed after `file_rows` rows and the next begun (a Parquet writer holds every
    row group's metadata until it closes): together the files hold every row once, in order, each
    with its own row count and captures."""
    rows = _frames_of_one_day()
    for seq, row in enumerate(rows):
        row.source = f"file:///night/{seq // 40}.pcap"  # frames are replaced by the file that made them
    assert len(rows) > 100
    writer = TableFiles(str(tmp_path), "run-1", batch_rows=7, file_rows=30)
    for row in rows:
        writer.add(FRAMES, row)
    files = writer.close()
    assert len(files) == -(-len(rows) // 35)  # whole batches of 7: a file closes at 35 rows
    tables = [pq.read_table(tmp_path / "frames" / f.path) for f in files]
    assert [f.rows for f in files] == [t.num_rows for t in tables]
    expected = rows_to_batch(FRAMES, [r.as_dict() for r in rows], {"run_id": "run-1"}, without=("date",))
    assert pa.concat_tables(tables).equals(pa.Table.from_batches([expected]))
    for f, table in zip(files, tables):
        assert sorted(f.captures) == sorted(set(table.column("source").to_pylist()))


@pytest.mark.parametrize("group_bytes, groups_of", [(1 << 30, 21), (1, 7)])
def test_batches_are_held_as_arrow_until_a_row_group_is_big_enough(tmp_path, monkeypatch, group_bytes, groups_of):
    """Batches of 7 rows, row groups of GROUP_ROWS (20: three batches make one), unless all the
    held batches reach GROUP_BYTES first (1 byte: each batch is written as it comes)."""
    monkeypatch.setattr(tablefiles, "GROUP_ROWS", 20)
    monkeypatch.setattr(tablefiles, "GROUP_BYTES", group_bytes)
    rows = _frames_of_one_day()
    assert len(rows) > 3 * groups_of
    writer = TableFiles(str(tmp_path), "run-1", batch_rows=7)
    for row in rows:
        writer.add(FRAMES, row)
    [written] = writer.close()
    assert writer.held_bytes == 0
    metadata = pq.read_metadata(tmp_path / "frames" / written.path)
    sizes = [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)]
    assert sizes[:-1] == [groups_of] * (len(sizes) - 1) and 0 < sizes[-1] <= groups_of and sum(sizes) == len(rows)
    expected = rows_to_batch(FRAMES, [r.as_dict() for r in rows], {"run_id": "run-1"}, without=("date",))
    assert pq.read_table(tmp_path / "frames" / written.path).equals(pa.Table.from_batches([expected]))
    # the statistics come from the footer the writer wrote: the same as the file's, read back
    assert json.loads(written.stats) == tablefiles.stats(metadata) and written.rows == len(rows)


def test_only_string_columns_whose_values_repeat_are_dictionary_encoded(tmp_path):
    """A string column is written with a dictionary when its values repeat (methods, the run id),
    plain when they are nearly one per row (here the arguments' JSON, one per frame); numbers never."""
    rows = _frames_of_one_day()
    for i, row in enumerate(rows):
        row.args_json = f'{{"delivery_tag": {i}}}'
    writer = TableFiles(str(tmp_path), "run-1")
    for row in rows:
        writer.add(FRAMES, row)
    [written] = writer.close()
    group = pq.read_metadata(tmp_path / "frames" / written.path).row_group(0)
    encodings = {group.column(i).path_in_schema: group.column(i).encodings for i in range(group.num_columns)}

    def dictionary(name):
        return bool({"RLE_DICTIONARY", "PLAIN_DICTIONARY"} & set(encodings[name]))
    schema = FRAMES.arrow(("date",))
    for field in schema:
        if not pa.types.is_string(field.type):
            assert not dictionary(field.name), field.name
            continue
        values = [getattr(row, field.name) if field.name != "run_id" else "run-1" for row in rows]
        present = [value for value in values if value is not None]
        repeats = bool(present) and len(set(present)) <= tablefiles.DICTIONARY_SHARE * len(present)
        assert dictionary(field.name) == repeats, field.name
    assert dictionary("method") and dictionary("run_id") and not dictionary("args_json")
    for name in ("ts_ns", "connection_seq"):
        assert not dictionary(name), name
    # the same rows whatever the encoding
    expected = rows_to_batch(FRAMES, [r.as_dict() for r in rows], {"run_id": "run-1"}, without=("date",))
    assert pq.read_table(tmp_path / "frames" / written.path).equals(pa.Table.from_batches([expected]))


def test_repeating_strings_are_the_string_columns_with_few_distinct_values():
    batch = pa.RecordBatch.from_pydict({
        "few": pa.array(["a", "b", "a", "a", None, "b"]),  # 2 distinct of 5
        "half": pa.array(["a", "b", "a", "b", "c", "d"]),  # 4 distinct of 6: more than half
        "unique": pa.array(["k1", "k2", "k3", "k4", "k5", "k6"]),
        "empty": pa.array([None] * 6, pa.string()),
        "numbers": pa.array([1, 1, 1, 1, 1, 1]),
        "large": pa.array(["x"] * 6, pa.large_string()),
    })
    assert tablefiles.repeating_strings(batch) == ["few", "large"]


def test_rows_given_in_arrow_follow_the_rows_added_before_them_per_date(tmp_path):
    """add_arrow (message_flows' tasks make their rows in Arrow): the rows go to their dates' files
    after the rows of that table added one by one before them, with the table's schema and run_id;
    a batch of one date and a batch crossing midnight alike."""
    from amqpcap.tables.registry import MESSAGE_FLOWS
    schema = MESSAGE_FLOWS.arrow(("run_id",))
    first, second = datetime.date(2026, 11, 27), datetime.date(2026, 11, 28)

    def rows(days, start):
        return [{"date": day, "capture": "c.pcap", "message_key": f"k{start + i}", "delivery_tag": start + i,
                 "provisional": False, "source": "c.pcap"} for i, day in enumerate(days)]
    one_by_one = rows([first, second], 0)
    in_arrow = [rows([first] * 3, 10), rows([second, first, second, first], 20)]
    writer = TableFiles(str(tmp_path), "run-1", batch_rows=100)
    for row in one_by_one:
        writer.add(MESSAGE_FLOWS, row)
    for batch in in_arrow:
        writer.add_arrow(MESSAGE_FLOWS, pa.Table.from_pylist(batch, schema=schema))
    files = writer.close()
    got = {f.date: pq.read_table(tmp_path / "message_flows" / f.path) for f in files}
    assert sorted(got) == [first.isoformat(), second.isoformat()] and len(files) == 2
    for day in (first, second):
        table = got[day.isoformat()]
        want = [row for row in one_by_one + in_arrow[0] + in_arrow[1] if row["date"] == day]
        assert table.schema.equals(MESSAGE_FLOWS.arrow(("date",)))
        assert table.column("message_key").to_pylist() == [row["message_key"] for row in want]
        assert set(table.column("run_id").to_pylist()) == {"run-1"}


def test_a_table_file_reads_back_from_a_manifest_old_or_new():
    """A run's manifest holds its TableFiles as JSON; one a 0.2.0 run left (captures as a JSON
    string) still reads, so `amqpcap repair` can finish that run."""
    import msgspec

    from amqpcap.lake.tablefiles import TableFile
    old = {"table": "frames", "path": "date=2026-11-21/a.parquet", "size": 10, "date": "2026-11-21", "rows": 3,
           "captures": '["file:///a.pcap", "file:///b.pcap"]', "stats": '{"numRecords": 3}'}
    file = TableFile.of(old)
    assert file.captures == ["file:///a.pcap", "file:///b.pcap"] and file.rows == 3 and file.path == old["path"]
    assert TableFile.of(msgspec.json.decode(msgspec.json.encode(file))) == file
