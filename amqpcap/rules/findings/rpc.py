"""slow-rpc: the client's synchronous methods (queue.declare, exchange.declare, basic.qos,
confirm.select, queue.bind...) the broker answered after more than slow_rpc_ms, from the
`rpc_calls` rows, by request method."""

from __future__ import annotations

from amqpcap.rules.findings.finding import WARNING, Finding, plural


class SlowRpc:
    def __init__(self, settings) -> None:
        self.limit = settings.slow_rpc_ms
        self.slow: dict[str, Finding] = {}

    def row(self, table: str, row, rules) -> None:
        latency = row.latency_ms
        if latency is None or latency <= self.limit or row.requester != "client":
            return
        request = row.request
        finding = self.slow.get(request)
        if finding is None:
            finding = self.slow[request] = Finding("slow-rpc", WARNING, row, (request,), threshold=self.limit,
                                                   unit="ms")
        finding.seen(row.request_at * 1000 if row.request_at is not None else None, latency)
        finding.cite("frames", rules.record)  # the reply
        finding.cite("channels", row.channel)

    def findings(self, rules):
        for request, finding in self.slow.items():
            yield finding, (f"the broker took up to {finding.value:.0f} ms to answer {request} "
                            f"({plural(finding.count, 'call')} over {finding.threshold:.0f} ms)")
