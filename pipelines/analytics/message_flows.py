"""The `message_flows` table: which delivery carried which publish, across connections.

AMQP carries no end-to-end message id of its own, so pairs are matched on what the messages carry:
the `message-id` property when set, else the body's SHA-256 together with the exchange and routing
key the message was published with (a delivery repeats them). Within one key and one consumer
stream (connection, channel, consumer tag), first deliveries take the key's publishes in time order,
each only from publishes before it: so a fan-out to several queues pairs every copy with its
publish, and a burst of identical bodies pairs one to one. A redelivery pairs with the publish the
earlier delivery of that message got. What stays unmatched keeps its row with the other side empty.
"""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipelines.analytics.grouped import per_group
from pipelines.schemas import MESSAGE_FLOWS

SIDE = ["date", "capture", "connection", "channel", "method", "ts_ns", "message_id", "body_sha256", "exchange",
        "routing_key", "consumer_tag", "delivery_tag", "redelivered"]
PAIRS = pa.schema([("match", pa.string()), ("publish_ref", pa.int64()), ("delivery_ref", pa.int64())])
PAIRS_DDL = "match string, publish_ref bigint, delivery_ref bigint"


def message_flows(messages: DataFrame, deliveries: DataFrame) -> DataFrame:
    keyed = (messages.select(*SIDE)
             .withColumn("ref", F.monotonically_increasing_id())
             .withColumn("key", F.when(F.col("message_id").isNotNull(), F.concat(F.lit("id:"), "message_id"))
                         .otherwise(F.concat_ws("|", F.lit("body"), "body_sha256", "exchange", "routing_key")))
             .where(F.col("method").isin("basic.publish", "basic.deliver", "basic.get-ok")))
    keyed = keyed.localCheckpoint(eager=True)  # refs must not change between the uses below
    pairs = per_group(keyed.select("key", "ref", "method", "ts_ns", "connection", "channel", "consumer_tag",
                                   "redelivered", "message_id"), ["key"], pair_key, PAIRS, PAIRS_DDL)
    publish = keyed.where(F.col("method") == "basic.publish").select(
        F.col("ref").alias("publish_ref"), F.col("date").alias("p_date"), F.col("capture").alias("p_capture"),
        F.col("connection").alias("publisher_connection"), F.col("channel").alias("publisher_channel"),
        F.col("ts_ns").alias("published_ns"), F.col("message_id").alias("p_message_id"),
        F.col("body_sha256").alias("p_sha"), F.col("exchange").alias("p_exchange"),
        F.col("routing_key").alias("p_routing_key"))
    settle = deliveries.select(F.col("connection").alias("consumer_connection"),
                               F.col("channel").alias("consumer_channel"), "delivery_tag",
                               F.col("delivered_ns").alias("delivered_ns"), "queue", "settled_at", "outcome")
    delivery = keyed.where(F.col("method") != "basic.publish").select(
        F.col("ref").alias("delivery_ref"), F.col("date").alias("d_date"), F.col("capture").alias("d_capture"),
        F.col("connection").alias("consumer_connection"), F.col("channel").alias("consumer_channel"),
        "consumer_tag", "delivery_tag", "redelivered", F.col("ts_ns").alias("delivered_ns"),
        F.col("message_id").alias("d_message_id"), F.col("body_sha256").alias("d_sha"),
        F.col("exchange").alias("d_exchange"), F.col("routing_key").alias("d_routing_key")) \
        .join(settle, ["consumer_connection", "consumer_channel", "delivery_tag", "delivered_ns"], "left")
    ms = lambda later, earlier: (F.col(later) - F.col(earlier)) / 1e6  # noqa: E731  (ns -> ms)
    return (pairs.join(publish, "publish_ref", "full").join(delivery, "delivery_ref", "full")
            .withColumn("published_at", F.timestamp_micros(F.floor(F.col("published_ns") / 1000)))
            .withColumn("delivered_at", F.timestamp_micros(F.floor(F.col("delivered_ns") / 1000)))
            .withColumn("settled_ns", F.unix_micros("settled_at") * 1000)
            .withColumn("publish_to_deliver_ms", ms("delivered_ns", "published_ns"))
            .withColumn("deliver_to_settle_ms", ms("settled_ns", "delivered_ns"))
            .withColumn("end_to_end_ms", ms("settled_ns", "published_ns"))
            .withColumn("date", F.coalesce("p_date", "d_date"))
            .withColumn("capture", F.coalesce("p_capture", "d_capture"))
            .withColumn("message_id", F.coalesce("p_message_id", "d_message_id"))
            .withColumn("body_sha256", F.coalesce("p_sha", "d_sha"))
            .withColumn("exchange", F.coalesce("p_exchange", "d_exchange"))
            .withColumn("routing_key", F.coalesce("p_routing_key", "d_routing_key"))
            .withColumn("run_id", F.lit(None).cast("string"))
            .select(*MESSAGE_FLOWS.names))


def pair_key(rows: list[dict]) -> Iterator[dict]:
    rows.sort(key=lambda r: (r["ts_ns"], r["method"] != "basic.publish"))
    return _pairs(rows)


def _pairs(rows: list[dict]) -> Iterator[dict]:
    publishes = [r for r in rows if r["method"] == "basic.publish"]
    how = "message_id" if rows and rows[0]["message_id"] is not None else "body"
    taken = set()
    position: dict[tuple, int] = {}  # consumer stream -> index of its next publish
    matched_by_stream: dict[tuple, int] = {}  # consumer stream -> publish of its last first delivery
    for r in rows:
        if r["method"] == "basic.publish":
            continue
        stream = (r["connection"], r["channel"], r["consumer_tag"])
        publish = None
        if r["redelivered"] and stream in matched_by_stream:
            publish = matched_by_stream[stream]
        else:
            i = position.get(stream, 0)
            if i < len(publishes) and publishes[i]["ts_ns"] <= r["ts_ns"]:
                publish = publishes[i]
                position[stream] = i + 1
        if publish is None:
            continue  # its publish is outside the capture: the full join keeps the delivery alone
        matched_by_stream[stream] = publish
        taken.add(publish["ref"])
        yield {"match": how, "publish_ref": publish["ref"], "delivery_ref": r["ref"]}
