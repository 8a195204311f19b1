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
rows. The job's message_flows tasks (pipelines.stages.flows) run the same rule (`_pair`) over
many keys' sides given as columns (`flow_pairs`), and make the rows in Arrow, column by column
(`arrow_flows`, the twin of `_row`): only the columns the rule reads become Python values. The
sides reach those tasks staged by the decode tasks, under their keys made column by column
(`arrow_keys`, the twin of `_key`), each in its part of the key space (`KeyParts`).
"""

from __future__ import annotations

from typing import Iterable, Iterator
from zlib import crc32

from amqp_decode.analytics.common import micros

# The columns of each side the rule and its rows need.
PUBLISH_COLUMNS = ("date", "capture", "source", "provisional", "connection", "channel", "message_key", "published_ns",
                   "message_id", "body_sha256", "exchange", "routing_key")
DELIVERY_COLUMNS = ("date", "capture", "source", "provisional", "connection", "channel", "message_key", "consumer_tag",
                    "delivery_tag", "redelivered", "delivered_ns", "message_id", "body_sha256", "exchange",
                    "routing_key", "queue", "settled_ns", "outcome")


# A side as the job stages it (pipelines.stages.flows): its key, time and kind, then these columns
# (both sides' together; a column the side's table lacks is null).
SIDE_COLUMNS = tuple(sorted(set(PUBLISH_COLUMNS) | set(DELIVERY_COLUMNS)))


class KeyParts:
    """Which part of the key space each match key falls in: CRC-32 of the key, modulo `parts`, the
    same in every task and run. Compiled: a decode task's publishes and deliveries are staged as
    their match sides a batch at a time (pipelines.stages.flows), and only this step of it is a loop
    over the rows."""

    def __init__(self, parts: int, keys_held: int = 16_384) -> None:
        self.parts = parts
        # key -> part, so that a message's later sides skip the hash; cleared when full, for a
        # task's memory must not grow with its input (a message's sides come close together)
        self.keys: dict[str, int] = {}
        self.keys_held = keys_held

    def rows_by_part(self, keys: list) -> dict:
        """{part: [the indexes of `keys` in that part, in order]}"""
        by_part: dict = {}
        cache = self.keys
        for i in range(len(keys)):
            key = keys[i]
            part = cache.get(key)
            if part is None:
                if len(cache) >= self.keys_held:
                    cache.clear()
                part = cache[key] = crc32(key.encode()) % self.parts
            rows = by_part.get(part)
            if rows is None:
                rows = by_part[part] = []
            rows.append(i)
        return by_part


def flow_key(side: dict) -> str:
    """The match key: the message id, else the body hash with the exchange and routing key (absent
    parts left out, as SQL's concat_ws does)."""
    return _key(side.get("message_id"), side.get("body_sha256"), side.get("exchange"), side.get("routing_key"))


def _key(message_id, body_sha256, exchange, routing_key) -> str:
    if message_id is not None:
        return "id:" + message_id
    return "|".join(p for p in ("body", body_sha256, exchange, routing_key) if p is not None)


def arrow_keys(message_id, body_sha256, exchange, routing_key):
    """`_key` column by column, in Arrow: the match keys of rows given as string columns."""
    import pyarrow as pa
    import pyarrow.compute as pc
    def text(value):  # typed: inferring a Python value's type imports pandas (pipelines.worker)
        return pa.scalar(value, pa.string())
    by_id = pc.binary_join_element_wise(text("id:"), message_id, text(""))
    by_body = pc.binary_join_element_wise(text("body"), body_sha256, exchange, routing_key, text("|"),
                                          null_handling="skip")
    return pc.if_else(pc.is_valid(message_id), by_id, by_body)


def side_time(side: dict) -> int:
    return side["published_ns"] if "published_ns" in side else side["delivered_ns"]


def side_order(side: dict) -> tuple[int, bool]:
    """Time order; on a tie the publish first."""
    return side_time(side), "delivered_ns" in side


def flows(sides: Iterable[dict]) -> Iterator[dict]:
    """One key's sides, in `side_order`: publishes (rows with `published_ns`) and deliveries."""
    sides = list(sides)
    if not sides:
        return
    how = "message_id" if sides[0]["message_id"] is not None else "body"
    is_delivery = ["published_ns" not in side for side in sides]
    times = [side["delivered_ns" if delivery else "published_ns"] for side, delivery in zip(sides, is_delivery)]
    streams = [(side["connection"], side["channel"], side["consumer_tag"]) if delivery else None
               for side, delivery in zip(sides, is_delivery)]
    redelivered = [bool(side["redelivered"]) if delivery else False for side, delivery in zip(sides, is_delivery)]
    publish: list = []
    delivery: list = []
    _pair(0, len(sides), is_delivery, times, streams, redelivered, publish, delivery)
    for p, d in zip(publish, delivery):
        yield _row(how if p is not None and d is not None else None, None if p is None else sides[p],
                   None if d is None else sides[d])


def flow_pairs(bounds: list, is_delivery: list, times: list, streams: list, redelivered: list,
               by_id: list) -> tuple[list, list, list]:
    """The rule over many keys' sides given as columns, sorted by key, then each key's in
    `side_order` (the job's flows tasks): (publish row, delivery row, match) of every flow, in the
    order `flows` yields them key by key; a row is an index into the columns, None for the side left empty.
    `bounds`: where each key's rows begin, then where the last one's end; `streams`: each
    delivery's (connection, channel, consumer tag); `by_id`: whether the side has a message id (a
    key's first side tells how its pairs were matched)."""
    publish: list = []
    delivery: list = []
    match: list = []
    for k in range(len(bounds) - 1):
        start = bounds[k]
        first = len(publish)
        _pair(start, bounds[k + 1], is_delivery, times, streams, redelivered, publish, delivery)
        how = "message_id" if by_id[start] else "body"
        for i in range(first, len(publish)):
            match.append(how if publish[i] is not None and delivery[i] is not None else None)
    return publish, delivery, match


def _pair(start: int, end: int, is_delivery: list, times: list, streams: list, redelivered: list,
          publish: list, delivery: list) -> None:
    """The rule for one key's sides, rows start..end of the columns (in `side_order`): appends each
    flow's publish and delivery row (None: the side left empty): one flow per delivery, in order,
    then one per publish that no delivery took, in order."""
    publishes: list = []  # rows of the key's publishes so far
    paired: set = set()  # indexes into `publishes` that got a delivery
    position: dict = {}  # consumer stream -> index of its next publish
    last: dict = {}  # consumer stream -> publish of its last first delivery
    for row in range(start, end):
        if not is_delivery[row]:
            publishes.append(row)
            continue
        stream = streams[row]
        index = -1
        if redelivered[row] and stream in last:
            index = last[stream]
        else:
            i = position.get(stream, 0)
            if i < len(publishes) and times[publishes[i]] <= times[row]:
                index = i
                position[stream] = i + 1
        if index < 0:  # its publish is outside the capture
            publish.append(None)
            delivery.append(row)
            continue
        last[stream] = index
        paired.add(index)
        publish.append(publishes[index])
        delivery.append(row)
    for index in range(len(publishes)):
        if index not in paired:
            publish.append(publishes[index])
            delivery.append(None)


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


def arrow_flows(sides, publish, delivery, match: list, schema):
    """`_row` column by column, in Arrow: the `message_flows` rows of flows given as rows of
    `sides` (an Arrow table with both sides' columns, as the job stages them), `publish` and
    `delivery` the rows' indexes (Arrow integer arrays, null for the side left empty), `match`
    each flow's (flow_pairs). Returns a table of `schema`'s columns (the table's, less run_id),
    with the same values `_row` gives, None as null."""
    import pyarrow as pa
    import pyarrow.compute as pc

    p = sides.select(PUBLISH_COLUMNS).take(publish)
    d = sides.select(DELIVERY_COLUMNS).take(delivery)

    def either(name):
        return pc.coalesce(p[name], d[name])

    published, delivered, settled = p["published_ns"], d["delivered_ns"], d["settled_ns"]
    no = pa.scalar(False, pa.bool_())
    columns = {"date": either("date"), "capture": either("capture"), "source": either("source"),
               "provisional": pc.or_(pc.fill_null(p["provisional"], no), pc.fill_null(d["provisional"], no)),
               "match": pa.array(match, pa.string()),
               "message_key": d["message_key"], "publish_message_key": p["message_key"],
               "message_id": either("message_id"), "body_sha256": either("body_sha256"),
               "exchange": either("exchange"), "routing_key": either("routing_key"),
               "publisher_connection": p["connection"], "publisher_channel": p["channel"],
               "published_at": _arrow_micros(published), "consumer_connection": d["connection"],
               "consumer_channel": d["channel"], "consumer_tag": d["consumer_tag"], "queue": d["queue"],
               "delivery_tag": d["delivery_tag"], "redelivered": d["redelivered"],
               "delivered_at": _arrow_micros(delivered), "settled_at": _arrow_micros(settled), "outcome": d["outcome"],
               "publish_to_deliver_ms": _arrow_ms(delivered, published),
               "deliver_to_settle_ms": _arrow_ms(settled, delivered), "end_to_end_ms": _arrow_ms(settled, published)}
    return pa.table([pc.cast(columns[field.name], field.type) for field in schema], schema=schema)


def _arrow_micros(ns):
    """micros() of a column: floor division (Arrow's integer division truncates towards zero)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    thousand = pa.scalar(1000, pa.int64())
    quotient = pc.divide(ns, thousand)
    below = pc.and_(pc.less(ns, pa.scalar(0, pa.int64())), pc.not_equal(pc.multiply(quotient, thousand), ns))
    return pc.subtract(quotient, pc.cast(below, pa.int64()))


def _arrow_ms(later, earlier):
    """_ms() of two columns: the exact difference, then divided as a double, as Python does."""
    import pyarrow as pa
    import pyarrow.compute as pc
    return pc.divide(pc.cast(pc.subtract(later, earlier), pa.float64()), pa.scalar(1e6, pa.float64()))
