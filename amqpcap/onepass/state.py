"""Connections that outlive a run: their whole state saved at the end of one run and resumed in
the next (docs/state.md). Each part saves and restores itself (TcpConnection, HalfStream,
AmqpConnection, FrameReader, _Content: `saved` and `restore`, beside their fields); this module
frames the blob, checks that a first packet continues it, and reads it back safely.

What a connection still open at the captures' end holds is plain data: per TCP direction the
sequence number of stream offset 0, the next offset and what waits out of order; per AMQP
direction the bytes of a frame cut in the middle and where framing stands; the messages whose
content is still arriving (their bodies so far, so the SHA-256 completes); and the analytics
state machines of every channel (unconfirmed publishes, outstanding deliveries, consumers,
pending requests, the handshake facts). `save` turns one connection into a blob, `resume` makes a
live connection of it again, for the first packet of the next run that continues it.

A blob is a pickle of plain data and of the analytics objects, read back by an unpickler that
knows only those types (a blob cannot make it run anything else); capture files are named, not
numbered, so a resumed connection's chunks keep the capture they came from.
"""

from __future__ import annotations

import io
import pickle
import zlib
from dataclasses import dataclass

from amqpcap.capture.packets import Segment
from amqpcap.capture.tcp import NONE, SEQ_MOD, TCP_SYN
from amqpcap.connection.stream import AmqpConnection

FORMAT = 2  # of the blob; a blob of another format is not resumed (2: pcap records and TCP stream indices)


@dataclass
class SavedState:
    """One connection as the end of a run left it."""

    key: str  # the 4-tuple, the same from either side ("a|b" with a < b)
    connection: str  # its id, kept for its whole life
    last_ts_ns: int  # its last packet
    source: str  # the capture file of the run that saved it (its last)
    blob: bytes


# -- saving --------------------------------------------------------------------------------------

def save(connection: AmqpConnection, analyzer, seq: int, capture_names: list[str]) -> bytes:
    """One open connection (its decoder, its analytics, its frame counter) as a blob: each part
    saves itself (TcpConnection.saved, AmqpConnection.saved); the client's segments waiting out of
    order are withheld (they may hold credentials)."""
    def name(index: int):
        return capture_names[index] if index >= 0 else None

    tcp = connection.tcp
    data = {"format": FORMAT, "seq": seq,
            "tcp": tcp.saved(name, tuple(connection.may_send_secrets(half.direction) for half in tcp.halves)),
            "amqp": connection.saved(name)}
    out = io.BytesIO()
    pickler = pickle.Pickler(out, protocol=5)
    pickler.persistent_id = _persistent_id(analyzer, connection.version)
    pickler.dump((data, analyzer))
    return zlib.compress(out.getvalue(), 1)


# -- resuming ------------------------------------------------------------------------------------

def load(blob: bytes, analytics_context) -> tuple[dict, object]:
    """(decoder data, analytics objects) of a blob; `analytics_context`: what the analytics objects
    refer to in this run (amqpcap.rules.Analytics: its emit, settings, and naming by version)."""
    unpickler = _Unpickler(io.BytesIO(zlib.decompress(blob)))
    unpickler.persistent_load = _persistent_load(analytics_context)
    data, analyzer = unpickler.load()
    if data.get("format") != FORMAT:
        raise ValueError(f"saved state of format {data.get('format')} (this version reads {FORMAT})")
    return data, analyzer


def continues(data: dict, segment: Segment, max_gap_ns: int, tolerance: int) -> str | None:
    """Why this first packet does not continue the saved connection (None when it does)."""
    tcp = data["tcp"]
    gap = segment.ts_ns - tcp["last_ts_ns"]
    if gap > max_gap_ns:
        return f"silent for {gap / 3.6e12:.1f} hours since its last packet"
    if gap < 0:
        return "the saved state is later than this packet (captures out of order, or another capture point)"
    if segment.flags & TCP_SYN:
        return "a new connection (SYN) on the same addresses and ports"
    direction = 0 if (segment.src, segment.sport) == tuple(tcp["a"]) else 1
    half = tcp["halves"][direction]
    if half["base"] == NONE:
        return None  # that direction never carried data: nothing to compare
    relative = (segment.seq - half["base"]) % SEQ_MOD
    offset = relative + ((half["next"] - relative + (1 << 31)) // SEQ_MOD) * SEQ_MOD
    if abs(offset - half["next"]) > tolerance:
        return f"its sequence numbers jumped by {offset - half['next']} bytes from where the saved state ended"
    return None


def restore(data: dict, connection: AmqpConnection, capture_names: list[str]) -> None:
    """Make a freshly made connection (same 4-tuple, its TCP object too) the saved one."""
    def index(name) -> int:
        if name is None:
            return -1
        if name not in capture_names:
            capture_names.append(name)  # a file of an earlier run: records name it still
        return capture_names.index(name)

    flipped = connection.tcp.restore(data["tcp"], index)  # (the new run saw the other side first)
    connection.restore(data["amqp"], index, flipped)


# -- the analytics objects: pickled, their links to this run's objects by name --------------------

def _persistent_id(analyzer, version):
    if analyzer is None:
        return lambda obj: None
    links = {id(analyzer.emit): "emit", id(analyzer.settings): "settings", id(analyzer.findings.settings): "findings",
             id(analyzer.naming): ("naming", version)}

    def persistent_id(obj):
        return links.get(id(obj))
    return persistent_id


def _persistent_load(analytics):
    def persistent_load(link):
        if isinstance(link, tuple):  # the connection's protocol names, by its version
            return analytics.naming(link[1])
        return getattr(analytics, link)
    return persistent_load


class _Unpickler(pickle.Unpickler):
    """Only the types a saved state holds: a tampered blob cannot name anything else."""

    ALLOWED = {("collections", "deque"), ("datetime", "date"), ("datetime", "datetime"),
               ("datetime", "timezone"), ("datetime", "timedelta"), ("decimal", "Decimal"),
               ("builtins", "set"), ("builtins", "frozenset"), ("builtins", "bytearray"),
               ("copyreg", "_reconstructor"), ("copyreg", "__newobj__"), ("builtins", "object"),
               ("amqpcap.protocol.fieldtable", "Timestamp")}

    # Where a class lived when 0.2.0's lakes saved their states (before the package had wings):
    # a lake carried across the upgrade resumes its connections.
    MOVED = {"amqp_decode.fieldtable": "amqpcap.protocol.fieldtable", "amqp_decode.analytics.": "amqpcap.rules."}

    def find_class(self, module: str, name: str):
        for old, new in self.MOVED.items():
            if module == old or (old.endswith(".") and module.startswith(old)):
                module = new + module[len(old):]
        if (module, name) in self.ALLOWED or module.startswith("amqpcap.rules."):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"a saved state may not hold {module}.{name}")

