"""Records in time order across connections: a bounded reorder buffer released by a watermark.

The decoder reads packets in time order but emits a record only when it is complete, so records
come out per connection in decoding order and may step back in time: a content method waits for
its last body frame, a frame for its last segment, bytes behind a hole for the hole to fill (or be
declared lost), records of a connection whose client side is not known yet for it to be decided,
and a closed connection's last records and its end for the close grace period. No fixed lag
bounds that wait, so the watermark is not a guess: it is the earliest time any record still to
come can carry, as the decoder answers it (`low_watermark`), and every buffered record at or
before it is released. Ties keep decoding order, so a connection's end follows its records.

Memory is bounded: past `cap` records the oldest is released whatever the watermark says, and a
record that then arrives older than one already written is written at once and counted in
`late` (the summary reports it). The known late records: a TLS connection's `tls-not-decoded`
(or `tls-undecryptable`) issue, one for a run of encrypted records not decrypted, timed by its
first record and told when the run ends (often the connection's end: holding the watermark at
its start would hold every other connection's records for as long), and the end of a connection whose 4-tuple
was reused after it went silent without closing.
"""

from __future__ import annotations

import bisect
import time
from array import array
from typing import Callable

from amqpcap.connection.record import Record, as_record

DEFAULT_CAP = 200_000
RUN_CHUNK = 1 << 18  # bytes per chunk of renderings held one after another (TimeOrder's `into`)


def _same(record: Record) -> Record:
    return record


def low_watermark(decoder) -> int | None:
    """The earliest ts_ns a record still to come from `decoder` can carry (None: nothing read yet),
    as the decoder answers it (CaptureDecoder.earliest_pending)."""
    return decoder.earliest_pending()


class TimeOrder:
    """Records in ts_ns order: `feed` each batch of the decoder, then `finish`. What is held is each
    record's rendering (a line of text or JSON, far smaller than the record), not the record; with
    `into`, the renderings of the first list below are written one after another into chunks of
    bytes instead of being an object each (_Runs).

    Records come nearly in order, so the held ones are two sorted lists (each two side by side:
    times and renderings). A record no earlier than the latest held is appended to the first; an
    earlier one (a content method, made when its body completed, timed by its method frame) goes
    into the second, after those of its time. What a watermark releases is a prefix of each
    (`start` moves in the first, compacted now and then), merged, a late record after the others
    of its time: they all came before it, as what comes later is appended only if no earlier than
    the latest held. That is the order of one list with each late record inserted in its place
    (bisect_right: ties keep their order), without the insert, which moved every record held
    after the watermark (thousands) for each late one."""

    def __init__(self, decoder, cap: int = DEFAULT_CAP, every: int | None = None, into=None,
                 chunk_bytes: int = RUN_CHUNK) -> None:
        """`every`: take a watermark after that many records (default: adaptive, see feed).
        `into(record, chunk, fill)`: writes the record's rendering into the bytearray `chunk` from
        `fill` on and gives the new fill (`fill` itself: no rendering; -size: it does not fit). The
        renderings of records that come in order are then held one after another in chunks of
        `chunk_bytes` (_Runs), and given out as memoryviews of runs of them, not as an object each
        (a late record's is still `render`'s): made, held for thousands of records and freed one
        by one, those objects cost more than the copies."""
        self.decoder = decoder
        self.every = every
        self.cap = max(1, cap)
        # The times of the held records (the first n_times of `times`), sorted from `start` on;
        # before it: written. Machine integers, not the records' int objects: those would be
        # freed long after their records, one by one, cold.
        self.times = array("q", bytes(8 * 1024))
        self.time_at = self.times  # (compiled: a typed view of it)
        self.n_times = 0
        self.held: list = []  # their renderings, in the same order (with `into`: held by `runs`)
        self.runs = _Runs(into, chunk_bytes) if into is not None else None
        self.start = 0
        self.late_times: list[int] = []  # of the held records that came after later ones, sorted
        self.late_held: list = []  # their renderings, in the same order
        self.seq = 0  # records held so far
        self.last = None  # ts_ns of the last record written
        self.late = 0  # records written after a later one
        self.forced = 0  # records released by the cap rather than the watermark
        self.most = 0  # the most records held at once
        self.next_check = every or 256  # self.seq at which to take the next watermark
        self.checked_at = time.monotonic()  # when the last one was taken

    def feed(self, batch: list[Record], render: Callable[[Record], object] = _same) -> list:
        """One of the decoder's batches (CaptureDecoder.batches, possibly filtered; between two
        batches the decoder's state holds exactly the records still to come): the renderings
        (`render(record)`; None is dropped; with `into`, runs of them as memoryviews) that can be
        written now, in order. (A dict of a record is taken too, as its Record.)"""
        held, runs = self.held, self.runs
        seq = self.seq
        top = self.time_at[self.n_times - 1] if self.n_times > self.start else -1  # the latest time held
        for item in batch:
            record = as_record(item)
            stamp = record.ts_ns
            if stamp is None:  # damage at the very end of a file with no packet after it
                stamp = top if top >= 0 else (self.last or 0)
            ts = stamp  # (compiled: a C long long)
            if runs is not None and ts >= top:
                if runs.add(record):
                    seq += 1
                    self._time(ts)
                    top = ts
                continue
            rendered = render(record)
            if rendered is None:
                continue
            seq += 1
            if ts >= top:
                self._time(ts)
                held.append(rendered)
                top = ts
            else:
                at = bisect.bisect_right(self.late_times, stamp)
                self.late_times.insert(at, stamp)
                self.late_held.insert(at, rendered)
        self.seq = seq
        count = self.n_times - self.start + len(self.late_held)
        if count > self.most:
            self.most = count
        out: list = []
        # A watermark costs a look at every open connection: take one when enough records have
        # come to pay for it, or when half a second has passed (interactive use: `tcpdump -w - |
        # amqpcap decode -`). Time on the clock, not the packets': a file's packet time passes
        # hundreds of times faster, and a look per second of it was most of the watermarks' cost
        # (what is released is the same either way, only when: the watermark is a lower bound).
        now = time.monotonic()
        if count and (seq >= self.next_check or now - self.checked_at > 0.5):
            self.next_check, self.checked_at = seq + self._interval(), now
            low = low_watermark(self.decoder)
            if low is not None:
                out = self._release(bisect.bisect_right(self.times, low, self.start, self.n_times),
                                    bisect.bisect_right(self.late_times, low))
                count = self.n_times - self.start + len(self.late_held)
        if count > self.cap:  # full: the oldest go, whatever the watermark says
            self.forced += count - self.cap
            out += self._release_oldest(count - self.cap)
        return out

    def finish(self) -> list:
        return self._release(self.n_times, len(self.late_held))

    def _time(self, ts: int) -> None:
        """A held record's time, after the others."""
        if self.n_times == len(self.times):
            times = array("q", bytes(16 * self.n_times))
            times[:self.n_times] = self.times
            self.times = times
            self.time_at = times
        self.time_at[self.n_times] = ts
        self.n_times += 1

    def _interval(self) -> int:
        if self.every is not None:
            return self.every
        # a watermark looks at each open connection (a few microseconds each): one look per 16
        # records or more keeps it a small part of the cost
        return max(256, 16 * self.decoder.open_connections())

    def _release_oldest(self, count: int) -> list:
        """The `count` oldest held renderings, in order."""
        late_times = self.late_times
        if not late_times:
            return self._release(self.start + count, 0)
        end, late_end = self.start, 0
        while count > 0:  # (a merge of the two lists' fronts, the late record after its ties)
            if late_end < len(late_times) and (end == self.n_times or late_times[late_end] < self.time_at[end]):
                late_end += 1
            else:
                end += 1
            count -= 1
        return self._release(end, late_end)

    def _release(self, end: int, late_end: int) -> list:
        """The held renderings before index `end` of the first list and `late_end` of the late
        one, merged in order."""
        held, times, start = self.held, self.times, self.start  # (times: bisect's, with bounds)
        late_held, late_times = self.late_held, self.late_times
        if end <= start and late_end == 0:
            return []
        last = self.last
        if last is not None:  # those that came after later ones were written
            if end > start:
                self.late += bisect.bisect_left(times, last, start, end) - start
            self.late += bisect.bisect_left(late_times, last, 0, late_end)
        final = self.time_at[end - 1] if end > start else late_times[late_end - 1]
        if late_end == 0:
            out = self._held(start, end)
        else:
            if late_times[late_end - 1] > final:
                final = late_times[late_end - 1]
            out = []
            at = start
            for i in range(late_end):  # each late record after the others of its time
                stop = bisect.bisect_right(times, late_times[i], at, end)
                if stop > at:
                    out += self._held(at, stop)
                    at = stop
                out.append(late_held[i])
            if end > at:
                out += self._held(at, end)
            del late_held[:late_end]
            del late_times[:late_end]
        self.last = final if last is None or final > last else last
        if end > 4096 and end * 2 > self.n_times:
            if self.runs is not None:
                self.runs.forget(end)
            else:
                del held[:end]
            time_at = self.time_at
            for i in range(self.n_times - end):  # (in place: the typed view keeps `times` from being resized)
                time_at[i] = time_at[end + i]
            self.n_times -= end
            end = 0
        self.start = end
        return out

    def _held(self, start: int, end: int) -> list:
        """The renderings of the records held at [start, end) of `times`."""
        if end <= start:
            return []
        if self.runs is not None:
            return self.runs.views(start, end)
        return self.held[start:end]


class _Runs:
    """Renderings held one after another: TimeOrder's records that come in order, written by its
    `into` into chunks of bytes (fixed in size, so views of them stay valid), each rendering in
    one chunk. A rendering is known by where it ends in the stream of all of them (`ends`, from
    the first still held; `head`: where that one starts)."""

    def __init__(self, into, chunk_bytes: int) -> None:
        self.into = into
        self.chunk_bytes = max(1, chunk_bytes)
        self.chunks: list[bytearray] = []  # those holding renderings still held (the last: being filled)
        self.bases: list[int] = []  # where each starts in the stream
        self.chunk = bytearray()  # the last (none yet: one of no bytes)
        self.base = 0  # where it starts
        self.fill = 0  # its bytes written
        self.ends = array("q", bytes(8 * 1024))
        self.end_at = self.ends  # (compiled: a typed view of it)
        self.count = 0  # entries of ends in use
        self.head = 0

    def add(self, record) -> bool:
        """The record's rendering after the others; False when it has none."""
        fill = self.into(record, self.chunk, self.fill)
        if fill < 0:  # it does not fit: a new chunk, big enough
            self.base += self.fill
            self.chunk = bytearray(max(self.chunk_bytes, -fill))
            self.fill = 0
            self.chunks.append(self.chunk)
            self.bases.append(self.base)
            fill = self.into(record, self.chunk, 0)
        if fill == self.fill:
            return False
        self.fill = fill
        if self.count == len(self.ends):
            ends = array("q", bytes(16 * self.count))
            ends[:self.count] = self.ends
            self.ends = ends
            self.end_at = ends
        self.end_at[self.count] = self.base + fill
        self.count += 1
        return True

    def views(self, start: int, end: int) -> list:
        """The renderings [start, end) of those held (start < end), as views of their chunks."""
        low = self.end_at[start - 1] if start > 0 else self.head
        high = self.end_at[end - 1]
        bases, chunks = self.bases, self.chunks
        k = bisect.bisect_right(bases, low) - 1
        out = []
        while low < high:
            base = bases[k]
            stop = bases[k + 1] if k + 1 < len(bases) else self.base + self.fill
            if stop > high:
                stop = high
            out.append(memoryview(chunks[k])[low - base:stop - base])
            low = stop
            k += 1
        return out

    def forget(self, end: int) -> None:
        """The first `end` renderings were given out: from now on counted from the next one; the
        chunks before it let go (views given out keep theirs)."""
        self.head = self.end_at[end - 1]
        left = self.count - end
        end_at = self.end_at
        for i in range(left):  # (in place: the typed view of `ends` keeps it from being resized)
            end_at[i] = end_at[end + i]
        self.count = left
        bases = self.bases
        drop = 0
        while drop + 1 < len(bases) and bases[drop + 1] <= self.head:
            drop += 1
        if drop:
            del bases[:drop]
            del self.chunks[:drop]
