"""The `deliveries` table: every basic.deliver and basic.get-ok and how the consumer settled it
(ack latency).

Per channel, in stream order (AMQP.md 8.5): delivery tags are channel-local; `multiple` settles
every outstanding tag up to and including the given one, and tag 0 with `multiple` every
outstanding one; basic.reject never has `multiple`. A delivery to a no_ack consumer (or a get with
no_ack) is settled by being sent (`auto-ack`). A channel.close (either side) or a channel.open that
reuses the number settles what is outstanding as `channel-closed`. What is outstanding when the
connection ends is `connection-closed` if a connection.close, or the TCP connection's FIN or RST,
ended it (the broker requeues it), else `unsettled` (the capture ended first).

A row is emitted when its delivery is settled; only outstanding deliveries and the channel's
consumers are held.
"""

from __future__ import annotations

from amqpcap.protocol.spec import CLIENT_TO_SERVER
from amqpcap.rules.common import Emit, micros
from amqpcap.rules.table_rows import DeliveryRow
from amqpcap.tables.registry import DELIVERIES
from amqpcap.tables.rows import FrameRow, MessageRow

SETTLE = {"basic.ack": "ack", "basic.nack": "nack", "basic.reject": "reject"}
RELEVANT = frozenset({"basic.deliver", "basic.get-ok", "basic.get", "basic.get-empty", "basic.consume",
                      "basic.consume-ok", "basic.ack", "basic.nack", "basic.reject", "channel.open",
                      "channel.close", "channel.close-ok"})
# C-typed twins of the tables above, what the rules read (compiled: a C variable, not a module
# global looked up by name per method; deliveries.pxd). The public names stay Python objects.
_SETTLE, _RELEVANT = SETTLE, RELEVANT


class DeliveryRules:
    """One channel number's deliveries, across its lifetimes."""

    __slots__ = ("emit", "instance", "consumers", "pending_consumes", "pending_gets", "outstanding",
                 "last_tag", "in_order")

    def __init__(self, emit: Emit) -> None:
        self.emit = emit
        self.instance = 0
        self.consumers: dict[str, tuple] = {}  # consumer tag -> (queue, no_ack)
        self.pending_consumes: list[tuple] = []  # (queue, no_ack) of consumes awaiting consume-ok
        self.pending_gets: list[tuple] = []  # (queue, no_ack) of gets awaiting get-ok / get-empty
        self.outstanding: dict[int, DeliveryRow] = {}  # delivery tag -> row, in delivery order
        # Tags grow within a lifetime, so a multiple ack settles a prefix of `outstanding`; a capture
        # that breaks the order (it should not happen) falls back to scanning them all.
        self.last_tag = -1
        self.in_order = True

    def method(self, row: FrameRow, instance: int, message: MessageRow | None = None) -> None:
        method = row.method
        if method not in _RELEVANT:
            return
        from_client = row.direction == CLIENT_TO_SERVER
        if method == "channel.open":
            self._close(row.ts_ns, "channel-closed")  # the number reused without a close we saw
            self.instance = instance
            self.consumers.clear()
            self.pending_consumes.clear()
            self.pending_gets.clear()
        elif method in ("channel.close", "channel.close-ok"):
            self._close(row.ts_ns, "channel-closed")
        elif method == "basic.consume" and from_client:
            if row.no_wait and row.consumer_tag:
                self.consumers[row.consumer_tag] = (row.queue, row.no_ack)
            else:
                self.pending_consumes.append((row.queue, row.no_ack))
        elif method == "basic.consume-ok" and not from_client and self.pending_consumes:
            self.consumers[row.consumer_tag] = self.pending_consumes.pop(0)
        elif method == "basic.get" and from_client:
            self.pending_gets.append((row.queue, row.no_ack))
        elif method == "basic.get-empty" and self.pending_gets:
            self.pending_gets.pop(0)
        elif method in ("basic.deliver", "basic.get-ok") and not from_client:
            if method == "basic.deliver":
                queue, no_ack = self.consumers.get(row.consumer_tag, (None, None))
            else:
                queue, no_ack = self.pending_gets.pop(0) if self.pending_gets else (None, None)
            delivery = self._delivery(row, queue, message)
            if no_ack:
                self._settled(delivery, "auto-ack", None, None, False)
            else:
                tag = row.delivery_tag
                if tag is None or tag <= self.last_tag:
                    self.in_order = False
                else:
                    self.last_tag = tag
                self.outstanding[tag] = delivery
        elif method in _SETTLE and from_client:
            tag = row.delivery_tag
            multiple = bool(row.multiple) and method != "basic.reject"
            if multiple and tag == 0:
                covered = list(self.outstanding)
            elif multiple and self.in_order:
                covered = []
                for t in self.outstanding:
                    if t > tag:
                        break
                    covered.append(t)
            elif multiple:
                covered = [t for t in self.outstanding if t is not None and t <= tag]
            else:  # a tag not outstanding was delivered before the capture began
                covered = [tag] if tag in self.outstanding else []
            requeue = row.requeue if method != "basic.ack" else None
            for t in sorted(covered, key=_tag_order):
                self._settled(self.outstanding.pop(t), _SETTLE[method], row.ts_ns, requeue, multiple)

    def end(self, closed_ns: int | None) -> None:
        """The connection ended; `closed_ns`: when a close method or the TCP end closed it (None
        when the capture ended first)."""
        for delivery in self.outstanding.values():
            if closed_ns is not None and closed_ns >= delivery.delivered_ns:
                self._settled(delivery, "connection-closed", closed_ns, None, False)
            else:
                self._settled(delivery, "unsettled", None, None, False)
        self.outstanding.clear()

    def _close(self, at_ns: int, outcome: str) -> None:
        for delivery in self.outstanding.values():
            self._settled(delivery, outcome, at_ns, None, False)
        self.outstanding.clear()
        self.last_tag, self.in_order = -1, True

    def _delivery(self, row: FrameRow, queue, message: MessageRow | None) -> DeliveryRow:
        delivery = DeliveryRow.__new__(DeliveryRow)
        delivery.begin(row, self.instance)
        delivery.carried(row, message)
        delivery.method = row.method
        delivery.delivery_tag = row.delivery_tag
        delivery.consumer_tag = row.consumer_tag
        delivery.queue = queue
        delivery.exchange = row.exchange
        delivery.routing_key = row.routing_key
        delivery.redelivered = row.redelivered
        delivery.delivered_at = micros(row.ts_ns)
        delivery.delivered_ns = row.ts_ns
        if message is not None and message.headers is not None:
            delivery.dead_lettered(message.headers)
        return delivery

    def _settled(self, delivery: DeliveryRow, outcome: str, at_ns, requeue, multiple: bool) -> None:
        delivery.outcome = outcome
        delivery.requeue = requeue
        delivery.settled_at = micros(at_ns)
        delivery.settled_ns = at_ns
        delivery.settle_latency_ms = (at_ns - delivery.delivered_ns) / 1e6 if at_ns is not None else None
        delivery.settled_by_multiple = multiple
        self.emit(DELIVERIES, delivery)


def _tag_order(tag):
    return (tag is None, tag or 0)  # a tag beyond bigint's range is null: last
