"""Live progress: tasks leave their counters in the staging area while they run; the driver sums
them; the console shows one line (plain when not a terminal)."""

from __future__ import annotations

import logging
import os

import pytest

from amqpcap.capture.inputs import canonical_uri
from amqpcap.job.progress import TaskProgress, totals
from amqpcap.job.stages.read import read_unit
from amqpcap.job.work import ReadUnit
from tests.helpers.samples import SAMPLES


def test_counters_of_every_task_are_summed(tmp_path):
    first, second = TaskProgress(str(tmp_path), "read-0"), TaskProgress(str(tmp_path), "read-1")
    first.add(bytes=10, packets=1)
    first.close()
    second.add(bytes=5)
    second._write(False)
    assert totals(str(tmp_path)) == {"tasks": 2, "done": 1, "bytes": 15, "packets": 1}
    assert totals(str(tmp_path / "nothing-yet")) == {"tasks": 0, "done": 0}


class Recorder(TaskProgress):
    def __init__(self):
        super().__init__(None, "x")
        self.calls = []

    def add(self, **counts):
        self.calls.append(counts)


def long_capture(path, copies: int) -> None:
    """A pcap of `copies` back-to-back replays of a sample's records (times shifted forward)."""
    import struct
    data = (SAMPLES / "channels_qos_get.pcap").read_bytes()
    header, records, pos = data[:24], [], 24
    while pos < len(data):
        sec, usec, caplen, length = struct.unpack_from("<IIII", data, pos)
        records.append((sec, usec, data[pos + 16:pos + 16 + caplen], length))
        pos += 16 + caplen
    with open(path, "wb") as out:
        out.write(header)
        for copy in range(copies):
            for sec, usec, body, length in records:
                out.write(struct.pack("<IIII", sec + copy * 100, usec, len(body), length) + body)


def test_reading_reports_as_it_goes_not_only_at_the_end(tmp_path):
    from amqpcap.capture.bucketing import REPORT_EVERY
    path = tmp_path / "long.pcap"
    long_capture(path, 200)
    recorder = Recorder()
    unit = ReadUnit(0, 0, canonical_uri(str(path)), 0, None, os.path.getsize(path))
    _, facts = read_unit(unit, str(tmp_path), 2, recorder)
    packets, captured = facts.info.records, facts.info.bytes
    assert packets > 3 * REPORT_EVERY
    reading = [c for c in recorder.calls if "packets" in c]
    assert len(reading) == packets // REPORT_EVERY + 1  # steadily, not once at the end
    assert sum(c["packets"] for c in reading) == packets
    assert sum(c["bytes"] for c in reading) == captured + 16 * packets


@pytest.mark.parametrize("name", ["channels_qos_get.pcap", "ipv6_pcapng.pcapng", "kombu_gzip.pcap.gz"])
def test_every_unit_reads_its_share_of_the_file_to_the_end(tmp_path, name):
    """What the progress line's "read N%" compares with the files' sizes: each unit's share of its
    file, whole once the unit is done (packet bytes alone stopped at 96% of a pcap: its headers;
    a gzip's went past its size), and never more than the share along the way."""
    path = SAMPLES / name
    size = os.path.getsize(path)
    cuts = [0, size] if name.endswith(".gz") else [0, size // 3, 2 * size // 3, size]
    told = 0
    for n, (start, end) in enumerate(zip(cuts, cuts[1:])):
        recorder = Recorder()
        unit = ReadUnit(n, 0, canonical_uri(str(path)), start, None if end == size else end, size)
        read_unit(unit, str(tmp_path), 2, recorder)
        shares = [c.get("file_bytes", 0) for c in recorder.calls]
        assert sum(shares) == end - start and all(s >= 0 for s in shares)
        told += sum(shares)
    assert told == size


def test_the_plain_display_logs_lines(tmp_path, caplog):
    from amqpcap.cli.console import JobDisplay
    TaskProgress(str(tmp_path), "read-0").add(bytes=520_000, file_bytes=500_000)
    display = JobDisplay(1_000_000, 2, terminal=False)
    display.staging = str(tmp_path)
    with caplog.at_level(logging.INFO, logger="amqpcap"):
        logging.getLogger("amqpcap").propagate = True
        display.phase("reading")
    assert "read 50% of 2 files" in caplog.text
