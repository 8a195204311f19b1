"""The `message_flows` rule: which delivery carried which publish, across connections, and the
journey one message makes across hops.

AMQP carries no end-to-end message id of its own, so pairs are matched on what the messages carry:
the `message-id` property when set, else the body's SHA-256; all the sides of one such key are
taken together. A delivery carries the exchange and routing key of the publish that routed it (the
broker copies them into basic.deliver and basic.get-ok), so within a key a delivery first takes a
publish of its own exchange and routing key: within one consumer stream (connection, channel,
consumer tag) and route, first deliveries take the route's publishes in time order, each only from
publishes before it: a fan-out to several queues pairs every copy with its publish, and a burst of
identical bodies pairs one to one. A redelivery pairs with the publish the earlier delivery of that
message got. Only a delivery that no publish of its route explains, and that was dead-lettered
(its x-first-death-exchange header; dead-lettering rewrites the exchange and routing key), takes a
publish to the exchange the header names (`-dead-letter` matches). What stays unmatched keeps its
row with the other side empty.

Journeys link one message's hops: a publish of the key after a delivery of it that it forwards (a
shovel, a federation link, a consume-and-republish worker) continues that delivery's journey one hop
on; a dead-lettered delivery is a hop of its own. Which delivery a re-publish forwards is told by
what a forwarder does: it publishes on the connection it consumed on, or from the same host while
it still holds the delivery (it settles it after publishing: a shovel's on-confirm and on-publish
ack modes; or it consumed with no ack); the latest such delivery not yet forwarded is taken. A
publish that forwards none starts a journey of its own.

This module is the rule, Spark-free: `flows(sides)` takes one key's publishes and deliveries (rows
of the `publishes` and `deliveries` tables, sorted by `side_order`) and yields `message_flows`
rows. The job's message_flows tasks (amqpcap.job.stages.flows) run the same rule (`KeyRule`) over
many keys' sides given as columns (`flow_pairs`), and make the rows in Arrow, column by column
(`arrow_flows`, the twin of `_row`): only the columns the rule reads become Python values. The
sides reach those tasks staged by the decode tasks, under their keys made column by column
(`arrow_keys`, the twin of `_key`), each in its part of the key space (`KeyParts`).
"""

from __future__ import annotations

from typing import Iterable, Iterator
from zlib import crc32

from amqpcap.rules.common import micros

# The columns of each side the rule and its rows need.
PUBLISH_COLUMNS = ("date", "capture", "source", "provisional", "connection", "client", "channel", "message_key",
                   "published_ns", "message_id", "body_sha256", "exchange", "routing_key")
DELIVERY_COLUMNS = ("date", "capture", "source", "provisional", "connection", "client", "channel", "message_key",
                    "consumer_tag", "delivery_tag", "redelivered", "delivered_ns", "message_id", "body_sha256",
                    "exchange", "routing_key", "queue", "settled_ns", "outcome", "death_exchange")


# A side as the job stages it (amqpcap.job.stages.flows): its key, time and kind, then these columns
# (both sides' together; a column the side's table lacks is null).
SIDE_COLUMNS = tuple(sorted(set(PUBLISH_COLUMNS) | set(DELIVERY_COLUMNS)))


class KeyParts:
    """Which part of the key space each match key falls in: CRC-32 of the key, modulo `parts`, the
    same in every task and run. Compiled: a decode task's publishes and deliveries are staged as
    their match sides a batch at a time (amqpcap.job.stages.flows), and only this step of it is a loop
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
    """The match key: the message id, else the body hash (a message with neither, its body not seen
    whole: its exchange and routing key, absent parts left out as SQL's concat_ws does)."""
    return _key(side.get("message_id"), side.get("body_sha256"), side.get("exchange"), side.get("routing_key"))


def _key(message_id, body_sha256, exchange, routing_key) -> str:
    if message_id is not None:
        return "id:" + message_id
    if body_sha256 is not None:
        return "body|" + body_sha256
    return "|".join(p for p in ("body", exchange, routing_key) if p is not None)


def arrow_keys(message_id, body_sha256, exchange, routing_key):
    """`_key` column by column, in Arrow: the match keys of rows given as string columns."""
    import pyarrow as pa
    import pyarrow.compute as pc
    def text(value):  # typed: inferring a Python value's type imports pandas (amqpcap.process)
        return pa.scalar(value, pa.string())
    by_id = pc.binary_join_element_wise(text("id:"), message_id, text(""))
    by_body = pc.binary_join_element_wise(text("body"), body_sha256, text("|"))
    by_route = pc.binary_join_element_wise(text("body"), exchange, routing_key, text("|"), null_handling="skip")
    return pc.if_else(pc.is_valid(message_id), by_id, pc.if_else(pc.is_valid(body_sha256), by_body, by_route))


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
    rule = KeyRule(is_delivery, [side_time(side) for side in sides],
                   [(side["connection"], side["channel"], side["consumer_tag"]) if delivery else None
                    for side, delivery in zip(sides, is_delivery)],
                   [bool(side["redelivered"]) if delivery else False for side, delivery in zip(sides, is_delivery)],
                   [(side.get("exchange"), side.get("routing_key")) for side in sides],
                   [side.get("death_exchange") if delivery else None for side, delivery in zip(sides, is_delivery)],
                   [(side.get("connection"), host_of(side.get("client"))) for side in sides],
                   [side.get("settled_ns") if delivery else None for side, delivery in zip(sides, is_delivery)],
                   [side.get("outcome") if delivery else None for side, delivery in zip(sides, is_delivery)])
    out = Flows()
    rule.pair(0, len(sides), how, out)
    for i in range(len(out.publish)):
        p, d = out.publish[i], out.delivery[i]
        row = _row(out.match[i], None if p is None else sides[p], None if d is None else sides[d])
        first = sides[out.journey[i]]
        delivered = sides[d]["delivered_ns"] if d is not None else None
        row.update(journey=first["message_key"], hop=out.hop[i], hop_ms=_ms(delivered, out.hop_start[i]),
                   journey_ms=_ms(delivered, side_time(first)))
        yield row


def host_of(endpoint):
    """The host of an endpoint as the tables write it ("10.0.0.1:5672", "[::1]:5672")."""
    return endpoint.rsplit(":", 1)[0] if endpoint else None


# How far back a re-publish (or a dead-lettered delivery) looks among the key's deliveries for the
# one it forwards (or that caused it): a key matched by a common body holds thousands of messages,
# and a forwarder re-publishes what it has just consumed.
FORWARDERS_SEEN = 64


class Flows:
    """What the rule found, one entry per flow, in order: its publish and delivery (indexes into the
    sides; None for the side left empty), how they were matched, the index of the side that
    began its journey, its hop, and when the hop began (ns: its publish's time, a dead-lettering's
    reject or nack; None when unknown)."""

    def __init__(self) -> None:
        self.publish: list = []
        self.delivery: list = []
        self.match: list = []
        self.journey: list = []
        self.hop: list = []
        self.hop_start: list = []

    def add(self, publish, delivery, match, journey: int, hop: int, hop_start) -> None:
        self.publish.append(publish)
        self.delivery.append(delivery)
        self.match.append(match)
        self.journey.append(journey)
        self.hop.append(hop)
        self.hop_start.append(hop_start)


def flow_pairs(bounds: list, is_delivery: list, times: list, streams: list, redelivered: list, by_id: list,
               routes: list, deaths: list, senders: list, settled: list, outcomes: list) -> Flows:
    """The rule over many keys' sides given as columns, sorted by key, then each key's in
    `side_order` (the job's flows tasks): every flow, in the order `flows` yields them key by key.
    `bounds`: where each key's rows begin, then where the last one's end; `streams`: each
    delivery's (connection, channel, consumer tag); `by_id`: whether the side has a message id (a
    key's first side tells how its pairs were matched); `routes`: each side's (exchange, routing
    key); `deaths`: each delivery's death exchange (None: not dead-lettered); `senders`: each side's
    (connection, client host); `settled`, `outcomes`: each delivery's settle time and outcome."""
    rule = KeyRule(is_delivery, times, streams, redelivered, routes, deaths, senders, settled, outcomes)
    out = Flows()
    for k in range(len(bounds) - 1):
        start = bounds[k]
        rule.pair(start, bounds[k + 1], "message_id" if by_id[start] else "body", out)
    return out


class KeyRule:
    """The rule for one key's sides at a time (`pair`), over columns of many keys' sides."""

    def __init__(self, is_delivery: list, times: list, streams: list, redelivered: list, routes: list, deaths: list,
                 senders: list, settled: list, outcomes: list) -> None:
        self.is_delivery, self.times, self.streams, self.redelivered = is_delivery, times, streams, redelivered
        self.routes, self.deaths, self.senders, self.settled, self.outcomes = routes, deaths, senders, settled, outcomes

    def pair(self, start: int, end: int, how: str, out: Flows) -> None:
        """Rows start..end (one key's, in `side_order`) into `out`: one flow per delivery, in order,
        then one per publish that no delivery took, in order."""
        times, routes = self.times, self.routes
        by_route: dict = {}  # route -> the key's publishes of that route so far (rows)
        by_exchange: dict = {}  # exchange -> the same, any routing key (dead-lettered deliveries)
        position: dict = {}  # (consumer stream, route or exchange) -> index of its next publish there
        last: dict = {}  # (consumer stream, route) -> publish of its last first delivery
        paired: set = set()  # publishes that got a delivery
        journey: dict = {}  # side -> (the side that began its journey, its hop) (publishes; paired deliveries)
        forwarders: list = []  # deliveries so far, not yet forwarded by a re-publish
        for row in range(start, end):
            if not self.is_delivery[row]:
                journey[row] = self._continues(row, forwarders, journey, how == "message_id")
                by_route.setdefault(routes[row], []).append(row)
                by_exchange.setdefault(routes[row][0], []).append(row)
                continue
            stream = self.streams[row]
            route = routes[row]
            publish, match = -1, how
            if self.redelivered[row] and (stream, route) in last:
                publish = last[(stream, route)]
            else:
                publish = self._next(by_route.get(route), (stream, route), position, row)
                if publish >= 0:
                    last[(stream, route)] = publish
                elif self.deaths[row] is not None:
                    publish = self._next(by_exchange.get(self.deaths[row]), (stream, self.deaths[row]), position, row)
                    match = how + "-dead-letter"
            if publish < 0:  # its publish is outside the capture: the journey starts here
                journey[row] = (row, 1)
                out.add(None, row, None, row, 1, None)
            else:
                paired.add(publish)
                began, hop = journey[publish]
                hop_start = times[publish]
                if match != how:  # dead-lettered: a hop of its own, from what caused it
                    hop += 1
                    hop_start = self._dead_lettered_at(start, row, publish, journey) or hop_start
                journey[row] = (began, hop)
                out.add(publish, row, match, began, hop, hop_start)
            forwarders.append(row)
        for row in range(start, end):
            if not self.is_delivery[row] and row not in paired:
                began, hop = journey[row]
                out.add(row, None, None, began, hop, times[row])

    def _next(self, publishes, place, position: dict, row: int) -> int:
        """The next publish of `publishes` for a consumer stream's `place`, if it came before `row`."""
        if not publishes:
            return -1
        i = position.get(place, 0)
        if i < len(publishes) and self.times[publishes[i]] <= self.times[row]:
            position[place] = i + 1
            return publishes[i]
        return -1

    def _continues(self, publish: int, forwarders: list, journey: dict, by_id: bool) -> tuple:
        """(journey's first side, hop) of a publish: one hop after the delivery it forwards, else
        its own journey's first hop. A forwarder publishes on the connection it consumed on, or from
        the same host while it still holds the delivery (it settles after publishing, or consumed
        with no ack); the latest such delivery is taken (of the last FORWARDERS_SEEN), and forwards
        once. Matched by body alone, a forwarder publishes to another route than it consumed from
        (the same body to the same route again is likelier a new message: an empty body, a ping)."""
        at = self.times[publish]
        connection, host = self.senders[publish]
        route = self.routes[publish]
        for i in range(len(forwarders) - 1, max(-1, len(forwarders) - 1 - FORWARDERS_SEEN), -1):
            delivery = forwarders[i]
            if not by_id and self.routes[delivery] == route:
                continue
            their_connection, their_host = self.senders[delivery]
            settled = self.settled[delivery]
            holding = settled is None or settled >= at or self.outcomes[delivery] == "auto-ack"
            if their_connection == connection or (host is not None and their_host == host and holding):
                del forwarders[i]
                began, hop = journey[delivery]
                return began, hop + 1
        return publish, 1

    def _dead_lettered_at(self, start: int, row: int, publish: int, journey: dict):
        """When the message was dead-lettered, as far as the capture tells: the settle time of its
        last earlier delivery on the same journey that was rejected or nacked (a poison message's
        last delivery; an expiry or a queue limit shows none)."""
        began = journey[publish][0]
        for earlier in range(row - 1, max(start, row - FORWARDERS_SEEN) - 1, -1):
            if self.is_delivery[earlier] and journey.get(earlier, (None,))[0] == began \
                    and self.outcomes[earlier] in ("nack", "reject"):
                return self.settled[earlier]
        return None


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


def arrow_flows(sides, publish, delivery, journey, out: Flows, schema):
    """`_row` (and `flows`' journey columns) column by column, in Arrow: the `message_flows` rows of
    flows given as rows of `sides` (an Arrow table with both sides' columns and their time `ts_ns`,
    as the job stages them), `publish`, `delivery` and `journey` the rows' indexes (Arrow integer
    arrays, null for the side left empty), and the rest of what the rule found in `out`
    (flow_pairs). Returns a table of `schema`'s columns (the table's, less run_id), with the same
    values `flows` gives, None as null."""
    import pyarrow as pa
    import pyarrow.compute as pc

    p = sides.select(PUBLISH_COLUMNS).take(publish)
    d = sides.select(DELIVERY_COLUMNS).take(delivery)
    first = sides.select(["message_key", "ts_ns"]).take(journey)

    def either(name):
        return pc.coalesce(p[name], d[name])

    published, delivered, settled = p["published_ns"], d["delivered_ns"], d["settled_ns"]
    no = pa.scalar(False, pa.bool_())
    columns = {"date": either("date"), "capture": either("capture"), "source": either("source"),
               "provisional": pc.or_(pc.fill_null(p["provisional"], no), pc.fill_null(d["provisional"], no)),
               "match": pa.array(out.match, pa.string()),
               "message_key": d["message_key"], "publish_message_key": p["message_key"],
               "message_id": either("message_id"), "body_sha256": either("body_sha256"),
               "exchange": either("exchange"), "routing_key": either("routing_key"),
               "publisher_connection": p["connection"], "publisher_channel": p["channel"],
               "published_at": _arrow_micros(published), "consumer_connection": d["connection"],
               "consumer_channel": d["channel"], "consumer_tag": d["consumer_tag"], "queue": d["queue"],
               "delivery_tag": d["delivery_tag"], "redelivered": d["redelivered"],
               "delivered_at": _arrow_micros(delivered), "settled_at": _arrow_micros(settled), "outcome": d["outcome"],
               "publish_to_deliver_ms": _arrow_ms(delivered, published),
               "deliver_to_settle_ms": _arrow_ms(settled, delivered), "end_to_end_ms": _arrow_ms(settled, published),
               "journey": first["message_key"], "hop": pa.array(out.hop, pa.int32()),
               "hop_ms": _arrow_ms(delivered, pa.array(out.hop_start, pa.int64())),
               "journey_ms": _arrow_ms(delivered, first["ts_ns"])}
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
