"""The report's time axis: bucket size and the idle stretches it skips."""

from __future__ import annotations

from amqpcap.report.timeaxis import BREAK_BUCKETS, BUCKETS, MIN, MS, S, TimeAxis, duration_text, plan_axis

DAY = 24 * 3600 * S


def test_continuous_traffic_gets_a_bucket_from_its_span_and_no_break():
    axis = plan_axis(0, 2 * 3600 * S, [])
    assert axis.bucket_us == 1 * MIN and axis.breaks == ()


def test_bursts_far_apart_are_shown_side_by_side():
    # bursts of a minute and of 50 s a year apart: the year is skipped and 1 s buckets fit the rest
    start, end = 0, 365 * DAY + 50 * S
    axis = plan_axis(start, end, [(60 * S, 365 * DAY)])
    assert axis.bucket_us == 1 * S
    assert axis.breaks == ((61 * S, 365 * DAY - 1 * S),)  # one bucket kept each side of the gap
    shown = sum(b - a for a, b in axis.segments())
    assert shown <= BUCKETS * axis.bucket_us + 4 * axis.bucket_us


def test_short_pauses_are_not_skipped():
    axis = plan_axis(0, 600 * S, [(100 * S, 103 * S)])
    assert axis.bucket_us == 5 * S and axis.breaks == ()
    assert all(b - a > BREAK_BUCKETS * axis.bucket_us for a, b in plan_axis(0, DAY, [(S, DAY - S)]).breaks)


def test_ticks_start_each_shown_stretch_and_write_the_date_when_it_changes():
    axis = plan_axis(0, 365 * DAY + 50 * S, [(60 * S, 365 * DAY)])
    values, texts = axis.ticks()
    assert values[0].startswith("1969-12-31T23:59:59") and texts[0].endswith("<br>1969-12-31")
    assert any(v.startswith("1971-01-01T00:00") for v in values)
    assert "<br>1971-01-01" in "".join(texts)


def test_sql_buckets():
    import duckdb
    axis = TimeAxis(0, 10 * S, 250 * MS)
    moment = "TIMESTAMP '2026-11-21 20:30:01.3'"
    bucket = duckdb.connect().execute(f"SELECT {axis.bucket(moment)}").fetchone()[0]
    assert bucket.isoformat() == "2026-11-21T20:30:01.250000"


def test_durations_read_naturally():
    assert [duration_text(v) for v in (500, 1500 * MS, 90 * S, 36 * 3600 * S)] == ["500 µs", "1.5 s", "1.5 min", "1.5 d"]
