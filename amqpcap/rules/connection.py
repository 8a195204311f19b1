"""One connection's analytics: its frames rows in, in decoding order, finished analytics rows out.

`ConnectionAnalyzer` routes each row to the rule sets (one file each): connection-wide rules see
every frame (`connections`, `heartbeats`) or every method (`errors`, `flow_control`); per channel
number, `rpc_calls` sees its methods (channel 0 too), and `channels`, `deliveries` and `publishes`
those of channels 1 and up. A channel number's lifetimes are counted here, once, for all of them:
instance 0 until the first channel.open seen, then 1, 2...

Frames and messages rows come typed (amqpcap.tables.rows.FrameRow, MessageRow: the rules read their
fields); `Analytics.frame` takes dicts of their columns too (tests, the lake's raw tables).

`Analytics` serves many connections at once, as a decode task interleaves them: rows are routed by
their `connection`, and a connection's analyzer is finished and dropped when its `streams` row
arrives (the decoder emits that after the connection's last frame).
"""

from __future__ import annotations

from typing import Callable

from amqpcap.rules.channels import ChannelRules
from amqpcap.rules.common import Emit, arguments, to_int
from amqpcap.rules.connections import ConnectionRules
from amqpcap.rules.deliveries import DeliveryRules
from amqpcap.rules.errors import ErrorRules
from amqpcap.rules.findings.connection import FindingRules
from amqpcap.rules.flow_control import FlowRules
from amqpcap.rules.heartbeats import HeartbeatRules
from amqpcap.rules.naming import Naming, naming_for
from amqpcap.rules.publishes import PublishRules
from amqpcap.rules.rpc_calls import RpcRules
from amqpcap.tables.rows import FrameRow, MessageRow

# The methods whose frames the findings rules read (FindingRules.method); of every other method
# they only note the frame number (`record`: the rows its handling emits cite it).
FINDING_METHODS = frozenset({"channel.open", "basic.qos", "queue.declare", "connection.blocked",
                             "connection.unblocked", "basic.return"})
# C-typed twin of the table above, what the rules read (compiled: a C variable; connection.pxd)
_FINDING_METHODS = FINDING_METHODS
# Raw rows (decode issues) held for a connection whose first frame is still to come.
EARLY_RAW_ROWS = 256
# A TCP end that closes the connection for the broker (it requeues what was unacked).
DROPPED = ("fin", "rst", "port-reuse")


class _Channel:
    __slots__ = ("instance", "rpc", "lifetimes", "deliveries", "publishes", "peak")

    def __init__(self, number: int, naming: Naming, emit: Emit, settings) -> None:
        self.instance = 0
        self.peak = 0  # the most deliveries outstanding at once in this lifetime (the findings see each new one)
        self.rpc = RpcRules(naming, emit)
        if number > 0:
            self.lifetimes = ChannelRules(emit)
            self.deliveries = DeliveryRules(emit)
            self.publishes = PublishRules(emit, settings.return_window, int(settings.return_wait_seconds * 1e9))
        else:
            self.lifetimes = self.deliveries = self.publishes = None


class ConnectionAnalyzer:
    def __init__(self, naming: Naming, emit: Emit, settings, findings=None) -> None:
        """`findings`: the findings rules' thresholds (amqpcap.settings.FindingsSection; default
        the defaults). The findings see the rows the rule sets emit when `emit` is
        Analytics.emit, which routes them here."""
        if findings is None:
            from amqpcap.settings import FindingsSection
            findings = FindingsSection()
        self.naming = naming
        self.emit = emit
        self.settings = settings
        self.findings = FindingRules(emit, findings)
        self.connection = ConnectionRules(naming, emit)
        self.heartbeats = HeartbeatRules(emit, findings.missed_heartbeat_intervals)
        self.errors = ErrorRules(naming, emit)
        self.flow = FlowRules(emit)
        self.channels: dict[int, _Channel] = {}
        self.close_ns: int | None = None  # the earliest connection.close
        self.close_code: int | None = None
        self.close_text: str | None = None
        self.tuned = False

    def frame(self, row: FrameRow, message: MessageRow | None = None) -> None:
        """A `frames` row; `message`: its `messages` row, for content-carrying methods."""
        self.heartbeats.frame(row)
        self.connection.frame(row)
        if row.kind != "method":
            return
        method = row.method
        findings = self.findings
        findings.record = row.pcap_record
        if method in _FINDING_METHODS:
            findings.method(row)
        self.connection.method(row)
        self.errors.method(row)
        self.flow.method(row)
        if method == "connection.tune-ok" and not self.tuned:
            self.tuned = True
            self.heartbeats.agreed(to_int(arguments(row).get("heartbeat")))
        elif method == "connection.close" and (self.close_ns is None or row.ts_ns < self.close_ns):
            self.close_ns, self.close_code, self.close_text = row.ts_ns, row.reply_code, row.reply_text
        number = row.channel
        channel = self.channels.get(number)
        if channel is None:
            channel = self.channels[number] = _Channel(number, self.naming, self.emit, self.settings)
        if method == "channel.open":
            channel.instance += 1
            channel.peak = 0
        instance = channel.instance
        channel.rpc.method(row, instance)
        if channel.lifetimes is not None:
            channel.lifetimes.method(row, instance)
            channel.deliveries.method(row, instance, message)
            channel.publishes.method(row, instance, message)
            if method == "basic.deliver" or method == "basic.get-ok":
                outstanding = len(channel.deliveries.outstanding)
                if outstanding > channel.peak:
                    channel.peak = outstanding
                    findings.delivered(row, outstanding)

    def end(self, stream: dict) -> None:
        """The connection ended: `stream` is its `streams` row. Everything still open is emitted,
        then the connection's findings."""
        self.findings.ending(stream)
        closed_ns = self.close_ns
        if closed_ns is None and stream.get("end_reason") in DROPPED and stream.get("last_ts") is not None:
            closed_ns = stream["last_ts"] * 1000
        for channel in self.channels.values():
            if channel.lifetimes is not None:
                channel.deliveries.end(closed_ns)
                channel.publishes.end()
                channel.lifetimes.end()
            channel.rpc.end(self.close_code, self.close_text)
        self.channels.clear()
        self.flow.end()
        self.heartbeats.end(stream.get("last_ts"))
        self.connection.end(stream)
        self.findings.end(self.heartbeats.late)


class Analytics:
    """Many connections' analytics, their rows interleaved (a decode task, `amqpcap decode
    --stats`, a replay of the raw tables)."""

    def __init__(self, emit: Emit, settings, naming: Callable[[str | None], Naming] = naming_for,
                 findings=None) -> None:
        """`emit`: where every row goes; the rule sets emit through `self.emit`, which shows each row
        to its connection's findings first. `findings`: amqpcap.settings.FindingsSection."""
        if findings is None:
            from amqpcap.settings import FindingsSection
            findings = FindingsSection()
        self.out = emit
        self.emit = self.observe
        self.settings = settings
        self.findings = findings
        self.naming = naming
        self.open: dict[str, ConnectionAnalyzer] = {}
        self.versions: dict[str, str | None] = {}
        self.early: dict[str, list] = {}  # connection -> raw rows seen before its first frame

    def observe(self, table, row) -> None:
        """A row the rule sets emitted: its connection's findings see it, then `emit`."""
        analyzer = self.open.get(row["connection"] if type(row) is dict else row.connection)
        if analyzer is not None:
            analyzer.findings.row(table, row)
        self.out(table, row)

    def raw(self, table, row: dict) -> None:
        """A raw row the findings read (decode_issues, tls_connections), before it is emitted."""
        connection = row.get("connection")
        if connection is None:
            return
        analyzer = self.open.get(connection)
        if analyzer is not None:
            analyzer.findings.row(table, row)
        else:
            early = self.early.setdefault(connection, [])
            if len(early) < EARLY_RAW_ROWS:
                early.append((table, row))

    def frame(self, row, message=None) -> None:
        """A `frames` row and, for a content-carrying method, its `messages` row: typed rows
        (amqpcap.tables.rows), or dicts of their columns (a test's, the lake's)."""
        if type(row) is dict:
            row = FrameRow.from_dict(row)
        if type(message) is dict:
            message = MessageRow.from_dict(message)
        frame = row
        analyzer = self.open.get(frame.connection)
        if analyzer is None:
            version = frame.protocol_version if frame.kind == "protocol-header" else None
            analyzer = self.open[frame.connection] = ConnectionAnalyzer(
                self.naming(version), self.emit, self.settings, self.findings)
            if self.early:
                self._early(frame.connection, analyzer)
        analyzer.frame(frame, message)

    def end(self, stream: dict) -> None:
        connection = stream["connection"]
        analyzer = self.open.get(connection)
        if analyzer is None:  # a connection without frames (not AMQP, TLS, no payload)
            analyzer = self.open[connection] = ConnectionAnalyzer(self.naming(stream.get("version")), self.emit,
                                                                  self.settings, self.findings)
        if self.early:
            self._early(connection, analyzer)
        analyzer.end(stream)
        del self.open[connection]

    def _early(self, connection: str, analyzer: ConnectionAnalyzer) -> None:
        for table, row in self.early.pop(connection, ()):
            analyzer.findings.row(table, row)
