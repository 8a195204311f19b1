"""The shipped specs against their sources, and the loader against bad or foreign files."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from amqpcap.protocol.errors import SpecError
from amqpcap.protocol.spec import CLIENT_TO_SERVER, SERVER_TO_CLIENT, load_spec, parse_spec
from tests.helpers.samples import ROOT

# RabbitMQ's JSON spells these slots the 0-8 way; the official XML (and so our spec) the 0-9-1 way.
JSON_NAMES = {"ticket": "reserved-1", "nowait": "no-wait", "capabilities": "reserved-1",
              "insist": "reserved-2", "known-hosts": "reserved-1", "out-of-band": "reserved-1",
              "channel-id": "reserved-1", "cluster-id": "reserved-1"}


def test_0_9_1_matches_rabbitmq_codegen(shared):
    rabbit = json.loads((shared / "reference/rabbitmq-codegen/amqp-rabbitmq-0.9.1.json").read_text())
    spec = load_spec("0-9-1")
    seen = set()
    for rabbit_class in rabbit["classes"]:
        for rabbit_method in rabbit_class["methods"]:
            method = spec.method(rabbit_class["id"], rabbit_method["id"])
            assert method is not None, f"{rabbit_class['name']}.{rabbit_method['name']} missing"
            assert (method.class_name, method.name) == (rabbit_class["name"], rabbit_method["name"])
            assert method.content == bool(rabbit_method.get("content"))
            types = [a.get("type") or spec.domains[a["domain"]] for a in rabbit_method["arguments"]]
            assert [f.type for f in method.fields] == types, method.full_name
            for field, argument in zip(method.fields, rabbit_method["arguments"]):
                if method.class_name != "access":
                    assert field.name in (argument["name"], JSON_NAMES.get(argument["name"]),
                                          {"auto-delete": "auto-delete", "internal": "internal"}
                                          .get(argument["name"])), method.full_name
            seen.add((method.class_id, method.method_id))
        properties = rabbit_class.get("properties", [])
        ours = spec.classes[rabbit_class["id"]].properties
        assert [p.type for p in ours] == [p["type"] for p in properties]
    assert seen == {(m.class_id, m.method_id) for m in spec.methods()}
    for constant in rabbit["constants"]:
        assert spec.constant(constant["name"].lower()) == constant["value"]


def test_0_9_1_spec_is_not_stale(shared):
    result = subprocess.run([sys.executable, str(ROOT / "tools/make_spec.py"), "--check",
                             "--shared", str(shared)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_official_xml_with_its_prose_loads_and_agrees(shared):
    official = load_spec(str(shared / "seeds/003_f593309a8c6e3f5a.txt"))
    ours = load_spec("0-9-1")
    assert (official.major, official.minor, official.revision) == (0, 9, 1)
    for method in official.methods():
        mine = ours.method(method.class_id, method.method_id)
        assert mine.full_name == method.full_name
        assert [f.type for f in mine.fields] == [f.type for f in method.fields]
        assert mine.responses == method.responses and mine.content == method.content
    assert len(official.methods()) == 53


def test_directions_and_replies_come_from_the_spec():
    spec = load_spec("0-9-1")
    assert spec.method_named("basic.deliver").directions == {SERVER_TO_CLIENT}
    assert spec.method_named("basic.publish").directions == {CLIENT_TO_SERVER}
    assert spec.method_named("basic.ack").directions == {CLIENT_TO_SERVER, SERVER_TO_CLIENT}
    assert spec.method_named("basic.nack").directions == {CLIENT_TO_SERVER, SERVER_TO_CLIENT}
    assert spec.method_named("basic.get").responses == ("get-ok", "get-empty")
    assert spec.method_named("confirm.select").responses == ("select-ok",)
    assert spec.method_named("exchange.unbind-ok").method_id == 51
    assert spec.reply_code(404).name == "not-found" and spec.reply_code(404).error_class == "soft-error"
    assert spec.reply_code(312).name == "no-route"
    assert spec.reply_code(530).error_class == "hard-error"
    assert spec.reply_code(999) is None


def test_0_9_facts_from_the_seeds():
    spec = load_spec("0-9")
    assert spec.version == "0-9"
    assert {c.name: c.class_id for c in spec.classes.values()} == {
        "connection": 10, "channel": 20, "access": 30, "exchange": 40, "queue": 50, "basic": 60,
        "file": 70, "stream": 80, "tx": 90, "dtx": 100, "tunnel": 110, "message": 120}
    assert spec.method_named("connection.redirect").method_id == 42
    assert spec.method_named("basic.recover").method_id == 100
    assert spec.method(60, 110) is None  # 0-9-1's recover does not exist in 0-9
    assert spec.method_named("message.offset").method_id == 530
    assert [p.name for p in spec.classes[80].properties] == [
        "content-type", "content-encoding", "headers", "priority", "timestamp"]
    assert spec.constant("frame-trace") == 7 and spec.reply_code(310).name == "not-delivered"


@pytest.mark.parametrize("text, match", [
    ("<amqp", "not well-formed"),
    ("<spec/>", "root element"),
    ('<amqp major="0" minor="9"><class name="x" index="5"><method name="m" index="1">'
     '<field name="f" domain="nope"/></method></class></amqp>', "does not resolve"),
    ('<amqp major="0" minor="9"><class name="x" index="5"/><class name="y" index="5"/></amqp>',
     "already x"),
    ('<amqp major="0" minor="9"><class name="x" index="five"/></amqp>', "not an integer"),
    ('<amqp major="0" minor="9"><domain name="a" type="b"/><domain name="b" type="a"/>'
     '<class name="x" index="5"><method name="m" index="1"><field name="f" domain="a"/></method>'
     '</class></amqp>', "does not resolve"),
])
def test_bad_spec_files_fail_clearly(text, match):
    with pytest.raises(SpecError, match=match):
        parse_spec(text)


def test_missing_spec_file():
    with pytest.raises(SpecError, match="cannot read spec file"):
        load_spec("/nonexistent/amqp.xml")
