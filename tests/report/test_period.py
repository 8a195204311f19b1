"""--since / --until: parsing, and the SQL predicates every section filters with."""

from __future__ import annotations

import datetime

import duckdb
import pytest

from amqpcap.report.period import Period, PeriodError

UTC = datetime.timezone.utc


def test_dates_and_times_are_utc_unless_zoned():
    period = Period.parse("2026-11-21", "2026-11-21T22:30:00+02:00")
    assert period.since == datetime.datetime(2026, 11, 21, tzinfo=UTC)
    assert period.until == datetime.datetime(2026, 11, 21, 20, 30, tzinfo=UTC)
    assert Period.parse("2026-11-21T20:00Z", None).since == datetime.datetime(2026, 11, 21, 20, tzinfo=UTC)
    assert Period.parse(None, None) == Period()


@pytest.mark.parametrize("since, until, message", [
    ("yesterday", None, "--since 'yesterday' is not an ISO date"),
    (None, "2026-13-01", "--until '2026-13-01' is not an ISO date"),
    ("2026-11-22", "2026-11-21", "is not before"),
])
def test_bad_periods_say_why(since, until, message):
    with pytest.raises(PeriodError, match=message):
        Period.parse(since, until)


@pytest.fixture
def con():
    """Events and intervals around midnight, each row's date its start's UTC day (as in the lake)."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute("""CREATE TABLE t AS SELECT * FROM (VALUES
        ('a', TIMESTAMPTZ '2026-11-20 23:00:00+00', TIMESTAMPTZ '2026-11-21 01:00:00+00'),
        ('b', TIMESTAMPTZ '2026-11-21 12:00:00+00', TIMESTAMPTZ '2026-11-21 12:00:01+00'),
        ('c', TIMESTAMPTZ '2026-11-22 00:00:00+00', NULL),
        ('d', TIMESTAMPTZ '2026-11-19 10:00:00+00', TIMESTAMPTZ '2026-11-19 11:00:00+00'))
        v(name, s, e)""")
    con.execute("CREATE VIEW v AS SELECT *, CAST(s AS DATE) AS date FROM t")
    return con


def names(con, where: str) -> list[str]:
    return [r[0] for r in con.execute(f"SELECT name FROM v WHERE {where} ORDER BY name").fetchall()]


def test_events_are_in_the_period_by_their_own_time(con):
    period = Period.parse("2026-11-21", "2026-11-22")
    assert names(con, period.events("s")) == ["b"]  # until is exclusive
    assert names(con, Period.parse("2026-11-21", None).events("s")) == ["b", "c"]
    assert names(con, Period().events("s")) == ["a", "b", "c", "d"]


def test_intervals_overlapping_the_period_count_even_when_they_started_before(con):
    period = Period.parse("2026-11-21", "2026-11-22")
    assert names(con, period.overlaps("s", "e")) == ["a", "b"]
    # no end: an instant at its start
    assert names(con, Period.parse("2026-11-22", None).overlaps("s", "e")) == ["c"]
    assert names(con, Period.parse("2026-11-22T00:00:01", None).overlaps("s", "e")) == []
