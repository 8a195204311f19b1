"""One connection's findings rules together: the frames of its methods and the rows the other rule
sets emit for it come in (amqpcap.rules.connection routes them), its findings go out when it ends.

Carried across runs inside the connection's analytics state (amqpcap.onepass.state): only plain
values and the rule sets' own objects are held, never a frame row; `record`, the Wireshark frame
number of the method being analysed, lets a row emitted while that frame is handled cite it.
"""

from __future__ import annotations

from amqpcap.rules.findings.churn import ChannelChurn
from amqpcap.rules.findings.closes import CloseRules
from amqpcap.rules.findings.consumers import AckTimeouts, Prefetch, Redeliveries
from amqpcap.rules.findings.deprecations import Deprecations
from amqpcap.rules.findings.flow import FlowStops
from amqpcap.rules.findings.liveness import Liveness
from amqpcap.rules.findings.publishers import LargeMessages, Nacks, Returns
from amqpcap.rules.findings.rpc import SlowRpc
from amqpcap.rules.findings.visibility import Visibility
from amqpcap.tables.registry import FINDINGS


class FindingRules:
    """One connection's rule sets; `settings`: amqpcap.settings.FindingsSection."""

    def __init__(self, emit, settings) -> None:
        self.emit = emit
        self.settings = settings
        self.record: int | None = None  # the frame being analysed (its pcap record), while it is
        self.facts: dict = {}  # the connections row's client product, for the summaries
        self.end_ns: int | None = None  # the connection's last packet, once it ends
        self.acks = AckTimeouts(settings)
        self.redeliveries = Redeliveries(settings)
        self.prefetch = Prefetch(settings)
        self.returns = Returns()
        self.nacks = Nacks()
        self.large = LargeMessages(settings)
        self.flow = FlowStops()
        self.liveness = Liveness(settings)
        self.closes = CloseRules()
        self.churn = ChannelChurn(settings)
        self.rpc = SlowRpc(settings)
        self.deprecations = Deprecations()
        self.visibility = Visibility()
        # who reads which table's rows (by table name)
        self.readers = {
            "errors": (self.closes, self.acks),
            "deliveries": (self.acks, self.redeliveries, self.prefetch, self.large),
            "publishes": (self.returns, self.nacks, self.large, self.flow),
            "flow_control": (self.flow,),
            "heartbeats": (self.liveness,),
            "rpc_calls": (self.rpc,),
            "decode_issues": (self.visibility,),
            "tls_connections": (self.visibility,),
        }

    def method(self, row) -> None:
        """A method frame (a FrameRow) of amqpcap.rules.connection.FINDING_METHODS, before the other
        rule sets see it (`record` is already its frame number)."""
        method = row.method
        if method == "channel.open":
            self.churn.opened(row)
            self.prefetch.opened(row)
        elif method == "basic.qos":
            self.prefetch.qos(row)
            self.deprecations.qos(row)
        elif method == "queue.declare":
            self.deprecations.declare(row)
        elif method in ("connection.blocked", "connection.unblocked"):
            self.flow.blocked(row)
        elif method == "basic.return":
            self.returns.frame(row)

    def delivered(self, row, outstanding: int) -> None:
        """A basic.deliver or get-ok that made its channel's outstanding deliveries more than ever in
        its lifetime, and how many."""
        self.prefetch.outstanding(row, outstanding)

    def row(self, table, row) -> None:
        """A row another rule set emitted for this connection."""
        readers = self.readers.get(table.name)
        if readers is not None:
            for reader in readers:
                reader.row(table.name, row, self)
        elif table.name == "connections":
            self.facts = {"product": row.get("client_product"), "version": row.get("client_version")}

    def ending(self, stream: dict) -> None:
        """The connection is about to end (its `streams` row): what it emits next is final."""
        self.record = None
        last = stream.get("last_ts")
        self.end_ns = last * 1000 if last is not None else None

    def end(self, late_silences: dict) -> None:
        """Every finding of the connection; `late_silences`: per direction, the heartbeat rules'
        silences longer than missed_heartbeat_intervals (amqpcap.rules.heartbeats)."""
        self.liveness.late = late_silences
        for rules in (self.acks, self.redeliveries, self.prefetch, self.returns, self.nacks, self.large, self.flow,
                      self.liveness, self.closes, self.churn, self.rpc, self.deprecations, self.visibility):
            for finding, summary in rules.findings(self):
                self.emit(FINDINGS, finding.row(summary))

    def client_name(self) -> str:
        """The client as summaries name it: its product and version when it said them."""
        product, version = self.facts.get("product"), self.facts.get("version")
        return f"{product} {version}" if product and version else product or "the client"
