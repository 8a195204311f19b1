"""deprecated-feature: what a client still uses that RabbitMQ's deprecated-features list retires
(4.3 denies them by default), seen on the wire: global QoS (basic.qos global=true), transient
non-exclusive queues (queue.declare durable=false exclusive=false), and the x-queue-master-locator
queue argument. Named per client with the frames (classic queue mirroring, RAM nodes and the
management metrics are broker configuration: not on the wire)."""

from __future__ import annotations

from amqpcap.rules.common import arguments
from amqpcap.rules.findings.finding import WARNING, Finding, bounded, named, plural

FEATURES = {
    "global_qos": "global QoS (basic.qos global=true): use per-consumer prefetch",
    "transient_nonexcl_queues": "transient non-exclusive queues (queue.declare durable=false exclusive=false): "
                                "declare them durable, or exclusive",
    "queue_master_locator": "the x-queue-master-locator queue argument: use x-queue-leader-locator",
}


class Deprecations:
    def __init__(self) -> None:
        self.used: dict[tuple, Finding] = {}

    def _use(self, row, feature: str, queue=None) -> None:
        key = (feature, bounded(self.used, (queue,))[0])
        finding = self.used.get(key)
        if finding is None:
            finding = self.used[key] = Finding("deprecated-feature", WARNING, row, key, channel=row.channel, queue=key[1])
            finding.facts["feature"] = feature
        finding.seen(row.ts_ns)
        finding.cite("frames", row.pcap_record)
        finding.cite("channels", row.channel)

    def qos(self, row) -> None:
        if row.direction == "C>S" and row.qos_global:
            self._use(row, "global_qos")

    def declare(self, row) -> None:
        if row.direction != "C>S" or row.passive:
            return
        if not row.durable and not row.exclusive:
            self._use(row, "transient_nonexcl_queues", row.queue)
        table = arguments(row).get("arguments")
        if isinstance(table, dict) and "x-queue-master-locator" in table:
            self._use(row, "queue_master_locator", row.queue)

    def findings(self, rules):
        for (feature, queue), finding in self.used.items():
            on = f" (queue {named(queue)})" if queue is not None else ""
            yield finding, (f"{rules.client_name()} uses {FEATURES[feature]}{on}, {plural(finding.count, 'time')}: "
                            f"RabbitMQ's deprecated feature {feature}, denied by default from 4.3")
