"""The TLS layer of one connection: both directions' records (amqpcap.tls.records), the handshake
that sets their keys, and the plaintext they carry, handed to the connection above (`TlsSink`).

    layer = TlsLayer(sink, keys, sessions)      # keys: amqpcap.tls.keylog.KeyLog (may be empty)
    layer.data(direction, offset, data, ts_ns, capture, record)   # the TCP bytes, as a StreamSink gets them
    layer.gap(direction, offset, size, ts_ns)
    layer.finish()                              # the stream ended
    layer.summary()                             # what the tables say of the TLS connection

TLS 1.2: keys from the key log's master secret (CLIENT_RANDOM) for the ClientHello's random, or,
for a resumed session whose own random is not logged, the master secret of the connection that
established it (amqpcap.tls.sessions); each direction's records are protected from its
ChangeCipherSpec on. TLS 1.3: the handshake traffic secrets from the ServerHello on, each
direction's application secret after its Finished, the next secret after each KeyUpdate; early
data with the client's early secret when the key log has it. A HelloRetryRequest is a ServerHello
like another, but sets no keys.

Without keys the connection is still read: hellos (SNI, ALPN, version, suite, resumption), the
server's certificate (TLS 1.2), the handshake's milestones, records and bytes per direction, alerts
in clear; the encrypted bytes are counted as `tls-not-decoded`.

Bytes that made no record (a gap in the capture, a stream cut short) are lost at this layer
(`tls-gap`, `tls-truncated`): framing goes on after them where the cut record's length was known,
else it resynchronises. Decryption goes on too: a record lost inside a known extent takes its
sequence number with it; after records of unknown number the next record's sequence number is
searched for (the AEAD tag or MAC says which is right; TLS 1.2 GCM's explicit nonce is tried first)
and the decrypted stream is told how many bytes it lost (`TlsSink.tls_lost`), as closely as the
records' overhead allows. A direction whose sequence cannot be found again is counted from there
(`tls-undecryptable`).

Carried to the next run (`saved`): every public fact, each direction's framing and sequence
number, its key stage and KeyUpdate count, never a secret or a key. The run that resumes it takes
its keys from its own key log again (docs/state.md says why).
"""

from __future__ import annotations

from amqpcap.protocol.spec import CLIENT_TO_SERVER, SERVER_TO_CLIENT
from amqpcap.tls import handshake as hs
from amqpcap.tls.ciphers import Aead13, Protection, Undecryptable, protection_for
from amqpcap.tls.keylog import (
    CLIENT_HANDSHAKE,
    CLIENT_TRAFFIC,
    EARLY_SECRET,
    MASTER_SECRET,
    SERVER_HANDSHAKE,
    SERVER_TRAFFIC,
    KeyLog,
)
from amqpcap.tls.keys import KeyBlock12, next_secret13, traffic_keys13
from amqpcap.tls.records import (
    ALERT,
    APPLICATION_DATA,
    CHANGE_CIPHER_SPEC,
    GAP,
    HANDSHAKE,
    HEADER,
    TRUNCATED,
    RecordReader,
    RecordSink,
)
from amqpcap.tls.sessions import SessionCache
from amqpcap.tls.suites import Suite, suite_of

# The issue kinds of this layer (its records' offsets are the TCP stream's)
NOT_DECODED = "tls-not-decoded"  # encrypted bytes without their keys: counted
UNDECRYPTABLE = "tls-undecryptable"  # records that did not open with the keys there were
MALFORMED = "tls-malformed"  # a handshake message that does not parse
ALERT_ISSUE = "tls-alert"  # an alert other than close_notify
MAX_SEARCH = 1 << 16  # sequence numbers tried for the first record after records of unknown number were lost
# A direction's records held while the other side's hello, which their keys need, has not been
# seen yet (a capture that reordered the directions); past this they are read as they are
MAX_WAITING = 1 << 20
TLS13 = 0x0304

ALERTS = {0: "close_notify", 10: "unexpected_message", 20: "bad_record_mac", 21: "decryption_failed",
          22: "record_overflow", 40: "handshake_failure", 42: "bad_certificate", 43: "unsupported_certificate",
          44: "certificate_revoked", 45: "certificate_expired", 46: "certificate_unknown", 47: "illegal_parameter",
          48: "unknown_ca", 49: "access_denied", 50: "decode_error", 51: "decrypt_error", 70: "protocol_version",
          71: "insufficient_security", 80: "internal_error", 86: "inappropriate_fallback", 90: "user_canceled",
          100: "no_renegotiation", 109: "missing_extension", 110: "unsupported_extension", 112: "unrecognized_name",
          113: "bad_certificate_status_response", 115: "unknown_psk_identity", 116: "certificate_required",
          120: "no_application_protocol"}

# A TLS 1.3 direction's key stages (which secret protects its records)
CLEAR, EARLY, HANDSHAKE_KEYS, APPLICATION_KEYS = 0, 1, 2, 3
# The record layer's constants again, as C values when compiled (layer.pxd): read for every record
_HEADER, _CCS, _HANDSHAKE, _APPLICATION, _ALERT = HEADER, CHANGE_CIPHER_SPEC, HANDSHAKE, APPLICATION_DATA, ALERT


class TlsSink:
    """What the layer tells its connection (amqpcap.connection.stream.AmqpConnection), a base class
    so the compiled layer calls it directly."""

    def tls_client(self, direction: int) -> None:
        """`direction` sent the ClientHello."""
        raise NotImplementedError

    def tls_plaintext(self, direction: int, offset: int, data: bytes, ts_ns: int, capture: int, record: int) -> None:
        """Decrypted application data at `offset` of the direction's decrypted stream."""
        raise NotImplementedError

    def tls_lost(self, direction: int, offset: int, size: int, ts_ns: int) -> None:
        """About `size` bytes of the decrypted stream from `offset` were in records that were lost."""
        raise NotImplementedError

    def tls_issue(self, direction: int, kind: str, detail: str, skipped: int, start: int, end: int, ts: tuple) -> None:
        """An issue of this layer: TCP stream offsets; ts: (first ts, last ts, capture, first record, last record)."""
        raise NotImplementedError


def _times(first: tuple, ts_ns: int, capture: int, record: int) -> tuple:
    """An issue's times from its first byte's (ts, capture, record) and its last byte's packet."""
    return first[0], ts_ns, first[1], first[2], record if capture == first[1] else 0


class Direction:
    """One direction's TLS state: its records' framing, the handshake messages it is assembling,
    the keys that open its records and their sequence number, and what it carried."""

    __slots__ = ("reader", "messages", "protection", "seq", "encrypted", "stage", "secret", "early", "generation",
                 "plain_offset", "search", "search_at", "search_first", "search_why", "records", "record_bytes",
                 "app_records", "app_record_bytes", "skipped_bytes", "plaintext_bytes", "lost_plaintext_bytes",
                 "undecryptable_records", "key_updates", "opaque_kind", "opaque_why", "opaque_bytes",
                 "opaque_records", "opaque_start", "opaque_end", "opaque_first", "opaque_last", "finished_ns",
                 "keyed", "failed", "failed_bytes", "failed_start", "failed_end", "failed_first", "failed_last",
                 "failed_why", "early_seq", "app_overhead", "waiting", "waiting_bytes", "waited", "held", "held_from",
                 "held_ts", "held_capture", "held_record", "awaiting", "awaiting_bytes")

    def __init__(self, layer: "TlsLayer", direction: int) -> None:
        self.reader = RecordReader(layer, direction)
        self.messages = hs.Messages()
        self.protection: Protection | None = None
        self.seq = 0
        self.encrypted = False  # its records are protected from here on (keys or not)
        self.stage = CLEAR  # TLS 1.3: which secret protects them
        self.secret: bytes | None = None  # TLS 1.3: the current traffic secret (never saved)
        self.early: Protection | None = None  # TLS 1.3: the client's early-data keys, while they may be used
        self.early_seq = 0
        # records that came before the other side's hello their keys need: (ctype, header, fragment,
        # start, first, ts_ns, capture, record), read once it has come (None: none held)
        self.waiting: list | None = None
        self.waiting_bytes = 0
        self.waited = False  # it held records once and let them go: it never holds any again
        # decrypted data of the delivery being read, and where and when it came (TlsLayer._plaintext)
        self.held: list | None = None
        self.held_from = self.held_ts = self.held_record = 0
        self.held_capture = -1
        self.generation = 0  # TLS 1.3: KeyUpdates of the application secret
        self.keyed = False  # keys were found for its current stage
        # a direction carried from an earlier run whose keys this run's key log lacked: the records
        # counted since (-1: none such) and their bytes, so that a later run whose key log has them
        # opens the next record at its sequence number (_resume)
        self.awaiting = -1
        self.awaiting_bytes = 0
        self.plain_offset = 0  # the decrypted stream's next offset
        self.search = -1  # bytes of records of unknown number lost: the next record's sequence is searched for
        self.search_at = 0
        self.search_first = (0, -1, 0)
        self.search_why = ""
        self.records = self.record_bytes = 0  # records framed whole, and their bytes
        self.app_records = self.app_record_bytes = 0  # of those, decrypted application data
        self.app_overhead = 0  # what the last one's protection added to its plaintext (CBC's padding varies)
        self.skipped_bytes = 0  # bytes of the TLS stream in this layer's issues
        self.plaintext_bytes = self.lost_plaintext_bytes = 0
        self.undecryptable_records = 0
        self.key_updates = 0
        self.finished_ns = -1  # its Finished (or, without keys, its first encrypted handshake record)
        # encrypted records counted, not decoded (no keys, or their sequence lost): one issue at the end
        self.opaque_kind = ""
        self.opaque_why = ""
        self.opaque_bytes = self.opaque_records = 0
        self.opaque_start = self.opaque_end = -1
        self.opaque_first = self.opaque_last = (0, -1, 0)
        # records that did not open although keys were there: told when one opens again, or at the end
        self.failed = 0
        self.failed_bytes = 0
        self.failed_start = self.failed_end = -1
        self.failed_first = self.failed_last = (0, -1, 0)
        self.failed_why = ""

    def saved(self, name) -> dict:
        """Everything but its keys and secrets (`keyed` says whether the next run must find them)."""
        def place(at):
            return at[0], name(at[1]), at[2]
        return {"reader": self.reader.saved(name), "messages": bytes(self.messages.buf), "seq": self.seq,
                "encrypted": self.encrypted, "stage": self.stage, "generation": self.generation,
                "keyed": self.keyed, "awaiting": [self.awaiting, self.awaiting_bytes],
                "plain_offset": self.plain_offset, "search": self.search,
                "search_at": self.search_at, "search_first": place(self.search_first), "search_why": self.search_why,
                "counts": [self.records, self.record_bytes, self.app_records, self.app_record_bytes, self.app_overhead,
                           self.skipped_bytes, self.plaintext_bytes, self.lost_plaintext_bytes,
                           self.undecryptable_records, self.key_updates, self.finished_ns],
                "opaque": [self.opaque_kind, self.opaque_why, self.opaque_bytes, self.opaque_records,
                           self.opaque_start, self.opaque_end, place(self.opaque_first), place(self.opaque_last)],
                "failed": [self.failed, self.failed_bytes, self.failed_start, self.failed_end,
                           place(self.failed_first), place(self.failed_last), self.failed_why],
                "waiting": [(c, h, f, s, place(first), ts, name(capture), r)
                            for c, h, f, s, first, ts, capture, r in self.waiting or ()], "waited": self.waited}

    def restore(self, state: dict, index) -> None:
        def place(at):
            return at[0], index(at[1]), at[2]
        self.reader.restore(state["reader"], index)
        self.messages.buf = bytearray(state["messages"])
        self.seq, self.encrypted, self.stage = state["seq"], state["encrypted"], state["stage"]
        self.generation, self.keyed, self.plain_offset = state["generation"], state["keyed"], state["plain_offset"]
        self.awaiting, self.awaiting_bytes = state["awaiting"]
        self.search, self.search_at, self.search_why = state["search"], state["search_at"], state["search_why"]
        self.search_first = place(state["search_first"])
        (self.records, self.record_bytes, self.app_records, self.app_record_bytes, self.app_overhead, self.skipped_bytes,
         self.plaintext_bytes, self.lost_plaintext_bytes, self.undecryptable_records, self.key_updates,
         self.finished_ns) = state["counts"]
        (self.opaque_kind, self.opaque_why, self.opaque_bytes, self.opaque_records, self.opaque_start,
         self.opaque_end, first, last) = state["opaque"]
        self.opaque_first, self.opaque_last = place(first), place(last)
        (self.failed, self.failed_bytes, self.failed_start, self.failed_end, first, last,
         self.failed_why) = state["failed"]
        self.failed_first, self.failed_last = place(first), place(last)
        waiting = state.get("waiting") or []
        self.waiting = [(c, h, f, s, place(first), ts, index(capture), r)
                        for c, h, f, s, first, ts, capture, r in waiting] or None
        self.waiting_bytes = sum(len(item[2]) + HEADER for item in waiting)
        self.waited = state.get("waited", False)


class TlsLayer(RecordSink):
    """One TLS connection's records of both directions (0 and 1, as the TCP layer numbers them)."""

    def __init__(self, sink: TlsSink, keys: KeyLog | None = None, sessions: SessionCache | None = None) -> None:
        self.sink = sink
        self.keys = keys if keys is not None else KeyLog()
        self.sessions = sessions
        self.dirs = (Direction(self, 0), Direction(self, 1))
        self.client = -1  # the direction of the ClientHello
        # the handshake (public facts only: randoms, ids and certificates cross the wire in clear)
        self.client_random: bytes | None = None
        self.server_random: bytes | None = None
        self.client_session_id = b""
        self.server_session_id = b""
        self.offered_ticket: bytes | None = None  # a TLS 1.2 session ticket the ClientHello offers
        self.ticket_offered = False  # (a non-empty one)
        self.early_offered = False
        self.version = 0  # negotiated (0: no ServerHello seen)
        self.suite: Suite | None = None
        self.sni: str | None = None
        self.alpn_offered: list[str] = []
        self.alpn: str | None = None
        self.resumed: str | None = None  # session-id, ticket, psk
        self.hello_retry = False
        self.etm = False
        self.ems = False
        self.certificate: hs.CertificateFacts | None = None
        self.server_certificate_seen = False
        self.new_ticket: bytes | None = None  # TLS 1.2: the ticket the server issued (for the session cache)
        self.tickets_issued = 0
        self.client_hello_ns = self.server_hello_ns = self.done_ns = -1
        self.alerts: list[str] = []
        self.master_from: bytes | None = None  # the client random whose key log line gave the master secret
        self.block: KeyBlock12 | None = None  # TLS 1.2's keys (never saved)
        self.master: bytes | None = None  # (never saved)
        self.renegotiations = 0

    # -- the TCP bytes ---------------------------------------------------------------------------

    def data(self, direction: int, offset: int, data: bytes, ts_ns: int, capture: int, record: int) -> None:
        d = self.dirs[direction]  # (typed in layer.pxd: compiled, the reader's method is a C call)
        reader = d.reader
        reader.data(offset, data, ts_ns, capture, record)
        self._flush(direction)
        self._flush(1 - direction)  # (records of the other side that waited for this one's hello)

    def gap(self, direction: int, offset: int, size: int, ts_ns: int) -> None:
        d = self.dirs[direction]
        reader = d.reader
        reader.gap(offset, size, ts_ns)
        self._flush(direction)

    def release(self) -> None:
        """Its last use (the connection ended): the links back to it and to its sink are broken,
        so that it, its readers and its connection are freed at once, not by the cyclic collector
        (which decoding runs seldom: amqpcap.process)."""
        for d in self.dirs:
            d.reader.sink = None
        self.sink = None

    # -- the decrypted stream: what a delivery's records decrypted, up in one piece ----------------

    def _plaintext(self, d: Direction, data: bytes, ts_ns: int, capture: int, record: int) -> None:
        """Decrypted application data, held until the delivery that brought it is done: the records
        one TCP segment completes go up as one piece (a 64 KiB segment holds four full records),
        so the frames above are framed once, as in clear."""
        if d.held is not None and (d.held_ts != ts_ns or d.held_capture != capture or d.held_record != record):
            self._flush(d.reader.direction)
        if d.held is None:
            d.held = [data]
            d.held_from, d.held_ts, d.held_capture, d.held_record = d.plain_offset, ts_ns, capture, record
        else:
            d.held.append(data)
        d.plaintext_bytes += len(data)
        d.plain_offset += len(data)

    def _flush(self, direction: int) -> None:
        d = self.dirs[direction]
        held = d.held
        if held is None:
            return
        d.held = None
        self.sink.tls_plaintext(direction, d.held_from, held[0] if len(held) == 1 else b"".join(held), d.held_ts,
                                d.held_capture, d.held_record)

    def finish(self, ts_ns: int) -> None:
        """The stream ended: what is not framed is lost, what was counted is told."""
        for direction, d in enumerate(self.dirs):
            d.reader.finish(ts_ns)
            self._release(direction)
            self._flush(direction)
            if d.search >= 0:
                self._issue(direction, GAP, d.search_why + "; the stream ended before decryption could resume",
                            d.search, d.search_at, d.search_at + d.search, (d.search_first[0], ts_ns, d.search_first[1],
                                                                           d.search_first[2], 0))
                d.search = -1
            self._tell_failed(direction)
            self._tell_opaque(direction)
            self._tell_not_tls(direction)

    # -- RecordSink ------------------------------------------------------------------------------

    def record(self, reader: RecordReader, ctype: int, header: bytes, fragment: bytes, start: int,
               first: tuple, ts_ns: int, capture: int, record: int) -> None:
        direction = reader.direction
        d = self.dirs[direction]
        size = _HEADER + len(fragment)
        if d.waiting is not None or not d.waited and (self.client < 0 or self.server_random is None) \
                and self._waits(direction, ctype, fragment):
            if d.waiting is None:
                d.waiting = []
            d.waiting.append((ctype, header, bytes(fragment), start, first, ts_ns, capture, record))
            d.waiting_bytes += size
            if d.waiting_bytes > MAX_WAITING:
                self._release(direction)
            return
        protection = d.protection
        # in clear: TLS 1.3's ChangeCipherSpec and outer handshake records (a ClientHello after a
        # HelloRetryRequest) are never protected; TLS 1.2's ChangeCipherSpec is until keys are on
        clear = (ctype == _CCS or ctype == _HANDSHAKE) and self.version == TLS13 \
            or ctype == _CCS and not d.encrypted
        if protection is not None and not clear:
            try:
                if d.search >= 0:
                    ctype, fragment = self._search(direction, d, header, fragment, ts_ns)
                else:
                    fragment = protection.open(d.seq, header, fragment)
                    ctype = protection.content_type
                    d.seq += 1
            except Undecryptable as error:
                early = direction == self.client and self.early_offered and d.stage == HANDSHAKE_KEYS
                if d.search < 0 and not early:  # (a 0-RTT record is no record of these keys)
                    d.seq += 1
                if self._early_data(direction, d, header, fragment, ts_ns, capture, record):
                    d.records += 1
                    d.record_bytes += size
                    return
                self._failed(direction, d, size, start, first, ts_ns, capture, record, str(error))
                return
            if d.failed:
                self._tell_failed(direction)
        elif d.encrypted and not clear:
            self._opaque(direction, d, size, start, first, ts_ns, capture, record)
            return
        elif ctype == _APPLICATION and direction == self.client and d.early is not None:
            if self._early_data(direction, d, header, fragment, ts_ns, capture, record):
                d.records += 1
                d.record_bytes += size
            else:
                self._failed(direction, d, size, start, first, ts_ns, capture, record, "0-RTT data that did not open")
            return
        elif ctype == _APPLICATION:  # in clear before any keys: early data without its key, or not TLS's
            why = ("0-RTT early data, and the key log has no early secret for it" if direction == self.client
                   and self.early_offered else "application data before any ChangeCipherSpec")
            d.opaque_kind = d.opaque_kind or UNDECRYPTABLE
            d.opaque_why = d.opaque_why or why
            self._opaque(direction, d, size, start, first, ts_ns, capture, record)
            return
        d.records += 1
        d.record_bytes += size
        if ctype == _APPLICATION:
            d.app_records += 1
            d.app_record_bytes += size
            d.app_overhead = size - _HEADER - len(fragment)
            if fragment:
                self._plaintext(d, fragment, ts_ns, capture, record)
        elif ctype == _HANDSHAKE:
            try:
                messages = d.messages.feed(fragment)
            except hs.HandshakeError as error:
                self._issue(direction, MALFORMED, f"handshake: {error}", 0, start, start + size,
                            _times(first, ts_ns, capture, record))
                return
            for kind, body in messages:
                try:
                    self._message(direction, d, kind, body, first, ts_ns)
                except hs.HandshakeError as error:
                    self._issue(direction, MALFORMED, f"{hs.MESSAGE_NAMES.get(kind, f'handshake type {kind}')}: "
                                f"{error}", 0, start, start + size, _times(first, ts_ns, capture, record))
        elif ctype == _CCS:
            if self.version != TLS13:
                self._change_cipher_spec(direction, d)
        elif ctype == _ALERT:
            self._alert(direction, fragment, start, size, _times(first, ts_ns, capture, record))

    def lost(self, reader: RecordReader, start: int, end: int, records: int, kind: str, why: str, first: tuple,
             ts_ns: int) -> None:
        direction = reader.direction
        d = self.dirs[direction]
        size = end - start
        self._tell_failed(direction)  # (what is told of the bytes before, first: issues' ranges do not overlap)
        self._tell_opaque(direction)
        if d.messages.pending():  # a handshake message cut: what was gathered of it goes too
            d.messages.clear()
        decrypting = d.protection is not None and kind != TRUNCATED
        if decrypting and records == 1 and d.search < 0:  # one record, framing kept: its sequence number goes too
            d.seq += 1
            estimate = max(0, size - self._per_record(d))
            self._lose_plaintext(direction, d, estimate, ts_ns)
            self._issue(direction, kind, f"{why}: 1 record lost (about {estimate} bytes of decrypted data); "
                        "decryption goes on", size, start, end, (first[0], ts_ns, first[1], first[2], 0))
            return
        if decrypting:  # records of unknown number: told once the next record's sequence number is found
            if d.search >= 0:
                d.search_why += "; " + why
            else:
                d.search_at, d.search_first, d.search_why = start, first, why
            d.search = end - d.search_at
            return
        self._issue(direction, kind, why, size, start, end, (first[0], ts_ns, first[1], first[2], 0))

    def not_tls(self, reader: RecordReader, offset: int, first: tuple) -> None:
        pass  # counted by the reader from `offset`; told at the end (_tell_opaque)

    # -- records that wait for the other side's hello ---------------------------------------------

    def _waits(self, direction: int, ctype: int, fragment) -> bool:
        """Whether this record's keys hang on a hello the other side has not been seen to send:
        the client's records after its ClientHello before any ServerHello (in a capture that put a
        later packet of the client's first), or a ServerHello before the ClientHello."""
        if self.client < 0:
            return ctype == HANDSHAKE and len(fragment) > 0 and fragment[0] == hs.SERVER_HELLO
        return direction == self.client and self.client_random is not None and self.server_random is None \
            and not (self.hello_retry and ctype == HANDSHAKE)

    def _release(self, direction: int) -> None:
        """The records a direction held, read now, in their order."""
        d = self.dirs[direction]
        waiting, d.waiting, d.waiting_bytes = d.waiting, None, 0
        if waiting is not None:
            d.waited = True
        for item in waiting or ():
            self.record(d.reader, *item)

    # -- decryption --------------------------------------------------------------------------------

    def _search(self, direction: int, d: Direction, header: bytes, fragment: bytes, ts_ns: int) -> tuple[int, bytes]:
        """The first record after records of unknown number were lost: opened at the sequence
        number that authenticates it (TLS 1.3: also with the next secret, should a KeyUpdate have
        been lost). Tells the decrypted stream how much it lost."""
        if d.awaiting >= 0:
            return self._resume(direction, d, header, fragment, ts_ns)
        lost = d.search
        protection = d.protection
        per_record = self._per_record(d)
        most = min(MAX_SEARCH, lost // (HEADER + protection.overhead) + 1)
        tried = set()
        order = []
        explicit = getattr(protection, "explicit", 0)
        if explicit == 8 and len(fragment) >= 8:  # TLS 1.2 GCM/CCM: senders put the sequence number here
            guess = int.from_bytes(fragment[:8], "big") - d.seq
            if 1 <= guess <= MAX_SEARCH:
                order.append(guess)
        average = d.app_record_bytes / d.app_records if d.app_records else per_record + 256
        middle = max(1, min(most, round(lost / average)))
        order.append(middle)
        for step in range(1, most + 1):
            if middle + step <= most:
                order.append(middle + step)
            if middle - step >= 1:
                order.append(middle - step)
        found = None
        for k in order:
            if k in tried:
                continue
            tried.add(k)
            try:
                found = (k, (protection.open(d.seq + k - 1, header, fragment), protection))
                break
            except Undecryptable:
                continue
        updated = False
        if found is None and self.version == TLS13 and d.stage == APPLICATION_KEYS and d.secret is not None:
            secret = next_secret13(self.suite, d.secret)
            key, iv = traffic_keys13(self.suite, secret)
            candidate = Aead13(self.suite, key, iv)
            for seq in range(min(MAX_SEARCH, most + 1)):
                try:
                    found = (seq + 1, (candidate.open(seq, header, fragment), candidate))
                    break
                except Undecryptable:
                    continue
            if found is not None:
                d.secret, d.protection, d.seq, d.generation = secret, candidate, 0, d.generation + 1
                d.key_updates += 1
                updated = True
        why = d.search_why
        at, first = d.search_at, d.search_first
        d.search = -1
        if found is None:
            self._issue(direction, GAP, f"{why}; no sequence number up to {most} records on opens the next "
                        "record: the rest of this direction is counted, not decrypted", lost, at, at + lost,
                        (first[0], ts_ns, first[1], first[2], 0))
            d.protection = None
            d.opaque_kind, d.opaque_why = UNDECRYPTABLE, "its record sequence was lost with records not captured"
            raise Undecryptable("sequence lost")
        k, opened = found  # (k: the record found is the k-th after the last one opened)
        records_lost = k - 1
        d.seq = k if updated else d.seq + k
        estimate = max(0, lost - records_lost * per_record)
        self._lose_plaintext(direction, d, estimate, ts_ns)
        counted = f"{'at least ' if updated else ''}{records_lost} record{'s' if records_lost != 1 else ''}"
        self._issue(direction, GAP, f"{why}: {counted} lost (about {estimate} bytes of decrypted data)"
                    + ("; a KeyUpdate among them" if updated else "") + "; decryption resumed", lost, at, at + lost,
                    (first[0], ts_ns, first[1], first[2], 0))
        plain, which = opened
        return which.content_type, plain

    def _resume(self, direction: int, d: Direction, header: bytes, fragment: bytes, ts_ns: int) -> tuple[int, bytes]:
        """The first record of a direction whose keys an earlier run lacked, this run's key log having
        them: opened at the sequence number its records counted since (what they held lost to the
        decrypted stream, which resynchronises; their bytes were told as tls-not-decoded then)."""
        records, size = d.awaiting, d.awaiting_bytes
        d.awaiting, d.awaiting_bytes, d.search = -1, 0, -1
        protection = d.protection
        plain = protection.open(d.seq + records, header, fragment)  # (Undecryptable: the caller counts it)
        d.seq += records + 1
        self._lose_plaintext(direction, d, max(0, size - records * self._per_record(d)), ts_ns)
        return protection.content_type, plain

    @staticmethod
    def _per_record(d: Direction) -> int:
        """What a record adds to its plaintext on the wire, header included: the protection's
        overhead, or for CBC (whose padding varies) what the direction's last record added (records
        lost amid a large message are likely of its size)."""
        return HEADER + max(d.protection.overhead, d.app_overhead)

    def _lose_plaintext(self, direction: int, d: Direction, size: int, ts_ns: int) -> None:
        """Records lost after the direction's handshake carried application data: the decrypted
        stream is told (those of the handshake carried none)."""
        if size > 0 and (d.stage == APPLICATION_KEYS or self.version != TLS13 and d.finished_ns >= 0):
            d.lost_plaintext_bytes += size
            self._flush(direction)
            self.sink.tls_lost(direction, d.plain_offset, size, ts_ns)
            d.plain_offset += size

    def _early_data(self, direction: int, d: Direction, header: bytes, fragment: bytes, ts_ns: int, capture: int,
                    record: int) -> bool:
        """A client record the current keys did not open, tried as 0-RTT data: its plaintext goes up."""
        early = d.early
        if early is None or direction != self.client:
            return False
        try:
            plain = early.open(d.early_seq, header, fragment)
            ctype = early.content_type
        except Undecryptable:
            return False
        d.early_seq += 1
        if ctype == APPLICATION_DATA and plain:
            self._plaintext(d, plain, ts_ns, capture, record)
        elif ctype == HANDSHAKE:  # EndOfEarlyData: early keys are done
            d.early = None
        return True

    def _failed(self, direction: int, d: Direction, size: int, start: int, first: tuple, ts_ns: int, capture: int,
                record: int, why: str) -> None:
        d.undecryptable_records += 1
        if not d.failed:
            d.failed_start, d.failed_first, d.failed_why = start, first, why
        d.failed += 1
        d.failed_bytes += size
        d.failed_end = start + size
        d.failed_last = (ts_ns, capture, record)

    def _tell_failed(self, direction: int) -> None:
        d = self.dirs[direction]
        if not d.failed:
            return
        first, last = d.failed_first, d.failed_last
        self._issue(direction, UNDECRYPTABLE, f"{d.failed} record{'s' if d.failed != 1 else ''} did not open with "
                    f"this connection's keys ({d.failed_why})", d.failed_bytes, d.failed_start, d.failed_end,
                    (first[0], last[0], first[1], first[2], last[2] if last[1] == first[1] else 0))
        d.failed = d.failed_bytes = 0

    def _opaque(self, direction: int, d: Direction, size: int, start: int, first: tuple, ts_ns: int, capture: int,
                record: int) -> None:
        if d.awaiting >= 0:
            d.awaiting += 1
            d.awaiting_bytes += size
        if not d.opaque_records:
            d.opaque_start, d.opaque_first = start, first
            if not d.opaque_kind:
                d.opaque_kind, d.opaque_why = NOT_DECODED, self._why_no_keys()
        d.opaque_records += 1
        d.opaque_bytes += size
        d.opaque_end = start + size
        d.opaque_last = (ts_ns, capture, record)
        if d.finished_ns < 0 and self.version and (self.version != TLS13 or direction == self.client):
            d.finished_ns = first[0]  # its first encrypted handshake record: its Finished
            self._maybe_done()

    def _tell_not_tls(self, direction: int) -> None:
        """A direction whose bytes were never TLS records: counted, told once at the end."""
        reader = self.dirs[direction].reader
        if reader.opaque_from >= 0:
            size = reader.end - reader.opaque_from
            first = reader.opaque_first
            self._issue(direction, NOT_DECODED, f"{size} bytes that are not TLS records: counted, not decoded", size,
                        reader.opaque_from, reader.end, (first[0], first[0], first[1], first[2], 0))

    def _tell_opaque(self, direction: int) -> None:
        """The encrypted records counted since the last told: one issue (a loss between two runs of
        them ends the first, so that no issue's range holds another's bytes)."""
        d = self.dirs[direction]
        if not d.opaque_records:
            return
        first, last = d.opaque_first, d.opaque_last
        self._issue(direction, d.opaque_kind, f"{d.opaque_records} encrypted record{'s' if d.opaque_records != 1 else ''} "
                    f"({d.opaque_bytes} bytes) counted, not decrypted: {d.opaque_why}", d.opaque_bytes,
                    d.opaque_start, d.opaque_end,
                    (first[0], last[0], first[1], first[2], last[2] if last[1] == first[1] else 0))
        d.opaque_records = d.opaque_bytes = 0

    def _why_no_keys(self) -> str:
        if self.client_random is None:
            return "its handshake was not captured (no client random to find its keys by)"
        if self.suite is not None and self.suite.cipher is None:
            return f"{self.suite.name} is not a cipher suite amqpcap decrypts"
        if self.version and self.version not in (0x0303, TLS13):
            return f"{hs.version_name(self.version)} is not decrypted (TLS 1.2 and 1.3 are)"
        if not self.keys.covers(self.client_random):
            return f"no key log line for its client random {self.client_random.hex()}"
        return f"the key log lacks a secret this connection needs (client random {self.client_random.hex()})"

    # -- the handshake -----------------------------------------------------------------------------

    def _message(self, direction: int, d: Direction, kind: int, body: bytes, first: tuple, ts_ns: int) -> None:
        if kind == hs.CLIENT_HELLO:
            hello = hs.client_hello(body)
            first_hello = self.client < 0
            if first_hello:
                self.client = direction
                self.sink.tls_client(direction)
            if self.client_random is not None and hello.random != self.client_random and self.done_ns >= 0:
                self.renegotiations += 1
            if self.client_random is None:
                self.client_hello_ns = first[0]
                self.sni, self.alpn_offered = hello.sni, hello.alpn
            self.client_random, self.client_session_id = hello.random, hello.session_id
            self.offered_ticket, self.ticket_offered = hello.ticket, bool(hello.ticket)
            self.early_offered = hello.early_data
            if hello.early_data:
                secret = self.keys.secret(hello.random, EARLY_SECRET)
                if secret is not None and hello.suites:
                    # (the early suite is the PSK's: the first TLS 1.3 suite offered is its usual choice)
                    early_suite = suite_of(next((s for s in hello.suites if s >> 8 == 0x13), hello.suites[0]))
                    if early_suite.tls13 and early_suite.cipher is not None:
                        key, iv = traffic_keys13(early_suite, secret)
                        d.early = Aead13(early_suite, key, iv)
            if first_hello:
                self._release(1 - direction)  # (a ServerHello that came first: its keys need this hello's random)
        elif kind == hs.SERVER_HELLO:
            hello = hs.server_hello(body)
            if hello.hello_retry:
                self.hello_retry = True
                self.version = hello.version
                self.suite = suite_of(hello.suite)
                return
            if self.server_random is None:
                self.server_hello_ns = first[0]
            self.server_random, self.server_session_id = hello.random, hello.session_id
            self.version = hello.version
            self.suite = suite_of(hello.suite)
            self.etm, self.ems = hello.etm and not self.suite.aead, hello.ems
            if hello.alpn is not None:
                self.alpn = hello.alpn
            if self.version == TLS13:
                if hello.psk:
                    self.resumed = "psk"
                self._keys13(direction, SERVER_HANDSHAKE, HANDSHAKE_KEYS)
                self._keys13(1 - direction, CLIENT_HANDSHAKE, HANDSHAKE_KEYS)
            elif self.client_session_id and hello.session_id == self.client_session_id:
                self.resumed = "ticket" if self.ticket_offered else "session-id"
            self._release(1 - direction)  # (the client's records that came before it)
        elif kind == hs.CERTIFICATE:
            if direction != self.client and self.certificate is None:
                der = hs.leaf_certificate(body, self.version == TLS13)
                self.server_certificate_seen = True
                if der is not None:
                    self.certificate = hs.certificate_facts(der)
        elif kind == hs.SERVER_KEY_EXCHANGE:
            self.server_certificate_seen = True
        elif kind == hs.NEW_SESSION_TICKET:
            self.tickets_issued += 1
            if self.version != TLS13:
                self.new_ticket = hs.session_ticket12(body)
                if self.master is not None and self.resumed is None and self.sessions is not None:
                    self.sessions.remember(None, self.new_ticket, self.master, self.master_from)
        elif kind == hs.ENCRYPTED_EXTENSIONS:
            self.alpn = hs.encrypted_extensions(body)
        elif kind == hs.FINISHED:
            if d.finished_ns < 0:
                d.finished_ns = first[0]
            if self.version == TLS13:
                label = CLIENT_TRAFFIC if direction == self.client else SERVER_TRAFFIC
                self._keys13(direction, label, APPLICATION_KEYS)
            self._maybe_done()
        elif kind == hs.KEY_UPDATE and self.version == TLS13:
            hs.key_update_requested(body)
            if d.secret is not None:
                d.secret = next_secret13(self.suite, d.secret)
                key, iv = traffic_keys13(self.suite, d.secret)
                d.protection = Aead13(self.suite, key, iv)
            d.seq = 0
            d.generation += 1
            d.key_updates += 1
        elif kind == hs.END_OF_EARLY_DATA:
            d.early = None

    def _maybe_done(self) -> None:
        if self.done_ns >= 0:
            return
        client = self.dirs[self.client] if self.client >= 0 else None
        server = self.dirs[1 - self.client] if self.client >= 0 else None
        if client is None or client.finished_ns < 0:
            return
        if self.version == TLS13:
            self.done_ns = client.finished_ns
        elif server.finished_ns >= 0:
            self.done_ns = max(client.finished_ns, server.finished_ns)

    def _keys13(self, direction: int, label: str, stage: int) -> None:
        """A TLS 1.3 direction's keys for a new stage, from the key log's secret for it."""
        d = self.dirs[direction]
        d.encrypted = True
        d.stage = stage
        d.seq = 0
        d.generation = 0
        suite = self.suite
        secret = self.keys.secret(self.client_random, label) if suite is not None and suite.cipher else None
        if secret is None or len(secret) != (48 if suite.hash == "SHA384" else 32):
            d.protection, d.secret, d.keyed = None, None, False
            return
        key, iv = traffic_keys13(suite, secret)
        d.protection, d.secret, d.keyed = Aead13(suite, key, iv), secret, True

    def _change_cipher_spec(self, direction: int, d: Direction) -> None:
        """TLS 1.2: the direction's records are protected from here, with keys from the master secret."""
        if self.resumed is None and self.ticket_offered and not self.server_certificate_seen:
            self.resumed = "ticket"  # the server went straight to ChangeCipherSpec: it took the ticket
        d.encrypted = True
        d.seq = 0
        block = self._key_block()
        if block is None or self.client < 0:
            d.protection, d.keyed = None, False
            return
        i = 0 if direction == self.client else 1
        d.protection = protection_for(self.suite, block.keys[i], block.ivs[i], block.mac_keys[i], self.etm)
        d.keyed = True

    def _key_block(self) -> KeyBlock12 | None:
        if self.block is not None:
            return self.block
        suite = self.suite
        if suite is None or suite.cipher is None or suite.tls13 or self.version != 0x0303 or self.server_random is None:
            return None
        master = self.keys.secret(self.client_random, MASTER_SECRET)
        origin = self.client_random
        if master is None and self.resumed is not None and self.sessions is not None:
            found = self.sessions.find(self.client_session_id, self.offered_ticket)
            if found is not None:
                master, origin = found
        if master is None:
            return None
        self.master_from, self.master = origin, master
        self.block = KeyBlock12(suite, master, self.client_random, self.server_random)
        if self.sessions is not None and self.resumed is None:  # a full handshake: others may resume it
            self.sessions.remember(self.server_session_id, self.new_ticket, master, origin)
        return self.block

    # -- alerts --------------------------------------------------------------------------------

    def _alert(self, direction: int, fragment: bytes, start: int, size: int, ts: tuple) -> None:
        who = "client" if direction == self.client else "server"
        if len(fragment) != 2:
            self.alerts.append(f"an alert of {len(fragment)} bytes from the {who}")
            return
        level, description = fragment[0], fragment[1]
        name = ALERTS.get(description, f"alert {description}")
        self.alerts.append(f"{name} from the {who}")
        if description != 0:
            self._issue(direction, ALERT_ISSUE, f"{'fatal' if level == 2 else 'warning'} alert {name} ({description}) "
                        f"from the {who}", 0, start, start + size, ts)

    def _issue(self, direction: int, kind: str, detail: str, skipped: int, start: int, end: int, ts: tuple) -> None:
        self._flush(direction)  # (what was decrypted before it goes up first)
        self.dirs[direction].skipped_bytes += skipped
        self.sink.tls_issue(direction, kind, detail, skipped, start, end, ts)

    # -- what the tables say of it -------------------------------------------------------------------

    def summary(self, client: int) -> dict:
        """The TLS connection's facts (the `tls_connections` row; `client`: the direction the
        connection took for the client's, which the ClientHello decided when it was seen)."""
        cert = self.certificate
        suite = self.suite
        hello_ns, done_ns = self.client_hello_ns, self.done_ns
        directions = {}
        for direction, d in enumerate(self.dirs):
            label = CLIENT_TO_SERVER if direction == client else SERVER_TO_CLIENT
            directions[label] = {"records": d.records + d.opaque_records + d.undecryptable_records,
                                 "record_bytes": d.record_bytes, "skipped_bytes": d.skipped_bytes,
                                 "plaintext_bytes": d.plaintext_bytes, "lost_plaintext_bytes": d.lost_plaintext_bytes,
                                 "undecryptable_records": d.undecryptable_records, "key_updates": d.key_updates}
        return {"version": hs.version_name(self.version) if self.version else None,
                "cipher_suite": suite.name if suite is not None else None,
                "cipher_suite_id": suite.id if suite is not None else None,
                "sni": self.sni, "alpn_offered": list(self.alpn_offered), "alpn": self.alpn,
                "resumed": self.resumed, "hello_retry": self.hello_retry,
                "encrypt_then_mac": self.etm if suite is not None and not suite.tls13 else None,
                "extended_master_secret": self.ems if suite is not None and not suite.tls13 else None,
                "client_hello_ns": hello_ns if hello_ns >= 0 else None,
                "server_hello_ns": self.server_hello_ns if self.server_hello_ns >= 0 else None,
                "handshake_done_ns": done_ns if done_ns >= 0 else None,
                "handshake_ms": (done_ns - hello_ns) / 1e6 if done_ns >= 0 and hello_ns >= 0 else None,
                "cert_subject": cert.subject if cert else None, "cert_issuer": cert.issuer if cert else None,
                "cert_not_before_us": cert.not_before_us if cert else None,
                "cert_not_after_us": cert.not_after_us if cert else None,
                "cert_sha256": cert.sha256 if cert else None,
                "key_logged": self.keys.covers(self.client_random),
                "decrypted": any(d.plaintext_bytes for d in self.dirs),
                "tickets_issued": self.tickets_issued, "alerts": list(self.alerts),
                "directions": directions}

    def earliest_pending(self, low: int) -> int:
        """The earliest time of what is still to come out as records, if before `low`: a record not
        whole yet, bytes lost and not yet told, undecryptable records not yet told. (Counted
        encrypted bytes are told at the end, timed by their first: late, as decode's time order
        knows: amqpcap.decodeview.order.)"""
        for d in self.dirs:
            low = d.reader.earliest_pending(low)
            if d.waiting and d.waiting[0][4][0] < low:
                low = d.waiting[0][4][0]
            if d.search >= 0 and d.search_first[0] < low:
                low = d.search_first[0]
            if d.failed and d.failed_first[0] < low:
                low = d.failed_first[0]
        return low

    # -- carried to the next run (amqpcap.onepass.state frames the blob) ---------------------------

    def saved(self, name) -> dict:
        """Every public fact and each direction's framing, sequence and key stage; no secret, no
        key: the next run finds them in its own key log (`restore`)."""
        cert = self.certificate
        return {"client": self.client, "client_random": self.client_random, "server_random": self.server_random,
                "client_session_id": self.client_session_id, "server_session_id": self.server_session_id,
                "offered_ticket": self.offered_ticket, "early_offered": self.early_offered,
                "version": self.version, "suite": self.suite.id if self.suite is not None else None,
                "sni": self.sni, "alpn_offered": list(self.alpn_offered), "alpn": self.alpn, "resumed": self.resumed,
                "hello_retry": self.hello_retry, "etm": self.etm, "ems": self.ems,
                "certificate": None if cert is None else [cert.subject, cert.issuer, cert.not_before_us,
                                                          cert.not_after_us, cert.sha256],
                "server_certificate_seen": self.server_certificate_seen, "tickets_issued": self.tickets_issued,
                "times": [self.client_hello_ns, self.server_hello_ns, self.done_ns], "alerts": list(self.alerts),
                "master_from": self.master_from, "renegotiations": self.renegotiations,
                "directions": [d.saved(name) for d in self.dirs]}

    def restore(self, state: dict, index, flipped: bool) -> None:
        """The layer as `saved` left it (`flipped`: this run numbers the directions the other way
        round), its keys found again in this run's key log."""
        self.client = (1 - state["client"] if flipped and state["client"] >= 0 else state["client"])
        self.client_random, self.server_random = state["client_random"], state["server_random"]
        self.client_session_id, self.server_session_id = state["client_session_id"], state["server_session_id"]
        self.offered_ticket, self.early_offered = state["offered_ticket"], state["early_offered"]
        self.ticket_offered = bool(self.offered_ticket)
        self.version = state["version"]
        self.suite = suite_of(state["suite"]) if state["suite"] is not None else None
        self.sni, self.alpn_offered, self.alpn = state["sni"], state["alpn_offered"], state["alpn"]
        self.resumed, self.hello_retry, self.etm, self.ems = (state["resumed"], state["hello_retry"], state["etm"],
                                                              state["ems"])
        self.certificate = hs.CertificateFacts(*state["certificate"]) if state["certificate"] else None
        self.server_certificate_seen, self.tickets_issued = state["server_certificate_seen"], state["tickets_issued"]
        self.client_hello_ns, self.server_hello_ns, self.done_ns = state["times"]
        self.alerts, self.master_from, self.renegotiations = state["alerts"], state["master_from"], state["renegotiations"]
        saved = state["directions"][::-1] if flipped else state["directions"]
        for direction, (d, found) in enumerate(zip(self.dirs, saved)):
            d.restore(found, index)
            if d.keyed or d.awaiting >= 0:
                self._rekey(direction, d)

    def _rekey(self, direction: int, d: Direction) -> None:
        """A carried direction's keys, from this run's key log: TLS 1.3's secret for its stage (and
        its KeyUpdates), TLS 1.2's master secret by the client random it came from."""
        suite = self.suite
        protection = None
        if self.version == TLS13 and suite is not None and suite.cipher:
            client = direction == self.client
            label = {HANDSHAKE_KEYS: CLIENT_HANDSHAKE if client else SERVER_HANDSHAKE,
                     APPLICATION_KEYS: CLIENT_TRAFFIC if client else SERVER_TRAFFIC}.get(d.stage)
            secret = self.keys.secret(self.client_random, label) if label else None
            if secret is not None:
                for _ in range(d.generation):
                    secret = next_secret13(suite, secret)
                key, iv = traffic_keys13(suite, secret)
                d.secret, protection = secret, Aead13(suite, key, iv)
        elif suite is not None and suite.cipher and self.master_from is not None:
            master = self.keys.secret(self.master_from, MASTER_SECRET)
            if master is not None and self.server_random is not None:
                self.master = master
                self.block = KeyBlock12(suite, master, self.client_random, self.server_random)
                i = 0 if direction == self.client else 1
                protection = protection_for(suite, self.block.keys[i], self.block.ivs[i], self.block.mac_keys[i],
                                            self.etm)
        d.protection = protection
        if protection is not None and d.awaiting >= 0:  # keys missed by an earlier run: resumed (_resume)
            d.keyed, d.search = True, 0
        if protection is None:
            d.keyed = False
            if d.awaiting < 0:  # its records are counted from here: a later run may have the keys
                d.awaiting, d.awaiting_bytes = 0, 0
            d.opaque_kind = d.opaque_kind or NOT_DECODED
            d.opaque_why = d.opaque_why or ("carried from the previous run, and this run's key log has no secret "
                                            "for it (it is looked for again in every run's key log)")
