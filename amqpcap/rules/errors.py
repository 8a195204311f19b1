"""The `errors` table: what the protocol said went wrong. A row is final as soon as its frame is
seen: every connection.close and channel.close with a reply code other than 200 (or 0), every
basic.return, every basic.nack the broker sends (a publisher confirm's negative answer)."""

from __future__ import annotations

from amqpcap.rules.common import Emit, micros, side
from amqpcap.rules.naming import Naming
from amqpcap.tables.registry import ERRORS
from amqpcap.tables.rows import FrameRow

CLOSES = ("connection.close", "channel.close")
# C-typed twin of the table above, what the rules read (compiled: a C variable, not a module
# global looked up by name per method; errors.pxd). The public name stays a Python object.
_CLOSES = CLOSES


class ErrorRules:
    def __init__(self, naming: Naming, emit: Emit) -> None:
        self.naming = naming
        self.emit = emit

    def method(self, row: FrameRow) -> None:
        method = row.method
        if method in _CLOSES:
            if (row.reply_code or 0) in (0, 200):
                return
        elif method != "basic.return" and not (method == "basic.nack" and row.direction == "S>C"):
            return
        code = row.reply_code
        name, code_class = self.naming.reply_codes.get(code, (None, None)) if code is not None else (None, None)
        self.emit(ERRORS, {  # (the table's columns in order: the table writer reads such a row in one walk)
            "date": row.date, "connection": row.connection, "capture": row.capture, "ts": micros(row.ts_ns),
            "ts_ns": row.ts_ns, "client": row.client, "server": row.server, "channel": row.channel,
            "method": method, "initiator": side(row.direction),
            "scope": "connection" if method == "connection.close" else "channel",
            "reply_code": code, "reply_name": None if method == "basic.nack" else name,
            "code_class": code_class, "reply_text": row.reply_text,
            "failing_method": self.naming.method_name(row.failing_class_id, row.failing_method_id),
            "delivery_tag": row.delivery_tag, "multiple": row.multiple, "source": None, "provisional": None})
