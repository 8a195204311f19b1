"""`amqpcap decode --stats`: the same state machines as the lake, summarised per connection, error
and latency group; checked against the samples' known facts."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from amqpcap.cli import main
from amqpcap.rules.stats import latency_summary, percentile
from tests.helpers.samples import EXPECTED, capture_for, key_log_for

RECORDED = [p for p in EXPECTED if p.parent.name != "crafted"]


def stats(capfdbinary, *paths):
    keys = [f"--tls-keylog={found}" for found in map(key_log_for, paths) if found is not None]
    code = main(["decode", "--stats", "--json", *keys, *map(str, paths)])
    out, _ = capfdbinary.readouterr()
    assert code == 0
    return json.loads(out)


def test_nearest_rank_percentiles():
    values = list(range(1, 101))
    assert [percentile(values, p) for p in (50, 95, 99, 100)] == [50, 95, 99, 100]
    assert latency_summary([3.0, 1.0, 2.0]) == {"count": 3, "p50_ms": 2.0, "p95_ms": 3.0, "p99_ms": 3.0,
                                                 "max_ms": 3.0}
    assert latency_summary([]) == {"count": 0}


@pytest.mark.parametrize("expected_path", RECORDED, ids=[p.name.split(".")[0] for p in RECORDED])
def test_stats_agree_with_the_known_facts(capfdbinary, expected_path):
    facts = json.loads(expected_path.read_text())
    summary = stats(capfdbinary, capture_for(expected_path))
    # every TCP connection: the AMQP ones listed, the others (AMQP 1.0, another protocol) counted
    assert len(summary["connections"]) + sum(summary["other_connections"].values()) == facts["connections"]
    assert summary["other_connections"] == Counter(p["protocol"] for p in facts.get("protocols", [])
                                                   if p["protocol"] != "amqp-0-9-1") + \
        Counter({"http": 1} if expected_path.name.startswith("protocol_headers") else {}) + \
        Counter("tls" for c in facts.get("tls", []) if c["tls"] and not c["key_logged"])
    assert {c["user"] for c in summary["connections"]} - {None} == set(facts["users"])
    outcomes = summary["deliveries"]["outcomes"]
    messages = facts["messages"]
    assert (outcomes.get("ack", 0), outcomes.get("nack", 0), outcomes.get("reject", 0)) == \
        (messages["acked"], messages["nacked"], messages["rejected"])
    assert sum(outcomes.values()) == messages["delivered"] + messages["get_ok"]
    assert summary["publishes"]["outcomes"].get("ack", 0) == messages["confirmed_messages"]
    returns = sum(e["count"] for e in summary["errors"] if e["method"] == "basic.return")
    assert returns == messages["returned"]
    settled = sum(g["count"] for g in summary["deliveries"]["ack_latency"])
    assert settled == messages["acked"] + messages["nacked"] + messages["rejected"]


def test_readable_stats(capfdbinary):
    code = main(["decode", "--stats", str(capture_for(next(p for p in RECORDED if "returns" in p.name)))])
    out, _ = capfdbinary.readouterr()
    assert code == 0
    assert "deliver -> settle latency" in out.decode() and "NO_ROUTE" in out.decode()
