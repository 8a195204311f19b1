"""long_connection: one pika connection (SelectConnection, callbacks) carrying ~25 s of steady
publisher-confirm and consumer traffic with four 300000-byte messages, and the record numbers
("cuts") where a test can split the capture into nightly files while state is open.

Everything in expected.json is known by construction: the scenario decides every publish, every
consumer ack (by delivery tag) and waits for each answer it counts.  The only count the broker
decides is how many basic.ack frames confirm the three pipelined batches; the client counts those
frames as they arrive (pika calls the confirm callback once per frame).  The cut points are found
after the capture by looking for the exact bytes the scenario made pika send (reproduced with
pika's own frame marshalling) among the client's TCP payloads: that maps byte offsets known by
construction to record numbers, without decoding AMQP from the capture.
"""
from __future__ import annotations

import copy
import time
from types import SimpleNamespace

from .broker import HOST4, PASSWORD, USER, VHOST
from .pcaprecords import read_segments
from .scenarios import PIKA_CH, pika_label, scenario

QUEUE = "amqpcap.long"
N = 120                                  # messages; delivery tag == publish sequence number
LARGE = (23, 51, 79, 107)                # tag % 4 == 3: the delivery before (tag % 4 == 2) is held
BATCHES = {33: 8, 61: 8, 89: 8}          # first seq -> size: published back to back, then awaited
PACE = 0.25                              # seconds between publish steps
LARGE_SIZE = 300000
FRAME_MAX = 131072
BODY_MAX = FRAME_MAX - 8
HEARTBEAT = 10
PREFETCH = 10


def message_id(i: int) -> str:
    return f"long-{i:04d}"


def small_body(i: int) -> bytes:
    return f'{{"seq": {i}, "id": "{message_id(i)}", "kind": "steady"}}'.encode()


def large_body(i: int) -> bytes:
    """300000 bytes, very compressible (the capture is gzipped), every 4 KiB block labelled."""
    out = bytearray()
    block = 0
    while len(out) < LARGE_SIZE:
        head = f"{message_id(i)} block {block:03d} offset {len(out):06d}\n".encode()
        out += head + b"." * (4096 - len(head) - 1) + b"\n"
        block += 1
    return bytes(out[:LARGE_SIZE])


def ack_policy(tag: int) -> str:
    """Consumer ack by delivery tag: 4k+1 acked alone, 4k+2 and 4k+3 held, 4k acked with
    multiple=1 (settling the two held ones too)."""
    return {1: "single", 2: "hold", 3: "hold", 0: "multiple"}[tag % 4]


@scenario("One long-lived pika SelectConnection (frame_max 131072, heartbeat 10 s): a publisher channel "
          "in confirm mode (120 publishes with message_id, each awaited except three pipelined batches "
          "of 8), a consumer channel with basic.qos prefetch 10 acking by delivery tag (4k+1 alone, 4k "
          "with multiple=1), four 300000-byte messages spread through ~25 s of steady traffic (one "
          "publish every ~0.25 s), basic.cancel and a clean close; gzip-compressed pcap. expected.json "
          "adds `cuts`: record numbers where the capture can be split inside a large body frame while "
          "a delivery is unacked and a publish unconfirmed.", fmt="pcap.gz")
def long_connection(ctx):
    import pika
    from pika import frame as pframe
    from pika import spec as pspec

    exp = ctx.exp
    st = SimpleNamespace(opened=[], done=set(), confirmed=set(), confirm_frames=0, confirm_multiple=0,
                         confirm_frames_in_batches=0, delivered=[], held=[], error=None, closed=False,
                         snapshots={}, large=[], in_batch=False)

    def ok(key):
        return lambda *_a: st.done.add(key)

    def on_confirm(fr):
        m = fr.method
        assert isinstance(m, pspec.Basic.Ack), m
        exp.s("basic.ack"); exp.msg("confirm_acks")
        st.confirm_frames += 1
        if m.multiple:
            st.confirm_multiple += 1
            st.confirmed.update(range(1, m.delivery_tag + 1))
        else:
            st.confirmed.add(m.delivery_tag)
        if st.in_batch:
            st.confirm_frames_in_batches += 1

    def on_message(ch, method, props, body):
        exp.s("basic.deliver"); exp.msg("delivered")
        t = method.delivery_tag
        assert props.message_id == message_id(t) and not method.redelivered, (t, props.message_id)
        assert len(body) == (LARGE_SIZE if t in LARGE else len(small_body(t))), (t, len(body))
        st.delivered.append(t)
        policy = ack_policy(t)
        if policy == "single":
            ch.basic_ack(t)
            exp.c("basic.ack"); exp.msg("acked")
        elif policy == "multiple":
            assert st.held == [t - 2, t - 1], (t, st.held)
            ch.basic_ack(t, multiple=True)
            exp.c("basic.ack"); exp.msg("acked", 3); exp.msg("acked_multiple_frames")
            st.held.clear()
        else:
            st.held.append(t)

    def publish(ch, i, body):
        props = pika.BasicProperties(message_id=message_id(i), content_type="application/json" if i not in LARGE
                                     else "text/plain", delivery_mode=1, app_id="amqpcap-long")
        ch.basic_publish("", QUEUE, body, props)
        exp.c("basic.publish"); exp.msg("published")
        exp.max_body(len(body))
        return props

    def wire_bytes(channel_number, body, props) -> bytes:
        """What pika writes for this publish (same classes as pika.connection._send_message)."""
        frames = [pframe.Method(channel_number, pspec.Basic.Publish(exchange="", routing_key=QUEUE,
                                                                    mandatory=False)).marshal(),
                  pframe.Header(channel_number, len(body), props).marshal()]
        for start in range(0, len(body), BODY_MAX):
            frames.append(pframe.Body(channel_number, body[start:start + BODY_MAX]).marshal())
        return b"".join(frames)

    def script():
        pub = conn.channel(on_open_callback=st.opened.append)
        yield lambda: len(st.opened) == 1
        exp.lib_channel()
        cons = conn.channel(on_open_callback=st.opened.append)
        yield lambda: len(st.opened) == 2
        exp.lib_channel()
        cons.queue_declare(QUEUE, exclusive=True, callback=ok("declare"))
        yield lambda: "declare" in st.done
        exp.rpc("queue.declare")
        cons.basic_qos(prefetch_count=PREFETCH, callback=ok("qos"))
        yield lambda: "qos" in st.done
        exp.rpc("basic.qos")
        ctag = cons.basic_consume(QUEUE, on_message, auto_ack=False, callback=ok("consume"))
        yield lambda: "consume" in st.done
        exp.rpc("basic.consume")
        pub.confirm_delivery(on_confirm, callback=ok("confirm"))
        yield lambda: "confirm" in st.done
        exp.rpc("confirm.select")
        yield PACE

        i = 1
        while i <= N:
            if i in LARGE:
                assert ack_policy(i - 1) == "hold"
                yield lambda i=i: (i - 1) in st.delivered
                assert st.held == [i - 1] and st.confirmed == set(range(1, i)), (i, st.held)
                body = large_body(i)
                # the state just before the large publish is written (everything before it answered)
                st.snapshots[i] = {"methods": {d: dict(c) for d, c in copy.deepcopy(exp.methods).items()},
                                   "messages": dict(exp.messages), "unacked": list(st.held)}
                props = publish(pub, i, body)
                st.large.append({"seq": i, "bytes": wire_bytes(pub.channel_number, body, props)})
                yield lambda i=i: i in st.confirmed and i in st.delivered
                i += 1
            elif i in BATCHES:
                last = i + BATCHES[i] - 1
                st.in_batch = True
                for j in range(i, last + 1):
                    publish(pub, j, small_body(j))
                yield lambda last=last: set(range(1, last + 1)) <= st.confirmed
                st.in_batch = False
                i = last + 1
            else:
                publish(pub, i, small_body(i))
                yield lambda i=i: i in st.confirmed
                i += 1
            yield PACE

        yield lambda: len(st.delivered) == N and not st.held
        cons.basic_cancel(ctag, callback=ok("cancel"))
        yield lambda: "cancel" in st.done
        exp.rpc("basic.cancel")
        cons.add_on_close_callback(ok("cons-closed"))
        cons.close()
        yield lambda: "cons-closed" in st.done
        exp.rpc("channel.close", code=PIKA_CH)
        pub.add_on_close_callback(ok("pub-closed"))
        pub.close()
        yield lambda: "pub-closed" in st.done
        exp.rpc("channel.close", code=PIKA_CH)
        hb = conn._heartbeat_checker  # pika's own counters of heartbeat frames sent / received
        st.heartbeats_sent, st.heartbeats_received = hb._heartbeat_frames_sent, hb._heartbeat_frames_received
        conn.close()

    gen = script()
    deadline = time.time() + 120

    def step():
        try:
            while True:
                w = next(gen)
                if isinstance(w, (int, float)):
                    conn.ioloop.call_later(w, step)
                    return
                if not w():
                    poll(w)
                    return
        except StopIteration:
            return
        except BaseException as e:  # stop the loop and re-raise outside
            st.error = e
            conn.ioloop.stop()

    def poll(cond):
        if time.time() > deadline:
            st.error = TimeoutError("long_connection: condition not reached")
            conn.ioloop.stop()
        elif cond():
            step()
        else:
            conn.ioloop.call_later(0.002, lambda: poll(cond))

    def on_open(_c):
        exp.lib_connect(pika_label(), USER)
        step()

    def on_closed(_c, reason):
        st.closed = True
        st.close_reason = reason
        conn.ioloop.stop()

    params = pika.ConnectionParameters(HOST4, 5672, VHOST, pika.PlainCredentials(USER, PASSWORD),
                                       frame_max=FRAME_MAX, heartbeat=HEARTBEAT)
    conn = pika.SelectConnection(params, on_open_callback=on_open,
                                 on_open_error_callback=lambda _c, e: on_closed(_c, e),
                                 on_close_callback=on_closed)
    conn.ioloop.start()
    if st.error:
        raise st.error
    assert st.closed and isinstance(st.close_reason, pika.exceptions.ConnectionClosedByClient), st.close_reason
    exp.lib_close()
    exp.msg("confirmed_messages", N)
    assert st.confirmed == set(range(1, N + 1))
    assert st.confirm_multiple >= 1, "no multiple confirm in this recording: re-record"
    exp.heartbeat("C>S", st.heartbeats_sent)
    exp.heartbeat("S>C", st.heartbeats_received)
    exp.note(f"Publisher confirms: the three batches of 8 pipelined publishes (seq 33-40, 61-68, 89-96) "
             f"were confirmed with {st.confirm_frames_in_batches} basic.ack frames in this recording "
             f"(timing-dependent: between 3 and 24; counted by the client as they arrived); every other "
             f"publish was awaited alone and got exactly one basic.ack. In all {st.confirm_frames} "
             f"broker basic.ack frames, {st.confirm_multiple} with multiple=1. Consumer: delivery tag = "
             f"publish seq (one queue, one consumer, no requeue); tags 4k+1 acked alone, 4k acked with "
             f"multiple=1 covering 4k-2..4k: 30 + 30 basic.ack frames settle the 120 deliveries. Large messages "
             f"(seq {', '.join(map(str, LARGE))}) are 300000 bytes: body frames of 131064+131064+37872 in "
             f"both directions; each is published only once the delivery before it (held, unacked) has "
             f"arrived. heartbeats_min holds the heartbeat frames pika counted before its close: "
             f"{st.heartbeats_sent} sent (pika sends one every 5 s whatever the traffic) and "
             f"{st.heartbeats_received} received (RabbitMQ's heartbeat sender runs on its own timer; "
             f"whether it sends any while deliveries flow is timing-dependent). The queue is exclusive "
             f"(removed with the connection). `cuts` gives 0-based record numbers of the decompressed pcap.")

    def after_capture(raw_path):
        exp.cuts = find_cuts(raw_path, st)
    ctx.after_capture = after_capture


def find_cuts(raw_path, st) -> list[dict]:
    """Map the large publishes' bytes to records; keep the first and the last large message that
    offers a record boundary inside one of its body frames (C>S, consecutive records)."""
    segs = read_segments(raw_path)
    c2s = [s for s in segs if s.dport == 5672]
    ports = {s.sport for s in c2s}
    assert len(ports) == 1, ports
    isn = next(s.seq for s in c2s if s.flags & 0x02)  # SYN
    # stream offset (0 = first byte after the SYN) -> record, for every C>S payload
    spans, stream = [], bytearray()
    for s in c2s:
        if not s.payload:
            continue
        off = (s.seq - isn - 1) % 2 ** 32
        assert off == len(stream), f"record {s.index}: gap or retransmission at offset {off}"
        spans.append((off, off + len(s.payload), s.index))
        stream += s.payload
    next_index = {s.index: s.index + 1 for s in segs}
    by_index = {s.index: s for s in segs}

    def record_at(offset):
        return next((a, b, idx) for a, b, idx in spans if a <= offset < b)

    candidates = []
    for large in st.large:
        seq, data = large["seq"], large["bytes"]
        start = stream.find(data)
        assert start >= 0 and stream.find(data, start + 1) < 0, f"publish {seq} not found once"
        method_len = 7 + int.from_bytes(data[3:7], "big") + 1
        header_len = 7 + int.from_bytes(data[method_len + 3:method_len + 7], "big") + 1
        frame_off = start + method_len + header_len
        for k in (1, 2, 3):
            size = int.from_bytes(data[frame_off - start + 3:frame_off - start + 7], "big")
            a, b, idx = record_at(frame_off)
            end = frame_off + 7 + size + 1
            after = by_index.get(next_index[idx])
            if end > b and after is not None and after.dport == 5672 and after.payload and \
                    (after.seq - isn - 1) % 2 ** 32 == b:
                snap = st.snapshots[seq]
                methods_before = copy.deepcopy(snap["methods"])
                methods_before["C>S"]["basic.publish"] = methods_before["C>S"].get("basic.publish", 0) + 1
                candidates.append({
                    "index": idx + 1,
                    "meaning": "records[:index] is one night, records[index:] the next",
                    "inside": {"direction": "C>S", "method": "basic.publish", "message_id": message_id(seq),
                               "publish_seq": seq, "body_size": LARGE_SIZE, "body_frame": k,
                               "body_frame_size": size,
                               "frame_bytes_before_cut": b - frame_off,
                               "frame_bytes_after_cut": end - b},
                    "record_before": {"index": idx, "holds": f"start of body frame {k} (its first "
                                      f"{b - frame_off} of {7 + size + 1} bytes)"},
                    "record_after": {"index": idx + 1, "holds": "the continuation of that body frame"},
                    "unconfirmed_publishes": [{"seq": seq, "message_id": message_id(seq)}],
                    "unacked_deliveries": [{"channel": 2, "delivery_tag": t, "message_id": message_id(t)}
                                           for t in snap["unacked"]],
                    "complete_publishes_before": seq - 1,
                    "methods_before": {d: dict(sorted(m.items())) for d, m in methods_before.items()},
                    "messages_before": {k2: snap["messages"][k2] for k2 in
                                        ("delivered", "acked", "acked_multiple_frames", "confirm_acks")},
                })
                break  # first usable body frame of this message
            frame_off = end
    assert candidates, "no record boundary inside a large body frame: re-record"
    first = candidates[0]
    last = candidates[-1]
    assert last["inside"]["publish_seq"] > first["inside"]["publish_seq"], "need two different large messages"
    return [{"name": "night1|night2", **first}, {"name": "night2|night3", **last}]
