"""The `channels` table: each lifetime of each channel number, from its frames in stream order."""

from __future__ import annotations

import json
from typing import Iterator

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipelines.analytics.grouped import per_group
from pipelines.schemas import CHANNELS

INPUT = ["date", "connection", "capture", "client", "server", "channel", "direction", "method", "ts_ns",
         "stream_offset", "reply_code", "reply_text", "consumer_tag", "queue", "no_ack", "no_wait", "args_json"]
OUTPUT, OUTPUT_DDL = CHANNELS.task_output()
COUNTED = {"channel.flow": "flow_events", "basic.publish": "publishes", "basic.deliver": "deliveries",
           "basic.get-ok": "deliveries", "basic.reject": "rejects"}


def channels(frames: DataFrame) -> DataFrame:
    relevant = frames.where((F.col("kind") == "method") & (F.col("channel") > 0)).select(*INPUT)
    return (per_group(relevant, ["connection", "channel"], lifetimes, OUTPUT, OUTPUT_DDL)
            .withColumn("run_id", F.lit(None).cast("string")))


def lifetimes(rows: list[dict]) -> Iterator[dict]:
    rows.sort(key=lambda r: (r["ts_ns"], r["direction"], r["stream_offset"]))
    return _lifetimes(rows)


def _lifetimes(rows: list[dict]) -> Iterator[dict]:
    current = None
    pending_consumes: list[dict] = []
    for r in rows:
        method, side = r["method"], "client" if r["direction"] == "C>S" else "server"
        if method == "channel.open" or current is None:
            if current is not None:
                yield _row(current)
            current = _new(r, opened=method == "channel.open",
                           instance=(current["channel_instance"] + 1) if current else int(method == "channel.open"))
            pending_consumes = []
        if method in COUNTED:
            current[COUNTED[method]] += 1
        elif method in ("basic.ack", "basic.nack"):
            current["confirms" if side == "server" else ("acks" if method == "basic.ack" else "nacks")] += 1
        elif method == "channel.close" and current["closed_at"] is None:
            current.update(closed_at=r["ts_ns"] // 1000, close_initiator=side, close_code=r["reply_code"],
                           close_text=r["reply_text"])
        elif method == "confirm.select" and current["confirm_mode_at"] is None:
            current["confirm_mode_at"] = r["ts_ns"] // 1000
        elif method == "tx.select" and current["tx_mode_at"] is None:
            current["tx_mode_at"] = r["ts_ns"] // 1000
        elif method == "basic.qos":
            args = json.loads(r["args_json"] or "{}")
            current.update(prefetch_count=args.get("prefetch_count"), prefetch_size=args.get("prefetch_size"),
                           prefetch_scope="per-channel" if args.get("global") else "per-consumer")
        elif method == "basic.consume" and side == "client":
            consumer = {"tag": r["consumer_tag"] or None, "queue": r["queue"], "no_ack": r["no_ack"],
                        "started_at_ns": r["ts_ns"], "cancelled_at_ns": None, "cancelled_by": None}
            current["consumers"].append(consumer)
            if not (r["no_wait"] and r["consumer_tag"]):
                pending_consumes.append(consumer)
        elif method == "basic.consume-ok" and pending_consumes:
            pending_consumes.pop(0)["tag"] = r["consumer_tag"]
        elif method == "basic.cancel":
            for consumer in current["consumers"]:
                if consumer["tag"] == r["consumer_tag"] and consumer["cancelled_at_ns"] is None:
                    consumer.update(cancelled_at_ns=r["ts_ns"], cancelled_by=side)
    if current is not None:
        yield _row(current)


def _new(r: dict, opened: bool, instance: int) -> dict:
    return {"date": r["date"], "connection": r["connection"], "capture": r["capture"], "client": r["client"],
            "server": r["server"], "channel": r["channel"], "channel_instance": instance,
            "opened_at": r["ts_ns"] // 1000 if opened else None, "closed_at": None, "close_initiator": None,
            "close_code": None, "close_text": None, "confirm_mode_at": None, "tx_mode_at": None,
            "prefetch_count": None, "prefetch_size": None, "prefetch_scope": None, "consumers": [],
            "flow_events": 0, "publishes": 0, "deliveries": 0, "acks": 0, "nacks": 0, "rejects": 0,
            "confirms": 0}


def _row(current: dict) -> dict:
    consumers = current.pop("consumers")
    current["consumers_json"] = json.dumps(consumers) if consumers else None
    return current
