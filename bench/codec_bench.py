"""Codec benchmark: frames/s of amqpcap against pamqp on the same corpus, in the same run.

    .venv/bin/python bench/codec_bench.py [--seconds 3] [--repeat 5]

The corpus is a fixed, realistic mix of what dominates production captures: a publish with its
content header (rich properties and a headers table) and body, the matching deliver with header
and body, and the consumer's ack; plus a confirm ack and a heartbeat. Frames are encoded once with
pamqp, then each decoder parses the concatenated stream frame by frame from a bytes buffer. Both
run single-threaded in this process, timed alternately `--repeat` times; the best of each is reported.
Target (issue 55, raised from issue 12's 5x and issue 2's 2x): amqpcap at least 10x pamqp's frames/s.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import time
from decimal import Decimal

from pamqp import commands
from pamqp import frame as pamqp_frame
from pamqp.body import ContentBody
from pamqp.header import ContentHeader
from pamqp.heartbeat import Heartbeat

from amqpcap.protocol.codec import Codec

TARGET = 10.0  # amqpcap's frames/s over pamqp's (issue 55)


def corpus() -> list[bytes]:
    body = b'{"order": 1234, "items": [1, 2, 3], "note": "' + b"x" * 180 + b'"}'
    properties = commands.Basic.Properties(
        content_type="application/json", content_encoding="utf-8", delivery_mode=2, priority=5,
        correlation_id="c0ffee-0001", reply_to="amq.rabbitmq.reply-to", message_id="msg-000042",
        timestamp=datetime.datetime(2026, 11, 21, 12, 0, 0, tzinfo=datetime.timezone.utc),
        message_type="order.created", app_id="orders-service",
        headers={"x-trace-id": "4bf92f3577b34da6a3ce929d0e0e4736", "x-retry": 2,
                 "x-price": Decimal("19.99"), "x-tags": ["new", "priority"],
                 "x-origin": {"region": "eu-west-1", "zone": 3}, "x-flag": True})
    frames = [
        (commands.Basic.Publish(exchange="orders", routing_key="order.created", mandatory=True), 1),
        (ContentHeader(0, len(body), properties), 1),
        (ContentBody(body), 1),
        (commands.Basic.Deliver(consumer_tag="amq.ctag-6PgJzL2TQzGf1U3aWdFjXQ", delivery_tag=4242,
                                redelivered=False, exchange="orders", routing_key="order.created"), 2),
        (ContentHeader(0, len(body), properties), 2),
        (ContentBody(body), 2),
        (commands.Basic.Ack(delivery_tag=4242, multiple=False), 2),
        (commands.Basic.Ack(delivery_tag=17, multiple=True), 1),
        (Heartbeat(), 0),
    ]
    return [pamqp_frame.marshal(value, channel) for value, channel in frames]


# Each decoder gets the frames one bytes object at a time, as pamqp's users (aiormq, rabbitpy)
# call it; handing pamqp one long buffer would charge it for re-slicing the rest at every frame.
def decode_ours(codec: Codec, frames: list[bytes]) -> int:
    decode = codec.decode_frame
    for data in frames:
        decode(data)
    return len(frames)


def decode_pamqp(frames: list[bytes]) -> int:
    unmarshal = pamqp_frame.unmarshal
    for data in frames:
        unmarshal(data)
    return len(frames)


def rate(function, seconds: float) -> float:
    frames, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        frames += function()
    return frames / elapsed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="per timing")
    parser.add_argument("--repeat", type=int, default=3, help="timings per decoder; best is kept")
    args = parser.parse_args(argv)

    data = corpus() * 200
    codec = Codec.for_version("0-9-1")
    assert decode_ours(codec, data) == decode_pamqp(data) == len(data)

    # alternately, so that both see the machine's slow and fast spells (a VM's speed drifts)
    ours = theirs = 0.0
    for _ in range(args.repeat):
        ours = max(ours, rate(lambda: decode_ours(codec, data), args.seconds))
        theirs = max(theirs, rate(lambda: decode_pamqp(data), args.seconds))
    print(f"machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}, 1 core")
    print(f"corpus: {sum(map(len, data))} bytes, {len(data)} frames "
          "(publish+header+body, deliver+header+body, 2 acks, heartbeat)")
    print(f"amqpcap: {ours:12,.0f} frames/s")
    print(f"pamqp:       {theirs:12,.0f} frames/s")
    print(f"ratio:       {ours / theirs:12.2f}x  (target >= {TARGET:g}x)")


if __name__ == "__main__":
    main()
