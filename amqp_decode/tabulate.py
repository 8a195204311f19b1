"""One pass from decoder records to every per-connection table: the raw rows (`frames`,
`messages`, `decode_issues`, `streams`) and, from those same rows, the analytics rows.

    tabulator = Tabulator(emit, run_id="...")
    for record in CaptureDecoder(settings).decode(paths, ends=True):
        tabulator.record(record)

`emit(table, row)` receives every finished row; the Spark decode task writes them to Parquet,
`amqpcap decode --stats` keeps what it summarises, tests collect them.
"""

from __future__ import annotations

from amqp_decode.analytics import Analytics, AnalyticsSettings
from amqp_decode.analytics.common import Emit
from amqp_decode.rows import RawRows
from amqp_decode.stream import CONNECTION_END
from amqp_decode.tables import DECODE_ISSUES, FRAMES, MESSAGES, STREAMS


class Tabulator:
    def __init__(self, emit: Emit, run_id: str | None = None,
                 analytics: AnalyticsSettings = AnalyticsSettings(), naming=None) -> None:
        self.emit = emit
        self.rows = RawRows(run_id)
        self.analytics = Analytics(emit, analytics, **({"naming": naming} if naming else {}))

    def record(self, record: dict) -> None:
        kind = record["kind"]
        rows = self.rows
        if kind == "issue":
            self.emit(DECODE_ISSUES, rows.issue_row(record))
        elif kind == CONNECTION_END:
            stream = rows.stream_row(record["summary"])
            self.emit(STREAMS, stream)
            self.analytics.end(stream)
        else:
            frame = rows.frame_row(record)
            self.emit(FRAMES, frame)
            message = None
            if "message" in record:
                message = rows.message_row(record)
                self.emit(MESSAGES, message)
            self.analytics.frame(frame, message)
