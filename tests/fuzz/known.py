"""Findings already reported, recognised so that fuzzing keeps looking for new ones.

Each finding has a reproducer in tests/fuzz/corpus/ and a strict xfail test in test_corpus.py.
When a fix makes that test pass (XPASS, which fails the suite), remove its marker there and its
recogniser here: from then on the fuzz tests treat the input as the bug it was.

A recognised finding does not end the example: the property it breaks is skipped for that input
(the finding counted as a hypothesis event, shown with --hypothesis-show-statistics), and every
other property is still checked.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import event
from hypothesis.control import currently_in_test_context

SEEN: Counter = Counter()  # finding -> times met in this process


def tolerate(finding: str) -> None:
    """The current input hits `finding`, already reported."""
    SEEN[finding] += 1
    if currently_in_test_context():
        event(f"known finding: {finding}")


# No finding is open today (F1-F11 are fixed; corpus/README.md). A recogniser for a new one goes here:
# a function of the input that calls tolerate() and returns True when the input hits it.
