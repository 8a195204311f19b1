"""One time axis for every time plot of a report: the bucket size of the rate and error plots, and
the idle stretches the axis skips.

Captures are often bursts (a few minutes recorded now and then, or a lake holding last year's
captures beside today's): on a plain axis the traffic would be a few slivers on a wide empty line.
So the axis leaves out the longest stretches where no connection was open (Plotly rangebreaks), and
the bucket size is chosen from the time that is left. Both come from the connections table's
intervals, a small table, with window functions: no frame is read.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field

from amqpcap.report.period import Period

US = 1
MS = 1000 * US
S = 1000 * MS
MIN = 60 * S
H = 60 * MIN
D = 24 * H
# Bucket sizes a reader can count in.
NICE = (1 * MS, 2 * MS, 5 * MS, 10 * MS, 20 * MS, 50 * MS, 100 * MS, 200 * MS, 500 * MS,
        1 * S, 2 * S, 5 * S, 10 * S, 15 * S, 30 * S, 1 * MIN, 2 * MIN, 5 * MIN, 10 * MIN, 15 * MIN, 30 * MIN,
        1 * H, 2 * H, 3 * H, 6 * H, 12 * H, 1 * D, 2 * D, 7 * D, 30 * D)
BUCKETS = 120          # about this many buckets across the time shown
MAX_BREAKS = 40        # beyond this many skipped stretches the axis gets hard to read
BREAK_BUCKETS = 6      # only stretches longer than this many buckets are skipped
CANDIDATE_GAPS = 200   # the longest idle stretches fetched from the lake


@dataclass(frozen=True)
class TimeAxis:
    start_us: int | None                     # first traffic in the period (None: no traffic)
    end_us: int | None
    bucket_us: int = 1 * S
    breaks: tuple[tuple[int, int], ...] = field(default=())  # skipped stretches [from, to)

    @property
    def empty(self) -> bool:
        return self.start_us is None

    def bucket(self, column: str) -> str:
        """SQL: the start of the bucket holding timestamp `column` (a TIMESTAMP, UTC)."""
        return f"make_timestamp((epoch_us({column}) // {self.bucket_us}) * {self.bucket_us})"

    @property
    def bucket_seconds(self) -> float:
        return self.bucket_us / S

    def bucket_text(self) -> str:
        return duration_text(self.bucket_us)

    def skipped_text(self) -> str:
        if not self.breaks:
            return ""
        total = sum(b - a for a, b in self.breaks)
        return (f"The time axis skips {len(self.breaks)} idle stretch{'es' if len(self.breaks) > 1 else ''} "
                f"({duration_text(total)} in all) where no connection was open.")

    def apply(self, fig, whole_period: bool = True) -> None:
        """Make `fig`'s x axis this one: the idle stretches left out (a dotted line marks each),
        ticks placed and labelled here (Plotly's own ticks ignore the skipped stretches and may
        leave a single label) and the same range as every other time plot; without whole_period,
        Plotly fits the range to the data, and places the ticks."""
        axis = {"type": "date", "title": {"text": "time (UTC)"},
                "rangebreaks": [{"bounds": [_iso(a), _iso(b)]} for a, b in self.breaks]}
        if whole_period and not self.empty:
            values, texts = self.ticks()
            axis.update(range=[_iso(self.start_us - self.bucket_us), _iso(self.end_us + self.bucket_us)],
                        tickvals=values, ticktext=texts)
            for _, resumed in self.breaks:
                fig.add_vline(x=_iso(resumed), line={"dash": "dot", "width": 1, "color": "#BBBBBB"}, layer="below")
        fig.update_xaxes(**axis)

    def segments(self) -> list[tuple[int, int]]:
        """The stretches of time shown, in order."""
        if self.empty:
            return []
        edges = [self.start_us - self.bucket_us, *(t for gap in self.breaks for t in gap), self.end_us + self.bucket_us]
        return list(zip(edges[::2], edges[1::2]))

    def ticks(self, count: int = 8) -> tuple[list[str], list[str]]:
        """About `count` ticks spread over the time shown: every shown stretch begins with one
        unless it would crowd the previous; the date is written when it changes."""
        segments = self.segments()
        shown = sum(b - a for a, b in segments)
        if not shown:
            return [], []
        step = choose_step(shown / count)
        values: list[int] = []
        position, last = 0, None  # position: time shown so far, up to the segment's start
        for a, b in segments:
            first = -(-a // step) * step
            for t in [a, *range(first, b + 1, step)]:
                at = position + (t - a)
                if last is None or at - last >= 0.6 * step:
                    values.append(t)
                    last = at
            position += b - a
        texts, previous_day = [], None
        for t in values:
            moment = timestamp(t)
            text = _clock(moment, step)
            if moment.date() != previous_day:
                text += f"<br>{moment:%Y-%m-%d}"
                previous_day = moment.date()
            texts.append(text)
        return [_iso(t) for t in values], texts


def build_axis(con, period: Period) -> TimeAxis:
    """The axis for the traffic in `period`: the span of the connections open in it (clipped to
    it), less the longest idle stretches between them."""
    start, end = period.clip_start("started_at"), period.clip_end("coalesce(ended_at, started_at)")
    intervals = (f"SELECT epoch_us({start}) AS s, epoch_us({end}) AS e FROM connections "
                 f"WHERE started_at IS NOT NULL AND {period.overlaps('started_at', 'ended_at')}")
    extent = con.execute(f"SELECT min(s), max(e) FROM ({intervals})").fetchone()
    if extent[0] is None:
        extent = _captures_extent(con, period)
        if extent[0] is None:
            return TimeAxis(None, None)
        return TimeAxis(extent[0], extent[1], choose_bucket(extent[1] - extent[0]))
    # Gaps and islands: a gap starts where every interval begun so far has ended.
    gaps = con.execute(f"""
        WITH iv AS ({intervals}),
        reach AS (SELECT s, max(e) OVER (ORDER BY s, e ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before
                  FROM iv)
        SELECT before, s FROM reach WHERE s > before ORDER BY s - before DESC LIMIT {CANDIDATE_GAPS}
    """).fetchall()
    return plan_axis(extent[0], extent[1], gaps)


def plan_axis(start_us: int, end_us: int, gaps: list[tuple[int, int]]) -> TimeAxis:
    """The finest bucket that covers the time shown in about BUCKETS buckets, the time shown being
    the span less the idle stretches longer than BREAK_BUCKETS of that bucket (a finer bucket
    skips more, shorter stretches)."""
    gaps = sorted(gaps, key=lambda g: g[1] - g[0], reverse=True)
    span = end_us - start_us
    for bucket in NICE:
        # A bucket's bar starts at or before the traffic in it: keep one bucket each side of a gap.
        breaks = [(a + bucket, b - bucket) for a, b in gaps if b - a > BREAK_BUCKETS * bucket][:MAX_BREAKS]
        if span - sum(b - a for a, b in breaks) <= BUCKETS * bucket:
            return TimeAxis(start_us, end_us, bucket, tuple(sorted(breaks)))
    return TimeAxis(start_us, end_us, NICE[-1], tuple(sorted(breaks)))


def choose_bucket(span_us: int) -> int:
    return next((nice for nice in NICE if nice * BUCKETS >= span_us), NICE[-1])


def choose_step(at_least_us: float) -> int:
    return next((nice for nice in NICE if nice >= at_least_us), NICE[-1])


def _clock(moment: datetime.datetime, step: int) -> str:
    if step >= D:
        return f"{moment:%b %d}"
    if step >= MIN:
        return f"{moment:%H:%M}"
    if step >= S:
        return f"{moment:%H:%M:%S}"
    return f"{moment:%H:%M:%S.%f}"[:-3]


def _iso(us: int) -> str:
    return timestamp(us).isoformat()


def timestamp(us: int) -> datetime.datetime:
    """Naive UTC (Plotly draws naive date-times as they are)."""
    return datetime.datetime(1970, 1, 1) + datetime.timedelta(microseconds=us)


def duration_text(us: float) -> str:
    for unit, name in ((D, "d"), (H, "h"), (MIN, "min"), (S, "s"), (MS, "ms")):
        if us >= unit:
            value = us / unit
            return f"{value:.0f} {name}" if value >= 10 or value == int(value) else f"{value:.1f} {name}"
    return f"{us:.0f} µs"


def _captures_extent(con, period: Period):
    """No connection rows (the analytics were not built): the captures' own span."""
    return con.execute(f"SELECT epoch_us(min({period.clip_start('first_ts')})), "
                       f"epoch_us(max({period.clip_end('last_ts')})) FROM captures "
                       f"WHERE first_ts IS NOT NULL AND {period.overlaps('first_ts', 'last_ts')}").fetchone()
