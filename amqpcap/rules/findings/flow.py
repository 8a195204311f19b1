"""When the broker stopped traffic: publisher-blocked (connection.blocked, with its reason, how long
and the publishes the client sent meanwhile) and flow-stopped (channel.flow), from the
`flow_control` rows (and the frames between a block and its unblock)."""

from __future__ import annotations

from amqpcap.rules.common import micros
from amqpcap.rules.findings.finding import WARNING, Finding, plural, seconds


class FlowStops:
    def __init__(self) -> None:
        self.blocked_at: int | None = None  # (micros) while the connection is blocked
        self.blocked_ns: int | None = None
        self.held: dict[int, list] = {}  # block start (micros) -> [publishes sent meanwhile, its frame]
        self.stops: dict[tuple, Finding] = {}

    def blocked(self, row) -> None:
        if row.method == "connection.blocked":
            self.blocked_at, self.blocked_ns = micros(row.ts_ns), row.ts_ns
            self.held.setdefault(self.blocked_at, [0, row.pcap_record])
        else:
            self.blocked_at = None

    def published(self, row) -> None:
        # (by time: the two directions' frames are decoded in their own order, so a publish sent
        # just before the block may be decoded after it)
        if self.blocked_at is not None and row.direction == "C>S" and row.ts_ns >= self.blocked_ns:
            self.held[self.blocked_at][0] += 1

    def row(self, table: str, row, rules) -> None:
        mechanism = row.get("mechanism")
        started, duration = row.get("started_at"), row.get("duration_ms")
        if mechanism == "connection.blocked":
            key = (mechanism, row.get("reason"))
            finding = self.stops.get(key)
            if finding is None:
                finding = self.stops[key] = Finding("publisher-blocked", WARNING, row, key, unit="s")
                finding.facts.update(reason=row.get("reason"), held=0, open=0)
            held, record = self.held.pop(started, (0, None))
            finding.facts["held"] += held
            finding.cite("frames", record)
        else:
            key = (mechanism, row.get("channel"), row.get("initiator"))
            finding = self.stops.get(key)
            if finding is None:
                finding = self.stops[key] = Finding("flow-stopped", WARNING, row, key, channel=row.get("channel"),
                                                    unit="s")
                finding.facts.update(initiator=row.get("initiator"), open=0)
        finding.seen(started * 1000 if started is not None else None,
                     duration / 1000.0 if duration is not None else None)
        if row.get("ended_at") is None:
            finding.facts["open"] += 1
        else:
            finding.seen(row.get("ended_at") * 1000, count=0)

    def findings(self, rules):
        for finding in self.stops.values():
            n, unended = finding.count, finding.facts["open"]
            longest = f"the longest {seconds(finding.value)}" if finding.value is not None else "never lifted"
            tail = f"; {plural(unended, 'stop')} not lifted before the capture ended" if unended and \
                finding.value is not None else ""
            if finding.kind == "publisher-blocked":
                reason = finding.facts["reason"] or "no reason given"
                yield finding, (f"the broker blocked {rules.client_name()}'s connection {plural(n, 'time')} "
                                f"({reason}), {longest}; {plural(finding.facts['held'], 'publish', 'publishes')} "
                                f"sent while blocked waited{tail}")
            else:
                who = "the broker" if finding.facts["initiator"] == "server" else "the client"
                yield finding, (f"{who} stopped the flow on channel {finding.channel} (channel.flow active=false) "
                                f"{plural(n, 'time')}, {longest}{tail}")
