"""One function per scenario.  Each one drives real clients against the loopback broker and
states, in ctx.exp, every AMQP method it causes (C>S) and every method the broker must answer
(S>C).  Those counts come from the code below, never from decoding the capture."""
from __future__ import annotations

import asyncio
import datetime
import decimal
import os
import signal
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

from . import broker
from .broker import FORBIDDEN_VHOST, HOST4, HOST6, PASSWORD, RPASSWORD, RUSER, USER, VHOST
from .raw import FRAME_BODY, FRAME_HEADER, FV, RawClient, frame, header_payload, method_frame


@dataclass
class Scenario:
    name: str
    fn: object
    description: str
    fmt: str = "pcap"            # pcap | pcapng | pcap.gz
    interfaces: tuple = (("lo", None),)
    link_types: tuple = ("EN10MB",)
    nano: bool = False
    manual_capture: bool = False  # the scenario starts the capture itself (mid-stream)
    out_dir: str = ""            # below data/samples/ (tls.py: "tls")
    bpf: str = "tcp port 5672"   # the capture filter
    tls_options: dict | None = None  # Erlang ssl options for the broker's TLS listener (broker.ensure_broker)
    buffer_kib: int | None = None    # tcpdump -B
    broker_conf: dict | None = None  # rabbitmq.conf settings added for this scenario (broker.ensure_broker)
    rabbit_env: dict | None = None   # rabbit app env added to advanced.config for this scenario
    record_config: bool = False      # expected.json also gets broker_config and capture.tcpdump_stats/_retransmissions


SCENARIOS: dict[str, Scenario] = {}


def scenario(description, **kw):
    def deco(fn):
        SCENARIOS[fn.__name__] = Scenario(fn.__name__, fn, description, **kw)
        return fn
    return deco


def _ver(mod):
    import importlib.metadata as md
    return md.version(mod)


PIKA_CH = 0      # pika BlockingChannel.close() default reply_code
PY_AMQP_CLOSE = 0  # py-amqp Channel.close() / Connection.close() default reply_code (kombu too)
AIORMQ_CLOSE = 200  # aiormq closes channel and connection with REPLY_SUCCESS


def pika_label():
    return f"pika {_ver('pika')}"


# ------------------------------------------------------------------ pika helpers
def pika_connect(exp, host=HOST4, user=USER, password=PASSWORD, **kw):
    import pika
    params = pika.ConnectionParameters(host=host, port=5672, virtual_host=VHOST,
                                       credentials=pika.PlainCredentials(user, password), **kw)
    conn = pika.BlockingConnection(params)
    exp.lib_connect(pika_label(), user, "PLAIN", ip=6 if ":" in host else 4)
    return conn


def pika_channel(exp, conn):
    ch = conn.channel()
    exp.lib_channel()
    return ch


def pump(conn, cond, timeout=15.0):
    deadline = time.time() + timeout
    while not cond():
        if time.time() > deadline:
            raise TimeoutError("condition not reached")
        conn.process_data_events(time_limit=0.05)


def all_types_table():
    """Every field-value tag RabbitMQ parses, extremes included, plus nesting."""
    return [
        ("S_longstr", FV("S", "h\u00e9llo w\u00f6rld")),
        ("T_timestamp", FV("T", 1700000000)),
        ("b_int8", FV("b", -128)),
        ("B_uint8", FV("B", 255)),
        ("s_int16", FV("s", -32768)),
        ("u_uint16", FV("u", 65535)),
        ("I_int32", FV("I", -2147483648)),
        ("i_uint32", FV("i", 4294967295)),
        ("d_double", FV("d", -2.5e-300)),
        ("f_float", FV("f", 1.5)),
        ("l_int64", FV("l", -9223372036854775808)),
        ("t_true", FV("t", True)),
        ("t_false", FV("t", False)),
        ("D_decimal", FV("D", (2, 12345))),          # 123.45
        ("D_negative", FV("D", (3, -1500))),         # -1.500 (value as signed int32 0xFFFFFA24)
        ("F_table", FV("F", [("inner", FV("F", [("deep", FV("I", 42)), ("empty", FV("F", []))])),
                             ("n", FV("b", 1))])),
        ("A_array", FV("A", [FV("S", "a"), FV("I", 1), FV("A", [FV("t", False), FV("V")]),
                             FV("F", [("k", FV("u", 7))]), FV("A", [])])),
        ("x_bytes", FV("x", b"\x00\x01\xfe\xff")),
        ("V_void", FV("V")),
        # last on purpose: Wireshark 4.0 does not know "L" and stops decoding the table there
        ("L_uint64", FV("L", 18446744073709551615)),
    ]


# ================================================================== scenarios
@scenario("Publish/consume with all 14 basic properties; a raw client hand-encodes a headers table "
          "with every field type RabbitMQ parses (S T b B s u I i d f l L t D F A x V, nested, negative "
          "decimal); an empty-body message with no properties; pika publishes one with all pika types; "
          "pika consumes all three and acks (one single ack, one multiple ack).")
def rich_properties(ctx):
    exp, q = ctx.exp, "amqpcap.rich"
    c = pika_connect(exp)
    ch = pika_channel(exp, c)
    ch.queue_declare(q); exp.rpc("queue.declare")

    r = RawClient(exp).open(USER, PASSWORD, VHOST)
    r.channel(1)
    props = {"content-type": "application/json", "content-encoding": "identity",
             "headers": all_types_table(), "delivery-mode": 2, "priority": 7,
             "correlation-id": "corr-0001", "reply-to": "amqpcap.replies", "expiration": "600000",
             "message-id": "msg-rich-0001", "timestamp": 1700000000, "type": "rich.test",
             "user-id": USER, "app-id": "amqpcap-recorder", "cluster-id": "cluster-x"}
    r.publish(1, "", q, b'{"all": "properties"}', props)
    r.publish(1, "", q, b"", None)  # no properties at all, empty body (no body frame)
    r.close_channel(1)
    r.close()

    import pika
    pprops = pika.BasicProperties(
        content_type="text/plain", content_encoding="utf-8",
        headers={"str": "v", "int": -5, "big": 2 ** 40, "bool": True, "none": None,
                 "bytes": b"\x00\xff", "list": [1, "two", [3]], "dict": {"a": {"b": 1}},
                 "dec": decimal.Decimal("-1.25"),
                 "when": datetime.datetime(2024, 1, 2, 3, 4, 5)},
        delivery_mode=1, priority=0, correlation_id="corr-0002", reply_to="amqpcap.replies",
        expiration="60000", message_id="msg-rich-0002", timestamp=1700000001, type="pika.test",
        user_id=USER, app_id="pika", cluster_id="cluster-y")
    ch.basic_publish("", q, "pika body \u2713".encode(), pprops)
    exp.c("basic.publish"); exp.msg("published")

    got = []
    tag = ch.basic_consume(q, lambda chan, m, p, b: got.append(m))
    exp.rpc("basic.consume")
    pump(c, lambda: len(got) == 3)
    exp.s("basic.deliver", 3); exp.msg("delivered", 3)
    ch.basic_ack(got[0].delivery_tag); exp.c("basic.ack")
    ch.basic_ack(got[2].delivery_tag, multiple=True); exp.c("basic.ack")
    exp.msg("acked", 3); exp.msg("acked_multiple_frames")
    ch.basic_cancel(tag); exp.rpc("basic.cancel")
    ch.queue_delete(q); exp.rpc("queue.delete")
    ch.close(); exp.rpc("channel.close", code=PIKA_CH)
    c.close(); exp.lib_close()
    exp.max_body(len(b'{"all": "properties"}'))
    exp.note("Raw client message 1 carries all 14 properties (cluster-id included, RabbitMQ 3.10 accepts "
             "and forwards it) and the hand-encoded table; headers key names start with the tag. "
             "D_negative is scale 3, value bytes FF FF FA 24 (-1500 as signed int32 = -1.500). "
             "Message 2 has property flags 0 and body-size 0 (header frame, no body frame). "
             "Delivered in publish order: raw#1, raw#2, pika#3.")


@scenario("Publisher confirms: 5 publishes each awaited (one basic.ack each), a mandatory unroutable "
          "publish (basic.return 312 then basic.ack), a reject-publish overflow queue (ack then broker "
          "basic.nack), and a raw burst of 50 pipelined publishes acked with multiple=1.",
          nano=True)
def confirms(ctx):
    import pika
    exp, q, lim = ctx.exp, "amqpcap.confirms", "amqpcap.confirms.limited"
    c = pika_connect(exp)
    ch = pika_channel(exp, c)
    ch.confirm_delivery(); exp.rpc("confirm.select")
    ch.queue_declare(q); exp.rpc("queue.declare")
    for i in range(5):  # pika's BlockingChannel waits for each confirm
        ch.basic_publish("", q, f"confirmed {i}".encode())
    exp.c("basic.publish", 5); exp.s("basic.ack", 5)
    exp.msg("published", 5); exp.msg("confirm_acks", 5); exp.msg("confirmed_messages", 5)

    try:
        ch.basic_publish("", "amqpcap.no-such-queue", b"unroutable", mandatory=True)
        raise AssertionError("expected UnroutableError")
    except pika.exceptions.UnroutableError:
        pass
    exp.c("basic.publish"); exp.s("basic.return"); exp.reply_code("basic.return", 312); exp.s("basic.ack")
    exp.msg("published"); exp.msg("returned"); exp.msg("confirm_acks"); exp.msg("confirmed_messages")

    ch.queue_declare(lim, arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    exp.rpc("queue.declare")
    ch.basic_publish("", lim, b"fits")
    try:
        ch.basic_publish("", lim, b"overflows")
        raise AssertionError("expected NackError")
    except pika.exceptions.NackError:
        pass
    exp.c("basic.publish", 2); exp.s("basic.ack"); exp.s("basic.nack")
    exp.msg("published", 2); exp.msg("confirm_acks"); exp.msg("confirmed_messages"); exp.msg("confirm_nacks")

    # burst: 50 publishes written with one send(); read acks until tag 50 is covered
    r = RawClient(exp).open(USER, PASSWORD, VHOST)
    r.channel(1)
    r.rpc(1, "confirm.select", False)
    burst = b"".join(r.publish(1, "", q, f"burst {i:02d}".encode(), flush=False) for i in range(50))
    r.send_raw(burst)
    frames, multi = r.confirms_until(50)
    exp.s("basic.ack", frames)
    exp.msg("confirm_acks", frames); exp.msg("confirmed_messages", 50)
    r.close()
    exp.note(f"Burst phase (raw client, channel 1 of 2nd connection): 50 publishes in one write; the "
             f"broker answered with {frames} basic.ack frames ({multi} with multiple=1) - timing-dependent, "
             f"counted by the client at record time (bound: between 1 and 50); every other count is exact. "
             f"The overflow queue (x-max-length=1, x-overflow=reject-publish) makes the broker nack the "
             f"2nd message.")
    ch.queue_delete(q); exp.rpc("queue.delete")
    ch.queue_delete(lim); exp.rpc("queue.delete")
    ch.close(); exp.rpc("channel.close", code=PIKA_CH)
    c.close(); exp.lib_close()
    exp.max_body(len(b"confirmed 0"))  # longest body: "confirmed N" (11 bytes)


@scenario("Channel-level errors on one raw connection (user amqpcap) plus two helper connections: 404 "
          "passive declare of a missing queue, 404 publish to a missing exchange, 406 queue redeclare "
          "with different arguments, 406 double ack, 403 declare of an amq.* exchange, 406 tx.commit "
          "on a non-transactional channel, 405 exclusive queue of another connection, 403 restricted "
          "user writing outside its permissions, 404 consume from a missing queue.")
def channel_errors(ctx):
    exp = ctx.exp
    r = RawClient(exp).open(USER, PASSWORD, VHOST)
    r.channel(1)
    r.send_method(1, "queue.declare", 0, "amqpcap.missing", True, False, False, False, False, {})
    r.answer_channel_close(1, 404)

    r.channel(2)
    r.publish(2, "amqpcap.no-such-exchange", "k", b"lost")
    r.answer_channel_close(2, 404)

    r.channel(3)
    r.rpc(3, "queue.declare", 0, "amqpcap.args", False, False, True, True, False, {"x-max-length": FV("I", 10)})
    r.send_method(3, "queue.declare", 0, "amqpcap.args", False, False, True, True, False, {"x-max-length": FV("I", 20)})
    r.answer_channel_close(3, 406)

    r.channel(4)
    r.rpc(4, "queue.declare", 0, "amqpcap.acks", False, False, True, True, False, {})
    r.publish(4, "", "amqpcap.acks", b"ack me twice")
    r.send_method(4, "basic.get", 0, "amqpcap.acks", False)
    tag = r.expect("basic.get-ok", 4).args[0]
    r.expect_content()
    exp.msg("get_ok")
    r.send_method(4, "basic.ack", tag, False)
    exp.msg("acked")
    r.send_method(4, "basic.ack", tag, False)  # unknown delivery tag
    r.answer_channel_close(4, 406)

    r.channel(5)
    r.send_method(5, "exchange.declare", 0, "amq.amqpcap", "direct", False, False, False, False, False, {})
    r.answer_channel_close(5, 403)

    r.channel(6)
    r.send_method(6, "tx.commit")
    r.answer_channel_close(6, 406)

    r.channel(7)
    r.rpc(7, "queue.declare", 0, "amqpcap.exclusive", False, False, True, True, False, {})
    other = RawClient(exp).open(USER, PASSWORD, VHOST)
    other.channel(1)
    other.send_method(1, "queue.declare", 0, "amqpcap.exclusive", True, False, False, False, False, {})
    other.answer_channel_close(1, 405)
    other.close()

    rest = RawClient(exp).open(RUSER, RPASSWORD, VHOST)
    rest.channel(1)
    rest.rpc(1, "queue.declare", 0, "ro.allowed", False, False, True, True, False, {})
    rest.send_method(1, "queue.declare", 0, "amqpcap.not-allowed", False, False, True, True, False, {})
    rest.answer_channel_close(1, 403)
    rest.close()

    r.channel(8)
    r.send_method(8, "basic.consume", 0, "amqpcap.missing", "ctag", False, False, False, False, {})
    r.answer_channel_close(8, 404)
    r.close()
    exp.max_body(len(b"ack me twice"))
    exp.note("The publish on channel 2 is counted as published although the broker discards it "
             "(404 on the exchange). channel.close codes appear in the order 404,404,406,406,403,406,"
             "405 (2nd connection),403 (restricted user, 3rd connection),404.")


@scenario("Connection-level errors, one short raw connection each: 403 wrong password, 530 vhost "
          "without permission, 530 missing vhost, 504 method on a never-opened channel, 504 second "
          "channel.open, 505 content header without method, 505 heartbeat on channel 1, 501 bad "
          "frame-end octet, 501 frame larger than frame-max, 501 unknown frame type, 540 basic.qos "
          "prefetch_size, 540 channel.flow active=false, 540 publish immediate=true, 503 unknown "
          "exchange type, 530 channel_max exceeded, 320 connection forced by rabbitmqctl, and an "
          "unknown method id that makes the broker drop the socket without connection.close.")
def connection_errors(ctx):
    exp = ctx.exp
    U, P, V = USER, PASSWORD, VHOST

    r = RawClient(exp)                     # 403 ACCESS_REFUSED: wrong password
    r.handshake(U, "wrong-password", V, stop_after_start_ok=True)
    r.answer_connection_close(403)

    r = RawClient(exp)                     # 530: restricted user, vhost without permissions
    r.handshake(RUSER, RPASSWORD, FORBIDDEN_VHOST)
    r.answer_connection_close(530)

    r = RawClient(exp)                     # 530: vhost does not exist
    r.handshake(U, P, "amqpcap-no-such-vhost")
    r.answer_connection_close(530)

    def opened(**kw):
        c = RawClient(exp).open(U, P, V, **kw)
        c.channel(1)
        return c

    r = opened(); r.send_method(5, "basic.qos", 0, 5, False); r.answer_connection_close(504)
    r = opened(); r.send_method(1, "channel.open", ""); r.answer_connection_close(504)
    r = opened(); r.send_raw(frame(FRAME_HEADER, 1, header_payload(0))); r.answer_connection_close(505)
    r = opened(); r.send_raw(frame(8, 1, b"")); r.answer_connection_close(505)
    r = opened()
    exp.c("basic.qos")
    exp.malformed("C>S", "basic.qos")
    r.send_raw(method_frame(1, "basic.qos", 0, 5, False)[:-1] + b"\x00")  # frame-end 0x00, not 0xCE
    r.answer_connection_close(501)
    r = opened(frame_max=4096); r.send_raw(frame(FRAME_BODY, 1, b"x" * 5000)); r.answer_connection_close(501)
    r = opened(); r.send_raw(frame(9, 1, b"")); r.answer_connection_close(501)
    r = opened(); r.send_method(1, "basic.qos", 1000, 0, False); r.answer_connection_close(540)
    r = opened(); r.send_method(1, "channel.flow", False); r.answer_connection_close(540)
    r = opened()
    r.send_raw(r.send_method(1, "basic.publish", 0, "", "amqpcap.nowhere", False, True, flush=False)
               + frame(FRAME_HEADER, 1, header_payload(0)))
    exp.msg("published")
    r.answer_connection_close(540)
    r = opened()
    r.send_method(1, "exchange.declare", 0, "amqpcap.x", "no-such-type", False, False, False, False, False, {})
    r.answer_connection_close(503)

    r = RawClient(exp)                     # 530: channel_max negotiated to 2, open channel 3
    r.send_raw(b"AMQP\x00\x00\x09\x01")
    r.expect("connection.start")
    r.exp.auth("PLAIN", U)
    r.send_method(0, "connection.start-ok", {"product": "amqpcap-recorder raw-socket"}, "PLAIN",
                  b"\x00" + U.encode() + b"\x00" + P.encode(), "en_US")
    r.expect("connection.tune")
    r.send_method(0, "connection.tune-ok", 2, 131072, 0)
    r.send_method(0, "connection.open", V, "", False)
    r.expect("connection.open-ok")
    r.channel(1)
    r.channel(2)
    r.send_method(3, "channel.open", "")   # a third open channel exceeds channel_max=2
    r.answer_connection_close(530)

    r = opened()                           # 320 CONNECTION_FORCED
    port = r.sock.getsockname()[1]
    out = broker.ctl("list_connections", "-q", "pid", "peer_port").stdout
    name = next(l.split("\t")[0] for l in out.splitlines() if l.strip().endswith(f"\t{port}"))
    broker.ctl("close_connection", name, "amqpcap recorder: forced close")
    r.answer_connection_close(320)

    r = opened()                           # unknown method 60.99: broker drops the socket
    r.send_raw(frame(1, 1, struct.pack(">HH", 60, 99)))
    r.expect_eof()
    exp.note("Every connection after the first three completes the handshake (connection.open-ok) and "
             "opens channel 1 before its error; the channel_max one opens channels 1 and 2, and the 3rd open fails. The 403 connection: "
             "the broker answers start-ok with connection.close (the client advertises the "
             "authentication_failure_close capability), so it has no tune/open. The 501 bad-frame-end "
             "frame is a well-formed basic.qos except its last octet (counted as a C>S basic.qos). "
             "The 501 frame-too-large is a 5000-byte body frame with frame_max 4096. The last connection "
             "sends method 60.99 (no such method): RabbitMQ 3.10 closes the TCP connection without "
             "connection.close. That frame (class 60, method-id 99, no arguments) is NOT counted in "
             "methods because it is no spec method. Unknown frame type 9 and the heartbeat on channel 1 are not methods.")


@scenario("basic.return (mandatory, no route, 312), consumer basic.nack requeue=false, basic.reject "
          "requeue=true followed by the redelivery (redelivered=1), basic.reject requeue=false, and a "
          "multiple ack, all with pika.")
def returns_nack_reject(ctx):
    exp, q = ctx.exp, "amqpcap.rnr"
    c = pika_connect(exp)
    ch = pika_channel(exp, c)
    returned = []
    ch.add_on_return_callback(lambda *a: returned.append(a))
    ch.basic_publish("", "amqpcap.no-route", b"nobody home", mandatory=True)
    exp.c("basic.publish"); exp.msg("published")
    pump(c, lambda: returned)
    exp.s("basic.return"); exp.reply_code("basic.return", 312); exp.msg("returned")

    ch.queue_declare(q, exclusive=True); exp.rpc("queue.declare")
    for i in range(1, 5):
        ch.basic_publish("", q, f"m{i}".encode())
    exp.c("basic.publish", 4); exp.msg("published", 4)
    got = []
    tag = ch.basic_consume(q, lambda chan, m, p, b: got.append((m, b)))
    exp.rpc("basic.consume")
    pump(c, lambda: len(got) >= 4)
    (m1, _), (m2, _), (m3, _), (m4, _) = got[:4]
    ch.basic_nack(m1.delivery_tag, requeue=False); exp.c("basic.nack"); exp.msg("nacked")
    ch.basic_reject(m2.delivery_tag, requeue=True); exp.c("basic.reject"); exp.msg("rejected"); exp.msg("requeued")
    ch.basic_reject(m3.delivery_tag, requeue=False); exp.c("basic.reject"); exp.msg("rejected")
    pump(c, lambda: len(got) == 5)
    m5, b5 = got[4]
    assert m5.redelivered and b5 == b"m2", (m5, b5)
    exp.s("basic.deliver", 5); exp.msg("delivered", 5); exp.msg("redelivered")
    ch.basic_ack(m5.delivery_tag, multiple=True)  # covers m4 and the redelivered m2
    exp.c("basic.ack"); exp.msg("acked", 2); exp.msg("acked_multiple_frames")
    ch.basic_cancel(tag); exp.rpc("basic.cancel")
    ch.close(); exp.rpc("channel.close", code=PIKA_CH)
    c.close(); exp.lib_close()
    exp.max_body(len(b"nobody home"))
    exp.note("Delivery tags: m1=1 nacked, m2=2 rejected+requeued, m3=3 rejected, m4=4, redelivered m2=5; "
             "the single basic.ack (tag 5, multiple=1) settles 4 and 5.")


@scenario("A 300000-byte message with frame_max=131072 (3 body frames each way, pika publish + "
          "basic.get), and 100 pipelined small publishes written with a single send() by a raw client "
          "(many AMQP frames per TCP segment), consumed back with no-ack.")
def large_and_pipelined(ctx):
    exp, q, pq = ctx.exp, "amqpcap.large", "amqpcap.pipelined"
    c = pika_connect(exp, frame_max=131072)
    ch = pika_channel(exp, c)
    ch.queue_declare(q, exclusive=True); exp.rpc("queue.declare")
    big = bytes(range(256)) * (300000 // 256) + b"E" * (300000 % 256)
    ch.basic_publish("", q, big); exp.c("basic.publish"); exp.msg("published")
    m, _p, body = ch.basic_get(q, auto_ack=True)
    assert body == big
    exp.rpc("basic.get"); exp.msg("get_ok")  # get-ok (not get-empty)
    exp.max_body(len(big))

    r = RawClient(exp).open(USER, PASSWORD, VHOST, frame_max=131072)
    r.channel(1)
    r.rpc(1, "queue.declare", 0, pq, False, False, True, True, False, {})
    r.send_raw(b"".join(r.publish(1, "", pq, f"small-{i:03d}".encode(), flush=False) for i in range(100)))
    r.rpc(1, "basic.consume", 0, pq, "pipeline-consumer", False, True, False, False, {})
    for i in range(100):
        r.expect("basic.deliver", 1)
        _h, b = r.expect_content()
        assert b == f"small-{i:03d}".encode()
    exp.msg("delivered", 100)
    r.rpc(1, "basic.cancel", "pipeline-consumer", False)
    r.close()
    ch.close(); exp.rpc("channel.close", code=PIKA_CH)
    c.close(); exp.lib_close()
    exp.note("frame_max 131072 on both connections: the 300000-byte body travels as body frames of "
             "131064+131064+37872 bytes in both directions (basic.publish and basic.get-ok). The raw "
             "client's 100 publishes (method+header+body frames each) leave in one send(); the broker's "
             "100 deliveries are coalesced by the broker too.")


@scenario("Three channels on one pika connection: basic.qos prefetch_count=2 consumer receiving "
          "exactly 2 then 2 more after a multiple ack, client basic.cancel, basic.get get-ok x2 and "
          "get-empty on a third channel.")
def channels_qos_get(ctx):
    exp, q = ctx.exp, "amqpcap.work"
    c = pika_connect(exp)
    ch1, ch2, ch3 = (pika_channel(exp, c) for _ in range(3))
    ch1.queue_declare(q, exclusive=True); exp.rpc("queue.declare")
    for i in range(6):
        ch1.basic_publish("", q, f"job {i}".encode())
    exp.c("basic.publish", 6); exp.msg("published", 6)
    ch2.basic_qos(prefetch_count=2); exp.rpc("basic.qos")
    got = []
    tag = ch2.basic_consume(q, lambda chan, m, p, b: got.append(m))
    exp.rpc("basic.consume")
    pump(c, lambda: len(got) == 2)
    c.sleep(0.5)  # prefetch reached: the broker must hold the rest back
    assert len(got) == 2
    ch2.basic_ack(got[1].delivery_tag, multiple=True)
    pump(c, lambda: len(got) == 4)
    c.sleep(0.5)
    assert len(got) == 4
    ch2.basic_cancel(tag); exp.rpc("basic.cancel")
    ch2.basic_ack(got[3].delivery_tag, multiple=True)
    exp.c("basic.ack", 2); exp.msg("acked", 4); exp.msg("acked_multiple_frames", 2)
    exp.s("basic.deliver", 4); exp.msg("delivered", 4)
    for _ in range(2):
        m, _p, _b = ch3.basic_get(q, auto_ack=True)
        assert m is not None
    exp.rpc("basic.get", 2); exp.msg("get_ok", 2)
    m, _p, _b = ch3.basic_get(q, auto_ack=True)
    assert m is None
    exp.rpc("basic.get", reply="basic.get-empty"); exp.msg("get_empty")
    for ch in (ch3, ch2, ch1):
        ch.close(); exp.rpc("channel.close", code=PIKA_CH)
    c.close(); exp.lib_close()
    exp.max_body(len(b"job 0"))


@scenario("Transactions (tx.select, commit, rollback), exchange-to-exchange bind/unbind, queue "
          "bind/unbind, a client basic.cancel and a server-initiated basic.cancel (the consumer's "
          "queue is deleted from another channel), with pika.")
def tx_bind_cancel(ctx):
    exp = ctx.exp
    src, dst, q, doomed = "amqpcap.src", "amqpcap.dst", "amqpcap.txq", "amqpcap.doomed"
    c = pika_connect(exp)
    ch1 = pika_channel(exp, c)
    ch2 = pika_channel(exp, c)
    ch1.exchange_declare(src, "fanout", auto_delete=False); exp.rpc("exchange.declare")
    ch1.exchange_declare(dst, "direct", auto_delete=False); exp.rpc("exchange.declare")
    ch1.exchange_bind(destination=dst, source=src, routing_key="k"); exp.rpc("exchange.bind")
    ch1.queue_declare(q, exclusive=True); exp.rpc("queue.declare")
    ch1.queue_bind(q, dst, routing_key="k"); exp.rpc("queue.bind")

    ch1.tx_select(); exp.rpc("tx.select")
    ch1.basic_publish(src, "k", b"committed"); exp.c("basic.publish")
    ch1.tx_commit(); exp.rpc("tx.commit")
    ch1.basic_publish(src, "k", b"rolled back"); exp.c("basic.publish")
    ch1.tx_rollback(); exp.rpc("tx.rollback")
    exp.msg("published", 2)

    got = []
    tag = ch2.basic_consume(q, lambda chan, m, p, b: got.append((m, b)))
    exp.rpc("basic.consume")
    pump(c, lambda: got)
    c.sleep(0.3)
    assert [b for _, b in got] == [b"committed"]
    exp.s("basic.deliver"); exp.msg("delivered")
    ch2.basic_ack(got[0][0].delivery_tag); exp.c("basic.ack"); exp.msg("acked")
    ch2.basic_cancel(tag); exp.rpc("basic.cancel")

    ch1.exchange_unbind(destination=dst, source=src, routing_key="k"); exp.rpc("exchange.unbind")
    ch1.queue_unbind(q, dst, routing_key="k"); exp.rpc("queue.unbind")

    cancelled = []
    ch2.queue_declare(doomed, auto_delete=False); exp.rpc("queue.declare")
    ch2.add_on_cancel_callback(lambda frame: cancelled.append(frame))
    ch2.basic_consume(doomed, lambda *a: None); exp.rpc("basic.consume")
    ch1.queue_delete(doomed); exp.rpc("queue.delete")
    pump(c, lambda: cancelled)
    exp.s("basic.cancel")
    ch1.exchange_delete(src); exp.rpc("exchange.delete")
    ch1.exchange_delete(dst); exp.rpc("exchange.delete")
    ch2.close(); exp.rpc("channel.close", code=PIKA_CH)
    ch1.close(); exp.rpc("channel.close", code=PIKA_CH)
    c.close(); exp.lib_close()
    exp.max_body(len(b"rolled back"))
    exp.note("The rolled-back publish never reaches the queue (1 delivery). The server-initiated "
             "basic.cancel arrives on channel 2 when channel 1 deletes the consumer's queue; pika "
             "advertises consumer_cancel_notify and does not answer it (nowait).")


@scenario("Heartbeats: pika negotiates heartbeat=1 s and stays idle ~3.5 s, then closes normally.")
def heartbeats(ctx):
    exp = ctx.exp
    c = pika_connect(exp, heartbeat=1)
    ch = pika_channel(exp, c)
    c.sleep(3.5)
    ch.close(); exp.rpc("channel.close", code=PIKA_CH)
    c.close(); exp.lib_close()
    exp.heartbeat("C>S", 2); exp.heartbeat("S>C", 2)
    exp.note("heartbeats_min are lower bounds (timing-dependent): pika sends a heartbeat every 0.5 s "
             "(timeout/2) while idle and RabbitMQ sends one every ~0.5 s too; over 3.5 s idle at least 2 "
             "each way is a safe bound (6 each way were seen when recorded). connection.tune offers 60, "
             "tune-ok answers heartbeat=1.")


KILL_CHILD = r"""
import sys, time, pika
params = pika.ConnectionParameters(host="127.0.0.1", virtual_host=sys.argv[3],
                                   credentials=pika.PlainCredentials(sys.argv[1], sys.argv[2]))
c = pika.BlockingConnection(params)
ch = c.channel()
ch.queue_declare("amqpcap.killed", exclusive=True)
for i in range(3):
    ch.basic_publish("", "amqpcap.killed", b"before the kill %d" % i)
ch.basic_get("amqpcap.killed", auto_ack=False)   # one unacked message when killed
print("READY", flush=True)
time.sleep(60)
"""


@scenario("Abrupt client death: a pika client subprocess declares a queue, publishes 3 messages, "
          "basic.gets one without acking, then is killed with SIGKILL: no channel/connection close, "
          "the kernel closes the TCP connection.")
def abrupt_kill(ctx):
    exp = ctx.exp
    p = subprocess.Popen([sys.executable, "-c", KILL_CHILD, USER, PASSWORD, VHOST], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "READY"
    time.sleep(0.3)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    exp.lib_connect(pika_label(), USER)
    exp.lib_channel()
    exp.rpc("queue.declare")
    exp.c("basic.publish", 3); exp.msg("published", 3)
    exp.rpc("basic.get", reply="basic.get-ok"); exp.msg("get_ok")
    exp.max_body(len(b"before the kill 0"))
    time.sleep(1.0)
    exp.note("The client process is SIGKILLed after its last method; no channel.close / connection.close "
             "in either direction. The broker requeues the unacked message and drops the exclusive queue.")


@scenario("Four pika connections in parallel threads (start barrier, 20 ms pacing) each publishing "
          "10 messages to its own exclusive queue and consuming/acking them, interleaved on the wire; "
          "captured on the 'any' pseudo-interface (Linux cooked v2).",
          interfaces=(("any", None),), link_types=("LINUX_SLL2",))
def concurrent(ctx):
    exp, n, per = ctx.exp, 4, 10
    barrier = threading.Barrier(n)
    errors = []

    def worker(i):
        try:
            import pika
            c = pika.BlockingConnection(pika.ConnectionParameters(
                HOST4, 5672, VHOST, pika.PlainCredentials(USER, PASSWORD)))
            ch = c.channel()
            q = f"amqpcap.conc.{i}"
            ch.queue_declare(q, exclusive=True)
            barrier.wait(timeout=20)
            got = []
            ch.basic_consume(q, lambda chan, m, p, b: (got.append(m), chan.basic_ack(m.delivery_tag)))
            for k in range(per):
                ch.basic_publish("", q, f"conn {i} msg {k}".encode())
                c.sleep(0.02)
            pump(c, lambda: len(got) == per)
            ch.close()
            c.close()
        except Exception as e:  # pragma: no cover
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    for _ in range(n):
        exp.lib_connect(pika_label(), USER)
        exp.lib_channel()
        exp.rpc("queue.declare")
        exp.rpc("basic.consume")
        exp.c("basic.publish", per); exp.s("basic.deliver", per); exp.c("basic.ack", per)
        exp.rpc("basic.cancel")  # BlockingChannel.close() cancels its consumers first
        exp.rpc("channel.close", code=PIKA_CH)
        exp.lib_close()
    exp.msg("published", n * per); exp.msg("delivered", n * per); exp.msg("acked", n * per)
    exp.max_body(len(b"conn 0 msg 0"))
    exp.note("pika's BlockingChannel.close() first cancels the channel's active consumer (basic.cancel "
             "/ cancel-ok), then sends channel.close. The interleaving of the 4 connections varies per run.")


@scenario("pcapng with two interfaces (dumpcap): an aio-pika connection over IPv6 [::1] captured on "
          "'lo' (EN10MB, filter ip6) and a py-amqp connection (AMQPLAIN auth) over IPv4 captured on "
          "'any' (LINUX_SLL, filter ip); nanosecond timestamps.",
          fmt="pcapng", interfaces=(("lo", "tcp port 5672 and ip6"), ("any", "tcp port 5672 and ip")),
          link_types=("EN10MB", "LINUX_SLL"))
def ipv6_pcapng(ctx):
    exp = ctx.exp
    import aio_pika

    async def aio():
        conn = await aio_pika.connect(host=HOST6, port=5672, login=USER, password=PASSWORD, virtualhost=VHOST)
        ch = await conn.channel()  # publisher_confirms=True by default -> confirm.select
        q = await ch.declare_queue("amqpcap.aio", exclusive=True)
        await ch.default_exchange.publish(
            aio_pika.Message(b"hello from aio-pika over IPv6", content_type="text/plain",
                             headers={"via": "::1"}), routing_key=q.name)
        msg = await q.get(timeout=5)
        await msg.ack()
        await ch.close()
        await conn.close()

    asyncio.run(aio())
    exp.lib_connect(f"aio-pika {_ver('aio-pika')} (aiormq {_ver('aiormq')})", USER, "PLAIN", ip=6)
    exp.lib_channel()
    exp.rpc("confirm.select")
    exp.rpc("queue.declare")
    exp.c("basic.publish"); exp.s("basic.ack"); exp.msg("published"); exp.msg("confirm_acks"); exp.msg("confirmed_messages")
    exp.rpc("basic.get", reply="basic.get-ok"); exp.msg("get_ok")
    exp.c("basic.ack"); exp.msg("acked")
    exp.rpc("channel.close", code=AIORMQ_CLOSE)
    exp.lib_close(AIORMQ_CLOSE)

    import amqp
    c = amqp.Connection(host=f"{HOST4}:5672", userid=USER, password=PASSWORD, virtual_host=VHOST)
    c.connect()
    ch = c.channel()
    ch.queue_declare("amqpcap.pyamqp", exclusive=True)
    ch.basic_publish(amqp.Message("hello from py-amqp over IPv4", content_type="text/plain"),
                     exchange="", routing_key="amqpcap.pyamqp")
    m = ch.basic_get("amqpcap.pyamqp")  # same channel: the publish is enqueued before the get
    assert m is not None
    ch.basic_ack(m.delivery_tag)
    ch.close()
    c.close()
    exp.lib_connect(f"py-amqp {_ver('amqp')}", USER, "AMQPLAIN", ip=4)
    exp.lib_channel()
    exp.rpc("queue.declare")
    exp.c("basic.publish"); exp.msg("published")
    exp.rpc("basic.get", reply="basic.get-ok"); exp.msg("get_ok")
    exp.c("basic.ack"); exp.msg("acked")
    exp.rpc("channel.close", code=PY_AMQP_CLOSE)
    exp.lib_close(PY_AMQP_CLOSE)
    exp.max_body(len(b"hello from aio-pika over IPv6"))
    exp.note("Interface 0 = lo (EN10MB) holds only the IPv6 connection, interface 1 = any (LINUX_SLL) "
             "only the IPv4 one: per-interface capture filters make the two sets disjoint, no packet "
             "appears twice.")


@scenario("kombu (py-amqp transport; kombu asks for PLAIN): Producer publishes 3 JSON messages declaring a "
          "direct exchange + queue + binding, a Consumer drains and acks them; gzip-compressed pcap.",
          fmt="pcap.gz")
def kombu_gzip(ctx):
    exp = ctx.exp
    import kombu
    ex = kombu.Exchange("amqpcap.kombu", type="direct", durable=False, auto_delete=True)
    q = kombu.Queue("amqpcap.kombu.q", ex, routing_key="k", durable=False, exclusive=True)
    got = []
    with kombu.Connection(hostname=HOST4, port=5672, userid=USER, password=PASSWORD,
                          virtual_host=VHOST, transport="pyamqp") as conn:
        producer = conn.Producer()
        for i in range(3):
            producer.publish({"n": i, "text": "kombu json"}, exchange=ex, routing_key="k",
                             declare=[q], serializer="json")
        with conn.Consumer([q], callbacks=[lambda body, msg: (got.append(body), msg.ack())], accept=["json"]):
            while len(got) < 3:
                conn.drain_events(timeout=5)
    # kombu passes login_method PLAIN to py-amqp (py-amqp alone defaults to AMQPLAIN)
    exp.lib_connect(f"kombu {_ver('kombu')} (py-amqp {_ver('amqp')})", USER, "PLAIN")
    exp.lib_channel()
    # Producer.publish(declare=[q]) -> maybe_declare(q): an exclusive queue is auto_delete in kombu,
    # and auto_delete entities are never cached, so every publish re-declares
    # exchange + queue + binding before its basic.publish.
    exp.rpc("exchange.declare", 3); exp.rpc("queue.declare", 3); exp.rpc("queue.bind", 3)
    exp.c("basic.publish", 3); exp.msg("published", 3)
    # Consumer(auto_declare=True) declares again, then consumes
    exp.rpc("exchange.declare"); exp.rpc("queue.declare"); exp.rpc("queue.bind")
    exp.rpc("basic.consume")
    exp.s("basic.deliver", 3); exp.msg("delivered", 3)
    exp.c("basic.ack", 3); exp.msg("acked", 3)
    exp.rpc("basic.cancel")
    exp.rpc("channel.close", code=PY_AMQP_CLOSE)
    exp.lib_close(PY_AMQP_CLOSE)
    exp.max_body(len(b'{"n": 0, "text": "kombu json"}'))
    exp.note("kombu re-declares exchange, queue and binding before each of the 3 publishes (exclusive "
             "implies auto_delete, which kombu never caches) and once more when the Consumer starts: "
             "4 x exchange.declare/queue.declare/queue.bind. Channel and connection are closed by py-amqp "
             "with reply-code 0.")


@scenario("Capture starting mid-stream: a raw client streams 300000-byte messages in 16 KiB writes "
          "before tcpdump starts; the capture begins in the middle of body frame 2 of the second big "
          "message. Then 3 small publishes are delivered to a consumer registered before the capture, "
          "the big queue is deleted and the connection closed.", manual_capture=True)
def mid_stream(ctx):
    from .expect import Expect
    exp = ctx.exp
    pre = Expect("pre-capture", "")
    r = RawClient(pre).open(USER, PASSWORD, VHOST, frame_max=131072)
    r.channel(1)
    r.rpc(1, "queue.declare", 0, "amqpcap.mid.big", False, False, True, True, False, {})
    r.rpc(1, "queue.declare", 0, "amqpcap.mid.small", False, False, True, True, False, {})
    r.rpc(1, "basic.consume", 0, "amqpcap.mid.small", "mid-consumer", False, True, False, False, {})
    big = bytes((i * 7) & 0xFF for i in range(300000))

    def chunks(data):
        for i in range(0, len(data), 16384):
            r.send_raw(data[i:i + 16384])
            time.sleep(0.01)

    chunks(r.publish(1, "", "amqpcap.mid.big", big, flush=False))     # fully before the capture
    second = r.publish(1, "", "amqpcap.mid.big", big, flush=False)
    # offset of body frame 2: method frame + header frame + body frame 1 (7+131064+1)
    method_len = len(method_frame(1, "basic.publish", 0, "", "amqpcap.mid.big", False, False))
    header_len = 7 + len(header_payload(len(big))) + 1
    split = method_len + header_len + 131072 + 60000
    chunks(second[:split])
    time.sleep(0.3)
    ctx.start_capture()
    r.exp = exp
    exp.connection("raw-socket")
    chunks(second[split:])
    for i in range(3):
        r.publish(1, "", "amqpcap.mid.small", f"after the cut {i}".encode())
    for _ in range(3):
        r.expect("basic.deliver", 1)
        r.expect_content()
    exp.msg("delivered", 3)
    f = r.rpc(1, "queue.delete", 0, "amqpcap.mid.big", False, False, False)
    assert f.args[0] == 2, f.args
    r.close()
    exp.capture["starts_mid_stream"] = True
    exp.note(f"The capture starts {split - method_len - header_len - 131072} bytes after the first "
             f"octet of body frame 2 (i.e. inside its payload) "
             f"(of 3) of a 300000-byte message whose basic.publish and header frame are not captured; "
             f"the remaining {len(second) - split} bytes of that message come first. Counts cover only "
             f"what is in the capture: the partial message is not counted in published/max_body_size. "
             f"The handshake (so users/auth_mechanisms are empty: no start-ok in the capture), "
             f"channel.open, both queue.declares and basic.consume happened before the capture.")


@scenario("Protocol header variants (raw sockets): AMQP 1 1 0 9 (0-9; RabbitMQ serves it as 0-9-1) "
          "with a complete short handshake, channel open/close and connection close; AMQP 2 0 1 1 and "
          "an HTTP request, both answered with RabbitMQ's own AMQP 0 0 9 1 header then closed.")
def protocol_headers(ctx):
    exp = ctx.exp
    r = RawClient(exp)
    start = r.handshake(USER, PASSWORD, VHOST, header=b"AMQP\x01\x01\x00\x09")
    assert start.args[:2] == [0, 9], start.args
    r.expect("connection.open-ok")
    r.channel(1)
    r.close_channel(1)
    r.close()
    for hdr in (b"AMQP\x02\x00\x01\x01", b"GET / HTTP/1.1\r\nHost: 127.0.0.1:5672\r\n\r\n"):
        r = RawClient(exp)
        r.send_raw(hdr)
        answer = r.expect_eof()
        assert answer == b"AMQP\x00\x00\x09\x01", answer
    exp.note("connection.start of the 0-9 connection carries version-major 0, version-minor 9. The two "
             "refused connections contain no AMQP frame: only the client's bytes and the broker's "
             "8-byte protocol header before FIN.")


# scenarios kept in their own modules register themselves on import
from . import findings, hops, long_connection, other_clients, protocols, steady, tls  # noqa: E402,F401
