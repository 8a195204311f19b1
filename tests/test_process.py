"""amqpcap.process: what a decode task leaves in cycles is collected at its end, and only that."""

from __future__ import annotations

import gc
import weakref

from amqpcap.process import YOUNG_ALLOCATIONS, fewer_collections


class _Node:
    def __init__(self) -> None:
        self.other = self  # a cycle: only the cyclic collector frees it


def test_cycles_made_while_decoding_are_collected_at_the_end_and_older_ones_are_left_to_later():
    gc.collect()
    before = gc.get_threshold()
    older = _Node()
    older_ref = weakref.ref(older)
    del older  # garbage already, but from before the task: frozen out of its final pass
    with fewer_collections():
        assert gc.get_threshold()[0] == YOUNG_ALLOCATIONS
        made = _Node()
        made_ref = weakref.ref(made)
        del made
        assert made_ref() is not None  # (no collection runs in between)
    assert made_ref() is None
    assert older_ref() is not None
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
    gc.collect()
    assert older_ref() is None


def test_without_collect_nothing_is_collected_at_the_end():
    gc.collect()
    with fewer_collections(collect=False):
        made = _Node()
        made_ref = weakref.ref(made)
        del made
    assert made_ref() is not None
    gc.collect()
    assert made_ref() is None
