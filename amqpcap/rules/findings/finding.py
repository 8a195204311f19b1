"""One finding while it grows, and the `findings` row it becomes.

A rule set keeps its findings by what they are about (a consumer, an exchange and routing key, a
reply code and failing method...), updates them as the rows they read arrive, and emits them when
the connection ends: a connection carried across runs has each finding once (provisional in the
run that saved it, replaced by the run that resumed it). Evidence lists are cut at
EVIDENCE_LIMIT items, so a finding's size does not follow the traffic.
"""

from __future__ import annotations

import hashlib

import orjson

from amqpcap.rules.common import day, micros

INFO, WARNING, ERROR = "info", "warning", "error"
SEVERITIES = (ERROR, WARNING, INFO)  # the order people read them in
EVIDENCE_LIMIT = 20
# Findings a rule set keeps per connection by names the traffic chose (exchanges, routing keys, queues):
# beyond, what would make another goes to one finding of "(others)", so memory does not follow the names.
GROUPS = 256
OTHERS = "(others)"
# Where a finding is: the columns it copies from the first row that made it.
WHERE = ("connection", "capture", "client", "server")


class Finding:
    """What a finding is about and what was measured; `summary` is made when it is emitted
    (its numbers are final then)."""

    __slots__ = ("kind", "severity", "where", "channel", "consumer_tag", "queue", "exchange", "routing_key",
                 "first_ns", "last_ns", "count", "value", "threshold", "unit", "evidence", "facts", "about")

    def __init__(self, kind: str, severity: str, where, about: tuple = (), channel=None, consumer_tag=None,
                 queue=None, exchange=None, routing_key=None, threshold=None, unit=None) -> None:
        """`where`: a row (dict or typed) with the connection's columns; `about`: what makes the
        finding one (part of its id)."""
        self.kind = kind
        self.severity = severity
        queue, exchange, routing_key = (None if v == OTHERS else v for v in (queue, exchange, routing_key))
        self.where = {name: where.get(name) for name in WHERE}
        self.about = about
        self.channel = channel
        self.consumer_tag = consumer_tag
        self.queue = queue
        self.exchange = exchange
        self.routing_key = routing_key
        self.first_ns: int | None = None
        self.last_ns: int | None = None
        self.count = 0
        self.value: float | None = None
        self.threshold = threshold
        self.unit = unit
        self.evidence: dict[str, list] = {}
        self.facts: dict = {}  # what the summary says besides the columns (a reply text, a reason...)

    def seen(self, ts_ns: int | None, value: float | None = None, count: int = 1) -> "Finding":
        """One more occurrence at `ts_ns`; `value`: its measure (the finding keeps the largest)."""
        if ts_ns is not None:
            if self.first_ns is None or ts_ns < self.first_ns:
                self.first_ns = ts_ns
            if self.last_ns is None or ts_ns > self.last_ns:
                self.last_ns = ts_ns
        if value is not None and (self.value is None or value > self.value):
            self.value = value
        self.count += count
        return self

    def cite(self, name: str, item) -> None:
        """Evidence: a frame number, a delivery tag, a message key... (the first EVIDENCE_LIMIT)."""
        if item is None:
            return
        items = self.evidence.get(name)
        if items is None:
            items = self.evidence[name] = []
        if len(items) < EVIDENCE_LIMIT and item not in items:
            items.append(item)

    def row(self, summary: str) -> dict:
        """The `findings` row (its columns in order; source, provisional and run_id are the
        writer's)."""
        where = self.where
        first = self.first_ns
        identity = orjson.dumps([self.kind, where["connection"] or where["client"], *self.about],
                                option=orjson.OPT_NON_STR_KEYS, default=str)
        return {"date": day(first) if first is not None else None, "kind": self.kind, "severity": self.severity,
                "finding_id": hashlib.sha256(identity).hexdigest()[:16], "capture": where["capture"],
                "connection": where["connection"], "client": where["client"], "server": where["server"],
                "channel": self.channel, "consumer_tag": self.consumer_tag, "queue": self.queue,
                "exchange": self.exchange, "routing_key": self.routing_key, "first_at": micros(first),
                "first_ns": first, "last_at": micros(self.last_ns), "last_ns": self.last_ns, "count": self.count,
                "value": None if self.value is None else float(self.value),
                "threshold": None if self.threshold is None else float(self.threshold), "unit": self.unit,
                "summary": summary, "evidence_json": orjson.dumps(self.evidence).decode() if self.evidence else None,
                "source": None, "provisional": None}


def bounded(groups: dict, key: tuple) -> tuple:
    """`key`, or the same-length key of "(others)" once `groups` holds GROUPS findings without it."""
    if key in groups or len(groups) < GROUPS:
        return key
    return (OTHERS,) * len(key)


def seconds(value_s: float | None) -> str:
    """A duration in words' precision: 5.0 s, 0.35 s, 12 min."""
    if value_s is None:
        return "?"
    if value_s >= 600:
        return f"{value_s / 60:.0f} min"
    return f"{value_s:.1f} s" if value_s >= 1 else f"{value_s:.2f} s"


def named(value, empty: str = "''") -> str:
    """A name as a summary shows it: the default exchange as ''."""
    return empty if value in (None, "") else str(value)


def plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n} {word if n == 1 else (many or word + 's')}"
