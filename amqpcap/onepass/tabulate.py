"""One pass from decoder records to every per-connection table: the raw rows (`frames`,
`messages`, `decode_issues`, `streams`) and, from those same rows, the analytics rows.

    tabulator = Tabulator(emit, run_id="...")
    for record in CaptureDecoder(settings).decode(paths, ends=True):
        tabulator.record(record)

`emit(table, row)` receives every finished row: a dict, or for `frames` and `messages` a typed row
(amqpcap.tables.rows.FrameRow, MessageRow: `as_dict()`, `get(column)`). The Spark decode task writes
them to Parquet, `amqpcap decode --stats` keeps what it summarises, tests collect them.
"""

from __future__ import annotations

from amqpcap.connection.record import CONNECTION_END, Record, as_record
from amqpcap.rules.common import Emit
from amqpcap.rules.connection import Analytics
from amqpcap.rules.naming import naming
from amqpcap.settings import AnalyticsSection, FindingsSection
from amqpcap.tables.registry import DECODE_ISSUES, FRAMES, MESSAGES, STREAMS, TLS_CONNECTIONS
from amqpcap.tables.rows import RawRows


class Tabulator:
    def __init__(self, emit: Emit, run_id: str | None = None,
                 analytics: AnalyticsSection = AnalyticsSection(), naming=None,
                 findings: FindingsSection = FindingsSection()) -> None:
        self.emit = emit
        self.rows = RawRows(run_id)
        self.analytics = Analytics(emit, analytics, **({"naming": naming} if naming else {}), findings=findings)
        self.seq: dict[str, int] = {}  # connection -> frames so far

    @classmethod
    def for_settings(cls, emit: Emit, settings, run_id: str | None = None) -> "Tabulator":
        """Analytics settings and protocol names from the job's settings (custom specs included)."""
        from amqpcap.connection.decoder import codecs_for
        decode = settings.decode
        codecs = codecs_for(tuple(sorted(decode.specs.items())), decode.field_table_dialect)
        default = codecs[decode.default_version]

        def namer(version):
            return naming(codecs.get(version, default).spec)
        return cls(emit, run_id, settings.analytics, namer, settings.findings)

    def record(self, value: Record) -> None:
        """A decoder record (a dict of one is taken too)."""
        record = as_record(value)
        kind = record.kind
        rows = self.rows
        if kind == "issue":
            issue = rows.issue_row(record)
            self.analytics.raw(DECODE_ISSUES, issue)
            self.emit(DECODE_ISSUES, issue)
        elif kind == CONNECTION_END:
            stream = rows.stream_row(record.summary)
            self.seq.pop(stream["connection"], None)
            self.emit(STREAMS, stream)
            tls = rows.tls_row(record.summary)
            if tls is not None:
                self.analytics.raw(TLS_CONNECTIONS, tls)
                self.emit(TLS_CONNECTIONS, tls)
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
