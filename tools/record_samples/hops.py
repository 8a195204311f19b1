"""Messages that travel more than one hop inside the broker: a dynamic shovel that re-publishes
(its own Erlang amqp_client connections are in the capture) and dead-lettering (a broker-internal
re-route, not on the wire).  Besides the usual facts, expected.json gets `journeys`: per message_id,
every publish and delivery of it in order, as the scenario made them happen.

Everything is known by construction: each message is sent alone, and the scenario waits until it
has completed its whole journey (for the shovel: until the shovel's own ack of its source delivery
has reached the broker, asked with rabbitmqctl, not from the capture) before the next one is sent,
so delivery tags, publish sequence numbers and confirm frames cannot be batched or reordered.  The
shovel's behaviour (channels, declarations, qos, confirm mode, how it closes) is that of
rabbit_amqp091_shovel / rabbit_shovel_parameters / amqp_client 3.10.8, read from the broker's own
modules.  Which shovel connection is the source and which the destination is asked from the broker
(rabbitmqctl list_channels: the channel with a consumer, the channel in confirm mode)."""
from __future__ import annotations

import json
import time
from urllib.parse import quote

from . import broker
from .broker import HOST4, PASSWORD, USER, VHOST
from .scenarios import PIKA_CH, pika_channel, pika_connect, pump, scenario

SHOVEL = "hop"


def _port(conn) -> int:
    """The client's ephemeral port of a pika BlockingConnection (its socket, not the capture)."""
    return conn._impl._transport._sock.getsockname()[1]


def _wait(cond, what: str, timeout: float = 30.0, every: float = 0.2):
    deadline = time.time() + timeout
    while True:
        got = cond()
        if got:
            return got
        if time.time() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(every)


def _queues() -> dict:
    out = broker.ctl("list_queues", "-p", VHOST, "-q", "--no-table-headers", "name", "messages",
                     "messages_unacknowledged", "consumers").stdout
    rows = {}
    for line in out.splitlines():
        if line.strip():
            name, msgs, unacked, consumers = line.split("\t")
            rows[name] = (int(msgs), int(unacked), int(consumers))
    return rows


def _channels() -> list[tuple[int, int, bool, int]]:
    """(client port, channel number, confirm mode, consumers) of every channel in VHOST."""
    out = broker.ctl("list_channels", "-q", "--no-table-headers", "name", "vhost", "number", "confirm",
                     "consumer_count").stdout
    rows = []
    for line in out.splitlines():
        if not line.strip():
            continue
        name, vhost, number, confirm, consumers = line.split("\t")
        if vhost == VHOST:  # name: "127.0.0.1:PORT -> 127.0.0.1:5672 (N)"
            rows.append((int(name.split(" ")[0].rsplit(":", 1)[1]), int(number), confirm == "true",
                         int(consumers)))
    return rows


def _connection_ports() -> set[int]:
    out = broker.ctl("list_connections", "-q", "--no-table-headers", "peer_port").stdout
    return {int(x) for x in out.split()}


def _client_properties(port: int) -> str:
    """client_properties of the connection from `port`, as rabbitmqctl prints them."""
    out = broker.ctl("list_connections", "-q", "--no-table-headers", "peer_port", "client_properties").stdout
    return next(line.split("\t", 1)[1] for line in out.splitlines() if line.split("\t", 1)[0] == str(port))


def shovel_label() -> str:
    return f"RabbitMQ shovel (Erlang amqp_client {broker.broker_version().split()[-1]})"


def hop(role, by, exchange, routing_key, queue, port, channel, **extra) -> dict:
    return {"role": role, "by": by, "exchange": exchange, "routing_key": routing_key, "queue": queue,
            "client_port": port, "channel": channel} | extra


# ================================================================== shovel
@scenario("A dynamic shovel (rabbitmq_shovel, ack-mode on-confirm, src-prefetch-count 10) in vhost "
          "amqpcap moves messages from queue hop.src to exchange hop.out with the new routing key "
          "hop.forwarded (dest-exchange-key), which feeds queue hop.dst; both its URIs point to this "
          "broker, so its two Erlang amqp_client connections (consumer on hop.src, confirm-mode "
          "publisher to hop.out) are in the capture, handshakes and closes included. A pika publisher "
          "sends order-0001..order-0005 to exchange orders (routing key orders.new -> hop.src) one at a "
          "time, then order-dup the same way and again with routing key orders.audit (-> hop.other), "
          "so that message_id is not unique; a pika consumer acks every delivery from hop.dst and "
          "hop.other. Then the shovel is deleted (clear_parameter) and the clients close.",
          manual_capture=True)
def shovel_hops(ctx):
    import pika
    exp = ctx.exp
    broker.enable_plugins("rabbitmq_shovel")
    ctx.start_capture()                                  # before any connection, the shovel's included

    # -- publisher / topology (pika connection P)
    pub = pika_connect(exp)
    pch = pika_channel(exp, pub)
    pch.exchange_declare("orders", "direct"); exp.rpc("exchange.declare")
    pch.exchange_declare("hop.out", "direct"); exp.rpc("exchange.declare")
    for q in ("hop.src", "hop.dst", "hop.other"):
        pch.queue_declare(q); exp.rpc("queue.declare")
    pch.queue_bind("hop.src", "orders", "orders.new"); exp.rpc("queue.bind")
    pch.queue_bind("hop.other", "orders", "orders.audit"); exp.rpc("queue.bind")
    pch.queue_bind("hop.dst", "hop.out", "hop.forwarded"); exp.rpc("queue.bind")

    # -- final consumer (pika connection C): one channel, one consumer per queue
    con = pika_connect(exp)
    cch = pika_channel(exp, con)
    got = []
    cch.basic_consume("hop.dst", lambda ch, m, p, b: got.append((m, p, b))); exp.rpc("basic.consume")
    cch.basic_consume("hop.other", lambda ch, m, p, b: got.append((m, p, b))); exp.rpc("basic.consume")
    pport, cport = _port(pub), _port(con)

    # -- the shovel
    uri = f"amqp://{quote(USER, safe='')}:{quote(PASSWORD, safe='')}@{HOST4}:5672/{quote(VHOST, safe='')}"
    definition = {"src-protocol": "amqp091", "src-uri": uri, "src-queue": "hop.src",
                  "dest-protocol": "amqp091", "dest-uri": uri, "dest-exchange": "hop.out",
                  "dest-exchange-key": "hop.forwarded", "ack-mode": "on-confirm", "src-prefetch-count": 10}
    broker.ctl("set_parameter", "-p", VHOST, "shovel", SHOVEL, json.dumps(definition))
    _wait(lambda: _queues().get("hop.src", (0, 0, 0))[2] == 1, "the shovel's consumer on hop.src")
    shovel_chans = [c for c in _channels() if c[0] not in (pport, cport)]
    src = [c for c in shovel_chans if c[3] == 1]
    dst = [c for c in shovel_chans if c[2]]
    assert len(shovel_chans) == 2 and len(src) == 1 and len(dst) == 1, shovel_chans
    sport, dport = src[0][0], dst[0][0]
    assert (src[0][1], dst[0][1]) == (1, 1), shovel_chans
    for port in (sport, dport):  # what the broker was told in start-ok (not read from the capture)
        cp = _client_properties(port)
        assert f'{{"connection_name","Shovel {SHOVEL}"}}' in cp and '{"product","RabbitMQ"}' in cp \
            and '{"platform","Erlang"}' in cp, cp
    label = shovel_label()
    for _ in ("source", "destination"):
        # amqp_client: PLAIN (first of its mechanisms the broker offers), channel_max 2047,
        # heartbeat 10 (amqp_params_network defaults; the URI sets neither)
        exp.lib_connect(label, USER, "PLAIN")
    # source connection (connect_source, then init_source after init_dest):
    exp.lib_channel()                                   # channel 1, kept for the consumer
    exp.lib_channel()                                   # ensure_queue: channel 2 ...
    exp.rpc("queue.declare")                            # ... queue.declare passive=1 hop.src (it exists)
    exp.rpc("channel.close", code=200)                  # ... amqp_channel:close/1: 200 "Goodbye"
    exp.rpc("basic.qos")                                # prefetch_count 10
    exp.rpc("basic.consume")                            # server-generated consumer tag
    # destination connection: channel 1; dest-exchange needs no declaration; confirm mode
    exp.lib_channel()
    exp.rpc("confirm.select")

    journeys = {}

    def one_through_shovel(mid: str, n: int, body: bytes, props):
        """publish -> hop.src -> shovel (delivery tag n, publish seq n) -> hop.dst -> consumer."""
        pch.basic_publish("orders", "orders.new", body, props)
        exp.c("basic.publish"); exp.msg("published"); exp.max_body(len(body))
        pump(con, lambda: len(got) == len(seen) + 1)
        m, p, b = got[-1]
        assert (m.exchange, m.routing_key, m.redelivered, p.message_id, b) == \
            ("hop.out", "hop.forwarded", False, mid, body), (m, p, b)
        assert p.headers == props.headers and p.content_type == props.content_type, p
        seen.append(mid)
        cch.basic_ack(m.delivery_tag); exp.c("basic.ack"); exp.msg("acked")
        # wait for the shovel's ack of its source delivery: it follows the confirm, so the next
        # message cannot share a confirm frame or a source ack with this one
        _wait(lambda: _queues()["hop.src"][:2] == (0, 0), f"hop.src settled after {mid}")
        exp.s("basic.deliver"); exp.msg("delivered")    # broker -> shovel source (tag n)
        exp.c("basic.publish"); exp.msg("published")    # shovel dest -> hop.out (seq n)
        exp.s("basic.ack"); exp.msg("confirm_acks"); exp.msg("confirmed_messages")  # multiple=0
        exp.c("basic.ack"); exp.msg("acked")            # shovel source ack, tag n, multiple=0
        exp.s("basic.deliver"); exp.msg("delivered")    # hop.dst -> consumer
        journeys.setdefault(mid, []).extend([
            hop("publish", "client", "orders", "orders.new", "hop.src", pport, 1),
            hop("deliver", "shovel", "orders", "orders.new", "hop.src", sport, 1, delivery_tag=n),
            hop("publish", "shovel", "hop.out", "hop.forwarded", "hop.dst", dport, 1, publish_seq=n),
            hop("deliver", "consumer", "hop.out", "hop.forwarded", "hop.dst", cport, 1,
                delivery_tag=m.delivery_tag),
        ])
        return m.delivery_tag

    seen: list[str] = []
    tags = []
    for k in range(1, 6):
        mid = f"order-{k:04d}"
        props = pika.BasicProperties(message_id=mid, content_type="application/json",
                                     headers={"hop": "client"})
        tags.append(one_through_shovel(mid, k, json.dumps({"order": k, "item": "widget"}).encode(), props))
    dup = "order-dup"
    props = pika.BasicProperties(message_id=dup, content_type="application/json", headers={"hop": "client"})
    tags.append(one_through_shovel(dup, 6, b'{"order": "dup", "via": "orders.new"}', props))
    body = b'{"order": "dup", "via": "orders.audit"}'
    pch.basic_publish("orders", "orders.audit", body, props)
    exp.c("basic.publish"); exp.msg("published"); exp.max_body(len(body))
    pump(con, lambda: len(got) == 7)
    m, p, b = got[-1]
    assert (m.exchange, m.routing_key, p.message_id, b) == ("orders", "orders.audit", dup, body), (m, p)
    cch.basic_ack(m.delivery_tag); exp.c("basic.ack"); exp.msg("acked")
    exp.s("basic.deliver"); exp.msg("delivered")
    tags.append(m.delivery_tag)
    assert tags == list(range(1, 8)), tags
    journeys[dup] += [hop("publish", "client", "orders", "orders.audit", "hop.other", pport, 1),
                      hop("deliver", "consumer", "orders", "orders.audit", "hop.other", cport, 1,
                          delivery_tag=m.delivery_tag)]

    # -- delete the shovel: the worker's terminate closes source then destination, each with
    # amqp_connection:close/2 (connection.close 200 "Goodbye"; its channels go without channel.close)
    broker.ctl("clear_parameter", "-p", VHOST, "shovel", SHOVEL)
    _wait(lambda: not ({sport, dport} & _connection_ports()), "the shovel's connections to close")
    exp.rpc("connection.close", code=200)               # source
    exp.rpc("connection.close", code=200)               # destination
    assert _queues()["hop.src"] == (0, 0, 0)

    cch.close(); exp.rpc("basic.cancel", 2); exp.rpc("channel.close", code=PIKA_CH)
    con.close(); exp.lib_close()
    pch.close(); exp.rpc("channel.close", code=PIKA_CH)
    pub.close(); exp.lib_close()

    exp.journeys = [{"message_id": mid, "hops": hops} for mid, hops in journeys.items()]
    exp.note(f"Connections by client port: pika publisher {pport}, pika consumer {cport}, shovel "
             f"source {sport} (consumer on hop.src), shovel destination {dport} (publisher to "
             f"hop.out); which shovel connection is which was read from rabbitmqctl list_channels while "
             f"it ran (the channel with the consumer, the channel in confirm mode). The shovel "
             f"'{SHOVEL}' has ack-mode on-confirm and src-prefetch-count 10; its URIs are "
             f"amqp://amqpcap:***@127.0.0.1:5672/amqpcap for both ends. Both shovel connections "
             f"use PLAIN with user amqpcap, tune-ok channel_max 2047 and heartbeat 10 (amqp_client "
             f"defaults), so heartbeat frames appear on them within seconds (both sides check every "
             f"~5 s): how many depends on timing, heartbeats_min stays 0 (they are not methods). "
             f"On the source connection the shovel "
             f"opens channel 1, then channel 2 only for a passive queue.declare of hop.src which it "
             f"closes with 200 (this is the channel.close 200 first in reply_codes), then basic.qos "
             f"10 and basic.consume on channel 1. On the destination connection: channel 1, "
             f"confirm.select, no declaration (dest-exchange). Each message is sent alone and the "
             f"scenario waits until hop.src has no message and no unacked one (rabbitmqctl) before "
             f"the next, so every shovel publish gets its own broker basic.ack (multiple=0) and "
             f"the shovel acks its source delivery alone (multiple=0): these counts are exact for "
             f"this construction. The shovel re-publishes with the same properties (message_id, "
             f"content_type and the client's headers {{'hop': 'client'}} arrive unchanged: the "
             f"consumer asserts it; no x-shovelled header, add-forward-headers is off) and the "
             f"delivery at the consumer carries exchange hop.out, routing key hop.forwarded. "
             f"order-dup is two messages: one via orders.new and the shovel (delivery tag 6 at the "
             f"consumer) and one published afterwards via orders.audit to hop.other (tag 7); its "
             f"journey lists both, in that order. clear_parameter makes the worker close the source "
             f"connection, then the destination one, each with connection.close 200 and no "
             f"channel.close or basic.cancel before it. The consumer's channel close cancels its 2 "
             f"consumers first (pika). Connection names in client-properties: the shovel's "
             f"start-ok carries connection_name 'Shovel {SHOVEL}', product 'RabbitMQ', platform "
             f"'Erlang' (asserted with rabbitmqctl list_connections). Hops are listed in causal order; "
             f"`client_port` and `channel` say which connection/channel carried each hop.")


# ================================================================== dead-lettering
DELIVERY_LIMIT = 2
DEAD_KEY = "dead"
QUORUM_MSGS = 3
# consumer settlement of the 1st, 2nd, 3rd delivery of each quorum message (all requeue=1)
QUORUM_SETTLE = ("basic.nack", "basic.reject", "basic.nack")


def _plain(v):
    """x-death as pika decodes it, with the timestamp left out (it changes every run)."""
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in sorted(v.items()) if k != "time"}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, bytes):
        return v.decode()
    return v


@scenario("Dead-lettering: a quorum queue dlx.work (x-delivery-limit 2, x-dead-letter-exchange dlx, "
          "x-dead-letter-routing-key dead) fed by exchange jobs (routing key job.quorum); a pika "
          "publisher sends job-q1..job-q3 one at a time; the consumer (prefetch 1) settles each "
          "delivery with requeue=1 - basic.nack, basic.reject, basic.nack - so every message is "
          "delivered 3 times (2 redeliveries) and then dead-lettered by the broker (delivery limit "
          "exceeded) through the direct exchange dlx to the classic queue dlx.dead, whose consumer "
          "acks it. One more message, job-c1, goes to the classic queue dlx.classic (same dead-letter "
          "exchange and key) and is dead-lettered by basic.reject requeue=0.")
def dead_letter_hops(ctx):
    import pika
    exp = ctx.exp
    pub = pika_connect(exp)
    pch = pika_channel(exp, pub)
    dl_args = {"x-dead-letter-exchange": "dlx", "x-dead-letter-routing-key": DEAD_KEY}
    pch.exchange_declare("jobs", "direct"); exp.rpc("exchange.declare")
    pch.exchange_declare("dlx", "direct"); exp.rpc("exchange.declare")
    pch.queue_declare("dlx.work", durable=True,
                      arguments={"x-queue-type": "quorum", "x-delivery-limit": DELIVERY_LIMIT} | dl_args)
    exp.rpc("queue.declare")
    pch.queue_declare("dlx.classic", arguments=dl_args); exp.rpc("queue.declare")
    pch.queue_declare("dlx.dead"); exp.rpc("queue.declare")
    pch.queue_bind("dlx.work", "jobs", "job.quorum"); exp.rpc("queue.bind")
    pch.queue_bind("dlx.classic", "jobs", "job.classic"); exp.rpc("queue.bind")
    pch.queue_bind("dlx.dead", "dlx", DEAD_KEY); exp.rpc("queue.bind")

    con = pika_connect(exp)
    wch = pika_channel(exp, con)                         # channel 1: dlx.work and dlx.classic
    dch = pika_channel(exp, con)                         # channel 2: dlx.dead
    work, dead = [], []
    wch.basic_qos(prefetch_count=1); exp.rpc("basic.qos")
    wch.basic_consume("dlx.work", lambda ch, m, p, b: work.append((m, p, b))); exp.rpc("basic.consume")
    wch.basic_consume("dlx.classic", lambda ch, m, p, b: work.append((m, p, b))); exp.rpc("basic.consume")
    dch.basic_consume("dlx.dead", lambda ch, m, p, b: dead.append((m, p, b))); exp.rpc("basic.consume")
    pport, cport = _port(pub), _port(con)

    journeys, xdeath_seen = [], {}

    def dead_lettered(mid: str, body: bytes, queue: str, reason: str, hops: list):
        pump(con, lambda: len(dead) == len(journeys) + 1)
        m, p, b = dead[-1]
        assert (m.exchange, m.routing_key, m.redelivered, p.message_id, b) == \
            ("dlx", DEAD_KEY, False, mid, body), (m, p)
        death = p.headers["x-death"]
        assert len(death) == 1 and death[0]["reason"] == reason and death[0]["queue"] == queue \
            and death[0]["count"] == 1, death
        assert "x-delivery-count" not in p.headers, p.headers
        xdeath_seen[mid] = _plain(dict(p.headers))
        exp.s("basic.deliver"); exp.msg("delivered")
        dch.basic_ack(m.delivery_tag); exp.c("basic.ack"); exp.msg("acked")
        assert m.delivery_tag == len(journeys) + 1
        hops += [hop("publish", "broker-dead-letter", "dlx", DEAD_KEY, "dlx.dead", None, None,
                     reason=reason, from_queue=queue),
                 hop("deliver", "consumer", "dlx", DEAD_KEY, "dlx.dead", cport, 2,
                     delivery_tag=m.delivery_tag, redelivered=False, settle="basic.ack")]

    wtag = 0
    for k in range(1, QUORUM_MSGS + 1):
        mid, body = f"job-q{k}", f"quorum job {k}".encode()
        pch.basic_publish("jobs", "job.quorum", body, pika.BasicProperties(message_id=mid))
        exp.c("basic.publish"); exp.msg("published"); exp.max_body(len(body))
        hops = [hop("publish", "client", "jobs", "job.quorum", "dlx.work", pport, 1)]
        for n, settle in enumerate(QUORUM_SETTLE):
            pump(con, lambda: len(work) == wtag + 1)
            m, p, b = work[-1]
            wtag += 1
            count = (p.headers or {}).get("x-delivery-count")
            # rabbit_fifo_client: a message returned before is delivered with redelivered=1 and
            # the header x-delivery-count = its returns so far
            assert (m.delivery_tag, m.exchange, m.routing_key, m.redelivered, p.message_id, b, count) == \
                (wtag, "jobs", "job.quorum", n > 0, mid, body, n if n else None), (m, p)
            exp.s("basic.deliver"); exp.msg("delivered"); exp.msg("redelivered", int(n > 0))
            if settle == "basic.nack":
                wch.basic_nack(m.delivery_tag, requeue=True); exp.msg("nacked")
            else:
                wch.basic_reject(m.delivery_tag, requeue=True); exp.msg("rejected")
            exp.c(settle); exp.msg("requeued")
            hops.append(hop("deliver", "consumer", "jobs", "job.quorum", "dlx.work", cport, 1,
                            delivery_tag=m.delivery_tag, redelivered=n > 0, x_delivery_count=count,
                            settle=settle, requeue=True))
        # 3rd return: delivery_count 3 > x-delivery-limit 2 -> rabbit_fifo dead-letters it
        dead_lettered(mid, body, "dlx.work", "delivery_limit", hops)
        con.sleep(0.3)
        assert len(work) == wtag, "a quorum message was delivered again after its dead-lettering"
        journeys.append({"message_id": mid, "queue_type": "quorum", "deliveries": 3, "redeliveries": 2,
                         "dead_lettered": "delivery_limit", "hops": hops})

    mid, body = "job-c1", b"classic job 1"
    pch.basic_publish("jobs", "job.classic", body, pika.BasicProperties(message_id=mid))
    exp.c("basic.publish"); exp.msg("published"); exp.max_body(len(body))
    hops = [hop("publish", "client", "jobs", "job.classic", "dlx.classic", pport, 1)]
    pump(con, lambda: len(work) == wtag + 1)
    m, p, b = work[-1]
    wtag += 1
    assert (m.delivery_tag, m.exchange, m.routing_key, m.redelivered, p.message_id, b) == \
        (wtag, "jobs", "job.classic", False, mid, body), (m, p)
    exp.s("basic.deliver"); exp.msg("delivered")
    wch.basic_reject(m.delivery_tag, requeue=False); exp.c("basic.reject"); exp.msg("rejected")
    hops.append(hop("deliver", "consumer", "jobs", "job.classic", "dlx.classic", cport, 1,
                    delivery_tag=m.delivery_tag, redelivered=False, settle="basic.reject", requeue=False))
    dead_lettered(mid, body, "dlx.classic", "rejected", hops)
    journeys.append({"message_id": mid, "queue_type": "classic", "deliveries": 1, "redeliveries": 0,
                     "dead_lettered": "rejected", "hops": hops})

    wch.close(); exp.rpc("basic.cancel", 2); exp.rpc("channel.close", code=PIKA_CH)
    dch.close(); exp.rpc("basic.cancel"); exp.rpc("channel.close", code=PIKA_CH)
    con.close(); exp.lib_close()
    pch.close(); exp.rpc("channel.close", code=PIKA_CH)
    pub.close(); exp.lib_close()

    exp.journeys = journeys
    q1 = json.dumps(xdeath_seen["job-q1"], sort_keys=True, default=str)
    c1 = json.dumps(xdeath_seen["job-c1"], sort_keys=True, default=str)
    exp.note(f"Client ports: publisher {pport}, consumer {cport} (channel 1: dlx.work with basic.qos "
             f"prefetch 1, and dlx.classic; channel 2: dlx.dead). Each message is sent alone and "
             f"followed to dlx.dead before the next. Quorum messages: delivery 1 (redelivered=0) "
             f"basic.nack requeue=1, delivery 2 (redelivered=1, header x-delivery-count 1) basic.reject "
             f"requeue=1, delivery 3 (redelivered=1, x-delivery-count 2) basic.nack requeue=1; "
             f"rabbit_fifo counts returns and dead-letters a message whose count exceeds "
             f"x-delivery-limit (3 > 2), so each is delivered exactly 3 times, redelivered twice, "
             f"and the consumer sees no 4th delivery (asserted). Delivery tags on channel 1: "
             f"job-q1 1-3, job-q2 4-6, job-q3 7-9, job-c1 10; on channel 2: 1-4 in the same order. "
             f"The dead-lettering is broker-internal (at-most-once, the default strategy): no frame "
             f"for it; what shows it on the wire is the basic.deliver on dlx.dead with exchange dlx, routing "
             f"key {DEAD_KEY}, redelivered=0 and the original properties plus x-death; its hop in "
             f"`journeys` has client_port/channel null. Headers the dlx.dead consumer saw (x-death "
             f"'time' left out), quorum job-q1: {q1}; classic job-c1: {c1}. job-q2 and job-q3 look "
             f"like job-q1 with their own ids. The dead-lettered copy carries no x-delivery-count "
             f"(the quorum queue adds that header only to its own deliveries). The dlx.work "
             f"queue.declare carries x-queue-type "
             f"quorum, x-delivery-limit 2 (pika encodes it as I, signed 32-bit), x-dead-letter-exchange dlx, "
             f"x-dead-letter-routing-key {DEAD_KEY} and durable=1. Channel close: pika cancels the "
             f"channel's consumers first (2 on channel 1, 1 on channel 2).")
