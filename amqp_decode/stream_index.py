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
"""

from __future__ import annotations

from amqp_decode.packets import TCP_ACK, TCP_SYN

# A local stream: [key, opening SYN's direction (-1: none), its sequence number, first sequence
# number per direction (-1: none seen)]. The key orders the endpoints (lower first); direction 0
# is from the lower one.
KEY, OPENER, OPENER_SEQ, FIRST = 0, 1, 2, 3


class RangeStreams:
    """Local stream numbers for the packets of one range of a file, in order."""

    def __init__(self) -> None:
        self.streams: list[list] = []
        self.current: dict[tuple, int] = {}  # key -> its latest local stream

    def segment(self, src: bytes, sport: int, dst: bytes, dport: int, flags: int, seq: int) -> int:
        """The local stream of a TCP packet."""
        if src < dst or src == dst and sport <= dport:
            key, direction = (src, sport, dst, dport), 0
        else:
            key, direction = (dst, dport, src, sport), 1
        found = self.current.get(key)
        syn = flags & (TCP_SYN | TCP_ACK) == TCP_SYN
        if found is None or syn and not _same_opener(self.streams[found], direction, seq):
            local = len(self.streams)
            self.current[key] = local
            self.streams.append([key, direction if syn else -1, seq if syn else -1, [-1, -1]])
        else:
            local = found
        first = self.streams[local][FIRST]
        if first[direction] < 0:
            first[direction] = seq
        return local

    def as_json(self) -> list[list]:
        """The local streams as plain data (they travel from the reading tasks to the driver)."""
        return [[key[0].hex(), key[1], key[2].hex(), key[3], opener, opener_seq, first[0], first[1]]
                for key, opener, opener_seq, first in self.streams]


def streams_from_json(data: list[list]) -> list[list]:
    return [[(bytes.fromhex(a), a_port, bytes.fromhex(b), b_port), opener, opener_seq, [first0, first1]]
            for a, a_port, b, b_port, opener, opener_seq, first0, first1 in data]


def _same_opener(stream: list, direction: int, seq: int) -> bool:
    """A retransmitted SYN: Wireshark keeps it in the conversation it opened."""
    return stream[OPENER] == direction and stream[OPENER_SEQ] == seq


class StreamIndex:
    """Local streams in file order -> Wireshark's stream index in the file."""

    def __init__(self) -> None:
        self.count = 0
        # key -> [index, the conversation's first sequence number per direction, its latest local stream]
        self.conversations: dict[tuple, list] = {}

    def place(self, stream: list) -> int:
        """The index of a local stream (all earlier local streams of the file placed already). Its
        first sequence numbers are read when the next local stream of its key is placed, so a
        single-pass reader can place it as soon as it opens."""
        key = stream[KEY]
        conversation = self.conversations.get(key)
        if conversation is not None:
            base, latest = conversation[1], conversation[2]
            for direction in (0, 1):
                if base[direction] < 0:
                    base[direction] = latest[FIRST][direction]
            opener = stream[OPENER]
            if opener >= 0 and base[opener] >= 0 and base[opener] != stream[OPENER_SEQ]:
                conversation = None  # a reused port: a new conversation
        if conversation is None:
            conversation = self.conversations[key] = [self.count, [-1, -1], stream]
            self.count += 1
        conversation[2] = stream
        return conversation[0]


class FileStreams:
    """Both steps at once, for a reader of a whole file in order."""

    def __init__(self) -> None:
        self.local = RangeStreams()
        self.index = StreamIndex()
        self.indices: list[int] = []  # local stream -> index

    def segment(self, src: bytes, sport: int, dst: bytes, dport: int, flags: int, seq: int) -> int:
        local = self.local.segment(src, sport, dst, dport, flags, seq)
        if local == len(self.indices):
            self.indices.append(self.index.place(self.local.streams[local]))
        return self.indices[local]
