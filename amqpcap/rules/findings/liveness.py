"""Silences: heartbeat-timeout (a side silent for two agreed intervals at the end: the peer gave up
on it) and missed-heartbeats (silences longer than missed_heartbeat_intervals on a connection that
did not time out), from the `heartbeats` rows and the heartbeat rules' count of such silences."""

from __future__ import annotations

from amqpcap.rules.findings.finding import ERROR, WARNING, Finding, plural, seconds

SIDE = {"C>S": "client", "S>C": "broker"}


class Liveness:
    def __init__(self, settings) -> None:
        self.intervals = settings.missed_heartbeat_intervals
        self.rows: list = []  # the connection's heartbeats rows (one per direction)
        self.late: dict = {}  # direction -> (silences, longest ns, first end ns, last end ns)

    def row(self, table: str, row, rules) -> None:
        self.rows.append(row)

    def findings(self, rules):
        for row in self.rows:
            heartbeat, direction = row.get("heartbeat_s"), row.get("direction")
            if not heartbeat:
                continue
            side = SIDE.get(direction, direction)
            if row.get("ended_after_silence"):
                silent = row.get("final_silence_s")
                finding = Finding("heartbeat-timeout", ERROR, row, ("timeout", direction), threshold=2 * heartbeat,
                                  unit="s")
                end = rules.end_ns
                finding.seen(end - int(silent * 1e9) if end is not None else None, silent)
                finding.seen(end, count=0)
                yield finding, (f"the {side} ({row.get('client') if side == 'client' else row.get('server')}) went "
                                f"silent for {seconds(silent)}, more than twice the {heartbeat} s heartbeat: the "
                                "connection ended by heartbeat timeout")
                continue
            late = self.late.get(direction)
            if not late or not late[0]:
                continue
            count, longest_ns, first_ns, last_ns = late
            finding = Finding("missed-heartbeats", WARNING, row, ("missed", direction),
                              threshold=self.intervals * heartbeat, unit="s")
            finding.seen(first_ns, longest_ns / 1e9, count)
            finding.seen(last_ns, count=0)
            yield finding, (f"the {side} was silent for more than {self.intervals:g} heartbeat intervals "
                            f"({heartbeat} s) {plural(count, 'time')}, the longest {seconds(longest_ns / 1e9)}, "
                            "without the connection timing out")
