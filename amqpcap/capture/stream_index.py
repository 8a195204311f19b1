"""Wireshark's TCP stream index (`tcp.stream`) of every packet of a capture file, so that any row can
be opened in Wireshark with `tcp.stream == N` (and `frame.number == N` for the pcap record).

Wireshark numbers a file's TCP conversations from 0 in the order they first appear, and starts a
new conversation on the same addresses and ports when a SYN (without ACK) comes whose sequence
number differs from the first one seen in its direction (a reused port).

A big file is read in byte ranges by several tasks, each blind to what came before it, so the
numbering has two steps. `RangeStreams` numbers the packets of one range with local streams: one
starts at a conversation's first packet in the range and at every SYN that may begin a new
conversation (every SYN but a retransmission of the local stream's own opening SYN), and keeps what
the rule needs of each (its addresses, its opening SYN, the first sequence number per direction).
`StreamIndex` then takes the ranges' local streams in file order and gives each its index in the
file. A reader of the whole file in one pass (`FileStreams`) does both at once.

Memory: a conversation is forgotten once it has ended (a RST, or a FIN each way) and stayed quiet
for `GRACE_NS` of capture time, so what is held follows the connections open, not the file's
length. Forgetting changes nothing Wireshark shows unless an ended conversation's addresses and
ports carry a packet without SYN more than GRACE_NS later (it would get a new index where
Wireshark keeps the old one); a reused port opens with a SYN, a new conversation either way.
"""

from __future__ import annotations

from amqpcap.capture.packets import TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN

ENDED_BOTH = 3  # bit 0: a FIN from the lower endpoint, bit 1: from the higher; a RST sets both
GRACE_NS = 300 * 10**9  # well past TIME_WAIT (60 s on Linux): no late segment of the old connection comes after
FORGET_EVERY = 1024  # FileStreams looks for ended conversations each time this many more have opened


class LocalStream:
    """A conversation as one range saw it from its first packet (or from a SYN that may open a
    new conversation on the same addresses and ports) on: what the rule needs of it. Its key orders
    the endpoints (lower first); direction 0 is from the lower one."""

    __slots__ = ("key", "opener", "opener_seq", "first_lower", "first_higher", "last_ts", "ended", "local", "placed",
                 "bucket")

    def __init__(self, key: tuple, opener: int, opener_seq: int, first_lower: int, first_higher: int, last_ts: int,
                 ended: int, local: int) -> None:
        self.key = key
        self.opener = opener  # the opening SYN's direction (-1: none)
        self.opener_seq = opener_seq  # its sequence number
        self.first_lower = first_lower  # the first sequence number per direction (-1: none seen)
        self.first_higher = first_higher
        self.last_ts = last_ts  # its last packet's time
        self.ended = ended  # how it ended (ENDED_* bits)
        self.local = local  # its local number in the range
        self.placed = -1  # its index in the file once FileStreams placed it
        self.bucket = -1  # its connection's bucket once a reader sorted it (amqpcap.capture.bucketing)

    def first(self, direction: int) -> int:
        return self.first_lower if direction == 0 else self.first_higher


class RangeStreams:
    """Local stream numbers for the packets of one range of a file, in order."""

    def __init__(self, keep: bool = True) -> None:
        """`keep`: keep every local stream in `streams` (a range's reader hands them all on);
        otherwise only `current` holds them, and `forget_ended` can drop those that ended."""
        self.streams: list[LocalStream] | None = [] if keep else None
        self.current: dict[tuple, LocalStream] = {}  # key -> its latest local stream
        self.count = 0
        self.last: LocalStream | None = None  # the last segment's local stream
        # Its endpoints as that segment gave them: most packets belong to the same conversation
        # as the one before (83% of a busy capture's), which then needs no key and no lookup.
        self.last_src = self.last_dst = b""
        self.last_sport = self.last_dport = -1
        self.last_direction = 0

    def segment(self, src: bytes, sport: int, dst: bytes, dport: int, flags: int, seq: int, ts_ns: int) -> int:
        """The local stream of a TCP packet."""
        syn = flags & (TCP_SYN | TCP_ACK) == TCP_SYN
        stream = self.last
        if stream is not None and not syn and sport == self.last_sport and dport == self.last_dport \
                and src == self.last_src and dst == self.last_dst:
            direction = self.last_direction
        elif stream is not None and not syn and sport == self.last_dport and dport == self.last_sport \
                and src == self.last_dst and dst == self.last_src:
            direction = 1 - self.last_direction
        else:
            stream, direction = self._lookup(src, sport, dst, dport, syn, seq, ts_ns)
            self.last_src, self.last_sport, self.last_dst, self.last_dport = src, sport, dst, dport
            self.last_direction = direction
        if direction == 0:
            if stream.first_lower < 0:
                stream.first_lower = seq
        elif stream.first_higher < 0:
            stream.first_higher = seq
        stream.last_ts = ts_ns
        if flags & (TCP_FIN | TCP_RST):
            stream.ended |= ENDED_BOTH if flags & TCP_RST else 1 << direction
        return stream.local

    def _lookup(self, src: bytes, sport: int, dst: bytes, dport: int, syn: bool, seq: int, ts_ns: int) -> tuple:
        """(the local stream, the packet's direction in it) by the conversation's key; a SYN that
        may open a new conversation starts a local stream."""
        if src < dst or src == dst and sport <= dport:
            key, direction = (src, sport, dst, dport), 0
        else:
            key, direction = (dst, dport, src, sport), 1
        stream = self.current.get(key)
        if stream is None or syn and not _same_opener(stream, direction, seq):
            stream = LocalStream(key, direction if syn else -1, seq if syn else -1, -1, -1, ts_ns, 0, self.count)
            self.count += 1
            self.current[key] = stream
            if self.streams is not None:
                self.streams.append(stream)
        self.last = stream
        return stream, direction

    def forget_ended(self, before_ns: int) -> None:
        """Drop the local streams that ended and were quiet since before `before_ns`."""
        for key, stream in list(self.current.items()):
            if stream.ended == ENDED_BOTH and stream.last_ts < before_ns:
                del self.current[key]
                if stream is self.last:  # its next packet is looked up: a new local stream
                    self.last_sport = -1


def _same_opener(stream: LocalStream, direction: int, seq: int) -> bool:
    """A retransmitted SYN: Wireshark keeps it in the conversation it opened."""
    return stream.opener == direction and stream.opener_seq == seq


class StreamIndex:
    """Local streams in file order -> Wireshark's stream index in the file."""

    def __init__(self) -> None:
        self.count = 0
        # key -> [index, the conversation's first sequence number per direction, its latest local
        # stream, how its earlier local streams ended]
        self.conversations: dict[tuple, list] = {}

    def place(self, stream: LocalStream) -> int:
        """The index of a local stream (all earlier local streams of the file placed already). Its
        first sequence numbers are read when the next local stream of its key is placed, so a
        single-pass reader can place it as soon as it opens."""
        key = stream.key
        conversation = self.conversations.get(key)
        if conversation is not None:
            base, latest = conversation[1], conversation[2]
            for direction in (0, 1):
                if base[direction] < 0:
                    base[direction] = latest.first(direction)
            opener = stream.opener
            if opener >= 0 and base[opener] >= 0 and base[opener] != stream.opener_seq:
                conversation = None  # a reused port: a new conversation
            else:
                conversation[3] |= latest.ended
        if conversation is None:
            conversation = self.conversations[key] = [self.count, [-1, -1], stream, 0]
            self.count += 1
        conversation[2] = stream
        return conversation[0]

    def forget_ended(self, before_ns: int) -> None:
        """Drop the conversations that ended and were quiet since before `before_ns`."""
        for key, conversation in list(self.conversations.items()):
            latest = conversation[2]
            if (conversation[3] | latest.ended) == ENDED_BOTH and latest.last_ts < before_ns:
                del self.conversations[key]


class FileStreams:
    """Both steps at once, for a reader of a whole file in order."""

    def __init__(self) -> None:
        self.local = RangeStreams(keep=False)
        self.index = StreamIndex()

    def segment(self, src: bytes, sport: int, dst: bytes, dport: int, flags: int, seq: int, ts_ns: int) -> int:
        self.local.segment(src, sport, dst, dport, flags, seq, ts_ns)
        stream = self.local.last
        if stream.placed < 0:  # it has just opened
            stream.placed = self.index.place(stream)
            if self.local.count % FORGET_EVERY == 0:
                self.forget_ended(ts_ns - GRACE_NS)
        return stream.placed

    def forget_ended(self, before_ns: int) -> None:
        self.local.forget_ended(before_ns)
        self.index.forget_ended(before_ns)
