"""The `connections` table: one row per TCP connection, from `streams` and the channel-0 frames."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipelines.schemas import CONNECTIONS

MILESTONES = {"start_at": "connection.start", "start_ok_at": "connection.start-ok",
              "tune_at": "connection.tune", "tune_ok_at": "connection.tune-ok",
              "open_at": "connection.open", "open_ok_at": "connection.open-ok"}


def _first(method: str, value: Column) -> Column:
    """`value` of the connection's first frame of `method`."""
    return F.min_by(F.when(F.col("method") == method, value), F.when(F.col("method") == method, F.col("ts_ns")))


def _ms(later: str, earlier: str) -> Column:
    """Exact: integer microseconds (seconds as doubles lose precision at epoch magnitudes)."""
    return (F.unix_micros(later) - F.unix_micros(earlier)) / 1000.0


def connections(streams: DataFrame, frames: DataFrame, method_names: DataFrame) -> DataFrame:
    args = F.col("args_json")
    handshake = frames.groupBy("connection").agg(
        *[F.min(F.when(F.col("method") == m, F.col("ts"))).alias(name) for name, m in MILESTONES.items()],
        F.min(F.when((F.col("kind") == "protocol-header") & (F.col("direction") == "C>S"), F.col("ts")))
        .alias("protocol_header_at"),
        _first("connection.start", F.get_json_object(args, "$.server_properties.product")).alias("server_product"),
        _first("connection.start", F.get_json_object(args, "$.server_properties.version")).alias("server_version"),
        _first("connection.start", F.get_json_object(args, "$.server_properties.platform")).alias("server_platform"),
        _first("connection.start-ok", F.get_json_object(args, "$.client_properties.product")).alias("client_product"),
        _first("connection.start-ok", F.get_json_object(args, "$.client_properties.version")).alias("client_version"),
        _first("connection.start-ok", F.get_json_object(args, "$.client_properties.platform")).alias("client_platform"),
        _first("connection.start-ok", F.get_json_object(args, "$.client_properties.connection_name"))
        .alias("connection_name"),
        _first("connection.start-ok", F.get_json_object(args, "$.client_properties.capabilities"))
        .alias("client_capabilities_json"),
        _first("connection.start-ok", F.get_json_object(args, "$.mechanism")).alias("auth_mechanism"),
        _first("connection.start-ok", F.get_json_object(args, "$.auth_user")).alias("auth_user"),
        _first("connection.start-ok", F.get_json_object(args, "$.locale")).alias("locale"),
        _first("connection.tune", F.get_json_object(args, "$.channel_max")).cast("int").alias("channel_max_proposed"),
        _first("connection.tune", F.get_json_object(args, "$.frame_max")).cast("bigint").alias("frame_max_proposed"),
        _first("connection.tune", F.get_json_object(args, "$.heartbeat")).cast("int").alias("heartbeat_proposed"),
        _first("connection.tune-ok", F.get_json_object(args, "$.channel_max")).cast("int").alias("channel_max"),
        _first("connection.tune-ok", F.get_json_object(args, "$.frame_max")).cast("bigint").alias("frame_max"),
        _first("connection.tune-ok", F.get_json_object(args, "$.heartbeat")).cast("int").alias("heartbeat"),
        _first("connection.open", F.get_json_object(args, "$.virtual_host")).alias("vhost"),
        _first("connection.close", F.when(F.col("direction") == "C>S", "client").otherwise("server"))
        .alias("close_initiator"),
        _first("connection.close", F.col("reply_code")).alias("close_code"),
        _first("connection.close", F.col("reply_text")).alias("close_text"),
        _first("connection.close", F.col("failing_class_id")).alias("failing_class_id"),
        _first("connection.close", F.col("failing_method_id")).alias("failing_method_id"),
        F.max(F.when(F.col("method") == "connection.close-ok", True)).alias("closed_cleanly"),
        F.max(F.when(F.col("direction") == "C>S", F.col("ts"))).alias("last_client_frame_at"),
        F.sum(F.when(F.col("method") == "channel.open-ok", 1).otherwise(0)).alias("channels_opened"),
        F.sum(F.when(F.col("method") == "basic.publish", 1).otherwise(0)).alias("messages_published"),
        F.sum(F.when(F.col("method").isin("basic.deliver", "basic.get-ok"), 1).otherwise(0))
        .alias("messages_delivered"),
    )
    failing = method_names.select(F.col("class_id").alias("failing_class_id"),
                                  F.col("method_id").alias("failing_method_id"),
                                  F.col("method_name").alias("close_failing_method"))
    silence = (F.unix_micros("last_ts") - F.unix_micros("last_client_frame_at")) / 1e6
    return (streams.join(handshake, "connection", "left")
            .join(F.broadcast(failing), ["failing_class_id", "failing_method_id"], "left")
            .withColumn("saw_start", F.col("syn_seen"))
            .withColumn("started_at", F.col("first_ts"))
            .withColumn("ended_at", F.col("last_ts"))
            .withColumn("handshake_ms", _ms("open_ok_at", "protocol_header_at"))
            .withColumn("handshake_ms", F.coalesce("handshake_ms", _ms("open_ok_at", "start_at")))
            .withColumn("auth_ms", _ms("tune_at", "start_at"))
            .withColumn("end_reason", F.when(F.col("closed_cleanly"), "close")
                        .when((F.col("heartbeat") > 0) & (silence >= 2 * F.col("heartbeat")), "heartbeat-timeout")
                        .otherwise(F.col("end_reason")))
            .withColumn("c2s_bytes", F.col("c2s_stream_bytes"))
            .withColumn("s2c_bytes", F.col("s2c_stream_bytes"))
            .select(*CONNECTIONS.names))
