"""What the capture could not tell: capture-loss (bytes of the connection the capture lost: `gap`
issues, or a TLS connection's `tls-gap`) and tls-not-decoded (a TLS connection without its keys),
from the `decode_issues` and `tls_connections` rows."""

from __future__ import annotations

from amqpcap.rules.findings.finding import ERROR, INFO, WARNING, Finding, plural


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


class CaptureDamage:
    """capture-loss of capture files themselves (damaged records, a truncated or damaged gzip, a file
    that is no capture), from the `decode_issues` rows tied to no connection and the files that
    failed, in any order; made where those are (amqpcap.job.nightly's driver, `decode --findings`)."""

    def __init__(self) -> None:
        self.files: dict[str, Finding] = {}

    def _file(self, capture: str, date) -> Finding:
        """The capture file's finding (its id from the file's name: the same wherever the file lies)."""
        finding = self.files.get(capture)
        if finding is None:
            finding = self.files[capture] = Finding("capture-loss", WARNING, {"capture": capture},
                                                    ("file", capture.rsplit("/", 1)[-1]), unit="bytes")
            finding.value = 0
            finding.facts.update(kinds=[], date=date, failed=None)
        return finding

    def add(self, row: dict) -> None:
        """A `decode_issues` row (those of a connection are the connection's capture-loss)."""
        capture = row.get("capture")
        if row.get("connection") is not None or capture is None:
            return
        finding = self._file(capture, row.get("date"))
        finding.seen(row.get("ts_ns"))
        finding.value += row.get("bytes_skipped") or 0
        if row.get("issue_kind") not in finding.facts["kinds"]:
            finding.facts["kinds"].append(row.get("issue_kind"))
        finding.cite("file_offsets", row.get("file_offset"))

    def failed(self, capture: str, error: str, date) -> None:
        """A file that could not be read at all."""
        finding = self._file(capture, date)
        finding.severity = ERROR
        finding.facts["failed"] = error

    def dropped(self, capture: str, dropped: int, packets: int, date) -> None:
        """The packets a capture file's interface statistics say were dropped."""
        self._file(capture, date).facts.update(dropped=dropped, packets=packets)

    def rows(self) -> list[dict]:
        out = []
        for capture, finding in self.files.items():
            dropped, kinds = finding.facts.get("dropped"), list(finding.facts["kinds"])
            measure = {}
            if finding.facts.get("failed"):
                summary = f"the capture file could not be read: {finding.facts['failed']}"
            elif dropped and not finding.count:
                measure = {"value": float(dropped), "unit": "packets", "count": dropped}
                summary = (f"the capture dropped {dropped:,} packets (its interface statistics), beside the "
                           f"{finding.facts['packets']:,} it holds: connections' gaps say which streams lost bytes; "
                           "capture with a larger buffer (tcpdump -B), a snaplen, or a filter")
            else:
                if dropped:
                    kinds.append(f"and {dropped:,} packets dropped, its statistics say")
                summary = (f"the capture file itself is damaged ({', '.join(kinds)}): "
                           f"{finding.value:,.0f} bytes of it skipped in {plural(finding.count, 'place')}; what "
                           "they held is missing from every table")
            row = finding.row(summary)
            row.update(measure)
            if row["date"] is None:
                row["date"] = finding.facts.get("date")
            row["source"], row["provisional"] = capture, False
            out.append(row)
        return out
