"""Rebuild the analytics tables from the raw ones: every connection's frames (with their messages)
replayed in decoding order (`frames.connection_seq`), then its decode issues and `tls_connections`
row (which the findings read), then its `streams` row, through the same
state machines the nightly job runs (amqpcap.rules), one grouped pass; message_flows from
the rebuilt publishes and deliveries, staged and paired as the nightly job does.

    amqpcap analyze --lake DIR [--config FILE] [--master URL]
"""

from __future__ import annotations

import functools
import uuid
from typing import Iterator

import pyarrow as pa

from amqpcap.job.stages.flows import FlowSides
from amqpcap.lake.tablefiles import FILES_DDL, TableFile, TableFiles, files_batch
from amqpcap.settings import Settings
from amqpcap.tables.registry import ANALYTICS_TABLES, DECODE_ISSUES, FRAMES, MESSAGES, STREAMS, TLS_CONNECTIONS

LAST = 2**62  # streams rows sort after every frame of their connection (issues and TLS rows just before)


def analyze(spark, lake: str, settings: Settings, run_id: str) -> dict[str, int]:
    """Rewrite every analytics table from the whole raw layer; the versions written."""
    from pyspark.sql import functions as F

    from amqpcap.job.nightly import flows_stage, staging_dir
    from amqpcap.job.stages.decode import remove_staging
    from amqpcap.job.stages.findings import churn_files, damage_files
    from amqpcap.job.stages.flows import flow_parts
    from amqpcap.lake.paths import absolute
    from amqpcap.lake.sinks import DeltaRsSink
    from amqpcap.lake.spark_read import read_table

    frames = _micros(read_table(spark, lake, FRAMES), FRAMES)
    messages = _micros(read_table(spark, lake, MESSAGES), MESSAGES)
    streams = _micros(read_table(spark, lake, STREAMS), STREAMS)
    keys = ["connection", "direction", "stream_offset"]
    message = F.struct(*[F.col(c) for c in messages.columns]).alias("m")
    joined = frames.join(messages.select(*keys, message), keys, "left")
    replay = (joined.select("connection", F.col("connection_seq").alias("seq"),
                            F.struct(*[F.col(c) for c in frames.columns]).alias("f"), "m")
              .unionByName(streams.select("connection", F.lit(LAST).cast("bigint").alias("seq"),
                                          F.struct(*[F.col(c) for c in streams.columns]).alias("s")),
                           allowMissingColumns=True))
    for name, table, seq in (("i", DECODE_ISSUES, LAST - 2), ("t", TLS_CONNECTIONS, LAST - 1)):
        raw = _micros(read_table(spark, lake, table), table).where(F.col("connection").isNotNull())
        replay = replay.unionByName(raw.select("connection", F.lit(seq).cast("bigint").alias("seq"),
                                               F.struct(*[F.col(c) for c in raw.columns]).alias(name)),
                                    allowMissingColumns=True)
    ordered = replay.repartition("connection").sortWithinPartitions("connection", "seq")
    root = absolute(lake)
    traffic = streams.select(F.sum(F.coalesce("c2s_stream_bytes", F.lit(0)) + F.coalesce("s2c_stream_bytes", F.lit(0))))
    parts = flow_parts(traffic.first()[0] or 0, spark.sparkContext.defaultParallelism)
    staging = staging_dir(spark, settings, lake, run_id)
    try:
        task = functools.partial(replay_task, settings_json=settings.to_json(), run_id=run_id, root=root,
                                 staging=staging, flow_parts=parts)
        written = [TableFile.of(r.asDict()) for r in ordered.mapInArrow(task, FILES_DDL).collect()]
        written += churn_files(written, settings, root, run_id) + damage_files(spark, lake, root, run_id)
        written += flows_stage(spark, parts, settings, staging, root, run_id)
    finally:
        remove_staging(staging)
    return DeltaRsSink(lake).commit(written, None, run_id, ANALYTICS_TABLES, kind="analyze")


def _micros(frame, table):
    from pyspark.sql import functions as F
    return frame.select(*[F.unix_micros(c.name).alias(c.name) if c.type == "timestamp" else F.col(c.name)
                          for c in table.columns])


def replay_task(batches: Iterator[pa.RecordBatch], settings_json: str, run_id: str, root: str, staging: str,
                flow_parts: int):
    from amqpcap.onepass.tabulate import Tabulator
    settings = Settings.from_json(settings_json)
    writer = TableFiles(root, run_id, tag="analyze-", batch_rows=settings.spark.arrow_batch_rows)
    sides = FlowSides(staging, f"a{uuid.uuid4().hex[:12]}", flow_parts)
    tag = {"source": None, "provisional": False}  # as the nightly run had them: the replayed row's
    sides.tap(writer)
    add = writer.add

    def emit(table, row):
        row.update(tag)
        add(table, row)
    analytics = Tabulator.for_settings(emit, settings, run_id).analytics
    for batch in batches:
        for row in batch.to_pylist():
            if row.get("i") is not None:
                analytics.raw(DECODE_ISSUES, row["i"])
            elif row.get("t") is not None:
                analytics.raw(TLS_CONNECTIONS, row["t"])
            elif row.get("s") is not None:
                tag["source"], tag["provisional"] = row["s"].get("source"), bool(row["s"].get("provisional"))
                analytics.end(row["s"])
            else:
                tag["source"], tag["provisional"] = row["f"].get("source"), False
                analytics.frame(row["f"], row.get("m"))
    files = writer.close()  # (its last batches reach the sides' tap)
    sides.close()
    if files:
        yield files_batch(files)
