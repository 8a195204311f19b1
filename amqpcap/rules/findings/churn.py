"""Churn: channel-churn (channel.open frames on one connection within any 60 s, per connection) and
connection-churn (short-lived connections one client host opened within any 60 s: the one finding
across connections, made from the `connections` rows of a run, amqpcap.job and `decode
--findings` call it). Connections and channels are meant to be long-lived: opening one per message
costs the broker a handshake (and its metadata store a write) each time."""

from __future__ import annotations

from collections import deque
from itertools import islice

from amqpcap.rules.common import day
from amqpcap.rules.findings.finding import EVIDENCE_LIMIT, WARNING, Finding, seconds

WINDOW_NS = 60 * 1_000_000_000


class _Peak:
    """The most events within any WINDOW_NS, over events in time order."""

    __slots__ = ("window", "total", "peak", "peak_first_ns", "peak_last_ns", "peak_items")

    def __init__(self) -> None:
        self.window: deque = deque()  # (ns, item) within the last WINDOW_NS
        self.total = 0
        self.peak = 0
        self.peak_first_ns = self.peak_last_ns = None
        self.peak_items: list = []

    def add(self, ts_ns: int, item) -> None:
        window = self.window
        window.append((ts_ns, item))
        while window[0][0] <= ts_ns - WINDOW_NS:
            window.popleft()
        self.total += 1
        if len(window) > self.peak:
            self.peak = len(window)
            self.peak_first_ns, self.peak_last_ns = window[0][0], ts_ns
            if len(self.peak_items) < EVIDENCE_LIMIT:
                self.peak_items = [i for _, i in islice(window, EVIDENCE_LIMIT)]


class ChannelChurn:
    def __init__(self, settings) -> None:
        self.limit = settings.channels_per_minute
        self.opens = _Peak()
        self.where = None

    def opened(self, row) -> None:
        if row.direction != "C>S":
            return
        if self.where is None:
            self.where = {name: row.get(name) for name in ("connection", "capture", "client", "server")}
        self.opens.add(row.ts_ns, row.pcap_record)

    def findings(self, rules):
        opens = self.opens
        if opens.peak < self.limit:
            return
        finding = Finding("channel-churn", WARNING, self.where, ("channels",), threshold=self.limit,
                          unit="per-minute")
        finding.seen(opens.peak_first_ns, opens.peak, opens.total)
        finding.seen(opens.peak_last_ns, count=0)
        for record in opens.peak_items:
            finding.cite("frames", record)
        span = (opens.peak_last_ns - opens.peak_first_ns) / 1e9
        yield finding, (f"{rules.client_name()} opened {opens.peak} channels on one connection within "
                        f"{seconds(span)} ({opens.total} in all): open channels once and reuse them")


def client_host(endpoint: str | None) -> str | None:
    """The host of an ip:port ([ip6]:port) endpoint."""
    if not endpoint:
        return None
    host = endpoint.rsplit(":", 1)[0]
    return host[1:-1] if host.startswith("[") else host


class ConnectionChurn:
    """connection-churn over `connections` rows (any order): per client host, its short-lived
    connections (ended, within short_connection_seconds of their start), peak per any 60 s."""

    def __init__(self, settings) -> None:
        self.settings = settings
        self.short: dict[str, list] = {}  # host -> [(started ns, connection, capture, server, client, product)]

    def add(self, row) -> None:
        started, ended = row.get("started_at"), row.get("ended_at")
        if started is None or ended is None or row.get("end_reason") == "capture-end" or row.get("provisional"):
            return
        if (ended - started) / 1e6 > self.settings.short_connection_seconds:
            return
        host = client_host(row.get("client"))
        if host is not None:
            self.short.setdefault(host, []).append(
                (started * 1000, row.get("connection"), row.get("capture"), row.get("server"), row.get("client"),
                 row.get("client_product"), row.get("source")))

    def rows(self) -> list[dict]:
        """The findings rows (source: the capture file of the peak's first connection)."""
        out = []
        limit = self.settings.connections_per_minute
        for host, connections in self.short.items():
            if len(connections) < limit:
                continue
            connections.sort()
            peak = _Peak()
            for item in connections:
                peak.add(item[0], item)
            if peak.peak < limit:
                continue
            first = peak.peak_items[0]
            finding = Finding("connection-churn", WARNING, {"capture": first[2], "server": first[3], "client": host},
                              ("host", host, peak.peak_first_ns), threshold=limit, unit="per-minute")
            finding.seen(peak.peak_first_ns, peak.peak, peak.total)
            finding.seen(peak.peak_last_ns, count=0)
            for item in peak.peak_items:
                finding.cite("connections", item[1])
            products = sorted({item[5] for item in connections if item[5]})
            span = (peak.peak_last_ns - peak.peak_first_ns) / 1e9
            row = finding.row(f"{' / '.join(products) or 'a client'} on {host} opened {peak.peak} short-lived "
                              f"connections (each at most {seconds(self.settings.short_connection_seconds)}) within "
                              f"{seconds(span)} ({peak.total} in all): keep a connection open and reuse it")
            row["date"] = day(peak.peak_first_ns)
            row["source"] = first[6]
            row["provisional"] = False
            out.append(row)
        return out

