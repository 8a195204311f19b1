"""Damage to a capture file is one row, made one way (issue 51, item 2): the job's file-level
`decode_issues` rows equal the issue records `amqpcap decode --jsonl` prints for the same files,
times included (the time of the packet read right after the damage, else the file's last), also
when the job reads a file in byte ranges and the damage sits at or near a range's edge."""

from __future__ import annotations

import random
import struct
import subprocess
import sys

import orjson
import pytest

from amqpcap.capture.inputs import list_inputs
from amqpcap.job.nightly import run
from amqpcap.lake.spark_read import read_table
from tests.helpers.samples import ROOT, SAMPLES, uri

CORPUS = ROOT / "tests" / "fuzz" / "corpus"
DAMAGED = sorted(CORPUS.glob("reader-*")) + [CORPUS / "stream-damaged-file-readable.pcap",
                                              SAMPLES / "crafted" / "truncated_gzip.pcap.gz"]
KEY = ("issue_kind", "detail", "bytes_skipped", "file_offset", "ts_ns")


def garbled(folder) -> str:
    """A real capture (600 KB) whose record headers are overwritten with garbage in a dozen places
    (one or two records apart), so that with 64 KB ranges some damage falls at a range's edge or
    is found by the range after the one it starts in."""
    data = bytearray((SAMPLES / "large_and_pipelined.pcap").read_bytes())
    starts, p = [], 24
    while p + 16 <= len(data):
        starts.append(p)
        p += 16 + struct.unpack_from("<I", data, p + 8)[0]
    for start in random.Random(51).sample(starts[1:-1], 12):
        data[start:start + 16] = b"\xfe" * 16
    path = folder / "garbled.pcap"
    path.write_bytes(bytes(data))
    return str(path)


def cli_issues(path: str) -> list[tuple]:
    out = subprocess.run([sys.executable, "-m", "amqpcap", "decode", "--jsonl", path], capture_output=True,
                         check=True).stdout
    records = [orjson.loads(line) for line in out.splitlines()]
    return sorted(tuple(r[k] for k in KEY) for r in records if r["kind"] == "issue" and r["connection"] is None)


@pytest.fixture(scope="module")
def damaged_lake(spark, settings, tmp_path_factory):
    files = [str(p) for p in DAMAGED] + [garbled(tmp_path_factory.mktemp("garbled"))]
    lake = str(tmp_path_factory.mktemp("damaged-lake"))
    ranged = settings.replace(job={"split_bytes": 64 << 10})
    run(spark, list_inputs(files), ranged, lake, "damaged")
    return lake, files


def test_the_jobs_damage_rows_are_the_decoders(spark, damaged_lake):
    lake, files = damaged_lake
    rows = read_table(spark, lake, "decode_issues").where("connection is null").collect()
    assert rows and all(r.ts_ns is not None for r in rows)
    total = 0
    for path in files:
        expected = cli_issues(path)
        got = sorted(tuple(getattr(r, k) for k in KEY) for r in rows if r.capture == uri(path))
        assert got == expected, path
        total += len(expected)
    assert total == len(rows)
    assert len(cli_issues(files[-1])) >= 6  # (the garbled file, read in ranges: what the test is about)
