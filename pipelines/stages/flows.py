"""Stage 3: message_flows, the one table across connections, from the run's `publishes` and
`deliveries` rows (they carry what the match needs): keyed by message id or body, shuffled so each
key's rows meet in one task in time order, paired by amqp_decode.analytics.message_flows."""

from __future__ import annotations

import functools
from typing import Iterator

import pyarrow as pa

from amqp_decode.analytics.message_flows import DELIVERY_COLUMNS, PUBLISH_COLUMNS, flows
from amqp_decode.tables import MESSAGE_FLOWS
from pipelines.tablefiles import FILES_DDL, TableFiles, files_batch

SIDES = ["key", "ts_ns", "is_delivery", *sorted(set(PUBLISH_COLUMNS) | set(DELIVERY_COLUMNS))]


def keyed_sides(publishes, deliveries):
    """Both sides in one frame: the match key, the time, and every column either side has."""
    from pyspark.sql import functions as F

    def key():
        return F.when(F.col("message_id").isNotNull(), F.concat(F.lit("id:"), F.col("message_id"))).otherwise(
            F.concat_ws("|", F.lit("body"), "body_sha256", "exchange", "routing_key"))

    columns = sorted(set(PUBLISH_COLUMNS) | set(DELIVERY_COLUMNS))

    def side(frame, present, time, is_delivery):
        return frame.select(key().alias("key"), F.col(time).alias("ts_ns"), F.lit(is_delivery).alias("is_delivery"),
                            *[F.col(c) if c in present else F.lit(None).alias(c) for c in columns])
    published = side(publishes, PUBLISH_COLUMNS, "published_ns", False)
    delivered = side(deliveries, DELIVERY_COLUMNS, "delivered_ns", True)
    return published.unionByName(delivered, allowMissingColumns=False)


def message_flows(sides, root: str, run_id: str, partitions: int, batch_rows: int):
    """-> FILES_DDL rows of the message_flows files written."""
    ordered = sides.repartition(partitions, "key").sortWithinPartitions("key", "ts_ns", "is_delivery")
    task = functools.partial(flows_task, root=root, run_id=run_id, batch_rows=batch_rows)
    return ordered.mapInArrow(task, FILES_DDL)


def flows_task(batches: Iterator[pa.RecordBatch], root: str, run_id: str, batch_rows: int) -> Iterator[pa.RecordBatch]:
    writer = TableFiles(root, run_id, tag="flows-", batch_rows=batch_rows)
    current, group = None, []
    for batch in batches:
        for row in batch.to_pylist():
            if row["key"] != current:
                _pair(group, writer)
                current, group = row["key"], []
            names = DELIVERY_COLUMNS if row["is_delivery"] else PUBLISH_COLUMNS
            group.append({name: row[name] for name in names})
    _pair(group, writer)
    files = writer.close()
    if files:
        yield files_batch(files)


def _pair(group: list[dict], writer: TableFiles) -> None:
    for row in flows(group):
        writer.add(MESSAGE_FLOWS, row)
