"""One pass from decoder records to every per-connection table: the raw rows (`frames`,
`messages`, `decode_issues`, `streams`) and, from those same rows, the analytics rows.

    tabulator = Tabulator(emit, run_id="...")
    for record in CaptureDecoder(settings).decode(paths, ends=True):
        tabulator.record(record)

`emit(table, row)` receives every finished row: a dict, or for `frames` and `messages` a typed row
(amqp_decode.rows.FrameRow, MessageRow: `as_dict()`, `get(column)`). The Spark decode task writes
them to Parquet, `amqpcap decode --stats` keeps what it summarises, tests collect them.
"""

from __future__ import annotations

from amqp_decode.analytics import AnalyticsSettings
from amqp_decode.analytics.connection import Analytics
from amqp_decode.analytics.common import Emit
from amqp_decode.analytics.naming import naming
from amqp_decode.rows import RawRows
from amqp_decode.record import CONNECTION_END, Record, as_record
from amqp_decode.tables import DECODE_ISSUES, FRAMES, MESSAGES, STREAMS


class Tabulator:
    def __init__(self, emit: Emit, run_id: str | None = None,
                 analytics: AnalyticsSettings = AnalyticsSettings(), naming=None) -> None:
        self.emit = emit
        self.rows = RawRows(run_id)
        self.analytics = Analytics(emit, analytics, **({"naming": naming} if naming else {}))
        self.seq: dict[str, int] = {}  # connection -> frames so far

    @classmethod
    def for_settings(cls, emit: Emit, settings, run_id: str | None = None) -> "Tabulator":
        """Analytics settings and protocol names from the job's settings (custom specs included)."""
        from amqp_decode.decoder import codecs_for
        decode = settings.decode
        codecs = codecs_for(tuple(sorted(decode.specs.items())), decode.field_table_dialect)
        default = codecs[decode.default_version]

        def namer(version):
            return naming(codecs.get(version, default).spec)
        analytics = AnalyticsSettings(settings.analytics.return_window, settings.analytics.return_wait_seconds)
        return cls(emit, run_id, analytics, namer)

    def record(self, value: Record) -> None:
        """A decoder record (a dict of one is taken too)."""
        record = as_record(value)
        kind = record.kind
        rows = self.rows
        if kind == "issue":
            self.emit(DECODE_ISSUES, rows.issue_row(record))
        elif kind == CONNECTION_END:
            stream = rows.stream_row(record.summary)
            self.seq.pop(stream["connection"], None)
            self.emit(STREAMS, stream)
            self.analytics.end(stream)
        else:
            frame = rows.frame_row(record)
            connection = frame.connection
            frame.connection_seq = seq = self.seq.get(connection, 0)
            self.seq[connection] = seq + 1
            self.emit(FRAMES, frame)
            message = None
            if record.message is not None:
                message = rows.message_row(record)
                self.emit(MESSAGES, message)
            self.analytics.frame(frame, message)
