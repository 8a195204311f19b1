"""The `publishes` table: every publish, its publisher confirm (confirm latency), its return and
its transaction.

Per channel, in stream order (RabbitMQ's confirm rules, AMQP.md 8.7): after confirm.select the
Nth publish has sequence number N; the broker's basic.ack / basic.nack name a sequence number, and
with `multiple` every outstanding one up to it. A basic.return carries no tag: it is matched to the
earliest mandatory publish on the channel with the same exchange and routing key that has not
been returned yet (the broker returns before it confirms). On a tx channel, tx.commit and
tx.rollback settle every publish since the previous one.
"""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipelines.analytics.grouped import per_group
from pipelines.schemas import PUBLISHES

INPUT = ["date", "connection", "capture", "client", "server", "channel", "direction", "method", "ts_ns",
         "stream_offset", "delivery_tag", "multiple", "exchange", "routing_key", "mandatory", "reply_code",
         "reply_text"]
MESSAGE_FACTS = ["message_id", "correlation_id", "body_size", "body_sha256"]
# the facts joined in from messages are not the task's; the publish's stream offset is its key to them
_SCHEMA, _DDL = PUBLISHES.task_output(without=("run_id", *MESSAGE_FACTS))
OUTPUT = _SCHEMA.append(pa.field("stream_offset", pa.int64()))
OUTPUT_DDL = _DDL + ", stream_offset bigint"
METHODS = ("channel.open", "channel.close", "channel.close-ok", "confirm.select", "tx.select",
           "tx.commit", "tx.rollback", "basic.publish", "basic.ack", "basic.nack", "basic.return")


def publishes(frames: DataFrame, messages: DataFrame) -> DataFrame:
    relevant = frames.where(F.col("method").isin(*METHODS) & (F.col("channel") > 0)).select(*INPUT)
    settled = per_group(relevant, ["connection", "channel"], settle_channel, OUTPUT, OUTPUT_DDL)
    facts = messages.where(F.col("method") == "basic.publish").select(
        "connection", "stream_offset", *MESSAGE_FACTS)
    return (settled.join(facts, ["connection", "stream_offset"], "left")
            .withColumn("run_id", F.lit(None).cast("string")).select(*PUBLISHES.names))


def settle_channel(rows: list[dict]) -> Iterator[dict]:
    rows.sort(key=lambda r: (r["ts_ns"], r["direction"] == "S>C", r["stream_offset"]))
    return _settle(rows)


def _settle(rows: list[dict]) -> Iterator[dict]:
    state = _Channel(0)
    for r in rows:
        method, from_client = r["method"], r["direction"] == "C>S"
        if method in ("channel.open", "channel.close", "channel.close-ok"):
            yield from state.end()
            state = _Channel(state.instance + (method == "channel.open"))
        elif method == "confirm.select" and from_client:
            state.confirming, state.seq = True, 0
        elif method == "tx.select" and from_client:
            state.transactional = True
        elif method in ("tx.commit", "tx.rollback") and from_client:
            for publish in state.in_tx:
                publish["tx_outcome"] = "committed" if method == "tx.commit" else "rolled-back"
            state.in_tx = []
        elif method == "basic.publish" and from_client:
            state.publish(_publish(r, state.instance), r["mandatory"])
        elif method == "basic.return" and not from_client:
            match = next((p for p in state.returnable if p["exchange"] == r["exchange"]
                          and p["routing_key"] == r["routing_key"]), None)
            if match is not None:
                state.returnable.remove(match)
                match.update(returned=True, return_code=r["reply_code"], return_text=r["reply_text"])
        elif method in ("basic.ack", "basic.nack") and not from_client and state.confirming:
            tag, multiple = r["delivery_tag"], bool(r["multiple"])
            for seq in [s for s in state.outstanding if s == tag or (multiple and (tag == 0 or s <= tag))]:
                publish = state.outstanding.pop(seq)
                publish.update(confirm_outcome="ack" if method == "basic.ack" else "nack",
                               confirmed_at=r["ts_ns"] // 1000, confirmed_by_multiple=multiple,
                               confirm_latency_ms=(r["ts_ns"] - publish["published_ns"]) / 1e6)
    yield from state.end()


class _Channel:
    """One lifetime of a channel number: its publishes, in order, updated in place."""

    def __init__(self, instance: int) -> None:
        self.instance = instance
        self.confirming = self.transactional = False
        self.seq = 0
        self.publishes: list[dict] = []
        self.outstanding: dict[int, dict] = {}  # confirm seq -> publish
        self.returnable: list[dict] = []  # mandatory publishes not returned yet
        self.in_tx: list[dict] = []  # publishes of the open transaction

    def publish(self, publish: dict, mandatory: bool) -> None:
        self.publishes.append(publish)
        if self.confirming:
            self.seq += 1
            publish["confirm_seq"] = self.seq
            self.outstanding[self.seq] = publish
        if self.transactional:
            self.in_tx.append(publish)
        if mandatory:
            self.returnable.append(publish)

    def end(self) -> list[dict]:
        for publish in self.outstanding.values():
            publish["confirm_outcome"] = "unconfirmed"
        for publish in self.in_tx:
            publish["tx_outcome"] = "uncommitted"
        return self.publishes


def _publish(r: dict, instance: int) -> dict:
    return {"date": r["date"], "connection": r["connection"], "capture": r["capture"], "client": r["client"],
            "server": r["server"], "channel": r["channel"], "channel_instance": instance,
            "published_at": r["ts_ns"] // 1000, "published_ns": r["ts_ns"], "exchange": r["exchange"],
            "routing_key": r["routing_key"], "mandatory": r["mandatory"], "confirm_seq": None,
            "confirm_outcome": None, "confirmed_at": None, "confirm_latency_ms": None,
            "confirmed_by_multiple": None, "returned": False, "return_code": None, "return_text": None,
            "tx_outcome": None, "stream_offset": r["stream_offset"]}
