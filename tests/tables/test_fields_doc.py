"""docs/fields.md, the map from tshark's and Packetbeat's AMQP fields to the lake's columns: every
column it names is declared, every tshark field it names is one tshark knows, every Packetbeat AMQP
field and every promoted argument column is in it."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from amqpcap.tables.registry import TABLES
from amqpcap.tables.rows import ARGUMENT_COLUMNS
from tests.helpers.samples import ROOT

DOC = ROOT / "docs" / "fields.md"
# Packetbeat's AMQP fields (elastic/beats packetbeat/protos/amqp/_meta/fields.yml; the exported-fields
# page of its reference), for the completeness check.
PACKETBEAT = ("reply-code", "reply-text", "class-id", "method-id", "exchange", "exchange-type", "passive",
              "durable", "exclusive", "auto-delete", "no-wait", "consumer-tag", "delivery-tag", "message-count",
              "consumer-count", "routing-key", "no-ack", "no-local", "if-unused", "if-empty", "queue",
              "redelivered", "multiple", "arguments", "mandatory", "immediate", "content-type",
              "content-encoding", "headers", "delivery-mode", "priority", "correlation-id", "reply-to",
              "expiration", "message-id", "timestamp", "type", "user-id", "app-id")


def sections() -> dict[str, list[tuple[str, list[str]]]]:
    """Each section's table rows: (the field, the columns it maps to)."""
    out: dict[str, list] = {}
    current = None
    for line in DOC.read_text().splitlines():
        if line.startswith("## "):
            current = out.setdefault(line[3:].split()[0], [])
        elif current is not None and line.startswith("| `"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            current.append((cells[0].strip("`"), re.findall(r"`([^`]+)`", cells[1])))
    return out


def test_every_column_named_is_declared():
    names = re.findall(r"`(\w+)\.(\w+)`", DOC.read_text())
    named = [(t, c) for t, c in names if t in TABLES]
    assert len(named) > 100
    missing = [f"{t}.{c}" for t, c in named if c not in TABLES[t].names]
    assert missing == []
    for section in sections().values():
        for field, columns in section:
            assert columns, field
            assert all(c.split(".")[0] in TABLES for c in columns), (field, columns)


def test_every_packetbeat_field_and_argument_column_is_mapped():
    doc = sections()
    assert [f for f, _ in doc["Packetbeat"]] == [f"amqp.{name}" for name in PACKETBEAT]
    mapped = {c for section in doc.values() for _, columns in section for c in columns}
    assert {f"frames.{c}" for c in ARGUMENT_COLUMNS.values()} <= mapped
    assert {f"messages.{c}" for c in ("content_type", "content_encoding", "headers", "delivery_mode", "priority",
                                      "correlation_id", "reply_to", "expiration", "message_id", "timestamp",
                                      "type", "user_id", "app_id")} <= mapped


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed (CI installs it)")
def test_every_tshark_field_named_is_one_tshark_knows():
    out = subprocess.run(["tshark", "-G", "fields"], capture_output=True, text=True, check=True).stdout
    known = {line.split("\t")[2] for line in out.splitlines() if line.startswith("F\t")}
    named = [field for field, _ in sections()["tshark"]]
    assert len(named) > 60 and len(set(named)) == len(named)
    assert [f for f in named if f not in known] == []
    # every argument tshark decodes in AMQP 0-9-1 under the spec's name is mapped
    from amqpcap.protocol.spec import load_spec
    arguments = {f.key for m in load_spec("0-9-1").methods() for f in m.fields if not f.reserved}
    tshark_arguments = {f.removeprefix("amqp.method.arguments.") for f in known
                        if f.startswith("amqp.method.arguments.")}
    assert {f"amqp.method.arguments.{a}" for a in arguments & tshark_arguments} <= set(named)
