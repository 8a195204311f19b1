"""The findings no one connection's decoding makes, on the driver: connection-churn (across
connections, amqpcap.rules.findings.churn) from the `connections` rows the run's tasks wrote (their
few columns it needs: a night of a connection per message is a few MB of them), and, for `amqpcap
analyze`, the capture files' own capture-loss (amqpcap.rules.findings.visibility.CaptureDamage:
the nightly job makes those where it writes the files' issues, amqpcap.job.nightly.capture_rows).
Written into the run's files, committed with the rest."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from amqpcap.lake.tablefiles import TableFile, TableFiles, filesystem_of
from amqpcap.rules.findings.churn import ConnectionChurn
from amqpcap.rules.findings.visibility import CaptureDamage
from amqpcap.tables.registry import CAPTURES, CONNECTIONS, DECODE_ISSUES, FINDINGS

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
        for name in ("started_at", "ended_at"):  # as the rows have them: microseconds
            table = table.set_column(table.schema.get_field_index(name), name, table[name].cast(pa.int64()))
        for row in table.to_pylist():
            churn.add(row)
    return _written(churn.rows(), root, run_id, "churn-")


def damage_files(spark, lake: str, root: str, run_id: str) -> list[TableFile]:
    """The findings files of the capture files' own damage, from the lake's `decode_issues` rows tied
    to no connection and its failed `captures` (`amqpcap analyze`)."""
    from pyspark.sql import functions as F

    from amqpcap.lake.spark_read import read_table
    damage = CaptureDamage()
    issues = read_table(spark, lake, DECODE_ISSUES).where(F.col("connection").isNull())
    for row in issues.select("date", "capture", "connection", "ts_ns", "issue_kind", "bytes_skipped",
                             "file_offset").collect():
        damage.add(row.asDict())
    for row in read_table(spark, lake, CAPTURES).where((F.col("status") == "failed") | (F.col("dropped_packets") > 0)) \
            .select("path", "status", "error", "date", "dropped_packets", "packets").collect():
        if row.status == "failed":
            damage.failed(row.path, row.error, row.date)
        else:
            damage.dropped(row.path, row.dropped_packets, row.packets, row.date)
    return _written(damage.rows(), root, run_id, "damage-")


def _written(rows: list[dict], root: str, run_id: str, tag: str) -> list[TableFile]:
    if not rows:
        return []
    writer = TableFiles(root, run_id, tag=tag)
    for row in rows:
        writer.add(FINDINGS, row)
    return writer.close()
