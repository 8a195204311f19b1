"""Differential test against tshark, an independent decoder: per direction, the same methods.

tshark must be installed (.ci/run installs it); outside CI the test is skipped without it. Where
tshark is known to be wrong, the test checks that it is wrong in exactly the documented way.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from amqp_decode.decoder import CaptureDecoder
from amqp_decode.spec import load_spec
from tests.conftest import ROOT, SHARED

TSHARK = shutil.which("tshark")
pytestmark = pytest.mark.skipif(TSHARK is None and not os.environ.get("CI"),
                                reason="tshark is not installed (CI installs it)")

CAPTURES = sorted(p for p in (ROOT / "data" / "samples").rglob("*") if ".pcap" in p.name) + \
    sorted((SHARED / "captures" / "public").glob("*.pcap"))

# sample -> (why tshark is wrong, what it shows that we do not, which of our methods it lacks:
# "all after the damage" means it sees only a subset of ours)
TSHARK_WRONG = {
    "connection_errors.pcap": (
        "tshark never checks the frame-end octet: it decodes the basic.qos sent with a corrupt "
        "frame-end (RabbitMQ refuses it with 501 FRAME_ERROR), and it counts method 60.99, which "
        "no spec defines", {"C>S": {"basic.qos": 1, "60.99": 1}}),
    "gap_in_methods.pcap.gz": ("tshark does not resynchronise after bytes the capture lost: it "
                               "decodes nothing of that direction after the gap", None),
    "gap_in_body.pcap.gz": ("bytes lost inside a body frame end tshark's decoding of that direction, "
                            "though the frame's extent is known and framing can continue", None),
    "mid_frame_start.pcap.gz": ("tshark cannot find frames in a stream that starts inside a frame",
                                None),
    "mid_stream.pcap": ("tshark cannot find frames in a stream that starts inside a frame", None),
}


def tshark_methods(path: Path) -> dict[str, Counter]:
    spec = load_spec("0-9-1")
    result = subprocess.run(
        [TSHARK, "-r", str(path), "-o", "tcp.reassemble_out_of_order:TRUE", "-d", "tcp.port==5672,amqp",
         "-Y", "amqp", "-T", "fields", "-e", "tcp.dstport", "-e", "amqp.method.class",
         "-e", "amqp.method.method", "-E", "occurrence=a", "-E", "aggregator=|"],
        capture_output=True, text=True)
    # exit status 2 with a complete listing: the file's last record is cut short (tshark says so)
    if result.returncode and not (result.returncode == 2 and "cut short" in result.stderr):
        raise AssertionError(f"tshark failed on {path}: {result.stderr}")
    counts = {"C>S": Counter(), "S>C": Counter()}
    for line in result.stdout.splitlines():
        dport, classes, method_ids = (line.split("\t") + ["", ""])[:3]
        if not classes:
            continue
        direction = "C>S" if dport == "5672" else "S>C"
        for class_id, method_id in zip(classes.split("|"), method_ids.split("|")):
            method = spec.method(int(class_id), int(method_id))
            counts[direction][method.full_name if method else f"{class_id}.{method_id}"] += 1
    return counts


def our_methods(path: Path) -> dict[str, Counter]:
    counts = {"C>S": Counter(), "S>C": Counter()}
    for record in CaptureDecoder().decode([str(path)]):
        if record["kind"] == "method":
            counts[record["dir"]][record["method"]] += 1
    return counts


@pytest.mark.parametrize("path", CAPTURES, ids=[p.name for p in CAPTURES])
def test_methods_agree_with_tshark(path):
    ours, theirs = our_methods(path), tshark_methods(path)
    assert sum(sum(c.values()) for c in ours.values()) > 0
    known = TSHARK_WRONG.get(path.name)
    if known is None:
        assert ours == theirs
        return
    _, extra = known
    for direction in ("C>S", "S>C"):
        if extra is not None:  # tshark shows these on top of ours
            assert theirs[direction] - ours[direction] == Counter(extra.get(direction, {}))
            assert ours[direction] - theirs[direction] == Counter()
        else:  # tshark sees a strict subset
            assert theirs[direction] - ours[direction] == Counter()
    assert ours != theirs  # if tshark ever gets it right, drop the entry
