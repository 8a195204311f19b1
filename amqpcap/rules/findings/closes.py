"""channel-error and connection-error: closes with a reply code other than 200, from the `errors`
rows, grouped by scope, reply code, failing method and who closed (an inequivalent declare, an
access refused, a queue not found...). The broker's acknowledgement-timeout close is
consumer-ack-timeout's."""

from __future__ import annotations

from amqpcap.rules.findings.consumers import is_ack_timeout
from amqpcap.rules.findings.finding import ERROR, WARNING, Finding, plural

CLOSES = ("channel.close", "connection.close")


class CloseRules:
    def __init__(self) -> None:
        self.closes: dict[tuple, Finding] = {}

    def row(self, table: str, row, rules) -> None:
        if row.get("method") not in CLOSES or is_ack_timeout(row):
            return
        scope = row.get("scope")
        key = (scope, row.get("reply_code"), row.get("failing_method"), row.get("initiator"))
        finding = self.closes.get(key)
        if finding is None:
            finding = self.closes[key] = Finding(f"{scope}-error", ERROR if key[3] == "server" else WARNING, row, key,
                                                 channel=row.get("channel") if scope == "channel" else None)
            finding.facts.update(name=row.get("reply_name"), text=row.get("reply_text"))
        finding.seen(row.get("ts_ns"))
        finding.cite("frames", rules.record)
        if scope == "channel":
            finding.cite("channels", row.get("channel"))
            if row.get("channel") != finding.channel:
                finding.channel = None  # several channels: the evidence lists them

    def findings(self, rules):
        for (scope, code, failing, initiator), finding in self.closes.items():
            who = "the broker" if initiator == "server" else rules.client_name()
            what = ("the connection" if finding.count == 1 else plural(finding.count, "connection")) \
                if scope == "connection" else plural(finding.count, "channel")
            if scope == "connection" and finding.count > 1:
                what = f"the connection {finding.count} times"
            name = f" {finding.facts['name']}" if finding.facts.get("name") else ""
            after = f" after {failing}" if failing else ""
            yield finding, f"{who} closed {what} with {code}{name}{after}: {finding.facts.get('text') or ''}".rstrip(": ")
