"""Consumers that hold, loop or swamp: consumer-ack-timeout, redelivery-loop, unbounded-prefetch and
slow-consumer, from the `errors` and `deliveries` rows and the channel's basic.qos and outstanding
deliveries (amqpcap.rules.deliveries holds those; it says how many after each delivery)."""

from __future__ import annotations

import math
import re

from amqpcap.rules.findings.finding import ERROR, EVIDENCE_LIMIT, WARNING, Finding, named, plural, seconds

# RabbitMQ's channel.close when a delivery outlived consumer_timeout (3.8.15+: "delivery
# acknowledgement on channel 1 timed out. Timeout value used: 1800000 ms..."; 3.8.x before: "consumer
# ack timed out on channel 1").
_ACK_TIMEOUT = re.compile(r"(acknowledgement|ack)\b.*\btimed out", re.IGNORECASE)
_TIMEOUT_USED = re.compile(r"Timeout value used: (\d+) ms")
SETTLED = ("ack", "nack", "reject")  # a consumer's own settlements (their latency is its)
TRACKED_MESSAGES = 4096  # messages seen redelivered, per connection, whose redeliveries are counted
EXACT_LATENCIES = 4096  # per consumer, kept exactly; beyond, in 1% buckets
BUCKET = math.log(1.01)


def is_ack_timeout(row) -> bool:
    """An `errors` row that is the broker closing a channel because a delivery was not acknowledged in time."""
    return row.get("method") == "channel.close" and row.get("initiator") == "server" \
        and row.get("reply_code") == 406 and bool(_ACK_TIMEOUT.search(row.get("reply_text") or ""))


class AckTimeouts:
    """consumer-ack-timeout: the broker's 406 close (error, naming what the consumer held), and
    deliveries held past ack_held_seconds without one (warning, per consumer)."""

    def __init__(self, settings) -> None:
        self.held_ms = settings.ack_held_seconds * 1000.0
        self.closes: dict[tuple, Finding] = {}  # (channel, close ns) -> the broker's close
        self.late: dict[tuple, Finding] = {}  # (channel, consumer tag, queue) -> held too long

    def row(self, table: str, row, rules) -> None:
        if table == "errors":
            if is_ack_timeout(row):
                text = row.get("reply_text")
                used = _TIMEOUT_USED.search(text or "")
                finding = Finding("consumer-ack-timeout", ERROR, row, ("closed", row.get("channel"), row.get("ts_ns")),
                                  channel=row.get("channel"), threshold=int(used.group(1)) / 1000 if used else None,
                                  unit="s")
                finding.seen(row.get("ts_ns"), count=0)
                finding.facts["reply"] = f"{row.get('reply_code')} {text}"
                finding.cite("frames", rules.record)
                self.closes[(row.get("channel"), row.get("ts_ns"))] = finding
            return
        delivered, settled, outcome = row.delivered_ns, row.settled_ns, row.outcome
        if delivered is None or outcome == "auto-ack":
            return
        closed = self.closes.get((row.channel, settled)) if outcome == "channel-closed" else None
        if closed is not None:  # what the consumer held when the broker closed the channel
            closed.seen(delivered, row.settle_latency_ms / 1000.0)
            if closed.consumer_tag is None:
                closed.consumer_tag, closed.queue = row.consumer_tag, row.queue
            _cite_delivery(closed, row)
            return
        held = row.settle_latency_ms
        if held is None and rules.end_ns is not None:  # still unsettled when the capture ended
            held = (rules.end_ns - delivered) / 1e6
        if held is None or held <= self.held_ms:
            return
        key = (row.channel, row.consumer_tag, row.queue)
        finding = self.late.get(key)
        if finding is None:
            finding = self.late[key] = Finding("consumer-ack-timeout", WARNING, row, ("held",) + key, channel=key[0],
                                               consumer_tag=key[1], queue=key[2], threshold=self.held_ms / 1000.0,
                                               unit="s")
        finding.seen(delivered, held / 1000.0)
        finding.cite("outcomes", outcome)
        _cite_delivery(finding, row)

    def findings(self, rules):
        for finding in self.closes.values():
            held = finding.evidence.get("delivery_tags", [])
            what = (f"consumer {named(finding.consumer_tag)} on queue {named(finding.queue)} held "
                    + (f"delivery {held[0]}" if len(held) == 1 else f"{plural(finding.count, 'delivery', 'deliveries')} "
                       f"(tags {', '.join(map(str, held))})")
                    + f" for {seconds(finding.value)}") if finding.count else \
                "the consumer held a delivery made before the capture began"
            yield finding, (f"{what}; the broker closed channel {finding.channel}: "
                            f"{_first_sentence(finding.facts['reply'])}")
        for finding in self.late.values():
            yield finding, (f"consumer {named(finding.consumer_tag)} on queue {named(finding.queue)} held "
                            f"{plural(finding.count, 'delivery', 'deliveries')} unacknowledged for more than "
                            f"{seconds(finding.threshold)} (up to {seconds(finding.value)}) on channel {finding.channel}")


class Redeliveries:
    """redelivery-loop: one message (by message id, else body hash) redelivered `redeliveries` times or
    more on a queue, and where it was dead-lettered to when it was."""

    def __init__(self, settings) -> None:
        self.limit = settings.redeliveries
        self.messages: dict[tuple, Finding] = {}  # (queue, message) -> its redeliveries
        self.by_message: dict[str, tuple] = {}

    def row(self, table: str, row, rules) -> None:
        message = row.message_id or row.body_sha256
        if message is None:
            return
        if row.redelivered:
            key = (row.queue, message)
            finding = self.messages.get(key)
            if finding is None:
                if len(self.messages) >= TRACKED_MESSAGES:
                    return
                finding = self.messages[key] = Finding("redelivery-loop", WARNING, row, key, channel=row.channel,
                                                       consumer_tag=row.consumer_tag, queue=key[0],
                                                       threshold=self.limit, unit="redeliveries")
                finding.facts.update(message=message, outcomes=[])
                self.by_message[message] = key
            finding.seen(row.delivered_ns)
            finding.value = finding.count
            outcomes = finding.facts["outcomes"]
            if len(outcomes) < EVIDENCE_LIMIT:
                outcomes.append(f"{row.outcome}{' requeue' if row.requeue else ''}")
            _cite_delivery(finding, row)
        elif row.death_reason is not None and message in self.by_message:
            finding = self.messages[self.by_message[message]]
            finding.facts["dead_lettered"] = (row.queue, row.death_reason)
            finding.seen(row.delivered_ns, count=0)
            finding.cite("message_keys", row.message_key)

    def findings(self, rules):
        for finding in self.messages.values():
            if finding.count < self.limit:
                continue
            outcomes = ", ".join(finding.facts["outcomes"])
            summary = (f"message {finding.facts['message']} on queue {named(finding.queue)} was redelivered "
                       f"{finding.count} times (settled: {outcomes})")
            dead = finding.facts.get("dead_lettered")
            if dead is not None:
                summary += f", then dead-lettered ({dead[1]}) and delivered from queue {named(dead[0])}"
            yield finding, summary


class _ChannelUse:
    """One channel lifetime's prefetch, peak of outstanding deliveries and consumers' settle latencies."""

    __slots__ = ("where", "channel", "known", "per_consumer", "per_channel", "peak", "peak_ns", "peak_record",
                 "latencies")

    def __init__(self, row, known: bool) -> None:
        self.where = {name: row.get(name) for name in ("connection", "capture", "client", "server")}
        self.channel = row.get("channel")
        self.known = known  # opened in the capture: no basic.qos seen means none was sent
        self.per_consumer = self.per_channel = 0
        self.peak = 0
        self.peak_ns = None
        self.peak_record = None
        self.latencies: dict[tuple, list] = {}  # (consumer tag, queue) -> [exact ms..., {bucket: n}]


class Prefetch:
    """unbounded-prefetch (a channel without a prefetch limit with unbounded_outstanding deliveries
    outstanding at once) and slow-consumer (a consumer whose deliver-to-ack p99 is above
    slow_consumer_p99_ms while its channel's prefetch was nearly used up)."""

    def __init__(self, settings) -> None:
        self.settings = settings
        self.channels: dict[int, _ChannelUse] = {}
        self.done: list[tuple] = []  # findings of ended channel lifetimes

    def _use(self, row, opened: bool = False) -> _ChannelUse:
        number = row.channel
        use = self.channels.get(number)
        if use is None or opened:
            if use is not None:
                self.done.extend(self._judge(use))
            use = self.channels[number] = _ChannelUse(row, opened)
        return use

    def opened(self, row) -> None:
        if row.direction == "C>S":
            self._use(row, opened=True)

    def qos(self, row) -> None:
        if row.direction == "C>S":
            use = self._use(row)
            if row.qos_global:
                use.per_channel = row.prefetch_count or 0
            else:
                use.per_consumer = row.prefetch_count or 0

    def outstanding(self, row, count: int) -> None:
        use = self._use(row)
        if count > use.peak:
            use.peak, use.peak_ns, use.peak_record = count, row.ts_ns, row.pcap_record

    def row(self, table: str, row, rules) -> None:
        if row.outcome not in SETTLED or row.settle_latency_ms is None:
            return
        use = self.channels.get(row.channel)
        if use is None:
            return
        values = use.latencies.get((row.consumer_tag, row.queue))
        if values is None:
            values = use.latencies[(row.consumer_tag, row.queue)] = [{}]
        latency = row.settle_latency_ms
        if len(values) <= EXACT_LATENCIES:
            values.append(latency)
        else:
            buckets = values[0]
            b = math.floor(math.log(max(latency, 1e-3)) / BUCKET)
            buckets[b] = buckets.get(b, 0) + 1

    def _judge(self, use: _ChannelUse) -> list:
        out = []
        settings = self.settings
        limit = min(x for x in (use.per_consumer, use.per_channel) if x) if (use.per_consumer or use.per_channel) else 0
        consumers = ", ".join(f"{named(tag)} on queue {named(queue)}" for tag, queue in list(use.latencies)[:3])
        if use.known and not limit and use.peak >= settings.unbounded_outstanding:
            finding = Finding("unbounded-prefetch", WARNING, use.where, ("channel", use.channel, use.peak_ns),
                              channel=use.channel, threshold=settings.unbounded_outstanding, unit="deliveries")
            finding.seen(use.peak_ns, use.peak)
            finding.cite("frames", use.peak_record)
            if use.latencies:
                finding.consumer_tag, finding.queue = next(iter(use.latencies))
            out.append((finding, f"channel {use.channel} has no prefetch limit (basic.qos prefetch_count 0, or none "
                                 f"sent) and had {use.peak} deliveries outstanding at once"
                                 + (f" (consumers: {consumers})" if consumers else "")
                                 + "; a consumer's memory, not the broker, then bounds them"))
        if limit:
            for (tag, queue), values in use.latencies.items():
                p99, count = _p99(values)
                if p99 is None or p99 <= settings.slow_consumer_p99_ms \
                        or use.peak < settings.slow_consumer_prefetch_fraction * limit:
                    continue
                finding = Finding("slow-consumer", WARNING, use.where, ("consumer", use.channel, tag, queue),
                                  channel=use.channel, consumer_tag=tag, queue=queue,
                                  threshold=settings.slow_consumer_p99_ms, unit="ms")
                finding.seen(use.peak_ns, p99, count)
                finding.cite("frames", use.peak_record)
                out.append((finding, f"consumer {named(tag)} on queue {named(queue)} took {p99:.0f} ms to "
                                     f"acknowledge (p99 of {count}) with {use.peak} of its prefetch {limit} "
                                     f"outstanding: the consumer is the bottleneck"))
        return out

    def findings(self, rules):
        for use in self.channels.values():
            self.done.extend(self._judge(use))
        self.channels.clear()
        yield from self.done
        self.done = []


def _p99(values: list) -> tuple:
    """(nearest-rank 99th percentile in ms, count) of a consumer's latencies: exact while few, else
    from 1% buckets."""
    buckets, exact = values[0], values[1:]
    count = len(exact) + sum(buckets.values())
    if not count:
        return None, 0
    rank = max(1, -(-count * 99 // 100))
    if not buckets:
        return sorted(exact)[rank - 1], count
    merged: dict = dict(buckets)
    for v in exact:
        b = math.floor(math.log(max(v, 1e-3)) / BUCKET)
        merged[b] = merged.get(b, 0) + 1
    seen = 0
    for b in sorted(merged):
        seen += merged[b]
        if seen >= rank:
            return math.exp((b + 1) * BUCKET), count
    return None, count


def _cite_delivery(finding: Finding, row) -> None:
    finding.cite("delivery_tags", row.delivery_tag)
    finding.cite("message_keys", row.message_key)
    finding.cite("message_ids", row.message_id)


def _first_sentence(text: str) -> str:
    cut = text.find(". ")
    return text if cut < 0 else text[:cut]
