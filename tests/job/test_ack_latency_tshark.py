"""Ack latency against an independent computation from tshark's fields (time, TCP stream, channel,
delivery tag, multiple), on the recorded samples tshark decodes correctly."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import defaultdict

import pytest

from amqpcap.lake.spark_read import read_table
from tests.connection.test_tshark import (  # noqa: F401  (pytestmark: skipped without tshark)
    TSHARK_WRONG,
    pytestmark,
    server_ports,
    tshark_options,
)
from tests.helpers.samples import EXPECTED, capture_for, uri

SAMPLES = [p for p in EXPECTED if p.parent.name != "crafted"
           and capture_for(p).name not in TSHARK_WRONG]


def tshark_ack_latencies(path) -> list[tuple[int, int, int]]:
    """(channel, delivery tag, latency in nanoseconds) of every consumer ack, computed the simplest
    way: per TCP stream and channel, deliveries by tag; an ack settles its tag, or with multiple
    every outstanding tag up to it (all of them for tag 0); a nack or reject takes its tags out
    the same way; channel.open starts over."""
    out = subprocess.run([shutil.which("tshark"), "-r", str(path), *tshark_options(path), "-Y", "amqp",
                          "-T", "json", "--no-duplicate-keys"], capture_output=True, text=True).stdout
    servers = server_ports(path)  # (a TLS sample's too: tshark decrypts it with its key log)
    outstanding = defaultdict(dict)
    latencies = []
    for packet in json.loads(out or "[]"):
        layers = packet["_source"]["layers"]
        pdus = layers["amqp"] if isinstance(layers["amqp"], list) else [layers["amqp"]]
        seconds, fraction = layers["frame"]["frame.time_epoch"].split(".")
        nanos = int(seconds) * 10**9 + int(fraction.ljust(9, "0")[:9])  # exact, no float
        to_server = layers["tcp"]["tcp.dstport"] in servers
        for pdu in pdus:
            if not isinstance(pdu, dict) or pdu.get("amqp.type") != "1" or "amqp.method.class" not in pdu:
                continue  # headers, bodies... and AMQP 1.0's frames (whose type 1 is SASL's)
            key = (layers["tcp"]["tcp.stream"], int(pdu["amqp.channel"]))
            method = (int(pdu["amqp.method.class"]), int(pdu["amqp.method.method"]))
            arguments = pdu.get("amqp.method.arguments")
            arguments = arguments if isinstance(arguments, dict) else {}
            tag = int(arguments.get("amqp.method.arguments.delivery_tag", 0))
            if method == (20, 10):
                outstanding[key].clear()
            elif method in ((60, 60), (60, 71)) and not to_server:
                outstanding[key][tag] = nanos
            elif method in ((60, 80), (60, 90), (60, 120)) and to_server:  # ack, reject, nack
                multiple = arguments.get("amqp.method.arguments.multiple") == "1"
                settled = [t for t in outstanding[key] if (multiple and (tag == 0 or t <= tag)) or t == tag]
                for t in settled:
                    delivered = outstanding[key].pop(t)
                    if method == (60, 80):
                        latencies.append((key[1], t, nanos - delivered))
    return sorted(latencies)


@pytest.mark.parametrize("expected_path", SAMPLES, ids=[p.name.split(".")[0] for p in SAMPLES])
def test_ack_latencies_match_tshark(spark, lake, expected_path):
    path, _ = lake
    table = read_table(spark, path, "deliveries")
    ours = sorted((r.channel, r.delivery_tag, round(r.settle_latency_ms * 1e6))
                  for r in table.where((table.capture == uri(capture_for(expected_path))) &
                                       (table.outcome == "ack")).collect())
    assert ours == tshark_ack_latencies(capture_for(expected_path))
