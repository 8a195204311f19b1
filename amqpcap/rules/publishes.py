"""The `publishes` table: every basic.publish, its publisher confirm (confirm latency), its
basic.return and its transaction.

Per channel, in stream order (RabbitMQ's confirm rules, AMQP.md 8.7): after confirm.select the
Nth publish has sequence number N; the broker's basic.ack / basic.nack name a sequence number, and
with `multiple` every outstanding one up to it (tag 0: all). A basic.return carries no tag: it is
matched to the earliest mandatory publish on the channel with the same exchange and routing key
that has not been returned yet (the broker returns before it confirms). On a tx channel,
tx.commit and tx.rollback settle every publish since the previous one.

A row is emitted as soon as nothing more can happen to it: when it is confirmed (or at once when
the channel is not in confirm mode), its transaction settled, and, for a mandatory publish, its
return seen or no longer possible (it was confirmed, `return_wait_ns` of capture time passed, or
more than `return_window` newer mandatory publishes wait). What a channel's end leaves is emitted
then: `unconfirmed`, `uncommitted`.
"""

from __future__ import annotations

from collections import deque

from amqpcap.protocol.spec import CLIENT_TO_SERVER
from amqpcap.rules.common import Emit, micros
from amqpcap.rules.table_rows import PublishRow
from amqpcap.tables.registry import PUBLISHES
from amqpcap.tables.rows import FrameRow, MessageRow

RELEVANT = frozenset({"channel.open", "channel.close", "channel.close-ok", "confirm.select", "tx.select",
                      "tx.commit", "tx.rollback", "basic.publish", "basic.ack", "basic.nack", "basic.return"})
LIFETIME_ENDS = ("channel.open", "channel.close", "channel.close-ok")
# C-typed twins of the tables above, what the rules read (compiled: a C variable, not a module
# global looked up by name per method; publishes.pxd). The public names stay Python objects.
_RELEVANT, _LIFETIME_ENDS = RELEVANT, LIFETIME_ENDS


class _Publish:
    """A publish and what it still waits for."""

    __slots__ = ("row", "confirm", "tx", "returnable")

    def __init__(self, row: PublishRow) -> None:
        self.row = row
        self.confirm = self.tx = self.returnable = False


class PublishRules:
    """One channel number's publishes, across its lifetimes."""

    __slots__ = ("emit", "return_window", "return_wait_ns", "instance", "confirming", "transactional",
                 "seq", "outstanding", "returnable", "in_tx")

    def __init__(self, emit: Emit, return_window: int, return_wait_ns: int) -> None:
        self.emit = emit
        self.return_window = return_window
        self.return_wait_ns = return_wait_ns
        self.instance = 0
        self._begin(0)

    def _begin(self, instance: int) -> None:
        self.instance = instance
        self.confirming = self.transactional = False
        self.seq = 0
        self.outstanding: dict[int, _Publish] = {}  # confirm seq -> publish, in order
        self.returnable: deque[_Publish] = deque()  # mandatory publishes not returned yet
        self.in_tx: list[_Publish] = []  # publishes of the open transaction

    def method(self, row: FrameRow, instance: int, message: MessageRow | None) -> None:
        method = row.method
        if method not in _RELEVANT:
            return
        from_client = row.direction == CLIENT_TO_SERVER
        if self.returnable:
            self._expire_returns(row.ts_ns)
        if method in _LIFETIME_ENDS:
            self.end()
            self._begin(instance if method == "channel.open" else self.instance)
        elif method == "confirm.select" and from_client:
            self.confirming, self.seq = True, 0
        elif method == "tx.select" and from_client:
            self.transactional = True
        elif method in ("tx.commit", "tx.rollback") and from_client:
            outcome = "committed" if method == "tx.commit" else "rolled-back"
            for publish in self.in_tx:
                publish.row.tx_outcome = outcome
                publish.tx = False
                self._maybe_final(publish)
            self.in_tx = []
        elif method == "basic.publish" and from_client:
            self._publish(row, message)
        elif method == "basic.return" and not from_client:
            match = None
            for publish in self.returnable:  # (a loop, not next(generator): compiled, no closure)
                if publish.row.exchange == row.exchange and publish.row.routing_key == row.routing_key:
                    match = publish
                    break
            if match is not None:
                self.returnable.remove(match)
                returned = match.row
                returned.returned = True
                returned.return_code = row.reply_code
                returned.return_text = row.reply_text
                match.returnable = False
                self._maybe_final(match)
        elif method in ("basic.ack", "basic.nack") and not from_client and self.confirming:
            tag, multiple = row.delivery_tag, bool(row.multiple)
            if multiple:
                covered = []
                for seq in self.outstanding:  # sequence numbers grow: a prefix
                    if tag != 0 and (tag is None or seq > tag):
                        break
                    covered.append(seq)
            else:
                covered = [tag] if tag in self.outstanding else []
            outcome = "ack" if method == "basic.ack" else "nack"
            for seq in covered:
                publish = self.outstanding.pop(seq)
                confirmed = publish.row
                confirmed.confirm_outcome = outcome
                confirmed.confirmed_at = micros(row.ts_ns)
                confirmed.confirmed_ns = row.ts_ns
                confirmed.confirm_latency_ms = (row.ts_ns - confirmed.published_ns) / 1e6
                confirmed.confirmed_by_multiple = multiple
                publish.confirm = False
                if publish.returnable:  # confirmed without a return first: it will not come back
                    self.returnable.remove(publish)
                    publish.returnable = False
                self._maybe_final(publish)

    def end(self) -> None:
        """The channel's lifetime ended (or the connection did): emit what is left."""
        for publish in self.outstanding.values():
            publish.row.confirm_outcome = "unconfirmed"
            publish.confirm = False
        for publish in self.in_tx:
            publish.row.tx_outcome = "uncommitted"
            publish.tx = False
        for publish in self.returnable:
            publish.returnable = False
        for publish in list(self.outstanding.values()) + self.in_tx + list(self.returnable):
            self._maybe_final(publish)
        self.outstanding, self.in_tx, self.returnable = {}, [], deque()

    def _publish(self, row: FrameRow, message: MessageRow | None) -> None:
        published = PublishRow.__new__(PublishRow)
        published.begin(row, self.instance)
        published.carried(row, message)
        published.published_at = micros(row.ts_ns)
        published.published_ns = row.ts_ns
        published.exchange = row.exchange
        published.routing_key = row.routing_key
        published.mandatory = row.mandatory
        published.returned = False
        publish = _Publish(published)
        if self.confirming:
            self.seq += 1
            publish.row.confirm_seq = self.seq
            publish.confirm = True
            self.outstanding[self.seq] = publish
        if self.transactional:
            publish.tx = True
            self.in_tx.append(publish)
        if row.mandatory:
            publish.returnable = True
            self.returnable.append(publish)
            if len(self.returnable) > self.return_window:
                self._release(self.returnable.popleft())
        self._maybe_final(publish)

    def _expire_returns(self, now_ns: int) -> None:
        while self.returnable and now_ns - self.returnable[0].row.published_ns > self.return_wait_ns:
            self._release(self.returnable.popleft())

    def _release(self, publish: _Publish) -> None:
        publish.returnable = False
        self._maybe_final(publish)

    def _maybe_final(self, publish: _Publish) -> None:
        if not (publish.confirm or publish.tx or publish.returnable) and publish.row is not None:
            self.emit(PUBLISHES, publish.row)
            publish.row = None  # emitted once
