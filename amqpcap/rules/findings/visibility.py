"""What the capture could not tell: capture-loss (bytes of the connection the capture lost: `gap`
issues, or a TLS connection's `tls-gap`) and tls-not-decoded (a TLS connection without its keys),
from the `decode_issues` and `tls_connections` rows."""

from __future__ import annotations

from amqpcap.rules.findings.finding import INFO, WARNING, Finding, plural


class Visibility:
    def __init__(self) -> None:
        self.loss: Finding | None = None
        self.tls: list = []

    def row(self, table: str, row, rules) -> None:
        if table == "tls_connections":
            if not row.get("decrypted"):
                self.tls.append(row)
            return
        kind = row.get("issue_kind")
        if not (kind == "tls-gap" or (kind == "gap" and not row.get("tls"))):
            return
        if self.loss is None:
            self.loss = Finding("capture-loss", WARNING, row, ("loss",), unit="bytes")
            self.loss.value = 0
        self.loss.seen(row.get("ts_ns"))
        self.loss.value += row.get("bytes_skipped") or 0
        self.loss.cite("frames", row.get("pcap_record"))

    def findings(self, rules):
        loss = self.loss
        if loss is not None:
            yield loss, (f"the capture lost {loss.value:,.0f} bytes of this connection in "
                         f"{plural(loss.count, 'gap')}: what they held (frames, acks, confirms) is missing from "
                         "every table; capture with a larger buffer (tcpdump -B) or snaplen")
        for row in self.tls:
            finding = Finding("tls-not-decoded", INFO, row, ("tls",))
            hello = row.get("client_hello_at")
            finding.seen(hello * 1000 if hello is not None else None)
            why = ("its keys were in the key log but it could not be decrypted" if row.get("key_logged")
                   else "no key log held its secrets")
            about = ", ".join(str(v) for v in (row.get("version"), row.get("cipher_suite"),
                                                f"SNI {row['sni']}" if row.get("sni") else None) if v)
            yield finding, (f"a TLS connection ({about}) was not decoded: {why}; only its handshake and sizes are "
                            "in the tables (amqpcap run --tls-keylog)")
