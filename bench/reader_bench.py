"""Capture reader benchmark: amqpcap.capture.readers against Scapy's raw readers on the same large files.

    .venv/bin/python bench/reader_bench.py [--mb 500] [--ranges 4] [--repeat 3] [--keep DIR]

Builds (or reuses, with --keep) a pcap of --mb megabytes with bench/synth.py and the same records
as a pcapng (one interface, nanosecond times), reads the page cache warm, then times, alternating,
in this process:

    read_records(path)                           the fast reader, whole file
    read_records(path, start=a, end=b)           the fast reader, --ranges ranges one after the
                                                 other (sum of their times; the same records)
    RawPcapReader / RawPcapNgReader._read_packet Scapy, the previous reader's core

and reports the fastest of --repeat runs of each: seconds, records/s, MB/s, and the speed-up over
Scapy. Targets: the fast reader at >= 3x Scapy's records/s on the pcap, and at least as fast as
Scapy on the pcapng. Single-threaded; the ranges are what several tasks would read in parallel.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import struct
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import synth  # noqa: E402

from amqpcap.capture.readers import CaptureInfo, read_records, split_points  # noqa: E402


def fast_whole(path: Path) -> int:
    count = 0
    for _ in read_records(str(path)):
        count += 1
    return count


def fast_ranges(path: Path, ranges: int) -> int:
    size = path.stat().st_size
    points = split_points(size, -(-size // ranges))
    merged, count = CaptureInfo(str(path), size), 0
    for start, end in zip(points, points[1:]):
        part = CaptureInfo(str(path), size)
        for _ in read_records(str(path), part, start=start, end=end):
            count += 1
        merged.merge(part)
    assert merged.ok and merged.records == count, merged.issues
    return count


def scapy(path: Path) -> int:
    from scapy.utils import RawPcapReader
    reader, count = RawPcapReader(str(path)), 0  # RawPcapNgReader for a pcapng, by its magic
    read = reader._read_packet
    try:
        while True:
            read(size=1 << 18)
            count += 1
    except EOFError:
        return count
    finally:
        reader.close()


def to_pcapng(source: Path, out: Path) -> None:
    """The records of a nanosecond pcap as a pcapng: SHB, one IDB (if_tsresol 9), EPBs."""
    def block(block_type: int, body: bytes) -> bytes:
        body += b"\x00" * (-len(body) % 4)
        return struct.pack("<II", block_type, 12 + len(body)) + body + struct.pack("<I", 12 + len(body))
    with open(out, "wb") as f:
        f.write(block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1)))
        f.write(block(1, struct.pack("<HHIHHB3x", 1, 0, 262144, 9, 1, 9) + struct.pack("<HH", 0, 0)))
        for ts, _, data in read_records(str(source)):
            f.write(block(6, struct.pack("<IIIII", 0, ts >> 32, ts & 0xFFFFFFFF, len(data), len(data)) + data))


def warm(path: Path) -> None:
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=500.0, help="size of the pcap, in MB")
    parser.add_argument("--ranges", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of each reader, alternating; the fastest counts (a shared VM is noisy)")
    parser.add_argument("--keep", type=Path, help="folder to keep (and reuse) the synthetic captures in")
    args = parser.parse_args(argv)
    folder = args.keep or Path(tempfile.mkdtemp(prefix="amqpcap-reader-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    pcap = folder / f"synthetic-{args.mb:g}MB.pcap"
    pcapng = folder / f"synthetic-{args.mb:g}MB.pcapng"
    if not pcap.exists():
        synth.synthesise(pcap, args.mb)
    if not pcapng.exists():
        to_pcapng(pcap, pcapng)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"load average {os.getloadavg()[0]:.1f}")
    for path in (pcap, pcapng):
        warm(path)
        megabytes = path.stat().st_size / 1e6
        readers = {"fast reader, whole file": lambda: fast_whole(path),
                   f"fast reader, {args.ranges} ranges": lambda: fast_ranges(path, args.ranges),
                   "Scapy raw reader": lambda: scapy(path)}
        best: dict[str, float] = {}
        counts: dict[str, int] = {}
        for _ in range(max(1, args.repeat)):
            for name, run in readers.items():
                start = time.perf_counter()
                counts[name] = run()
                best[name] = min(best.get(name, float("inf")), time.perf_counter() - start)
        assert len(set(counts.values())) == 1, counts
        records = counts["Scapy raw reader"]
        print(f"\n{path.name}: {megabytes:.1f} MB, {records} records, {megabytes * 1e6 / records:.0f} bytes "
              f"per record (fastest of {args.repeat} runs each)")
        for name, seconds in best.items():
            print(f"  {name:26} {seconds:6.2f} s  {records / seconds / 1e6:5.2f} M records/s  "
                  f"{megabytes / seconds:7.1f} MB/s  {best['Scapy raw reader'] / seconds:4.1f}x Scapy")
    if not args.keep:
        shutil.rmtree(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
