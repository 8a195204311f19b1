"""Message flows across hops (issue 51, item 3), on recorded samples whose journeys are known by
construction: a RabbitMQ shovel (its own Erlang client connections) moving orders from one queue to
an exchange with another routing key, one message id reused by a second, unrelated publish; and
dead-lettering (a quorum queue's x-delivery-limit, a classic queue's reject) into a dead-letter
exchange. Each delivery pairs with the publish that routed it, each message's hops form one journey
with its hop numbers and latencies, and the rule says which match it used."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from tests.helpers.samples import SAMPLES
from tests.helpers.tabulated import tabulate


def port(endpoint: str | None) -> int | None:
    return int(endpoint.rsplit(":", 1)[1]) if endpoint else None


@pytest.fixture(scope="module")
def shovel():
    return json.loads((SAMPLES / "shovel_hops.expected.json").read_text()), tabulate([str(SAMPLES / "shovel_hops.pcap")])


@pytest.fixture(scope="module")
def dead_letter():
    return (json.loads((SAMPLES / "dead_letter_hops.expected.json").read_text()),
            tabulate([str(SAMPLES / "dead_letter_hops.pcap")]))


def connections_by_port(tables) -> dict[int, str]:
    return {port(row["client"]): row["connection"] for row in tables["connections"]}


def flows_of(tables, message_id: str) -> list[dict]:
    return sorted((r for r in tables["message_flows"] if r["message_id"] == message_id),
                  key=lambda r: (r["hop"], r["delivered_at"] or 0))


def hop_pairs(hops: list[dict]) -> list[tuple[dict, dict]]:
    """(publish, delivery) hops of a journey as the facts list them, in order."""
    pairs, publish = [], None
    for hop in hops:
        if hop["role"] == "publish":
            publish = hop
        else:
            pairs.append((publish, hop))
    return pairs


def test_every_shovelled_message_is_one_journey_of_two_hops(shovel):
    facts, tables = shovel
    by_port = connections_by_port(tables)
    for journey in facts["journeys"]:
        if journey["message_id"] == "order-dup":
            continue
        flows = flows_of(tables, journey["message_id"])
        expected = hop_pairs(journey["hops"])
        assert len(flows) == len(expected) == 2, journey["message_id"]
        assert len({f["journey"] for f in flows}) == 1
        for hop, (flow, (publish, deliver)) in enumerate(zip(flows, expected), start=1):
            assert flow["hop"] == hop and flow["match"] == "message_id"
            assert flow["publisher_connection"] == by_port[publish["client_port"]]
            assert flow["consumer_connection"] == by_port[deliver["client_port"]]
            assert (flow["exchange"], flow["routing_key"]) == (publish["exchange"], publish["routing_key"])
            assert flow["hop_ms"] == flow["publish_to_deliver_ms"]
        first, last = flows
        assert first["journey"] == first["publish_message_key"]
        assert last["journey_ms"] == pytest.approx(first["publish_to_deliver_ms"] + (
            last["delivered_at"] - first["delivered_at"]) / 1000, abs=0.002)
        assert last["journey_ms"] > last["hop_ms"] > 0


def test_a_reused_message_id_is_told_apart_by_route(shovel):
    """order-dup: once through the shovel, then again, later, straight to another queue. The final
    consumer's deliveries pair with the publish of their own route (not, by message id alone, with
    the first publish), the shovel's publish is paired, and the second publish is a journey of its
    own (its publisher never received the message)."""
    facts, tables = shovel
    by_port = connections_by_port(tables)
    (journey,) = [j for j in facts["journeys"] if j["message_id"] == "order-dup"]
    flows = flows_of(tables, "order-dup")
    assert all(f["publish_message_key"] and f["message_key"] for f in flows)  # nothing left unpaired
    pairs = {(f["publisher_connection"], f["exchange"], f["routing_key"], f["consumer_connection"]): f for f in flows}
    expected = {(by_port[p["client_port"]], p["exchange"], p["routing_key"], by_port[d["client_port"]])
                for p, d in hop_pairs(journey["hops"])}
    assert set(pairs) == expected
    audit = next(f for f in flows if f["routing_key"] == "orders.audit")
    assert (audit["hop"], audit["journey"]) == (1, audit["publish_message_key"])
    assert len({f["journey"] for f in flows}) == 2


def test_the_old_rule_s_mistake_is_gone(shovel):
    """By message id alone (the rule before), the final consumer's delivery took the client's
    publish, a route it was never delivered from, and the shovel's publish stayed unpaired."""
    _, tables = shovel
    for flow in tables["message_flows"]:
        if flow["message_key"] and flow["publish_message_key"]:
            delivery = next(d for d in tables["deliveries"] if d["message_key"] == flow["message_key"])
            assert (delivery["exchange"], delivery["routing_key"]) == (flow["exchange"], flow["routing_key"])
    assert not [f for f in tables["message_flows"] if f["message_key"] is None]  # every publish delivered


def test_dead_lettered_deliveries_say_where_from_and_join_their_journey(dead_letter):
    facts, tables = dead_letter
    by_port = connections_by_port(tables)
    for journey in facts["journeys"]:
        flows = flows_of(tables, journey["message_id"])
        deliveries = [h for h in journey["hops"] if h["role"] == "deliver"]
        assert len(flows) == len(deliveries), journey["message_id"]
        assert len({f["journey"] for f in flows}) == 1
        *first_hop, dead = flows
        assert {f["hop"] for f in first_hop} == {1} and {f["match"] for f in first_hop} == {"message_id"}
        assert (dead["hop"], dead["match"]) == (2, "message_id-dead-letter")
        (dead_letter_hop,) = [h for h in journey["hops"] if h["by"] == "broker-dead-letter"]
        publish = journey["hops"][0]
        assert dead["publisher_connection"] == by_port[publish["client_port"]]
        assert (dead["exchange"], dead["routing_key"]) == (publish["exchange"], publish["routing_key"])
        assert dead["consumer_connection"] == by_port[deliveries[-1]["client_port"]]
        assert dead["consumer_channel"] == deliveries[-1]["channel"] and dead["queue"] == dead_letter_hop["queue"]
        # the hop began when the consumer turned the message down for the last time
        last_refusal = max(f["settled_at"] for f in first_hop)
        assert dead["hop_ms"] == pytest.approx((dead["delivered_at"] - last_refusal) / 1000, abs=0.002)
        assert dead["journey_ms"] == dead["publish_to_deliver_ms"] > dead["hop_ms"]
        delivery = next(d for d in tables["deliveries"] if d["message_key"] == dead["message_key"])
        assert (delivery["death_exchange"], delivery["death_queue"], delivery["death_reason"]) == (
            publish["exchange"], dead_letter_hop["from_queue"], dead_letter_hop["reason"])
        assert all(d["death_exchange"] is None for d in tables["deliveries"] if d["message_key"] in
                   {f["message_key"] for f in first_hop})
    redelivered = defaultdict(int)
    for flow in tables["message_flows"]:
        redelivered[flow["message_id"]] += bool(flow["redelivered"])
    assert {j["message_id"]: redelivered[j["message_id"]] for j in facts["journeys"]} == \
        {j["message_id"]: j["redeliveries"] for j in facts["journeys"]}


def test_identical_bodies_on_one_route_are_not_taken_for_hops():
    """Matched by body alone, a publish of the same body to the route it was consumed from is a new
    message (a ping, an empty body), not a forward: every one is a journey of its own."""
    from amqpcap.rules.message_flows import flows, side_order
    sides = []
    for n in range(4):
        t = 1_000 * n
        sides.append({"published_ns": t, "connection": "c1", "client": "10.0.0.1:4000", "channel": 1,
                      "message_key": f"p{n}", "message_id": None, "body_sha256": "e3b0", "exchange": "x",
                      "routing_key": "k"})
        sides.append({"delivered_ns": t + 100, "connection": "c1", "client": "10.0.0.1:4000", "channel": 2,
                      "consumer_tag": "t", "message_key": f"d{n}", "message_id": None, "body_sha256": "e3b0",
                      "exchange": "x", "routing_key": "k", "redelivered": False, "settled_ns": None,
                      "outcome": "unsettled", "death_exchange": None})
    rows = list(flows(sorted(sides, key=side_order)))
    assert [(r["journey"], r["hop"]) for r in rows] == [(f"p{n}", 1) for n in range(4)]
