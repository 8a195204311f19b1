"""The `errors` table: what the protocol said went wrong, from the frames."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipelines.schemas import ERRORS

CLOSES = ("connection.close", "channel.close")


def errors(frames: DataFrame, reply_codes: DataFrame, method_names: DataFrame) -> DataFrame:
    """Non-200 closes, every basic.return, every broker basic.nack; named with the spec's codes
    and methods. `reply_codes` and `method_names` come from pipelines.analytics.reference."""
    signalled = frames.where(
        (F.col("method").isin(*CLOSES) & ~F.coalesce(F.col("reply_code"), F.lit(0)).isin(0, 200))
        | (F.col("method") == "basic.return")
        | ((F.col("method") == "basic.nack") & (F.col("direction") == "S>C")))
    failing = method_names.select(F.col("class_id").alias("failing_class_id"),
                                  F.col("method_id").alias("failing_method_id"),
                                  F.col("method_name").alias("failing_method"))
    return (signalled
            .join(F.broadcast(reply_codes), "reply_code", "left")
            .join(F.broadcast(failing), ["failing_class_id", "failing_method_id"], "left")
            .withColumn("initiator", F.when(F.col("direction") == "C>S", "client").otherwise("server"))
            .withColumn("scope", F.when(F.col("method") == "connection.close", "connection")
                        .otherwise("channel"))
            .withColumn("reply_name", F.when(F.col("method") == "basic.nack", None)
                        .otherwise(F.col("reply_name")))
            .select(*ERRORS.names))
