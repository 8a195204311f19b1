"""Several capture files as one timeline: rotated captures (tcpdump -C/-G) or captures taken in
parallel, merged by packet time so that a connection cut across files reads as one stream. The
rule, kept once (`amqpcap decode` merges records, the job's decode stage staged segments): by
time, and a tie by file order (the order rotated files were written in)."""

from __future__ import annotations

import heapq
from typing import Iterable, Iterator


def merge_by_time(streams: Iterable[Iterable[tuple]]) -> Iterator[tuple]:
    """Each stream's items are tuples (ts_ns, file index, ...), in time order within the stream:
    all of them in time order, a tie by file index. (Tuples compare in C: no key function, which
    would be a Python call per packet; items of two files never tie on both.)"""
    return heapq.merge(*streams)
