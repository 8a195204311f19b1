"""message_key on real bytes: every publish and delivery of the samples and the public captures
carries the key of its own `messages` row (the content method that made it), `message_flows`
carries both sides' keys, and the keys survive a connection carried across runs."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from tests.helpers.samples import ROOT, SHARED
from tests.helpers.tabulated import tabulated_folder
from tests.onepass.test_carry import nightly, write_nights

CORPORA = {"samples": ROOT / "data" / "samples", "public": SHARED / "captures" / "public"}
KEY = re.compile(r"(?P<connection>[0-9a-f]{16})-(?P<side>[cs])(?P<offset>\d+)")


@pytest.fixture(scope="module", params=list(CORPORA))
def tables(request):
    return tabulated_folder(str(CORPORA[request.param]))


def by_key(rows):
    keyed = {row["message_key"]: row for row in rows}
    assert len(keyed) == len(rows) and None not in keyed, "unique and set"
    return keyed


def test_a_message_key_names_the_connection_side_and_offset_of_its_content_method(tables):
    messages = tables["messages"]
    assert messages
    for row in messages:
        match = KEY.fullmatch(row["message_key"])
        assert match, row["message_key"]
        assert (match["connection"], match["side"], int(match["offset"])) == (
            row["connection"], "c" if row["direction"] == "C>S" else "s", row["stream_offset"])
    by_key(messages)


def test_publishes_and_deliveries_carry_the_key_of_their_messages_row(tables):
    messages = by_key(tables["messages"])
    publishes, deliveries = tables["publishes"], tables["deliveries"]
    assert publishes and deliveries
    for publish in by_key(publishes).values():
        message = messages[publish["message_key"]]
        assert message["method"] == "basic.publish"
        assert (message["connection"], message["channel"], message["ts"], message["exchange"], message["routing_key"],
                message["message_id"], message["correlation_id"], message["app_id"], message["body_sha256"]) == (
            publish["connection"], publish["channel"], publish["published_at"], publish["exchange"],
            publish["routing_key"], publish["message_id"], publish["correlation_id"], publish["app_id"],
            publish["body_sha256"])
    for delivery in by_key(deliveries).values():
        message = messages[delivery["message_key"]]
        assert message["method"] == delivery["method"]
        assert (message["connection"], message["channel"], message["ts"], message["delivery_tag"],
                message["consumer_tag"], message["redelivered"], message["message_id"], message["correlation_id"],
                message["app_id"], message["body_size"], message["body_sha256"]) == (
            delivery["connection"], delivery["channel"], delivery["delivered_at"], delivery["delivery_tag"],
            delivery["consumer_tag"], delivery["redelivered"], delivery["message_id"], delivery["correlation_id"],
            delivery["app_id"], delivery["body_size"], delivery["body_sha256"])
    # every publish and delivery has a messages row, and the other way round (returns aside)
    content = Counter(m["method"] for m in messages.values())
    assert content["basic.publish"] == len(publishes)
    assert content["basic.deliver"] + content["basic.get-ok"] == len(deliveries)


def test_nanosecond_times_sit_beside_the_timestamps(tables):
    for delivery in tables["deliveries"]:
        assert delivery["settled_at"] == (None if delivery["settled_ns"] is None else delivery["settled_ns"] // 1000)
    confirmed = [p for p in tables["publishes"] if p["confirmed_ns"] is not None]
    assert all(p["confirmed_at"] == p["confirmed_ns"] // 1000 for p in confirmed)
    assert [p for p in tables["publishes"] if p["confirmed_at"] is not None] == confirmed


def test_message_flows_carry_both_sides_keys(tables):
    publishes, deliveries = by_key(tables["publishes"]), by_key(tables["deliveries"])
    flows = tables["message_flows"]
    assert flows
    # one row per delivery: the delivery side's key is unique where set, and every delivery has its row
    delivered = [f["message_key"] for f in flows if f["message_key"] is not None]
    assert len(set(delivered)) == len(delivered) and set(delivered) == set(deliveries)
    # every publish is in some row (delivered, maybe several times, or alone)
    assert {f["publish_message_key"] for f in flows if f["publish_message_key"] is not None} == set(publishes)
    for flow in flows:
        delivery, publish = deliveries.get(flow["message_key"]), publishes.get(flow["publish_message_key"])
        assert (delivery is None) == (flow["consumer_connection"] is None)
        assert (publish is None) == (flow["publisher_connection"] is None)
        if delivery is not None:
            assert (delivery["connection"], delivery["channel"], delivery["delivery_tag"], delivery["delivered_at"],
                    delivery["outcome"]) == (flow["consumer_connection"], flow["consumer_channel"],
                                             flow["delivery_tag"], flow["delivered_at"], flow["outcome"])
        if publish is not None:
            assert (publish["connection"], publish["channel"], publish["published_at"]) == (
                flow["publisher_connection"], flow["publisher_channel"], flow["published_at"])
        assert (flow["match"] is not None) == (delivery is not None and publish is not None)


def test_message_keys_survive_a_connection_carried_across_runs(tmp_path):
    """The long connection cut into three nights: each night's keys are those of one run over the
    whole capture (the connection keeps its id and its stream offsets)."""
    (tmp_path / "whole").mkdir()
    (tmp_path / "nights").mkdir()
    whole = nightly(write_nights(tmp_path / "whole", cuts=[]))
    nights = nightly(write_nights(tmp_path / "nights"))
    assert len(nights["connections"]) == 1
    for table in ("messages", "publishes", "deliveries"):
        keys = sorted(r["message_key"] for r in nights[table])
        assert keys and keys == sorted(r["message_key"] for r in whole[table]), table
