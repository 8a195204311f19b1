"""A broker's steady traffic, mostly small frames (bench/synth.py --shape small builds its
small-frame night from it): a publisher with publisher confirms that pipelines its publishes, as
busy publishers do, and a pika consumer, both long-lived, exchanging 100-900-byte messages, a few
large ones among them. The consumer acknowledges most deliveries one by one and some with
multiple=1. Counts are the clients' own (what they sent and received), so exact; the broker's
confirms are counted from the frames the raw publisher read."""
from __future__ import annotations

import random

from .broker import PASSWORD, USER, VHOST
from .raw import RawClient
from .scenarios import PIKA_CH, pika_channel, pika_connect, pump, scenario

MESSAGES = 1200
LARGE_EVERY = 400  # every 400th message is a large one
LARGE_BYTES = 40_000
BURST = 25  # messages a publisher writes at once (pipelined), then reads the confirms that cover them
ACK_BATCH = 100  # deliveries the consumer takes before acknowledging them
MULTIPLE_EVERY = 4  # every 4th batch is acknowledged with one multiple=1 ack


def _body(rng: random.Random, i: int) -> bytes:
    size = LARGE_BYTES if i % LARGE_EVERY == LARGE_EVERY - 1 else rng.randint(100, 900)
    text = f'{{"order":{i},"sku":"{rng.randrange(10**8):08d}","qty":{rng.randint(1, 9)},"note":"'
    return (text + "x" * max(size - len(text) - 2, 0) + '"}').encode()[:size]


@scenario(f"Steady small-frame traffic of a busy broker: a raw publisher with publisher confirms writes "
          f"{MESSAGES} messages of 100-900 bytes (every {LARGE_EVERY}th a {LARGE_BYTES}-byte one) in "
          f"pipelined bursts of {BURST}, reading the broker's confirms (multiple=1 where the broker "
          f"batches them) before the next burst; a pika consumer (prefetch 200, heartbeat=1 s) takes "
          f"them from one durable queue and acknowledges each batch of {ACK_BATCH} delivery by "
          f"delivery, except every {MULTIPLE_EVERY}th batch, acknowledged by one multiple=1 ack; a short "
          f"pause every few bursts, and an idle second at the end, let heartbeats through.")
def steady_small_frames(ctx):
    exp, q = ctx.exp, "amqpcap.steady"
    rng = random.Random(20261202)
    con = pika_connect(exp, heartbeat=1)
    cch = pika_channel(exp, con)
    cch.queue_declare(q, durable=True); exp.rpc("queue.declare")
    cch.basic_qos(prefetch_count=200); exp.rpc("basic.qos")
    got = []
    cch.basic_consume(q, lambda chan, m, p, b: got.append(m.delivery_tag))
    exp.rpc("basic.consume")
    r = RawClient(exp).open(USER, PASSWORD, VHOST)
    r.channel(1)
    r.rpc(1, "confirm.select", False)
    props = {"content_type": "application/json", "delivery_mode": 2}
    confirm_frames = confirm_multiple = acks = multiple_acks = acked = 0
    for start in range(0, MESSAGES, BURST):
        end = min(start + BURST, MESSAGES)
        r.send_raw(b"".join(r.publish(1, "", q, _body(rng, i), props, flush=False) for i in range(start, end)))
        frames, multiple = r.confirms_until(end)  # (delivery tags are 1-based: tag `end` covers the burst)
        confirm_frames += frames; confirm_multiple += multiple
        con.process_data_events(time_limit=0)
        while len(got) - acked >= ACK_BATCH or (end == MESSAGES and acked < MESSAGES):
            pump(con, lambda: len(got) >= min(acked + ACK_BATCH, MESSAGES))
            batch = got[acked:min(acked + ACK_BATCH, MESSAGES)]
            if (acked // ACK_BATCH) % MULTIPLE_EVERY == MULTIPLE_EVERY - 1:
                cch.basic_ack(batch[-1], multiple=True)
                acks += 1; multiple_acks += 1
            else:
                for tag in batch:
                    cch.basic_ack(tag)
                    acks += 1
            acked += len(batch)
        if (start // BURST) % 8 == 7:
            con.sleep(0.15)
    assert len(got) == MESSAGES, len(got)
    exp.s("basic.ack", confirm_frames); exp.msg("confirm_acks", confirm_frames); exp.msg("confirmed_messages", MESSAGES)
    exp.s("basic.deliver", len(got)); exp.msg("delivered", len(got))
    exp.c("basic.ack", acks); exp.msg("acked", len(got)); exp.msg("acked_multiple_frames", multiple_acks)
    con.sleep(1.2)  # idle: heartbeats both ways
    exp.heartbeat("C>S", 1); exp.heartbeat("S>C", 1)
    r.close()
    cch.queue_delete(q); exp.rpc("queue.delete")
    exp.s("basic.cancel")  # (the broker cancels the consumer of the deleted queue; pika does not answer)
    cch.close(); exp.rpc("channel.close", code=PIKA_CH)
    con.close(); exp.lib_close()
    exp.note(f"The broker confirmed the {MESSAGES} publishes with {confirm_frames} basic.ack frames "
             f"({confirm_multiple} with multiple=1): timing-dependent, counted by the raw client at record "
             f"time. {multiple_acks} of the consumer's {acks} basic.ack frames carry multiple=1. Heartbeat "
             f"counts are lower bounds (timing-dependent). The raw client negotiates heartbeat 0.")
