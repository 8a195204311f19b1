"""The `channels` table: each lifetime of each channel number, from its methods in stream order.

A lifetime begins with channel.open (instance 1, 2...; instance 0 when the channel was opened
before the capture began) and its row is emitted when the next channel.open of the same number
begins another, or when the connection ends; a channel.close only records how it ended.
"""

from __future__ import annotations

import json

from amqpcap.rules.common import Emit, arguments, micros, side, where_from
from amqpcap.tables.registry import CHANNELS
from amqpcap.tables.rows import FrameRow

COUNTED = {"channel.flow": "flow_events", "basic.publish": "publishes", "basic.deliver": "deliveries",
           "basic.get-ok": "deliveries", "basic.reject": "rejects"}
# C-typed twin of the table above, what the rules read (compiled: a C variable, not a module
# global looked up by name per method; channels.pxd). The public name stays a Python object.
_COUNTED = COUNTED


class ChannelRules:
    """One channel number's lifetimes."""

    __slots__ = ("emit", "current", "pending_consumes")

    def __init__(self, emit: Emit) -> None:
        self.emit = emit
        self.current: dict | None = None
        self.pending_consumes: list[dict] = []

    def method(self, row: FrameRow, instance: int) -> None:
        method = row.method
        current = self.current
        if method == "channel.open" or current is None:
            if current is not None:
                self._emit()
            current = self.current = self._new(row, opened=method == "channel.open", instance=instance)
            self.pending_consumes = []
        if method in _COUNTED:
            current[_COUNTED[method]] += 1
        elif method in ("basic.ack", "basic.nack"):
            if side(row.direction) == "server":
                current["confirms"] += 1
            else:
                current["acks" if method == "basic.ack" else "nacks"] += 1
        elif method == "channel.close" and current["closed_at"] is None:
            current.update(closed_at=micros(row.ts_ns), close_initiator=side(row.direction),
                           close_code=row.reply_code, close_text=row.reply_text)
        elif method == "confirm.select" and current["confirm_mode_at"] is None:
            current["confirm_mode_at"] = micros(row.ts_ns)
        elif method == "tx.select" and current["tx_mode_at"] is None:
            current["tx_mode_at"] = micros(row.ts_ns)
        elif method == "basic.qos":
            args = arguments(row)
            current.update(prefetch_count=args.get("prefetch_count"), prefetch_size=args.get("prefetch_size"),
                           prefetch_scope="per-channel" if args.get("global") else "per-consumer")
        elif method == "basic.consume" and side(row.direction) == "client":
            consumer = {"tag": row.consumer_tag or None, "queue": row.queue, "no_ack": row.no_ack,
                        "started_at_ns": row.ts_ns, "cancelled_at_ns": None, "cancelled_by": None}
            current["consumers"].append(consumer)
            if not (row.no_wait and row.consumer_tag):
                self.pending_consumes.append(consumer)
        elif method == "basic.consume-ok" and self.pending_consumes:
            self.pending_consumes.pop(0)["tag"] = row.consumer_tag
        elif method == "basic.cancel":
            for consumer in current["consumers"]:
                if consumer["tag"] == row.consumer_tag and consumer["cancelled_at_ns"] is None:
                    consumer.update(cancelled_at_ns=row.ts_ns, cancelled_by=side(row.direction))

    def end(self) -> None:
        if self.current is not None:
            self._emit()
            self.current = None

    def _emit(self) -> None:
        row = self.current
        consumers = row.pop("consumers")
        row["consumers_json"] = json.dumps(consumers) if consumers else None
        self.emit(CHANNELS, row)

    @staticmethod
    def _new(row: FrameRow, opened: bool, instance: int) -> dict:
        return {**where_from(row), "channel": row.channel, "channel_instance": instance,
                "opened_at": micros(row.ts_ns) if opened else None, "closed_at": None,
                "close_initiator": None, "close_code": None, "close_text": None, "confirm_mode_at": None,
                "tx_mode_at": None, "prefetch_count": None, "prefetch_size": None, "prefetch_scope": None,
                "consumers": [], "flow_events": 0, "publishes": 0, "deliveries": 0, "acks": 0, "nacks": 0,
                "rejects": 0, "confirms": 0}
