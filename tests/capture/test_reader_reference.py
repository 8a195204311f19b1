"""The fast reader against Scapy's raw readers (the reference, amqpcap/capture/readers/scapy_reader.py):
the same (ts_ns, link type, bytes) records in the same order, and the same counts, on every
sample and every public capture; from a path, an open file, a pipe, stdin, and with reads so
small that every record straddles two of them."""

from __future__ import annotations

import io
import json

import pytest

import amqpcap.capture.readers.source as source
from amqpcap.capture.readers import CaptureInfo, read_records, scapy_reader
from amqpcap.cli import main
from tests.helpers.captures import ALL_SAMPLES, pcap, pipe, sample_bytes, sample_id
from tests.helpers.samples import SAMPLES


def both(path, **kwargs):
    """(our records, our info, Scapy's records, Scapy's info) for one file."""
    ours, theirs = CaptureInfo(str(path), path.stat().st_size), CaptureInfo(str(path), path.stat().st_size)
    return (list(read_records(str(path), ours, **kwargs)), ours,
            list(scapy_reader.read_records(str(path), theirs)), theirs)


def expected_issues(path) -> list[str]:
    expected = path.parent / (path.name.split(".")[0] + ".expected.json")
    return list(json.loads(expected.read_text()).get("capture_issues", {}))


@pytest.mark.parametrize("path", ALL_SAMPLES, ids=sample_id)
def test_every_sample_reads_as_scapy_reads_it(path):
    ours, info, theirs, reference = both(path)
    assert len(ours) == len(theirs) > 0
    assert ours == theirs
    assert (info.records, info.bytes) == (reference.records, reference.bytes) == \
        (len(ours), sum(len(r[2]) for r in ours))
    assert (info.first_ts_ns, info.last_ts_ns) == (ours[0][0], ours[-1][0]) == \
        (reference.first_ts_ns, reference.last_ts_ns)
    assert (info.format, info.link_types, info.resolutions) == (reference.format, reference.link_types,
                                                                reference.resolutions)
    # Scapy's path also reports the two statistics blocks that end ipv6_pcapng as leftover bytes
    assert [issue.kind for issue in info.issues] == expected_issues(path)


def test_every_public_capture_reads_as_scapy_reads_it(shared):
    public = sorted((shared / "captures" / "public").glob("*.pcap*"))
    public = [p for p in public if not p.name.endswith(".out")]
    assert len(public) >= 5
    for path in public:
        ours, info, theirs, reference = both(path)
        assert ours == theirs and len(ours) > 0, path.name
        assert (info.records, info.bytes, info.link_types) == (reference.records, reference.bytes,
                                                               reference.link_types), path.name
        assert info.ok, path.name


@pytest.mark.parametrize("path", ALL_SAMPLES, ids=sample_id)
def test_a_pipe_reads_as_the_file(path):
    """A non-seekable stream (tcpdump -w - | amqpcap decode -), gzip included."""
    info = CaptureInfo("-", 0)
    assert list(read_records("-", info, pipe(path.read_bytes()))) == list(read_records(str(path)))
    assert [issue.kind for issue in info.issues] == expected_issues(path)


@pytest.mark.parametrize("path", ALL_SAMPLES[::4], ids=sample_id)
def test_reads_smaller_than_a_record(path, monkeypatch):
    """Every record straddles two reads: the window must stitch them."""
    monkeypatch.setattr(source, "CHUNK", 97)
    info = CaptureInfo(str(path), 0)
    records = list(read_records(str(path), info, pipe(path.read_bytes())))
    monkeypatch.undo()
    assert records == list(read_records(str(path)))
    assert info.bytes == sum(len(r[2]) for r in records)


def test_an_open_file_or_a_pyarrow_file_is_read_in_place():
    import pyarrow.fs as pafs
    path = SAMPLES / "ipv6_pcapng.pcapng"
    expected = list(read_records(str(path)))
    with open(path, "rb") as f:
        assert list(read_records("name only", source=f)) == expected
    with pafs.LocalFileSystem().open_input_file(str(path)) as f:
        assert list(read_records("name only", source=f)) == expected
    # a capture that starts further into the file it is in: offsets count from its start
    before = b"something before the capture"
    embedded = io.BytesIO(before + path.read_bytes())
    embedded.seek(len(before))
    assert list(read_records("embedded", source=embedded)) == expected
    embedded.seek(len(before))
    part = list(read_records("embedded", source=embedded, start=3000))
    assert part == expected[-len(part):] and 0 < len(part) < len(expected)


def test_stdin_is_dash(monkeypatch, capfdbinary):
    path = SAMPLES / "heartbeats.pcap"
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(pipe(path.read_bytes())))
    assert list(read_records("-")) == list(read_records(str(path)))
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(pipe(path.read_bytes())))
    assert main(["decode", "--jsonl", "-"]) == 0
    out = capfdbinary.readouterr().out.decode()
    assert sum(json.loads(line)["kind"] == "heartbeat" for line in out.splitlines()) >= 4


def test_gzip_is_found_by_its_bytes_not_its_name(tmp_path):
    path = SAMPLES / "crafted" / "clean.pcap.gz"
    renamed = tmp_path / "clean.pcap"  # gzip bytes, misleading name
    renamed.write_bytes(path.read_bytes())
    plain = tmp_path / "plain.pcap.gz"  # plain bytes, misleading name
    plain.write_bytes(sample_bytes(path))
    info = CaptureInfo(str(plain), 0)
    expected = list(read_records(str(path)))
    assert list(read_records(str(renamed))) == list(read_records(str(plain), info)) == expected
    assert info.format == "pcap"


@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("handed", [1, 2, 10, -2, -1])
def test_an_early_close_leaves_counts_of_what_was_handed_out(tmp_path, order, handed):
    """Records are read in runs and handed out one by one: a close anywhere in a run counts only
    those handed out."""
    sample = SAMPLES / "connection_errors.pcap"
    path = tmp_path / "capture.pcap"
    path.write_bytes(pcap([(ts, data) for ts, _, data in read_records(str(sample))], order=order))
    whole = list(read_records(str(path)))
    handed = handed % len(whole)
    info = CaptureInfo(str(path), 0)
    records = read_records(str(path), info)
    taken = [next(records) for _ in range(handed)]
    records.close()
    assert taken == whole[:handed]
    assert (info.records, info.bytes) == (handed, sum(len(r[2]) for r in taken))
    assert (info.first_ts_ns, info.last_ts_ns) == (whole[0][0], whole[handed - 1][0])
