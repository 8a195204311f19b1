"""After decoding: connection-churn, the one finding across connections (amqpcap.rules.findings.
churn), from the `connections` rows the run's tasks wrote. The driver reads their few columns it
needs (a row per connection: a night of a connection per message is a few MB of them) and writes
the findings into the run's files, committed with the rest."""

from __future__ import annotations

import pyarrow.parquet as pq

from amqpcap.lake.tablefiles import TableFile, TableFiles, filesystem_of
from amqpcap.rules.findings.churn import ConnectionChurn
from amqpcap.tables.registry import CONNECTIONS, FINDINGS

COLUMNS = ["connection", "capture", "client", "server", "client_product", "started_at", "ended_at", "end_reason",
           "source", "provisional"]


def churn_files(written: list[TableFile], settings, root: str, run_id: str) -> list[TableFile]:
    """The findings files of connection-churn over the connections files in `written`."""
    churn = ConnectionChurn(settings.findings)
    filesystem, base = filesystem_of(root)
    for f in written:
        if f.table != CONNECTIONS.name:
            continue
        table = pq.read_table(f"{base}/{f.table}/{f.path}", filesystem=filesystem, columns=COLUMNS)
        for row in table.to_pylist():
            for name in ("started_at", "ended_at"):  # timestamps as the rows have them: microseconds
                value = row[name]
                row[name] = None if value is None else int(value.timestamp() * 1_000_000) if hasattr(
                    value, "timestamp") else value
            churn.add(row)
    rows = churn.rows()
    if not rows:
        return []
    writer = TableFiles(root, run_id, tag="churn-")
    for row in rows:
        writer.add(FINDINGS, row)
    return writer.close()
