"""One run's decoding into table rows, with connections carried in from the run before and out to
the run after (amqpcap.onepass.state does the saving and resuming; docs/state.md the whole design).

    run = CarryingDecoder(settings, capture_names, emit, saved=[SavedState, ...])
    for segment, capture in ...:   # in capture order
        run.feed(segment, capture)
    states = run.finish(capture_end_ns, closing_source)   # to save for the next run
    run.resumed                                           # which saved states it continued

Every row gets `source`, the capture file whose decoding produced it (what a rerun of that file
replaces), and `provisional`: a connection still open at the end of the captures is saved, then
ended as the capture ends, and the rows that ending makes (its connections row, open channels,
unsettled deliveries, unconfirmed publishes...) are provisional: the run that resumes the
connection replaces them with what really happened.
"""

from __future__ import annotations

from typing import Iterable, NamedTuple

from amqpcap.capture.packets import conversation_key
from amqpcap.connection.decoder import SegmentDecoder
from amqpcap.connection.record import Record, new_record
from amqpcap.onepass.state import SavedState, continues, load, restore, save
from amqpcap.onepass.tabulate import Tabulator
from amqpcap.settings import Settings
from amqpcap.tls.keylog import KeyLog

NOT_RESUMED = "state-not-resumed"  # the issue kind of a saved state that did not fit


class Resumption(NamedTuple):
    connection: str
    saved_by: str  # the source of the state resumed
    ts_ns: int  # the packet that continued it
    capture: str | None  # its capture file


class CarryingDecoder:
    def __init__(self, settings: Settings, capture_names: list[str], emit, run_id: str | None = None,
                 saved: Iterable[SavedState] = (), keys: KeyLog | None = None) -> None:
        """`saved`: states earlier runs saved (several per 4-tuple, over time: the latest before a
        connection's first packet is tried). `keys`: the TLS key log (a carried TLS connection's
        keys are found in it again)."""
        self.settings = settings
        self.capture_names = capture_names
        self._emit = emit
        self.tabulator = Tabulator.for_settings(self._tagged, settings, run_id)
        self.decoder = SegmentDecoder(settings, capture_names, resumable=settings.state.carry, keys=keys)
        self.decoder.tracker.on_open = self._on_open
        self.saved: dict[str, list[SavedState]] = {}
        for state in saved:
            self.saved.setdefault(state.key, []).append(state)
        self.resumed: list[Resumption] = []
        self.source: str | None = None
        self.provisional = False

    def _tagged(self, table, row) -> None:
        if type(row) is dict:
            row["source"] = self.source
            row["provisional"] = self.provisional
        else:  # a typed row (amqpcap.tables.rows.TableRow)
            typed = row
            typed.source = self.source
            typed.provisional = self.provisional
        self._emit(table, row)

    def feed(self, segment, capture: int) -> int:
        """One segment of capture file number `capture`; the records it completed."""
        self.source = self.capture_names[capture]
        items = self.decoder.feed(segment, capture)
        for item in items:
            self.tabulator.record(item)
        return len(items)

    def feed_all(self, batches, progress=None) -> int:
        """Every segment of `batches`, (capture, [segment, ...]) in capture order (the decode
        stage's staged segments); `progress.add(segments=, records=)` is told after each batch.
        -> segments fed. (The loop of every decode task: compiled here rather than a Python step
        per segment.)"""
        fed = 0
        for capture, segments in batches:
            records = 0
            for segment in segments:
                records += self.feed(segment, capture)
            fed += len(segments)
            if progress is not None:
                progress.add(segments=len(segments), records=records)
        return fed

    def finish(self, capture_end_ns: int | None, closing_source: str | None) -> list[SavedState]:
        """The end of the run's captures: connections still open (and heard from within the idle
        limit) are saved, then every connection ends; what ending carried ones makes is provisional."""
        states: list[SavedState] = []
        carried: set[str] = set()
        if self.settings.state.carry and capture_end_ns is not None:
            idle_ns = int(self.settings.state.idle_limit_seconds * 1e9)
            for tcp in list(self.decoder.tracker._unique()):
                amqp = tcp.sink
                if tcp.closed or tcp.ended or (amqp.status != "amqp" and amqp.tls is None) \
                        or capture_end_ns - tcp.last_ts_ns > idle_ns:
                    continue
                analyzer = self.tabulator.analytics.open.get(amqp.id)
                blob = save(amqp, analyzer, self.tabulator.seq.get(amqp.id, 0), self.capture_names)
                states.append(SavedState(conversation_key(*tcp.a, *tcp.b), amqp.id, tcp.last_ts_ns, closing_source, blob))
                carried.add(amqp.id)
        self.source = closing_source
        tabulator = self.tabulator  # (called through its type: a bound method taken out compiles to a mistyped wrapper)
        for item in self.decoder.finish():
            self.provisional = item.connection in carried
            tabulator.record(item)
        self.provisional = False
        return states

    def _on_open(self, tcp, segment) -> None:
        """A connection's first packet in this run: if an earlier run saved it, and this packet
        continues it, the connection resumes where that run left it."""
        if not self.saved:
            return
        key = conversation_key(segment.src, segment.sport, segment.dst, segment.dport)
        candidates = self.saved.get(key)
        if not candidates:
            return
        del self.saved[key]  # one try per 4-tuple and run: a later reuse of it is a new connection
        before = [s for s in candidates if s.last_ts_ns <= segment.ts_ns]
        if not before:  # saved by a later run (this is a rerun of an earlier night): not this connection's past
            return
        state = max(before, key=lambda s: s.last_ts_ns)
        amqp = tcp.sink
        analytics = self.tabulator.analytics
        try:
            data, analyzer = load(state.blob, analytics)
            why = continues(data, segment, int(self.settings.state.max_gap_seconds * 1e9),
                            self.settings.state.seq_tolerance_bytes)
        except Exception as error:  # a state this version cannot read: start afresh, say so
            why = f"its saved state cannot be read ({error})"
        capture = self.capture_names[tcp.first_capture] if tcp.first_capture >= 0 else None  # this packet's
        if why is not None:
            self.decoder.out.append(_issue(amqp, segment, state, why, capture))
            return
        restore(data, amqp, self.capture_names)
        if analyzer is not None:
            analytics.open[amqp.id] = analyzer
        self.tabulator.seq[amqp.id] = data["seq"]
        self.resumed.append(Resumption(amqp.id, state.source, segment.ts_ns, capture))


def _issue(amqp, segment, state: SavedState, why: str, capture: str | None) -> Record:
    ts = segment.ts_ns
    record = new_record("issue", ts, ts, capture, segment.record or None, segment.record or None,
                        segment.stream if segment.stream >= 0 else None, amqp.id, None, None, None, None, None, 0)
    record.issue_kind = NOT_RESUMED
    record.detail = (f"connection {state.connection} saved by {state.source} was not resumed: {why}; this traffic "
                     "starts a new connection")
    record.bytes_skipped = 0
    return record
