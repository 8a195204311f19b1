"""The `deliveries` table: every delivery and how the consumer settled it (ack latency).

Settlement is sequential per channel: delivery tags are channel-local, `multiple` settles every
outstanding tag up to and including the given one, tag 0 with `multiple` settles all outstanding,
and a channel number reused after close starts over. So the frames of each (connection, channel)
go, in stream order, through a small state machine (`grouped.per_group`; the rows carry no
payloads, so a channel's frames fit a task).
"""

from __future__ import annotations

from typing import Iterator

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipelines.analytics.grouped import per_group
from pipelines.schemas import DELIVERIES

SETTLE = {"basic.ack": "ack", "basic.nack": "nack", "basic.reject": "reject"}
INPUT = ["date", "connection", "capture", "client", "server", "channel", "direction", "method",
         "ts_ns", "stream_offset", "delivery_tag", "multiple", "requeue", "consumer_tag", "queue",
         "no_ack", "no_wait", "exchange", "routing_key", "redelivered", "connection_closed_ns"]
OUTPUT, OUTPUT_DDL = DELIVERIES.task_output()
CHANNEL_METHODS = ("basic.deliver", "basic.get-ok", "basic.get", "basic.get-empty", "basic.consume",
                   "basic.consume-ok", "basic.ack", "basic.nack", "basic.reject", "channel.open",
                   "channel.close", "channel.close-ok")


def deliveries(frames: DataFrame, streams: DataFrame | None = None) -> DataFrame:
    """`streams`, when given, also ends connections that closed without connection.close (a client
    killed, a connection reset): their TCP end settles what was outstanding, as the broker does."""
    closed = (frames.where(F.col("method") == "connection.close")
              .groupBy("connection").agg(F.min("ts_ns").alias("connection_closed_ns")))
    if streams is not None:
        dropped = (streams.where(F.col("end_reason").isin("fin", "rst", "port-reuse"))
                   .select("connection", (F.unix_micros("last_ts") * 1000).alias("tcp_end_ns")))
        closed = (closed.join(dropped, "connection", "full")
                  .select("connection", F.coalesce("connection_closed_ns", "tcp_end_ns")
                          .alias("connection_closed_ns")))
    relevant = (frames.where(F.col("method").isin(*CHANNEL_METHODS) & (F.col("channel") > 0))
                .join(F.broadcast(closed), "connection", "left").select(*INPUT))
    return (per_group(relevant, ["connection", "channel"], settle_channel, OUTPUT, OUTPUT_DDL)
            .withColumn("run_id", F.lit(None).cast("string")))


def settle_channel(rows: list[dict]) -> Iterator[dict]:
    rows.sort(key=lambda r: (r["ts_ns"], r["direction"] == "C>S", r["stream_offset"]))
    return _settle(rows)


def _settle(rows: list[dict]) -> Iterator[dict]:
    instance = 0
    consumers: dict[str, tuple] = {}  # consumer tag -> (queue, no_ack)
    pending_consumes: list[tuple] = []  # (queue, no_ack) awaiting consume-ok
    pending_gets: list[tuple] = []
    outstanding: dict[int, dict] = {}  # delivery tag -> row

    def close(at_ns: int, outcome: str) -> Iterator[dict]:
        for row in outstanding.values():
            yield _settled(row, outcome, at_ns, None, False)
        outstanding.clear()

    for r in rows:
        method, from_client = r["method"], r["direction"] == "C>S"
        if method == "channel.open":
            yield from close(r["ts_ns"], "channel-closed")  # reopened without a close we saw
            instance += 1
            consumers.clear(), pending_consumes.clear(), pending_gets.clear()
        elif method in ("channel.close", "channel.close-ok"):
            yield from close(r["ts_ns"], "channel-closed")
        elif method == "basic.consume" and from_client:
            if r["no_wait"] and r["consumer_tag"]:
                consumers[r["consumer_tag"]] = (r["queue"], r["no_ack"])
            else:
                pending_consumes.append((r["queue"], r["no_ack"]))
        elif method == "basic.consume-ok" and not from_client and pending_consumes:
            consumers[r["consumer_tag"]] = pending_consumes.pop(0)
        elif method == "basic.get" and from_client:
            pending_gets.append((r["queue"], r["no_ack"]))
        elif method == "basic.get-empty" and pending_gets:
            pending_gets.pop(0)
        elif method in ("basic.deliver", "basic.get-ok") and not from_client:
            if method == "basic.deliver":
                queue, no_ack = consumers.get(r["consumer_tag"], (None, None))
            else:
                queue, no_ack = pending_gets.pop(0) if pending_gets else (None, None)
            row = _delivery(r, instance, queue)
            if no_ack:
                yield _settled(row, "auto-ack", None, None, False)
            else:
                outstanding[r["delivery_tag"]] = row
        elif method in SETTLE and from_client:
            tag, multiple = r["delivery_tag"], bool(r["multiple"]) and method != "basic.reject"
            if multiple:
                covered = [t for t in outstanding if tag == 0 or t <= tag]
            else:
                covered = [tag] if tag in outstanding else []  # else: delivered before the capture
            for t in sorted(covered):
                yield _settled(outstanding.pop(t), SETTLE[method], r["ts_ns"],
                               r["requeue"] if method != "basic.ack" else None, multiple)
    end_ns = rows[-1]["connection_closed_ns"] if rows else None
    for row in outstanding.values():
        if end_ns is not None and end_ns >= row["delivered_ns"]:
            yield _settled(row, "connection-closed", end_ns, None, False)
        else:
            yield _settled(row, "unsettled", None, None, False)


def _delivery(r: dict, instance: int, queue) -> dict:
    return {"date": r["date"], "connection": r["connection"], "capture": r["capture"], "client": r["client"],
            "server": r["server"], "channel": r["channel"], "channel_instance": instance,
            "method": r["method"], "delivery_tag": r["delivery_tag"], "consumer_tag": r["consumer_tag"],
            "queue": queue, "exchange": r["exchange"], "routing_key": r["routing_key"],
            "redelivered": r["redelivered"], "delivered_at": r["ts_ns"] // 1000, "delivered_ns": r["ts_ns"]}


def _settled(row: dict, outcome: str, at_ns, requeue, multiple: bool) -> dict:
    latency = (at_ns - row["delivered_ns"]) / 1e6 if at_ns is not None else None
    return {**row, "outcome": outcome, "requeue": requeue,
            "settled_at": at_ns // 1000 if at_ns is not None else None,
            "settle_latency_ms": latency, "settled_by_multiple": multiple}
