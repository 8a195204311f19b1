"""Today's tables against the golden copies the Spark implementation (0.1.0) produced for the same
captures (tests/golden/README.md): decoder, row builders and analytics state machines in one pass,
without Spark. Every table must be equal, except for the intentional differences listed here.

Intentional differences:
- message_flows.published_at / delivered_at: 0.1.0 computed them as floor(ns / 1000.0) through a
  double, which rounds ns values just below a whole microsecond up or down (39 rows of the samples
  were a microsecond off). They are now exact (ns // 1000), equal to publishes.published_at and
  deliveries.delivered_at.
- message_flows.deliver_to_settle_ms / end_to_end_ms: 0.1.0 took the settle time at microsecond
  precision (from deliveries.settled_at); they now use the exact nanoseconds, so they equal
  deliveries.settle_latency_ms (differences below a microsecond).
- captures: the new capture reader (amqpcap.capture.readers) reads ipv6_pcapng.pcapng whole (0.1.0 took its
  last two blocks, interface statistics, for a truncated record and marked the file partial), and
  words the truncated gzip's error without a record number (a byte range knows only its own).
- decode_issues: damage to a capture file itself is now a row too (its `file_offset` set); the
  golden copy has only the stream issues.
- Columns added since (deliveries.message_id, settled_ns...) are not in the golden copies; they
  are checked by their own tests.
- protocol_headers.pcap's HTTP request on the AMQP port (issue 51): the client's protocol is named
  (status `http` in streams and connections, the not-amqp-header issue says HTTP) and its 40 bytes
  are counted as not decoded, not resynchronised over (a `resync` issue, which could find frames
  in an HTTP request).
"""

from __future__ import annotations

import json

import pytest

from amqpcap.tables.registry import ANALYTICS_TABLES, RAW_TABLES
from tests.helpers.samples import ROOT, SHARED
from tests.helpers.tabulated import canonical, golden, tabulated_folder

GOLDEN = ROOT / "tests" / "golden"
CORPORA = {"samples": ROOT / "data" / "samples", "public": SHARED / "captures" / "public"}
# captures are a per-file table the job writes (the decoder's file facts); the rest are per connection.
# tls_connections and findings came after the golden copies (their own tests: tests/tls/,
# tests/rules/test_findings.py).
TABLES = [t.name for t in RAW_TABLES + ANALYTICS_TABLES if t.name not in ("captures", "tls_connections", "findings")]
ROUNDED = ("published_at", "delivered_at", "deliver_to_settle_ms", "end_to_end_ms")  # message_flows: see above


def golden_captures(corpus: str) -> tuple[str, ...]:
    """The captures the golden copy was made from (samples recorded since are not in it)."""
    return tuple(sorted(json.loads(line)["path"] for line in golden(GOLDEN / corpus, "captures")))


def tables_of(corpus: str) -> dict[str, list[dict]]:
    return tabulated_folder(str(CORPORA[corpus]), golden_captures(corpus))


def _rows(corpus: str, table: str, without: tuple[str, ...] = (), got_lines: list[str] | None = None):
    """(golden lines, our lines) on the golden copy's columns, less `without`; ours from the
    Spark-free tabulation unless `got_lines` (canonical JSON lines of every column) are given."""
    want = golden(GOLDEN / corpus, table)
    columns = sorted(set(json.loads(want[0])) - set(without)) if want else None
    if got_lines is None:
        got = canonical(table, tables_of(corpus).get(table, []), str(CORPORA[corpus]), columns)
    else:
        got = sorted(json.dumps({k: v for k, v in json.loads(line).items() if columns is None or k in columns},
                                sort_keys=True) for line in got_lines)
    if without:
        want = sorted(json.dumps({k: v for k, v in json.loads(line).items() if k not in without}, sort_keys=True)
                      for line in want)
    return want, got


# (table, capture) -> columns whose golden values changed on purpose (see the module docstring)
PATCHES = {("captures", "ipv6_pcapng.pcapng"): {"status": "ok", "error": None},
           ("captures", "crafted/truncated_gzip.pcap.gz"): {
               "error": "the last record holds 24 of its 54 bytes (a capture cut while being written?)"}}
# (table, connection[, issue kind]) -> the same, for one connection's rows
HTTP_ON_THE_AMQP_PORT = "5fb47f95b81d02cb"  # protocol_headers.pcap
CONNECTION_PATCHES = {
    ("streams", HTTP_ON_THE_AMQP_PORT): {"status": "http"},
    ("connections", HTTP_ON_THE_AMQP_PORT): {"status": "http"},
    ("decode_issues", HTTP_ON_THE_AMQP_PORT, "not-amqp-header"): {
        "detail": "the client speaks HTTP, not AMQP (its first bytes: 47 45 54 20 2f 20 48 54)"},
    ("decode_issues", HTTP_ON_THE_AMQP_PORT, "resync"): {
        "issue_kind": "not-decoded", "detail": "HTTP from the client: counted, not decoded"}}


def assert_golden(corpus: str, table: str, got_lines: list[str] | None = None) -> None:
    want, got = _rows(corpus, table, ROUNDED if table == "message_flows" else (), got_lines)
    if table == "decode_issues":  # rows about damage to the file itself are new (no connection)
        got = [line for line in got if json.loads(line).get("connection") is not None]
    patched = []
    for line in want:
        row = json.loads(line)
        row.update(PATCHES.get((table, row.get("path", row.get("capture"))), {}))
        row.update(CONNECTION_PATCHES.get((table, row.get("connection")), {}))
        row.update(CONNECTION_PATCHES.get((table, row.get("connection"), row.get("issue_kind")), {}))
        patched.append(json.dumps(row, sort_keys=True))
    want = sorted(patched)
    assert len(got) == len(want), table
    assert got == want, table


@pytest.mark.parametrize("corpus", sorted(CORPORA))
@pytest.mark.parametrize("table", TABLES)
def test_table_equals_its_golden_copy(corpus, table):
    assert_golden(corpus, table)


@pytest.mark.parametrize("corpus", sorted(CORPORA))
def test_message_flow_times_are_exact(corpus):
    tables = tables_of(corpus)
    published = {r["published_ns"] // 1000 for r in tables["publishes"]}
    delivered = {r["delivered_ns"] // 1000 for r in tables["deliveries"]}
    latencies = {r["settle_latency_ms"] for r in tables["deliveries"]}
    flows = tables["message_flows"]
    assert {r["deliver_to_settle_ms"] for r in flows} - {None} <= latencies
    assert {r["published_at"] for r in flows} - {None} <= published
    assert {r["delivered_at"] for r in flows} - {None} <= delivered
    # and the golden copy is at most a microsecond off (the double rounding of 0.1.0)
    want, got = _rows(corpus, "message_flows")
    off = {json.dumps({k: v for k, v in json.loads(line).items() if k not in ROUNDED}, sort_keys=True):
           json.loads(line) for line in want}
    for line in got:
        row = json.loads(line)
        old = off[json.dumps({k: v for k, v in row.items() if k not in ROUNDED}, sort_keys=True)]
        for name in ROUNDED:
            assert (row[name] is None) == (old[name] is None)
            assert row[name] is None or abs(row[name] - old[name]) <= (1 if name.endswith("_at") else 0.001)
