"""`heartbeats` and `flow_control`: is the connection alive, and is traffic allowed to flow."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from pipelines.schemas import FLOW_CONTROL, HEARTBEATS


def heartbeats(frames: DataFrame, streams: DataFrame) -> DataFrame:
    agreed = (frames.where(F.col("method") == "connection.tune-ok").groupBy("connection")
              .agg(F.min_by(F.get_json_object("args_json", "$.heartbeat").cast("int"), "ts_ns").alias("heartbeat_s")))
    ordered = Window.partitionBy("connection", "direction").orderBy("ts_ns", "stream_offset")
    gaps = frames.withColumn("gap_s", (F.col("ts_ns") - F.lag("ts_ns").over(ordered)) / 1e9)
    per_direction = gaps.groupBy("connection", "direction").agg(
        F.first("date").alias("date"), F.first("capture").alias("capture"), F.first("client").alias("client"),
        F.first("server").alias("server"), F.count("*").alias("frames"),
        F.sum(F.when(F.col("kind") == "heartbeat", 1).otherwise(0)).alias("heartbeats"),
        F.max("gap_s").alias("longest_gap_s"), F.max("ts_ns").alias("last_ns"),
        F.collect_list("gap_s").alias("gaps"))
    ends = streams.select("connection", (F.unix_micros("last_ts") * 1000).alias("end_ns"))
    limit = 2 * F.col("heartbeat_s")
    return (per_direction.join(agreed, "connection", "left").join(ends, "connection", "left")
            .withColumn("final_silence_s", F.greatest(F.lit(0.0), (F.col("end_ns") - F.col("last_ns")) / 1e9))
            .withColumn("longest_silence_s", F.greatest("longest_gap_s", "final_silence_s"))
            .withColumn("long_silences", F.when(F.col("heartbeat_s") > 0, F.size(F.filter("gaps", lambda g: g > limit))
                                                + F.when(F.col("final_silence_s") > limit, 1).otherwise(0)))
            .withColumn("ended_after_silence", (F.col("heartbeat_s") > 0) & (F.col("final_silence_s") > limit))
            .withColumn("run_id", F.lit(None).cast("string"))
            .select(*HEARTBEATS.names))


def flow_control(frames: DataFrame) -> DataFrame:
    events = frames.where(F.col("method").isin("channel.flow", "connection.blocked", "connection.unblocked"))
    events = (events.withColumn("mechanism", F.when(F.col("method") == "channel.flow", "channel.flow")
                                .otherwise("connection.blocked"))
              .withColumn("stops", F.when(F.col("method") == "connection.blocked", True)
                          .when(F.col("method") == "connection.unblocked", False)
                          .otherwise(F.get_json_object("args_json", "$.active") == "false")))
    ordered = Window.partitionBy("connection", "channel", "mechanism").orderBy("ts_ns")
    following = events.withColumn("next_stops", F.lead("stops").over(ordered)) \
                      .withColumn("next_ts", F.lead("ts").over(ordered))
    return (following.where(F.col("stops"))
            .withColumn("ended_at", F.when(~F.col("next_stops"), F.col("next_ts")))
            .withColumn("started_at", F.col("ts"))
            .withColumn("duration_ms", (F.unix_micros("ended_at") - F.unix_micros("started_at")) / 1000.0)
            .withColumn("initiator", F.when(F.col("direction") == "C>S", "client").otherwise("server"))
            .withColumn("reason", F.get_json_object("args_json", "$.reason"))
            .withColumn("run_id", F.lit(None).cast("string"))
            .select(*FLOW_CONTROL.names))
