"""When the broker stopped traffic: publisher-blocked (connection.blocked, with its reason, how long
and the publishes the client sent meanwhile) and flow-stopped (channel.flow), from the
`flow_control` rows, the connection.blocked frames and the `publishes` rows."""

from __future__ import annotations

from amqpcap.rules.common import micros
from amqpcap.rules.findings.finding import WARNING, Finding, plural, seconds

BLOCKS = 1024  # connection.blocked intervals a connection keeps to count the publishes they held


class FlowStops:
    def __init__(self) -> None:
        self.blocks: list[list] = []  # per connection.blocked: [start ns, end ns or None, its frame, publishes]
        self.stops: dict[tuple, Finding] = {}
        self.block_of: dict[int, tuple] = {}  # block start (micros) -> its finding's key

    def blocked(self, row) -> None:
        """A connection.blocked or connection.unblocked frame."""
        blocks = self.blocks
        if row.method == "connection.blocked":
            if len(blocks) < BLOCKS and not (blocks and blocks[-1][1] is None):
                blocks.append([row.ts_ns, None, row.pcap_record, 0])
        elif blocks and blocks[-1][1] is None:
            blocks[-1][1] = row.ts_ns

    def row(self, table: str, row, rules) -> None:
        if table == "publishes":  # (by the publish's time: it may be settled, and its row made, much later)
            if self.blocks:
                sent = row.published_ns
                for block in reversed(self.blocks):
                    if sent is not None and block[0] <= sent and (block[1] is None or sent < block[1]):
                        block[3] += 1
                        break
            return
        mechanism = row.get("mechanism")
        started, duration = row.get("started_at"), row.get("duration_ms")
        if mechanism == "connection.blocked":
            key = (mechanism, row.get("reason"))
            finding = self.stops.get(key)
            if finding is None:
                finding = self.stops[key] = Finding("publisher-blocked", WARNING, row, key, unit="s")
                finding.facts.update(reason=row.get("reason"), held=0, open=0)
            self.block_of[started] = key
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
        for start, _, record, held in self.blocks:
            key = self.block_of.get(micros(start))
            if key is not None:
                finding = self.stops[key]
                finding.facts["held"] += held
                finding.cite("frames", record)
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
