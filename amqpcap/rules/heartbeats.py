"""The `heartbeats` table: per connection and direction, the agreed heartbeat, heartbeat frames
seen, and silences: any frame is a sign of life, and a silence is the time from one to the next
(or, at the end, to the connection's last packet). A silence longer than twice the agreed interval
is a missed heartbeat; a final one that long means the connection ended by heartbeat timeout.

Emitted when the connection ends; per direction only counters and the silences seen before the
interval was agreed (a handful: the handshake) are held.
"""

from __future__ import annotations

import heapq

from amqpcap.rules.common import Emit
from amqpcap.tables.registry import HEARTBEATS
from amqpcap.tables.rows import FrameRow

EARLY_SILENCES = 1024  # silences kept until the interval is known (the largest, if more)


class _Direction:
    __slots__ = ("where", "frames", "heartbeats", "last_ns", "longest_ns", "long_silences", "early", "late",
                 "late_longest_ns", "late_first_ns", "late_last_ns")

    def __init__(self, row: FrameRow) -> None:
        self.where = {"date": row.date, "connection": row.connection, "capture": row.capture, "client": row.client,
                      "server": row.server, "direction": row.direction}
        self.frames = self.heartbeats = 0
        self.last_ns: int | None = None
        self.longest_ns: int | None = None
        self.long_silences = 0
        self.early: list[int] = []  # min-heap of silences (ns) seen before the interval was known
        # silences longer than the findings' missed_heartbeat_intervals (amqpcap.rules.findings.liveness)
        self.late = 0
        self.late_longest_ns = 0
        self.late_first_ns: int | None = None  # when the first and last of them ended
        self.late_last_ns: int | None = None


class HeartbeatRules:
    """One connection's two directions."""

    __slots__ = ("emit", "directions", "heartbeat_s", "limit_ns", "late_intervals", "late_ns", "late")

    def __init__(self, emit: Emit, late_intervals: float = 1.5) -> None:
        self.emit = emit
        self.directions: dict[str, _Direction] = {}
        self.heartbeat_s: int | None = None
        self.limit_ns: int | None = None  # twice the agreed interval, once known
        self.late_intervals = late_intervals
        self.late_ns: int | None = None  # late_intervals agreed intervals, once known
        # per direction, when the connection ends: (late silences, the longest, first and last end ns)
        self.late: dict = {}

    def agreed(self, heartbeat_s: int | None) -> None:
        """connection.tune-ok's heartbeat (the first one counts)."""
        if self.limit_ns is not None or self.heartbeat_s is not None:
            return
        self.heartbeat_s = heartbeat_s
        if heartbeat_s is not None and heartbeat_s > 0:
            self.limit_ns = 2 * heartbeat_s * 1_000_000_000
            self.late_ns = int(self.late_intervals * heartbeat_s * 1_000_000_000)
            for state in self.directions.values():
                state.long_silences = sum(1 for s in state.early if s > self.limit_ns)
                late = [s for s in state.early if s > self.late_ns]
                if late:  # (when they ended is not kept for these: the handshake's)
                    state.late, state.late_longest_ns = len(late), max(late)
                state.early = []

    def frame(self, row: FrameRow) -> None:
        direction = row.direction
        state = self.directions.get(direction)
        if state is None:
            state = self.directions[direction] = _Direction(row)
        state.frames += 1
        if row.kind == "heartbeat":
            state.heartbeats += 1
        ts = row.ts_ns
        last = state.last_ns
        if last is None or ts > last:
            if last is not None:
                silence = ts - last
                if state.longest_ns is None or silence > state.longest_ns:
                    state.longest_ns = silence
                self._silence(state, silence, ts)
            state.last_ns = ts
        elif state.longest_ns is None:  # a frame no later than the previous one: no silence
            state.longest_ns = 0
        # (frames whose packet time goes back, after a retransmission filled a hole, are no
        #  silence: the time since the last sign of life is what counts)

    def _silence(self, state: _Direction, silence: int, ended_ns: int) -> None:
        if self.limit_ns is not None:
            if silence > self.limit_ns:
                state.long_silences += 1
            if silence > self.late_ns:
                state.late += 1
                if silence > state.late_longest_ns:
                    state.late_longest_ns = silence
                if state.late_first_ns is None:
                    state.late_first_ns = ended_ns
                state.late_last_ns = ended_ns
        elif self.heartbeat_s is None:  # not agreed yet: keep it until it is
            if len(state.early) < EARLY_SILENCES:
                heapq.heappush(state.early, silence)
            elif silence > state.early[0]:
                heapq.heapreplace(state.early, silence)

    def end(self, last_ts_us: int | None) -> None:
        """The connection ended; `last_ts_us`: its last packet (streams.last_ts)."""
        end_ns = last_ts_us * 1000 if last_ts_us is not None else None
        heartbeat, limit = self.heartbeat_s, self.limit_ns
        for state in self.directions.values():
            final_s = max(0.0, (end_ns - state.last_ns) / 1e9) if end_ns is not None else 0.0
            gap_s = state.longest_ns / 1e9 if state.longest_ns is not None else None
            longest = max((v for v in (gap_s, final_s) if v is not None), default=None)
            if heartbeat is None:
                long_silences, timed_out = None, None
            elif heartbeat > 0:
                timed_out = final_s > limit / 1e9
                long_silences = state.long_silences + (1 if timed_out else 0)
            else:
                long_silences, timed_out = None, False
            where = state.where
            self.late[where["direction"]] = (state.late, state.late_longest_ns, state.late_first_ns, state.late_last_ns)
            # (the table's columns in order: the table writer reads such a row in one walk)
            self.emit(HEARTBEATS, {"date": where["date"], "connection": where["connection"],
                                   "capture": where["capture"], "client": where["client"], "server": where["server"],
                                   "direction": where["direction"], "heartbeat_s": heartbeat,
                                   "heartbeats": state.heartbeats, "frames": state.frames,
                                   "longest_silence_s": longest, "long_silences": long_silences,
                                   "final_silence_s": final_s, "ended_after_silence": timed_out, "source": None,
                                   "provisional": None})
        self.directions.clear()
