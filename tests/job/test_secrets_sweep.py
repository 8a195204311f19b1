"""No password or TLS secret reaches the lake (issue 51, item 1; issue 53): after the job over every
sample (the TLS ones with their key logs), after two nightly runs of a connection whose AMQPLAIN
login and update-secret are cut by the night's end, and after two of a TLS 1.3 connection cut
between its KeyUpdates, every column of every Parquet file under the lake (the tables, their old
versions, the Delta logs' checkpoints; binary values such as the carried states also
decompressed) and every other file there is searched for each password the samples were recorded
with (plain, base64 at any alignment, hex, UTF-16, and as the AMQPLAIN field table carries it),
and for every secret of the TLS samples' key logs and every record key and IV derived from them
(any 8 bytes of one as they are, the whole of it encoded)."""

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
from tests.helpers.secrets import Sweep, leaks
from tests.helpers.tls import sample_secrets

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


@pytest.fixture(scope="module")
def tls_secrets() -> Sweep:
    return Sweep(sample_secrets(SAMPLES / "tls"))


def test_every_tls_secret_searched_for_is_there_to_be_found(tls_secrets):
    """(Else the TLS sweep could pass by searching for nothing: each key log line's secret is found
    in its key log, as hex; a key block is derived for each TLS 1.2 connection the logs cover.)"""
    import json
    logs = sorted((SAMPLES / "tls").glob("*.keys"))
    secrets = [line.split()[2] for log in logs for line in log.read_text().splitlines() if not line.startswith("#")]
    found = set(tls_secrets.find(b"".join(log.read_bytes() for log in logs)))
    wanted = sample_secrets(SAMPLES / "tls")  # (a secret logged twice, a resumed session's, is named once)
    assert len(secrets) > 90 and all(wanted[secret.encode()] in found for secret in secrets)
    blocks = {name.split("'s ")[0] for name in tls_secrets.by_prefix_names() if "'s client key:" in name}
    covered = [c for p in (SAMPLES / "tls").glob("*.expected.json") for c in json.loads(p.read_text())["tls"]
               if c["tls"] and c["version"] == "TLSv1.2" and c["key_logged"]]
    assert len(blocks) == len(covered) > 10


def sweep(lake: str, tls: Sweep | None = None) -> list[str]:
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
            if tls is not None:
                found += [f"{path.relative_to(lake)}: {name}" for name in sorted(set(tls.find(data)))]
    assert parquet > 10  # (the sweep saw the tables)
    return found


def test_no_password_nor_tls_secret_anywhere_in_the_samples_lake(lake, tls_secrets):
    path, _ = lake
    assert sweep(path, tls_secrets) == []


def test_no_password_anywhere_in_a_lake_that_carried_a_cut_login_and_update_secret(carried_lake):
    assert sweep(carried_lake) == []


def split_pcap(capture: Path, at: int, into: list[Path]) -> None:
    """A classic pcap cut in two files after its first `at` packets (each with the header)."""
    data = capture.read_bytes()
    order = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    packets, pos = [], 24
    while pos + 16 <= len(data):
        size = struct.unpack(order + "I", data[pos + 8:pos + 12])[0]
        packets.append(data[pos:pos + 16 + size])
        pos += 16 + size
    assert pos == len(data) and 0 < at < len(packets)
    into[0].write_bytes(data[:24] + b"".join(packets[:at]))
    into[1].write_bytes(data[:24] + b"".join(packets[at:]))


@pytest.fixture(scope="module")
def carried_tls_lake(spark, settings, tmp_path_factory):
    """Two nights of one TLS 1.3 connection (tls13_key_update: ten KeyUpdates), cut between its
    third and fourth; each night's run given the key log, as a nightly job is. (lake, frames)."""
    from amqpcap.lake.spark_read import read_table
    from amqpcap.tls.keylog import read_key_logs
    sample = SAMPLES / "tls" / "tls13_key_update.pcap"
    folder = tmp_path_factory.mktemp("carried-tls")
    nights = [folder / "night1.pcap", folder / "night2.pcap"]
    split_pcap(sample, 120, nights)
    keys = read_key_logs([str(sample.with_suffix(".keys"))])
    lake = str(tmp_path_factory.mktemp("carried-tls-lake"))
    summaries = [run(spark, list_inputs([str(night)]), settings, lake, f"night{n}", keys=keys)
                 for n, night in enumerate(nights)]
    assert [(s.carried_out, s.resumed) for s in summaries] == [(1, 0), (0, 1)]  # (it closes on night 2)
    frames = read_table(spark, lake, "frames").where("kind = 'method'").groupBy("direction", "method").count()
    return lake, {(r.direction, r.method): r["count"] for r in frames.collect()}


def test_a_tls_connection_carried_between_nights_decodes_whole(carried_tls_lake):
    """(What the sweep below is about: the second night decrypted the rest with its own key log.)"""
    import json
    _, frames = carried_tls_lake
    expected = json.loads((SAMPLES / "tls" / "tls13_key_update.expected.json").read_text())["methods"]
    assert frames == {(d, m): n for d, methods in expected.items() for m, n in methods.items()}


def test_no_tls_secret_anywhere_in_a_lake_that_carried_a_tls_connection(carried_tls_lake, tls_secrets):
    lake, _ = carried_tls_lake
    assert sweep(lake, tls_secrets) == []


@pytest.mark.parametrize("view", [["--jsonl", "--bodies"], [], ["--stats"], ["--stats", "--json"]],
                         ids=["jsonl", "readable", "stats", "stats-json"])
def test_no_tls_secret_in_what_decode_prints(view, tls_secrets, tmp_path):
    """Every view of the TLS samples decrypted with their key logs, at DEBUG: neither the output
    nor the log says a secret or a key (what the decrypted conversation holds is the sample's)."""
    import subprocess
    import sys
    captures = sorted(str(p) for p in (SAMPLES / "tls").glob("*.pcap"))
    result = subprocess.run([sys.executable, "-m", "amqpcap", "decode", "--log-level", "DEBUG", *view,
                             "--tls-keylog", str(SAMPLES / "tls"), *captures], capture_output=True, cwd=tmp_path,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    assert len(result.stdout) > 10_000  # (it printed the connections: the sweep saw them)
    assert sorted(set(tls_secrets.find(result.stdout + result.stderr))) == []


def test_no_tls_secret_in_the_report_of_the_samples_lake(lake, tls_secrets, tmp_path):
    import subprocess
    import sys
    path, _ = lake
    page = tmp_path / "report.html"
    result = subprocess.run([sys.executable, "-m", "amqpcap", "report", "--lake", path, "-o", str(page)],
                            capture_output=True, cwd=tmp_path, timeout=900)
    assert result.returncode == 0, result.stderr[-2000:]
    data = page.read_bytes()
    assert b"5671" in data  # (the TLS connections are in it)
    assert sorted(set(tls_secrets.find(data + result.stdout + result.stderr))) == []
