"""The traffic period a report covers (--since / --until), as SQL predicates on the lake's views.

Every table is partitioned by `date`, the UTC date of the traffic that made the row (its first
frame), so each predicate also bounds `date`: DuckDB then reads only the partitions that can match,
which is what keeps a report of one day cheap on a lake of many months.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

UTC = datetime.timezone.utc


class PeriodError(ValueError):
    """--since / --until that cannot be read, or that make an empty period."""


@dataclass(frozen=True)
class Period:
    since: datetime.datetime | None = None  # inclusive, UTC
    until: datetime.datetime | None = None  # exclusive, UTC

    @classmethod
    def parse(cls, since: str | None, until: str | None) -> Period:
        period = cls(_instant(since, "--since"), _instant(until, "--until"))
        if period.since and period.until and period.since >= period.until:
            raise PeriodError(f"--since {since} is not before --until {until}")
        return period

    def events(self, column: str, date: str = "date") -> str:
        """Rows whose event time `column` is in the period (the row's `date` is that time's day)."""
        terms = []
        if self.since:
            terms += [f"{column} >= {_literal(self.since)}", f"{date} >= DATE '{self.since.date()}'"]
        if self.until:
            terms += [f"{column} < {_literal(self.until)}", f"{date} <= DATE '{self.until.date()}'"]
        return " AND ".join(terms) or "TRUE"

    def overlaps(self, start: str, end: str, date: str = "date") -> str:
        """Rows whose interval [start, end] meets the period (a null end: the instant `start`; the
        tables leave an end null when it was not captured, so callers coalesce a better one).
        The row's `date` is its start's day, so only the upper bound prunes partitions: a connection
        opened days before `since` can still be open in the period."""
        terms = []
        if self.since:
            terms.append(f"coalesce({end}, {start}) >= {_literal(self.since)}")
        if self.until:
            terms += [f"{start} < {_literal(self.until)}", f"{date} <= DATE '{self.until.date()}'"]
        return " AND ".join(terms) or "TRUE"

    def clip_start(self, column: str) -> str:
        """`column`, moved up to `since` when earlier (for drawing intervals inside the period)."""
        return f"greatest({column}, {_literal(self.since)})" if self.since else column

    def clip_end(self, column: str) -> str:
        return f"least({column}, {_literal(self.until)})" if self.until else column

    def describe(self) -> str:
        if not self.since and not self.until:
            return "all traffic in the lake"
        since = _text(self.since) if self.since else "the beginning"
        until = _text(self.until) if self.until else "the end"
        return f"from {since} to {until} (UTC)"


def _instant(text: str | None, option: str) -> datetime.datetime | None:
    """An ISO date or date-time; without a zone it is UTC."""
    if text is None or text == "":
        return None
    try:
        value = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise PeriodError(f"{option} {text!r} is not an ISO date or date-time "
                          "(e.g. 2026-11-21 or 2026-11-21T20:30:00Z)") from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _literal(instant: datetime.datetime) -> str:
    # Built from a datetime we parsed, never from the user's text: nothing to escape.
    return f"TIMESTAMPTZ '{instant.isoformat()}'"


def _text(instant: datetime.datetime) -> str:
    return instant.strftime("%Y-%m-%d %H:%M:%S") if instant.microsecond == 0 else instant.isoformat(" ")
