"""Rows of the analytics tables that get one per message or request (`publishes`, `deliveries`,
`rpc_calls`) as typed objects, as amqpcap.tables.rows has them for `frames` and `messages`: the rules
fill their fields (compiled: C stores, where building a dict of 20-30 keys cost ~5,000
instructions a row) and the table writer takes their values in column order in one call
(amqpcap.columnar.columns.ColumnBuffer.add_values) rather than walking a dict. A row is also a mapping
of its table's columns (amqpcap.tables.rows.TableRow): tests, tools and message_flows' sides read it so.
Declared once: the fields are the table's columns (tables.py); a test holds the classes to them.
"""

from __future__ import annotations

from amqpcap.tables.registry import DELIVERIES, PUBLISHES, RPC_CALLS
from amqpcap.tables.rows import FrameRow, MessageRow, TableRow, message_key

COMPILED = __file__.endswith((".so", ".pyd"))
PUBLISH_FIELDS = tuple(PUBLISHES.names)
DELIVERY_FIELDS = tuple(DELIVERIES.names)
RPC_CALL_FIELDS = tuple(RPC_CALLS.names)


class ChannelRow(TableRow):
    """What all three tables' rows begin with: the channel of the method that made the row."""

    def begin(self, frame: FrameRow, instance: int) -> None:
        """The row's first columns: `frame`'s date, connection, capture, ends and channel, and
        the channel's lifetime (`instance`)."""
        self.date = frame.date
        self.connection = frame.connection
        self.capture = frame.capture
        self.client = frame.client
        self.server = frame.server
        self.channel = frame.channel
        self.channel_instance = instance


class MessageSideRow(ChannelRow):
    """A `publishes` or `deliveries` row: a message's side, with what the message carried."""

    def carried(self, frame: FrameRow, message: MessageRow | None) -> None:
        """The message's key (from its content method, `frame`) and, when its content was seen
        (`message`), its ids, size and body hash."""
        self.message_key = message_key(frame.connection, frame.direction, frame.stream_offset)
        if message is not None:
            self.message_id = message.message_id
            self.correlation_id = message.correlation_id
            self.app_id = message.app_id
            self.body_size = message.body_size
            self.body_sha256 = message.body_sha256


class PublishRow(MessageSideRow):
    """One `publishes` row (tables.PUBLISHES). Fields not set are null."""

    def fields(self) -> tuple:
        return PUBLISH_FIELDS

    def column_values(self) -> tuple:
        """Every column's value, in the table's column order."""
        return (self.date, self.connection, self.capture, self.client, self.server, self.channel,
                self.channel_instance, self.message_key, self.published_at, self.published_ns, self.exchange,
                self.routing_key, self.mandatory, self.message_id, self.correlation_id, self.app_id,
                self.body_size, self.body_sha256, self.confirm_seq, self.confirm_outcome, self.confirmed_at,
                self.confirmed_ns, self.confirm_latency_ms, self.confirmed_by_multiple, self.returned,
                self.return_code, self.return_text, self.tx_outcome, self.source, self.provisional, self.run_id)


class DeliveryRow(MessageSideRow):
    """One `deliveries` row (tables.DELIVERIES). Fields not set are null."""

    def fields(self) -> tuple:
        return DELIVERY_FIELDS

    def column_values(self) -> tuple:
        """Every column's value, in the table's column order."""
        return (self.date, self.connection, self.capture, self.client, self.server, self.channel,
                self.channel_instance, self.method, self.message_key, self.delivery_tag, self.consumer_tag,
                self.queue, self.exchange, self.routing_key, self.redelivered, self.delivered_at,
                self.delivered_ns, self.outcome, self.requeue, self.settled_at, self.settled_ns,
                self.settle_latency_ms, self.settled_by_multiple, self.message_id, self.correlation_id,
                self.app_id, self.body_size, self.body_sha256, self.death_exchange, self.death_queue,
                self.death_reason, self.source, self.provisional, self.run_id)

    def dead_lettered(self, headers: list) -> None:
        """The x-first-death-* headers of a dead-lettered message (RabbitMQ sets them when it first
        dead-letters it, beside x-death), from the message's headers as (name, text) pairs."""
        for name, value in headers:
            if name.startswith("x-first-death-"):
                if name == "x-first-death-exchange":
                    self.death_exchange = value
                elif name == "x-first-death-queue":
                    self.death_queue = value
                elif name == "x-first-death-reason":
                    self.death_reason = value


class RpcCallRow(ChannelRow):
    """One `rpc_calls` row (tables.RPC_CALLS). Fields not set are null; `request_ns` (not a column)
    holds the request's time while it awaits its reply."""

    def fields(self) -> tuple:
        return RPC_CALL_FIELDS

    def column_values(self) -> tuple:
        """Every column's value, in the table's column order."""
        return (self.date, self.connection, self.capture, self.client, self.server, self.channel,
                self.channel_instance, self.requester, self.request, self.reply, self.request_at, self.reply_at,
                self.latency_ms, self.outcome, self.error_code, self.error_text, self.source, self.provisional,
                self.run_id)


if not COMPILED:  # interpreted, a field never set reads the class's None (compiled: every field starts None)
    for _row, _fields in ((PublishRow, PUBLISH_FIELDS), (DeliveryRow, DELIVERY_FIELDS),
                          (RpcCallRow, RPC_CALL_FIELDS + ("request_ns",))):
        for _name in _fields:
            setattr(_row, _name, None)
    del _row, _fields, _name
