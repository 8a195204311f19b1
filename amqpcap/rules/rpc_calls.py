"""The `rpc_calls` table: synchronous requests and their replies, paired per channel.

Which methods are requests and which replies answer them comes from the spec (`<response>`).
Replies on a channel come in request order, so pending requests form a queue per channel; a reply
answers the oldest pending request (from the other side) it can answer. A request with no-wait set
expects nothing; a broker's basic.cancel is a notification (RabbitMQ expects no cancel-ok). A
channel.close (or, on channel 0, connection.close) with an error code answers every request still
pending from the other side with that error. Requests still pending when the channel is reopened
have no reply; when the connection ends they are answered by its error close if it had one, else
they have none. A reply seen before its request (a capture that reordered packets) is paired when
the request comes; its latency is then negative, which is what the capture's timestamps say.

A row is emitted when its request is answered (or can no longer be).
"""

from __future__ import annotations

from amqpcap.rules.common import Emit, micros, side
from amqpcap.rules.naming import Naming
from amqpcap.rules.table_rows import RpcCallRow
from amqpcap.tables.registry import RPC_CALLS
from amqpcap.tables.rows import FrameRow

CLOSES = ("channel.close", "connection.close")
EARLY_LIMIT = 1024  # unrequested replies kept per channel (a capture that began mid-conversation)
# C-typed twin of the table above, what the rules read (compiled: a C variable, not a module
# global looked up by name per method; rpc_calls.pxd). The public name stays a Python object.
_CLOSES = CLOSES


class RpcRules:
    """One channel number's requests, across its lifetimes (channel 0: the connection's)."""

    __slots__ = ("naming", "emit", "instance", "pending", "early")

    def __init__(self, naming: Naming, emit: Emit) -> None:
        self.naming = naming
        self.emit = emit
        self.instance = 0
        self.pending: list[RpcCallRow] = []  # requests awaiting a reply (their rows so far), oldest first
        self.early: list[tuple[str, str, int]] = []  # replies no pending request wanted: (method, side, ts)

    def method(self, row: FrameRow, instance: int) -> None:
        method, requester = row.method, side(row.direction)
        responses = self.naming.responses
        if method == "channel.open":
            for call in self.pending:
                self._answer(call, None, None, "no-reply", None, None)
            # a new lifetime; only its own open-ok may already have been seen (reordered capture)
            self.pending = []
            self.early = [e for e in self.early if e[0] == "channel.open-ok"]
            self.instance = instance
        answered = None
        at = 0
        for pending in self.pending:  # a plain loop: a generator per method cost more than the search
            if pending.requester != requester and method in responses[pending.request]:
                answered = pending
                break
            at += 1
        if answered is not None:
            del self.pending[at]  # (by place: a row equals another of the same values)
            self._answer(answered, method, row.ts_ns, "ok", None, None)
        elif method in _CLOSES and (row.reply_code or 0) not in (0, 200):
            failed = [p for p in self.pending if p.requester != requester]
            self.pending = [p for p in self.pending if p.requester == requester]
            for call in failed:
                self._answer(call, method, row.ts_ns, "error", row.reply_code, row.reply_text)
        elif method in self.naming.replies and method not in responses:  # a reply nobody asked for (yet)
            self.early.append((method, requester, row.ts_ns))
            if len(self.early) > EARLY_LIMIT:
                del self.early[0]
        if method in responses and not row.no_wait and not (method == "basic.cancel" and requester == "server"):
            call = RpcCallRow.__new__(RpcCallRow)
            call.begin(row, self.instance)
            call.requester = requester
            call.request = method
            call.request_ns = row.ts_ns
            reply = None
            for early in self.early:
                if early[1] != requester and early[0] in responses[method]:
                    reply = early
                    break
            if reply is not None:
                self.early.remove(reply)
                self._answer(call, reply[0], reply[2], "ok", None, None)
            else:
                self.pending.append(call)

    def end(self, close_code: int | None, close_text: str | None) -> None:
        """The connection ended; `close_code`/`close_text` of its first connection.close."""
        for call in self.pending:
            if close_code not in (None, 0, 200) and call.request not in _CLOSES:
                self._answer(call, "connection.close", None, "error", close_code, close_text)
            else:
                self._answer(call, None, None, "no-reply", None, None)
        self.pending = []

    def _answer(self, call: RpcCallRow, reply, at_ns, outcome: str, code, text) -> None:
        request_ns = call.request_ns
        call.reply = reply
        call.request_at = micros(request_ns)
        call.reply_at = micros(at_ns)
        call.latency_ms = (at_ns - request_ns) / 1e6 if at_ns is not None else None
        call.outcome = outcome
        call.error_code = code
        call.error_text = text
        self.emit(RPC_CALLS, call)
