"""The `message_flows` rule: which delivery carried which publish, across connections.

AMQP carries no end-to-end message id of its own, so pairs are matched on what the messages carry:
the `message-id` property when set, else the body's SHA-256 together with the exchange and routing
key the message was published with (a delivery repeats them). Within one key and one consumer
stream (connection, channel, consumer tag), first deliveries take the key's publishes in time
order, each only from publishes before it: so a fan-out to several queues pairs every copy with
its publish, and a burst of identical bodies pairs one to one. A redelivery pairs with the publish
the earlier delivery of that message got. What stays unmatched keeps its row with the other side
empty.

This module is the rule, Spark-free: `flows(sides)` takes one key's publishes and deliveries (rows
of the `publishes` and `deliveries` tables, sorted by `side_order`) and yields `message_flows`
rows; `keyed_flows` runs it over many keys' sides sorted by key, and `column_flows` over such sides
given as columns, as the job's message_flows tasks read them (pipelines.stages.flows). Compiled: a
flows task is one row after another through here.
"""

from __future__ import annotations

from typing import Iterable, Iterator
from zlib import crc32

from amqp_decode.analytics.common import micros
from amqp_decode.tables import DELIVERIES

# The columns of each side the rule and its rows need.
PUBLISH_COLUMNS = ("date", "capture", "source", "provisional", "connection", "channel", "message_key", "published_ns",
                   "message_id", "body_sha256", "exchange", "routing_key")
DELIVERY_COLUMNS = ("date", "capture", "source", "provisional", "connection", "channel", "message_key", "consumer_tag",
                    "delivery_tag", "redelivered", "delivered_ns", "message_id", "body_sha256", "exchange",
                    "routing_key", "queue", "settled_ns", "outcome")


# A side as the job stages it (pipelines.stages.flows): its key, time and kind, then these columns
# (both sides' together; a column the side's table lacks is null).
SIDE_COLUMNS = tuple(sorted(set(PUBLISH_COLUMNS) | set(DELIVERY_COLUMNS)))


class SideParts:
    """`publishes` and `deliveries` rows as their staged match sides: (key, time, is_delivery, then
    SIDE_COLUMNS), each handed to `add(part, side)` with the part of the key space its key falls in
    (a stable hash: CRC-32 of the key, modulo `parts`). Compiled: no Python step per row on a decode
    task's way to its tables."""

    def __init__(self, parts: int, add, keys_held: int = 16_384) -> None:
        self.parts = parts
        self.add = add
        # key -> part, so that a message's later sides skip the hash; cleared when full, for a
        # task's memory must not grow with its input (a message's sides come close together)
        self.keys: dict[str, int] = {}
        self.keys_held = keys_held

    def see(self, table, row) -> None:
        """One row (a mapping of its table's columns) of `table`: `deliveries`, else `publishes` (a
        table writer's tap, amqp_decode.columns.TableColumns.taps)."""
        self.side(row, table is DELIVERIES)

    def side(self, row, is_delivery: bool) -> None:
        """One row of `deliveries` when `is_delivery`, else of `publishes`."""
        key = flow_key(row)
        part = self.keys.get(key)
        if part is None:
            if len(self.keys) >= self.keys_held:
                self.keys.clear()
            part = self.keys[key] = crc32(key.encode()) % self.parts
        get = row.get
        self.add(part, (key, get("delivered_ns" if is_delivery else "published_ns"), is_delivery,
                        *[get(name) for name in SIDE_COLUMNS]))


def flow_key(side: dict) -> str:
    """The match key: the message id, else the body hash with the exchange and routing key (absent
    parts left out, as SQL's concat_ws does)."""
    message_id = side.get("message_id")
    if message_id is not None:
        return "id:" + message_id
    return "|".join(p for p in ("body", side.get("body_sha256"), side.get("exchange"), side.get("routing_key"))
                    if p is not None)


def side_time(side: dict) -> int:
    return side["published_ns"] if "published_ns" in side else side["delivered_ns"]


def side_order(side: dict) -> tuple[int, bool]:
    """Time order; on a tie the publish first."""
    return side_time(side), "delivered_ns" in side


def flows(sides: Iterable[dict]) -> Iterator[dict]:
    """One key's sides, in `side_order`: publishes (rows with `published_ns`) and deliveries."""
    publishes: list[dict] = []
    paired: set[int] = set()  # indexes of publishes that got a delivery
    position: dict[tuple, int] = {}  # consumer stream -> index of its next publish
    last: dict[tuple, int] = {}  # consumer stream -> publish of its last first delivery
    how = None
    for side in sides:
        if how is None:
            how = "message_id" if side["message_id"] is not None else "body"
        if "published_ns" in side:
            publishes.append(side)
            continue
        stream = (side["connection"], side["channel"], side["consumer_tag"])
        index = None
        if side["redelivered"] and stream in last:
            index = last[stream]
        else:
            i = position.get(stream, 0)
            if i < len(publishes) and publishes[i]["published_ns"] <= side["delivered_ns"]:
                index = i
                position[stream] = i + 1
        if index is None:  # its publish is outside the capture
            yield _row(None, None, side)
            continue
        last[stream] = index
        paired.add(index)
        yield _row(how, publishes[index], side)
    for index, publish in enumerate(publishes):
        if index not in paired:
            yield _row(None, publish, None)


def keyed_flows(sides: Iterable[dict]) -> Iterator[dict]:
    """`message_flows` rows of many keys' sides, sorted by key and, within a key, in `side_order`:
    each side a row with its `key`, `is_delivery` and the columns of both sides (a side's own
    columns are taken from it)."""
    return _grouped((side["key"], {name: side[name] for name in
                                   (DELIVERY_COLUMNS if side["is_delivery"] else PUBLISH_COLUMNS)})
                    for side in sides)


def column_flows(batches: Iterable[dict]) -> Iterator[dict]:
    """keyed_flows of sides given as batches of columns (each a list per name: `key`,
    `is_delivery` and both sides' columns, as `Table.to_pydict` gives them), the batches in sort
    order. The job's flows tasks read sides from Arrow: a dict per row made straight from the
    columns, with only its side's columns, costs a fraction of Arrow's `to_pylist`, which makes
    every row with every column first."""
    return _grouped(side for columns in batches for side in _column_sides(columns))


def _column_sides(columns: dict) -> Iterator[tuple]:
    """(key, side) of each row of one batch of columns."""
    keys, deliveries = columns["key"], columns["is_delivery"]
    publish = [columns[name] for name in PUBLISH_COLUMNS]
    delivery = [columns[name] for name in DELIVERY_COLUMNS]
    for i in range(len(keys)):
        side = {}
        if deliveries[i]:
            for j in range(len(DELIVERY_COLUMNS)):
                side[DELIVERY_COLUMNS[j]] = delivery[j][i]
        else:
            for j in range(len(PUBLISH_COLUMNS)):
                side[PUBLISH_COLUMNS[j]] = publish[j][i]
        yield keys[i], side


def _grouped(keyed: Iterable[tuple]) -> Iterator[dict]:
    """flows() of each key's sides, from (key, side) pairs sorted by key."""
    current, group = None, []
    for key, side in keyed:
        if key != current:
            yield from flows(group)
            current, group = key, []
        group.append(side)
    yield from flows(group)


_NONE: dict = {}  # the absent side (never written to)


def _row(how: str | None, publish: dict | None, delivery: dict | None) -> dict:
    p = publish if publish is not None else _NONE
    d = delivery if delivery is not None else _NONE
    published_ns, delivered_ns = p.get("published_ns"), d.get("delivered_ns")
    settled_ns = d.get("settled_ns")
    return {"date": _either(p, d, "date"), "capture": _either(p, d, "capture"), "source": _either(p, d, "source"),
            "provisional": bool(p.get("provisional") or d.get("provisional")), "match": how,
            "message_key": d.get("message_key"), "publish_message_key": p.get("message_key"),
            "message_id": _either(p, d, "message_id"), "body_sha256": _either(p, d, "body_sha256"),
            "exchange": _either(p, d, "exchange"), "routing_key": _either(p, d, "routing_key"),
            "publisher_connection": p.get("connection"), "publisher_channel": p.get("channel"),
            "published_at": micros(published_ns), "consumer_connection": d.get("connection"),
            "consumer_channel": d.get("channel"), "consumer_tag": d.get("consumer_tag"), "queue": d.get("queue"),
            "delivery_tag": d.get("delivery_tag"), "redelivered": d.get("redelivered"),
            "delivered_at": micros(delivered_ns), "settled_at": micros(settled_ns), "outcome": d.get("outcome"),
            "publish_to_deliver_ms": _ms(delivered_ns, published_ns), "deliver_to_settle_ms": _ms(settled_ns, delivered_ns),
            "end_to_end_ms": _ms(settled_ns, published_ns)}


def _either(p: dict, d: dict, name: str):
    """The publish's value, else the delivery's."""
    value = p.get(name)
    return value if value is not None else d.get(name)


def _ms(later, earlier):
    return (later - earlier) / 1e6 if later is not None and earlier is not None else None
