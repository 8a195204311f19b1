"""Which records `amqpcap decode` shows: --connection, --channel, --method, --queue, --exchange,
--errors and --where, all of them required at once (a repeated --method or --channel: any of them).

A content method's header and body frames belong to it: they are shown when their method is (and
judged by nothing else). The decoder emits them right after their method (same connection,
direction and channel), which is how they are recognised; a header or body without its method is
judged on its own. In the one-line-per-message view the decoder folds them into their method's
record (CaptureDecoder's fold_content): they make no records at all.

--errors selects: channel.close and connection.close with a reply code other than 200 (or 0, which
some clients send for a normal close; either side), basic.return, basic.nack from the broker (a publish it failed to take; a consumer's nack or
basic.reject is its own choice, not an error), every decode issue, and connection ends that were
not a clean close or the capture's end (rst, fin without the close handshake, heartbeat-timeout,
port-reuse). The same as the lake's `errors` table, plus issues and abnormal ends.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Callable

from amqpcap.connection.record import Record, as_record
from amqpcap.decodeview.ends import ABNORMAL, END
from amqpcap.decodeview.where import compile_where

Predicate = Callable[[Record], bool]
_EXCHANGE_ARGS = ("exchange", "source", "destination")  # exchange.bind/unbind name two


def _glob(patterns: list[str]) -> Callable[[str], bool]:
    """Any of the globs (fnmatch, case-sensitive), answers cached per name."""
    match = re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns)).match
    cache: dict[str, bool] = {}

    def test(name) -> bool:
        if not isinstance(name, str):
            return False
        answer = cache.get(name)
        if answer is None:
            if len(cache) > 10_000:
                cache.clear()
            answer = cache[name] = match(name) is not None
        return answer
    return test


def is_error(record: Record) -> bool:
    kind = record.kind
    if kind == "issue":
        return True
    if kind == "method":
        method = record.method
        if method == "channel.close" or method == "connection.close":
            return (record.args.get("reply_code") or 0) not in (0, 200)  # (some clients send 0)
        if method == "basic.return":
            return True
        if method == "basic.nack":
            return record.dir == "S>C"
        return False
    if kind == END:
        return record["end_reason"] in ABNORMAL
    return False


def predicates(connection: str | None = None, channels: list[int] | None = None,
               methods: list[str] | None = None, queue: str | None = None, exchange: str | None = None,
               errors: bool = False, where: str | None = None) -> list[Predicate]:
    """The tests a record must all pass (none: everything is shown). `where`: WhereError if bad."""
    tests: list[Predicate] = []
    if connection:
        prefix = connection.lower()
        tests.append(lambda r: r.connection is not None and r.connection.startswith(prefix))
    if channels:
        wanted = frozenset(channels)
        tests.append(lambda r: r.channel in wanted)
    if methods:
        method_matches = _glob(methods)
        tests.append(lambda r: r.kind == "method" and method_matches(r.method))
    if queue is not None:
        queue_matches = _glob([queue])
        tests.append(lambda r: r.kind == "method" and queue_matches(r.args.get("queue")))
    if exchange is not None:
        exchange_matches = _glob([exchange])
        tests.append(lambda r: r.kind == "method"
                     and any(exchange_matches(r.args.get(key)) for key in _EXCHANGE_ARGS))
    if errors:
        tests.append(is_error)
    if where is not None:
        tests.append(compile_where(where))
    return tests


def _passes(tests: list[Predicate], record: Record) -> bool:
    # (a loop, not all() over a generator: one generator per record cost more than no test at all)
    for test in tests:
        if not test(record):
            return False
    return True


class Selection:
    """Applies the predicates to the decoder's batches, keeping content frames with their method.
    `folded`: the decoder folded content frames into their methods (no records follow one)."""

    def __init__(self, tests: list[Predicate], folded: bool) -> None:
        self.tests = tests
        self.folded = folded
        self.owned = 0  # content frames still to come right after the last content method
        self.owner_shown = False

    def select(self, batch: list[Record]) -> list[Record]:
        """The batch's records that pass (a dict of a record is taken too, and passed as a Record)."""
        tests = self.tests
        if not tests:
            return batch
        batch = [as_record(record) for record in batch]
        if self.folded:
            return [record for record in batch if _passes(tests, record)]
        out = []
        owned, shown = self.owned, self.owner_shown
        for record in batch:
            if owned:  # the method's header and body frames: [method, header, body...] in a row
                owned -= 1
                if shown:
                    out.append(record)
                continue
            message = record.message
            if message is not None:
                owned = (message["body_size"] is not None) + message["body_frames"]
                shown = _passes(tests, record)
                if shown:
                    out.append(record)
                continue
            if _passes(tests, record):
                out.append(record)
        self.owned, self.owner_shown = owned, shown
        return out
