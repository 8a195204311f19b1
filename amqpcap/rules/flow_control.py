"""The `flow_control` table: intervals when traffic was not allowed to flow: channel.flow
active=false until active=true (per channel, either side), and RabbitMQ's connection.blocked until
connection.unblocked. Every stop starts an interval; the event right after it (in time) ends it
when it resumes the flow, else the interval has no end in the capture. A row is emitted when the
next event of its channel and mechanism arrives, or when the connection ends."""

from __future__ import annotations

from amqpcap.rules.common import Emit, arguments, micros, side, where_from
from amqpcap.tables.registry import FLOW_CONTROL
from amqpcap.tables.rows import FrameRow

EVENTS = frozenset({"channel.flow", "connection.blocked", "connection.unblocked"})
# C-typed twin of the table above, what the rules read (compiled: a C variable, not a module
# global looked up by name per method; flow_control.pxd). The public name stays a Python object.
_EVENTS = EVENTS


class FlowRules:
    """One connection's flow events."""

    __slots__ = ("emit", "open")

    def __init__(self, emit: Emit) -> None:
        self.emit = emit
        self.open: dict[tuple, dict] = {}  # (channel, mechanism) -> its last stop, not yet followed

    def method(self, row: FrameRow) -> None:
        method = row.method
        if method not in _EVENTS:
            return
        if method == "channel.flow":
            mechanism, stops = "channel.flow", arguments(row).get("active") is False
        else:
            mechanism, stops = "connection.blocked", method == "connection.blocked"
        key = (row.channel, mechanism)
        previous = self.open.pop(key, None)
        if previous is not None:
            self._emit(previous, None if stops else row.ts_ns)
        if stops:
            self.open[key] = {**where_from(row), "channel": row.channel, "mechanism": mechanism,
                              "initiator": side(row.direction), "reason": arguments(row).get("reason"),
                              "started_ns": row.ts_ns}

    def end(self) -> None:
        for stop in self.open.values():
            self._emit(stop, None)
        self.open.clear()

    def _emit(self, stop: dict, ended_ns: int | None) -> None:
        started = micros(stop.pop("started_ns"))
        ended = micros(ended_ns)
        self.emit(FLOW_CONTROL, {**stop, "started_at": started, "ended_at": ended,
                                 "duration_ms": (ended - started) / 1000.0 if ended is not None else None})
