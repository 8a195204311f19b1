"""No password reaches the lake (issue 51, item 1): after the job over every sample, and after two
nightly runs of a connection whose AMQPLAIN login and update-secret are cut by the night's end,
every column of every Parquet file under the lake (the tables, their old versions, the Delta logs'
checkpoints; binary values such as the carried states also decompressed) and every other file
there is searched for each password the samples were recorded with: plain, base64 at any
alignment, hex, UTF-16, and as the AMQPLAIN field table carries it."""

from __future__ import annotations

import gzip
import os
import struct
import zlib
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from amqpcap.capture.inputs import list_inputs
from amqpcap.job.nightly import run
from tests.fuzz.corpus.build import HEADER, conversation, method, shortstr
from tests.fuzz.mutators import write_pcap
from tests.helpers.samples import SAMPLES
from tests.helpers.secrets import leaks

# The recorder's users (tools/record_samples/broker.py) and the wrong password of connection_errors.
PASSWORDS = [b"S3cr3t-Pa55w0rd!", b"R3str1cted-Pa55!", b"wrong-password"]


def amqplain(**values: bytes) -> bytes:
    return b"".join(shortstr(k.encode()) + b"S" + struct.pack(">I", len(v)) + v for k, v in values.items())


def longstr(value: bytes) -> bytes:
    return struct.pack(">I", len(value)) + value


def test_every_password_searched_for_is_in_the_samples():
    """(Else the sweep below could pass by searching for the wrong bytes.)"""
    captures = b"".join(gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes()
                        for p in SAMPLES.rglob("*.pcap*"))
    for password in PASSWORDS:
        assert password in captures, password
    assert amqplain(PASSWORD=PASSWORDS[0]) in captures  # py-amqp's AMQPLAIN login (ipv6_pcapng)


@pytest.fixture(scope="module")
def carried_lake(spark, settings, tmp_path_factory):
    """Two nights of one connection: night 1 ends inside its update-secret (after an AMQPLAIN
    login), night 2 holds the rest; the state between them goes through the lake."""
    password = PASSWORDS[0]
    start_ok = method(10, 11, longstr(b"") + shortstr(b"AMQPLAIN") +
                      longstr(amqplain(LOGIN=b"amqpcap", PASSWORD=password)) + shortstr(b"en_US"))
    update = method(10, 70, longstr(password) + shortstr(b"rotated"))
    opened = method(10, 40, shortstr(b"amqpcap") + shortstr(b"") + b"\x00")
    cut = len(update) - 4  # the whole password comes before the night's end
    pieces = [HEADER, start_ok, opened, update[:cut], update[cut:], start_ok[:30], start_ok[30:]]
    segments = conversation(pieces)[:-2]  # no FIN: the connection is still open at night 1's end
    folder = tmp_path_factory.mktemp("carried")
    first = 3 + 4  # the handshake's three segments, then the client's first four pieces
    nights = [folder / "night1.pcap", folder / "night2.pcap"]
    nights[0].write_bytes(write_pcap(segments[:first]))
    nights[1].write_bytes(write_pcap(segments[first:]))
    lake = str(tmp_path_factory.mktemp("carried-lake"))
    summaries = [run(spark, list_inputs([str(night)]), settings, lake, f"night{n}") for n, night in enumerate(nights)]
    assert [(s.carried_out, s.resumed) for s in summaries] == [(1, 0), (1, 1)]  # (what the test is about)
    return lake


def values_of(path: Path) -> bytes:
    """Every value of every column of a Parquet file, binary ones also decompressed."""
    parts = []
    for column in pq.read_table(path).columns:
        for value in column.to_pylist():
            if isinstance(value, bytes):
                parts.append(value)
                try:
                    parts.append(zlib.decompress(value))
                except zlib.error:
                    pass
            elif value is not None:
                parts.append(repr(value).encode())
    return b"\n".join(parts)


def sweep(lake: str) -> list[str]:
    found, parquet = [], 0
    for folder, _, names in os.walk(lake):
        for name in names:
            path = Path(folder, name)
            data = path.read_bytes()
            if name.endswith(".parquet"):
                parquet += 1
                data += values_of(path)
            for password in PASSWORDS:
                where = leaks(data, password, window=len(password))
                if where:
                    found.append(f"{path.relative_to(lake)}: {where} ({password.decode()})")
    assert parquet > 10  # (the sweep saw the tables)
    return found


def test_no_password_anywhere_in_the_samples_lake(lake):
    path, _ = lake
    assert sweep(path) == []


def test_no_password_anywhere_in_a_lake_that_carried_a_cut_login_and_update_secret(carried_lake):
    assert sweep(carried_lake) == []
