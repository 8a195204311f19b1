"""TLS 1.2 sessions a decoder has seen established, for the connections that resume them (RFC
5246, 7.3; RFC 5077): a resumed handshake reuses its session's master secret, so a connection
whose own client random the key log lacks is still decrypted when the full handshake was, earlier
in the same decoder's input (the same capture, rotated files, the same Spark bucket).

The cache holds master secrets: it lives in memory only, bounded, and is never saved, carried or
written (what a carried connection keeps instead is the client random of the key log line its
master secret came from).
"""

from __future__ import annotations

from collections import OrderedDict

MAX_SESSIONS = 100_000  # sessions remembered (the oldest go first)


class SessionCache:
    __slots__ = ("by_id", "by_ticket")

    def __init__(self) -> None:
        # session id or ticket -> (master secret, the client random of the key log line it came from)
        self.by_id: OrderedDict[bytes, tuple[bytes, bytes]] = OrderedDict()
        self.by_ticket: OrderedDict[bytes, tuple[bytes, bytes]] = OrderedDict()

    def __repr__(self) -> str:  # never a secret
        return f"SessionCache({len(self.by_id)} session ids, {len(self.by_ticket)} tickets)"

    def remember(self, session_id: bytes | None, ticket: bytes | None, master: bytes, origin: bytes) -> None:
        for table, key in ((self.by_id, session_id), (self.by_ticket, ticket)):
            if key:
                table[key] = (master, origin)
                table.move_to_end(key)
                if len(table) > MAX_SESSIONS:
                    table.popitem(last=False)

    def find(self, session_id: bytes | None, ticket: bytes | None) -> tuple[bytes, bytes] | None:
        """(master secret, its origin) of the session a ClientHello resumes: by its ticket, else its id."""
        if ticket and ticket in self.by_ticket:
            return self.by_ticket[ticket]
        if session_id and session_id in self.by_id:
            return self.by_id[session_id]
        return None

    def __reduce__(self):  # (never pickled with its secrets: a copy starts empty)
        return SessionCache, ()
