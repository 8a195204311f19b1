"""What happened to publishes: unroutable (mandatory publishes the broker returned), publish-nacked
(confirms that said no), large-message (bodies at least large_message_bytes), from the `publishes`
and `deliveries` rows (and the basic.return frames, whose numbers are the evidence)."""

from __future__ import annotations

from amqpcap.rules.findings.finding import ERROR, INFO, WARNING, Finding, bounded, named, plural


class Returns:
    """unroutable, by exchange, routing key and reply code."""

    def __init__(self) -> None:
        self.returned: dict[tuple, Finding] = {}

    def _finding(self, where, exchange, routing_key, code) -> Finding:
        key = bounded(self.returned, (exchange, routing_key, code))
        finding = self.returned.get(key)
        if finding is None:
            finding = self.returned[key] = Finding("unroutable", WARNING, where, key, exchange=key[0],
                                                   routing_key=key[1])
        return finding

    def frame(self, row) -> None:
        """A basic.return: its frame is evidence (the count is the publishes rows')."""
        finding = self._finding(row, row.exchange, row.routing_key, row.reply_code)
        finding.cite("frames", row.pcap_record)
        finding.facts.setdefault("text", row.reply_text)

    def row(self, table: str, row, rules) -> None:
        if table != "publishes" or not row.returned:
            return
        finding = self._finding(row, row.exchange, row.routing_key, row.return_code)
        finding.seen(row.published_ns)
        finding.facts["text"] = row.return_text
        finding.cite("channels", row.channel)
        finding.cite("message_keys", row.message_key)

    def findings(self, rules):
        for (exchange, routing_key, code), finding in self.returned.items():
            if not finding.count:  # returns of publishes made before the capture began
                continue
            n = finding.count
            yield finding, (f"{plural(n, 'mandatory publish', 'mandatory publishes')} to exchange {named(exchange)} "
                            f"with routing key {named(routing_key)} {'was' if n == 1 else 'were'} returned "
                            f"{code} {finding.facts.get('text') or ''}: no queue is bound for that key".replace("  ", " "))


class Nacks:
    """publish-nacked: the broker's basic.nack of confirmed publishes, by exchange and routing key."""

    def __init__(self) -> None:
        self.nacked: dict[tuple, Finding] = {}

    def row(self, table: str, row, rules) -> None:
        if table != "publishes" or row.confirm_outcome != "nack":
            return
        key = bounded(self.nacked, (row.exchange, row.routing_key))
        finding = self.nacked.get(key)
        if finding is None:
            finding = self.nacked[key] = Finding("publish-nacked", ERROR, row, key, exchange=key[0], routing_key=key[1])
        finding.seen(row.published_ns)
        finding.cite("frames", rules.record)  # the basic.nack that settled it
        finding.cite("channels", row.channel)
        finding.cite("message_keys", row.message_key)

    def findings(self, rules):
        for (exchange, routing_key), finding in self.nacked.items():
            n = finding.count
            yield finding, (f"the broker nacked {plural(n, 'confirmed publish', 'confirmed publishes')} to exchange "
                            f"{named(exchange)} with routing key {named(routing_key)}: "
                            f"{'it was' if n == 1 else 'they were'} not enqueued (an internal error, a queue's "
                            f"overflow=reject-publish or length limit)")


class LargeMessages:
    """large-message: published (by exchange and routing key) or delivered (by queue) bodies of at
    least large_message_bytes."""

    def __init__(self, settings) -> None:
        self.limit = settings.large_message_bytes
        self.large: dict[tuple, Finding] = {}

    def row(self, table: str, row, rules) -> None:
        size = row.body_size
        if size is None or size < self.limit:
            return
        if table == "publishes":
            key = ("published", row.exchange, row.routing_key)
        else:
            key = ("delivered", row.queue)
        key = bounded(self.large, key)
        finding = self.large.get(key)
        if finding is None:
            finding = self.large[key] = Finding("large-message", INFO, row, key, threshold=self.limit, unit="bytes")
            if table == "publishes":
                finding.exchange, finding.routing_key = key[1], key[2]
            else:
                finding.queue = key[1]
        finding.seen(row.published_ns if table == "publishes" else row.delivered_ns, size)
        finding.cite("message_keys", row.message_key)

    def findings(self, rules):
        for key, finding in self.large.items():
            n = finding.count
            where = (f"published to exchange {named(key[1])} with routing key {named(key[2])}" if key[0] == "published"
                     else f"delivered from queue {named(key[1])}")
            yield finding, (f"{plural(n, 'message')} of {finding.threshold / 1048576:g} MiB or more {where}, the largest "
                            f"{finding.value / 1048576:.1f} MiB: large bodies hold a channel and a queue's memory "
                            "(RabbitMQ 4 refuses above 16 MiB by default)")
