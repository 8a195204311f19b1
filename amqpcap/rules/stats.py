"""What `amqpcap decode --stats` shows: a summary of the analytics rows of some captures, without
Spark. Per connection: peers, user, vhost, how it ended; per TLS connection its handshake and
whether it was decrypted; errors by reply code; and latency percentiles: deliver->ack per queue and
consumer, publish->confirm per exchange and routing key, RPC per request method. Fed by the same
state machines as the lake (`Stats.emit`)."""

from __future__ import annotations

from collections import Counter, defaultdict

from amqpcap.rules.findings.listing import render_text as render_findings
from amqpcap.rules.findings.listing import shown
from amqpcap.tables.registry import (
    CONNECTIONS,
    DECODE_ISSUES,
    DELIVERIES,
    ERRORS,
    FINDINGS,
    PUBLISHES,
    RPC_CALLS,
    TLS_CONNECTIONS,
    Table,
)

PERCENTILES = (50, 95, 99)
# what --stats shows of each connections row (key shown -> column)
CONNECTION_FACTS = {"connection": "connection", "client": "client", "server": "server",
                    "client_product": "client_product", "client_version": "client_version",
                    "server_product": "server_product", "server_version": "server_version", "user": "auth_user",
                    "vhost": "vhost", "connection_name": "connection_name", "saw_start": "saw_start",
                    "end_reason": "end_reason", "close_code": "close_code", "close_text": "close_text",
                    "messages_published": "messages_published", "messages_delivered": "messages_delivered"}
# what it shows of each tls_connections row
TLS_FACTS = ("connection", "client", "server", "version", "cipher_suite", "sni", "alpn", "resumed", "key_logged",
             "decrypted", "handshake_ms", "cert_subject", "alerts")


def percentile(ordered: list[float], p: float) -> float:
    """Nearest-rank percentile of sorted values (exact, no interpolation)."""
    rank = max(1, -(-len(ordered) * p // 100))
    return ordered[int(rank) - 1]


def latency_summary(values: list[float]) -> dict:
    ordered = sorted(values)
    summary = {"count": len(ordered)}
    if ordered:
        summary.update({f"p{p}_ms": round(percentile(ordered, p), 3) for p in PERCENTILES})
        summary["max_ms"] = round(ordered[-1], 3)
    return summary


class Stats:
    def __init__(self, findings=None) -> None:
        """`findings`: the [findings] settings (connection-churn, across connections, is judged
        when the summary is made)."""
        from amqpcap.rules.findings.visibility import CaptureDamage
        self.findings_settings = findings
        self.findings: list[dict] = []
        self.damage = CaptureDamage()  # the capture files' own capture-loss
        self.connections: list[dict] = []
        self.tls: list[dict] = []
        self.errors: Counter = Counter()  # (method, reply code, name) -> count
        self.acks: dict[tuple, list[float]] = defaultdict(list)  # (queue, consumer tag) -> ms
        self.outcomes: Counter = Counter()  # delivery outcome -> count
        self.confirms: dict[tuple, list[float]] = defaultdict(list)  # (exchange, routing key) -> ms
        self.confirm_outcomes: Counter = Counter()
        self.rpc: dict[str, list[float]] = defaultdict(list)  # request -> ms
        self.rpc_outcomes: Counter = Counter()

    def emit(self, table: Table, row: dict) -> None:
        if table is FINDINGS:
            self.findings.append(row)
        elif table is DECODE_ISSUES:
            self.damage.add(row)
        elif table is CONNECTIONS:
            self.connections.append(row)
        elif table is TLS_CONNECTIONS:
            self.tls.append({key: row.get(key) for key in TLS_FACTS})
        elif table is ERRORS:
            self.errors[(row["method"], row["reply_code"], row["reply_name"])] += 1
        elif table is DELIVERIES:
            self.outcomes[row["outcome"]] += 1
            if row["outcome"] in ("ack", "nack", "reject") and row["settle_latency_ms"] is not None:
                self.acks[(row["queue"], row["consumer_tag"])].append(row["settle_latency_ms"])
        elif table is PUBLISHES:
            self.confirm_outcomes[row["confirm_outcome"] or "not in confirm mode"] += 1
            if row["confirm_latency_ms"] is not None:
                self.confirms[(row["exchange"], row["routing_key"])].append(row["confirm_latency_ms"])
        elif table is RPC_CALLS:
            self.rpc_outcomes[row["outcome"]] += 1
            if row["latency_ms"] is not None:
                self.rpc[row["request"]].append(row["latency_ms"])

    def all_findings(self) -> list[dict]:
        """Every finding: the connections', and connection-churn across them."""
        from amqpcap.rules.findings.churn import ConnectionChurn
        from amqpcap.settings import FindingsSection
        churn = ConnectionChurn(self.findings_settings or FindingsSection())
        for row in self.connections:
            churn.add(row)
        return self.findings + churn.rows() + self.damage.rows()

    def summary(self) -> dict:
        amqp = [c for c in self.connections if c["status"] == "amqp"]
        return {
            "findings": shown(self.all_findings()),
            "connections": [{key: c.get(column) for key, column in CONNECTION_FACTS.items()} for c in amqp],
            "other_connections": dict(Counter(c["status"] for c in self.connections if c["status"] != "amqp")),
            "tls_connections": self.tls,
            "errors": [{"method": m, "reply_code": code, "reply_name": name, "count": n}
                       for (m, code, name), n in sorted(self.errors.items(), key=lambda kv: -kv[1])],
            "deliveries": {"outcomes": dict(self.outcomes), "ack_latency": [
                {"queue": q, "consumer_tag": tag, **latency_summary(v)} for (q, tag), v in sorted(
                    self.acks.items(), key=lambda kv: (str(kv[0][0]), str(kv[0][1])))]},
            "publishes": {"outcomes": dict(self.confirm_outcomes), "confirm_latency": [
                {"exchange": x, "routing_key": rk, **latency_summary(v)} for (x, rk), v in sorted(
                    self.confirms.items(), key=lambda kv: (str(kv[0][0]), str(kv[0][1])))]},
            "rpc_calls": {"outcomes": dict(self.rpc_outcomes), "latency": [
                {"request": r, **latency_summary(v)} for r, v in sorted(self.rpc.items())]},
        }


def render_text(summary: dict) -> str:
    """The summary as aligned plain-text tables."""
    out: list[str] = []

    def table(title: str, headers: list[str], rows: list[list]) -> None:
        out.append(f"{title}")
        if not rows:
            out.append("  (none)\n")
            return
        cells = [[("" if v is None else str(v)) for v in row] for row in rows]
        widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
        out.append("  " + "  ".join(h.ljust(w) for h, w in zip(headers, widths)))
        out.extend("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in cells)
        out.append("")

    out.append(render_findings(summary["findings"]))
    conns = summary["connections"]
    table(f"connections ({len(conns)} AMQP" + "".join(f", {n} {s}" for s, n in summary["other_connections"].items())
          + ")", ["client", "server", "client product", "user", "vhost", "ended", "published", "delivered"],
          [[c["client"], c["server"], " ".join(p for p in (c["client_product"], c["client_version"]) if p),
            c["user"], c["vhost"], (c["end_reason"] or "") + (f" {c['close_code']}" if c["close_code"] not in (None, 200, 0)
                                                        else ""), c["messages_published"], c["messages_delivered"]]
           for c in conns])
    tls = summary["tls_connections"]
    table(f"TLS connections ({len(tls)}, {sum(bool(t['decrypted']) for t in tls)} decrypted)",
          ["client", "server", "version", "cipher suite", "sni", "resumed", "decrypted", "handshake ms"],
          [[t["client"], t["server"], t["version"], t["cipher_suite"], t["sni"], t["resumed"] or "",
            "yes" if t["decrypted"] else "no key" if not t["key_logged"] else "no",
            round(t["handshake_ms"], 1) if t["handshake_ms"] is not None else None] for t in tls])
    table("errors", ["method", "code", "name", "count"],
          [[e["method"], e["reply_code"], e["reply_name"], e["count"]] for e in summary["errors"]])
    latency = ["count", *[f"p{p} ms" for p in PERCENTILES], "max ms"]

    def numbers(s):
        return [s["count"], *[s.get(f"p{p}_ms") for p in PERCENTILES], s.get("max_ms")]
    d = summary["deliveries"]
    table("deliver -> settle latency (" + _counts(d["outcomes"]) + ")", ["queue", "consumer", *latency],
          [[s["queue"], s["consumer_tag"], *numbers(s)] for s in d["ack_latency"]])
    p = summary["publishes"]
    table("publish -> confirm latency (" + _counts(p["outcomes"]) + ")", ["exchange", "routing key", *latency],
          [[s["exchange"] or "(default)", s["routing_key"], *numbers(s)] for s in p["confirm_latency"]])
    r = summary["rpc_calls"]
    table("RPC latency (" + _counts(r["outcomes"]) + ")", ["request", *latency],
          [[s["request"], *numbers(s)] for s in r["latency"]])
    return "\n".join(out)


def _counts(counter: dict) -> str:
    return ", ".join(f"{n} {k}" for k, n in sorted(counter.items(), key=lambda kv: -kv[1])) or "none"
