"""Fewer garbage collections while decoding. The decoder makes millions of short-lived dicts and
keeps thousands of long-lived ones (open connections, rows waiting to be written); with Python's
default thresholds the cyclic collector then rescans the long-lived ones over and over (about a tenth
of a decode task's time, measured with py-spy). Objects made before decoding starts are frozen out
of the collector's view, and collections of the young generation are spaced out, the old ones
almost never: so what decoding makes must not rely on the collector to be freed (an ended connection
breaks its cycles, amqp_decode.tcp.TcpConnection.end). What is left in cycles when decoding ends (a
task's decoder and writers) is collected then, not left to a later task of a reused worker."""

from __future__ import annotations

import contextlib
import gc

YOUNG_ALLOCATIONS = 500_000  # Python's default: 700; 50,000 still spent 1% of a decode task collecting


@contextlib.contextmanager
def fewer_collections(collect: bool = True):
    """`collect=False`: no collection at the end, for a process that ends right after (`amqpcap
    decode`): a full pass over everything it made only delayed the exit (10-16 ms measured). Called
    in a process that goes on (decode's main in a test), what is left in cycles then waits for the
    collector's next pass at the restored thresholds."""
    before = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(YOUNG_ALLOCATIONS, 20, 100)
    try:
        yield
    finally:
        gc.set_threshold(*before)
        if collect:  # (before unfreezing: a pass over what decoding made, not also over every object
            gc.collect()  # the process held before it, which cost ~12 ms per decode task)
        gc.unfreeze()
