"""Wireshark's tcp.stream over a long capture: what the numbering holds follows the connections
open, not the file's length, and forgetting the ended ones changes no number (the numbers
themselves are checked against tshark on every sample in test_tshark.py)."""

from amqpcap.capture.packets import TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN
from amqpcap.capture.stream_index import GRACE_NS, FileStreams, RangeStreams, StreamIndex

CLIENT, OTHER, BROKER = bytes([10, 0, 0, 7]), bytes([10, 0, 0, 8]), bytes([10, 0, 0, 1])
SECOND = 10**9


def _churn(connections: int, ports: int = 28_000):
    """Short connections, one a second, on a client's ephemeral ports (reused once they run out),
    each opened with a new SYN and closed by FIN both ways
    (every seventh by a RST), and one long connection that is quiet for hours between packets.
    -> (src, sport, dst, dport, flags, seq, ts_ns) per packet."""
    packets = [(OTHER, 40000, BROKER, 5672, TCP_SYN, 7, 0)]
    for n in range(connections):
        ts, port, isn = n * SECOND, 32768 + n % ports, 1000 + n * 7919
        packets += [(CLIENT, port, BROKER, 5672, TCP_SYN, isn, ts),
                    (BROKER, 5672, CLIENT, port, TCP_SYN | TCP_ACK, 5 * isn, ts + 1000),
                    (CLIENT, port, BROKER, 5672, TCP_ACK, isn + 1, ts + 2000)]
        if n % 7 == 0:
            packets.append((BROKER, 5672, CLIENT, port, TCP_RST, 5 * isn + 1, ts + 3000))
        else:
            packets += [(CLIENT, port, BROKER, 5672, TCP_FIN | TCP_ACK, isn + 1, ts + 3000),
                        (BROKER, 5672, CLIENT, port, TCP_FIN | TCP_ACK, 5 * isn + 1, ts + 4000)]
        if n % 1000 == 999:  # the long connection, still there: the same conversation as its SYN
            packets.append((BROKER, 5672, OTHER, 40000, TCP_ACK, 99, ts + 5000))
    return packets


def _held_and_numbers(packets):
    """A one-pass reader's numbers, and the most conversations it held at once."""
    streams, numbers, held = FileStreams(), [], 0
    for src, sport, dst, dport, flags, seq, ts in packets:
        numbers.append(streams.segment(src, sport, dst, dport, flags, seq, ts))
        held = max(held, len(streams.index.conversations), len(streams.local.current))
    return held, numbers


def _never_forgetting(packets):
    """The rule alone: every local stream kept and placed, nothing ever forgotten."""
    local, index, indices = RangeStreams(), StreamIndex(), []
    numbers = []
    for packet in packets:
        n = local.segment(*packet)
        if n == len(indices):
            indices.append(index.place(local.streams[n]))
        numbers.append(indices[n])
    return len(index.conversations), numbers


def test_a_long_capture_holds_the_open_connections_not_the_ended_ones():
    packets = _churn(30_000)  # 8 hours of capture time, 30,001 conversations, 2,000 ports reused
    keys, reference = _never_forgetting(packets)
    held, numbers = _held_and_numbers(packets)
    assert numbers == reference and max(numbers) == 30_000
    assert keys == 28_001  # the rule alone holds every key the file ever had
    # what is held: the conversations ended within GRACE_NS (one a second), and those opened since
    # the last look (every FORGET_EVERY), and the long one
    assert held <= GRACE_NS // SECOND + 1024 + 2
    long_packets = [n for (src, _, dst, *_), n in zip(packets, numbers) if OTHER in (src, dst)]
    assert set(long_packets) == {0}  # never ended: never forgotten, however quiet


def test_ended_conversations_are_forgotten_after_the_grace_and_not_before():
    streams = FileStreams()
    streams.segment(CLIENT, 50000, BROKER, 5672, TCP_SYN, 10, 0)
    streams.segment(BROKER, 5672, CLIENT, 50000, TCP_FIN | TCP_ACK, 20, SECOND)
    streams.forget_ended(2 * SECOND)
    assert len(streams.index.conversations) == 1  # a FIN one way only: the other side may still send
    streams.segment(CLIENT, 50000, BROKER, 5672, TCP_FIN | TCP_ACK, 11, 2 * SECOND)
    streams.forget_ended(2 * SECOND)
    assert len(streams.index.conversations) == 1  # ended, but a late segment may still come
    late = streams.segment(BROKER, 5672, CLIENT, 50000, TCP_ACK, 21, 2 * SECOND + GRACE_NS // 2)
    assert late == 0
    streams.forget_ended(3 * SECOND + GRACE_NS)
    assert not streams.index.conversations and not streams.local.current
    # the port, reused with a new SYN: a new conversation, as Wireshark numbers it
    assert streams.segment(CLIENT, 50000, BROKER, 5672, TCP_SYN, 500, 4 * SECOND + GRACE_NS) == 1


def test_a_forgotten_conversation_is_not_continued_by_the_last_packet_remembered():
    """The last packet's conversation is remembered (most packets follow one of their own): once
    forgotten, a late packet of its tuple, the very next packet read, starts a new one."""
    streams = FileStreams()
    streams.segment(CLIENT, 50000, BROKER, 5672, TCP_SYN, 10, 0)
    streams.segment(CLIENT, 50000, BROKER, 5672, TCP_RST, 11, SECOND)
    streams.forget_ended(2 * SECOND)
    assert not streams.local.current and not streams.index.conversations
    assert streams.segment(BROKER, 5672, CLIENT, 50000, TCP_ACK, 20, 3 * SECOND) == 1


def test_a_file_read_in_ranges_forgets_between_ranges_and_numbers_as_one_pass():
    """The driver's numbering (amqpcap.job.stages.numbering): ranges' local streams placed in file
    order, ended conversations forgotten after each range."""
    packets = _churn(20_000)
    _, reference = _never_forgetting(packets)
    index, placed, held = StreamIndex(), [], 0
    for part in range(10):
        local = RangeStreams()
        numbers = [local.segment(*p) for p in packets[part * len(packets) // 10:(part + 1) * len(packets) // 10]]
        mapped = [index.place(stream) for stream in local.streams]
        placed += [mapped[n] for n in numbers]
        held = max(held, len(index.conversations))
        index.forget_ended(max(s.last_ts for s in local.streams) - GRACE_NS)
    assert placed == reference
    assert held <= len(packets) // 10 // 4 + GRACE_NS // SECOND + 2  # one range's conversations, not 20,001
