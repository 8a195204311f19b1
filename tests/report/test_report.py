"""amqpcap report on the samples' lake: what each section shows, checked against what the samples
hold by construction (data/samples/README.md), and the period filter."""

from __future__ import annotations

import re

import pytest

from amqpcap.cli import OK, main
from amqpcap.report import Period
from amqpcap.report.model import NOTHING
from amqpcap.report.sections import SECTIONS
from amqpcap.report.source import Context, open_lake


def sections(lake_path: str, since=None, until=None) -> dict:
    ctx = Context.of(open_lake(lake_path), Period.parse(since, until))
    return {s.key: s for s in (module.build(ctx) for module in SECTIONS)}


@pytest.fixture(scope="module")
def whole(lake):
    return sections(lake[0])


def rows(section, index=0) -> list[tuple]:
    return section.tables[index].rows


@pytest.mark.slow
def test_every_section_has_something_to_show_on_the_samples(whole):
    for key, section in whole.items():
        assert section.figures and not section.empty, key
        for fig in (f for entry in section.figures for f in (entry if isinstance(entry, tuple) else (entry,))):
            assert any(len(trace.x or []) for trace in fig.data), key


@pytest.mark.slow
def test_latency_sections(whole):
    acks = whole["acks"]
    outcomes = {trace.name.split(" (")[0] for trace in acks.figures[0].data}
    assert {"ack", "nack", "reject"} <= outcomes  # returns_nack_reject.pcap
    queues = {r[0]: r for r in rows(acks)}
    assert queues["amqpcap.long"][1] == 120  # long_connection: 120 messages consumed and acked
    assert all(r[2] <= r[3] <= r[4] <= r[5] for r in queues.values())  # p50 <= p95 <= p99 <= max
    confirms = whole["confirms"]
    assert any(t.name.startswith("nack (") for t in confirms.figures[0].data)  # confirms.pcap: a broker nack
    assert "(default) / amqpcap.long" in {r[0] for r in rows(confirms)}
    rpc = {r[0]: r for r in rows(whole["rpc"])}
    assert rpc["queue.declare"][3] >= 1 and rpc["tx.commit"][3] >= 1  # channel_errors: 404/406 answer them


@pytest.mark.slow
def test_errors_name_codes_and_failing_methods(whole):
    kinds = {(r[0], r[2], r[3], r[4]) for r in rows(whole["errors"])}
    assert ("channel.close", 404, "NOT_FOUND", "basic.consume") in kinds  # channel_errors.pcap
    assert ("channel.close", 406, "PRECONDITION_FAILED", "tx.commit") in kinds
    assert ("basic.return", 312, "NO_ROUTE", None) in kinds
    series = {t.name for t in whole["errors"].figures[0].data}
    assert {"404 NOT_FOUND", "312 NO_ROUTE", "basic.nack"} <= series


@pytest.mark.slow
def test_timeline_flow_heartbeats_talkers_decode(whole):
    gantt = whole["timeline"].figures[0]
    names = {t.name for t in gantt.data if t.name}
    assert {"connection ended by close", "connection ended by rst", "channel closed with an error"} <= names
    flow = rows(whole["flow"])
    # connection_errors: flow active=false; blocked_publisher: connection.blocked by the broker
    assert sorted((r[3], r[4]) for r in flow) == [("channel.flow", "client"), ("connection.blocked", "server")]
    assert whole["heartbeats"].figures  # heartbeats.pcap agreed on 1 s
    routes = {r[0]: r for r in whole["talkers"].tables[1].rows}
    assert routes["(default) / amqpcap.long"][1] == 120
    decode = {r[0]: r for r in rows(whole["decode"])}
    assert decode["mid_stream.pcap"][6] > 0  # the capture starts inside a body frame
    assert decode["crafted/truncated_gzip.pcap.gz"][1] == "partial"


@pytest.mark.slow
def test_a_period_keeps_only_its_traffic(lake):
    # the crafted captures are dated 2023-11-14/15, the recorded ones 2026-11
    crafted = sections(lake[0], "2023-11-14", "2023-11-16")
    assert crafted["errors"].empty and crafted["confirms"].empty
    assert not crafted["rates"].empty and not crafted["timeline"].empty
    labels = crafted["timeline"].figures[0].layout.yaxis.ticktext
    assert labels and all(label.startswith(("10.1.0.5:", "[fd00::5]:")) for label in labels)
    nothing = sections(lake[0], "2020-01-01", "2020-01-02")
    assert all(s.empty and s.notes == [NOTHING] for s in nothing.values())


@pytest.mark.slow
def test_the_command_writes_one_page_that_needs_no_network(lake, tmp_path, capsys):
    out = tmp_path / "report.html"
    assert main(["report", "--lake", lake[0], "--since", "2026-11-21", "-o", str(out)]) == OK
    assert capsys.readouterr().out.startswith(f"amqpcap report: {out}")
    page = out.read_text()
    assert page.count("Plotly.newPlot(") == page.count('class="plotly-graph-div"') >= 10
    assert not re.search(r"""<(script|link|img)[^>]+(src|href)=["']?https?:""", page)
    assert "from 2026-11-21 00:00:00 to the end (UTC)" in page


@pytest.mark.slow
def test_what_needs_attention_comes_first_and_links_to_the_evidence(whole, lake):
    assert next(iter(whole)) == "attention"
    section = whole["attention"]
    table = section.tables[0]
    kinds = {row[1] for row in table.rows}
    assert {"consumer-ack-timeout", "redelivery-loop", "unroutable", "publisher-blocked", "connection-churn",
            "channel-churn", "deprecated-feature"} <= kinds
    assert [row[0] for row in table.rows] == sorted((row[0] for row in table.rows),
                                                    key=["error", "warning", "info"].index)
    links = {row[1]: row[-1].href for row in table.rows}
    assert links["consumer-ack-timeout"] == "#acks" and links["publisher-blocked"] == "#flow"
    assert all(link.removeprefix("#") in whole for link in links.values())


@pytest.mark.slow
def test_the_findings_command_lists_the_lake_s_findings_by_severity(lake, capsys):
    import json
    assert main(["findings", "--lake", lake[0], "--json"]) == OK
    listed = json.loads(capsys.readouterr().out)
    severities = [f["severity"] for f in listed]
    assert severities == sorted(severities, key=["error", "warning", "info"].index)
    ack = next(f for f in listed if f["kind"] == "consumer-ack-timeout")
    assert ack["queue"] == "amqpcap.acktimeout" and json.loads(ack["evidence_json"])["delivery_tags"] == [3]
    assert main(["findings", "--lake", lake[0], "--severity", "error"]) == OK
    text = capsys.readouterr().out
    assert text.startswith("findings: ") and "consumer-ack-timeout" in text and " warning " not in text
