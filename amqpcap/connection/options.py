"""What a connection's decoding reads of the settings, flattened once per decoder (some are read
on hot paths): ports, versions, frame size limits, bodies, what may be carried to the next run; and
what its TLS connections are decrypted with (the key log, the sessions seen)."""

from __future__ import annotations

from amqpcap.settings import Settings
from amqpcap.tls.keylog import KeyLog
from amqpcap.tls.sessions import SessionCache


class StreamOptions:
    """What the stream decoder reads of the settings, flattened once per decoder (some are read on
    hot paths)."""

    __slots__ = ("amqp_ports", "tls_ports", "default_version", "max_frame", "resync_max_frame",
                 "capture_bodies", "body_cap", "pending_records", "resumable", "resumable_body_cap", "fold_content",
                 "keys", "sessions")

    def __init__(self, settings: Settings, resumable: bool = False, fold_content: bool = False,
                 keys: KeyLog | None = None) -> None:
        """`keys`: the TLS key log (read once by the caller: amqpcap.tls.keylog.read_key_logs;
        none: TLS connections are accounted, not decrypted)."""
        decode, bodies = settings.decode, settings.bodies
        self.amqp_ports = frozenset(decode.amqp_ports)
        self.tls_ports = frozenset(decode.tls_ports)
        self.default_version = decode.default_version
        self.max_frame = decode.max_frame_bytes
        self.resync_max_frame = decode.resync_max_frame_bytes
        self.capture_bodies = bodies.capture
        self.body_cap = bodies.cap_bytes
        self.pending_records = decode.pending_records
        self.resumable = resumable  # connections may be saved at the end (amqpcap.onepass.state)
        self.resumable_body_cap = settings.state.max_partial_body_bytes
        # A content method's header and body frames make no records of their own: its `message`
        # says what they were, and `last_frame_ns` when the last came (the one-line-per-message view)
        if fold_content and resumable:  # a saved message is resumed from its records (amqpcap.onepass.state)
            raise ValueError("content frames cannot be folded on connections that may be saved")
        self.fold_content = fold_content
        self.keys = keys if keys is not None else KeyLog()
        self.sessions = SessionCache()  # TLS sessions established in this decoder, for those that resume them
