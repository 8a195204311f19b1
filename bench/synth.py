"""Build a large capture by replicating the real sample connections.

    python bench/synth.py OUT.pcap --mb 150

Every Ethernet or Linux-cooked pcap in data/samples/ (the recorded ones, not the crafted) is
replayed over and over: each copy gets its own client port (so it is a distinct connection) and
is shifted in time, and copies overlap so the output interleaves many concurrent connections, as
a busy broker's capture does. Packet bytes are otherwise untouched (TCP checksums are not
recomputed: neither decoder checks them).
"""

from __future__ import annotations

import argparse
import heapq
import struct
import sys
from pathlib import Path

from amqp_decode.capture import read_records

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "data" / "samples"
AMQP_PORT = 5672
LINK_OFFSETS = {1: 14, 113: 16, 276: 20}  # link type -> IP header offset


def load_sample(path: Path) -> tuple[int, list[tuple[int, bytes]]]:
    """(link type, [(ts_ns, record)]) of one pcap, timestamps made relative to its start."""
    records = list(read_records(str(path)))
    link, start = records[0][1], records[0][0]
    return link, [(ts - start, data) for ts, _, data in records]


def client_port_offset(data: bytes, ip_offset: int) -> tuple[int, int]:
    """(offset of the client port field, client port): the port that is not 5672."""
    version = data[ip_offset] >> 4
    header = (data[ip_offset] & 0x0F) * 4 if version == 4 else 40
    tcp = ip_offset + header
    sport, dport = struct.unpack_from(">HH", data, tcp)
    return (tcp, sport) if dport == AMQP_PORT else (tcp + 2, dport)


def with_port(data: bytes, offset: int, port: int) -> bytes:
    patched = bytearray(data)
    struct.pack_into(">H", patched, offset, port)
    return bytes(patched)


def synthesise(out: Path, megabytes: float) -> tuple[int, int]:
    samples = []
    for path in sorted(SAMPLES.glob("*.pcap")):
        link, records = load_sample(path)
        if link == 1:  # one link type for the whole output: Ethernet
            samples.append(records)
    target = int(megabytes * 1_000_000)
    written, packets, next_port = 24, 0, 0
    clock = 1_700_000_000 * 10**9  # each batch starts after the previous one ends
    with open(out, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1))
        while written < target:
            # a batch of copies of every sample, started 50 ms apart, merged into one timeline
            batch = []
            for n, records in enumerate(samples):
                base = clock + n * 50_000_000
                ports: dict[int, int] = {}  # each of the sample's connections gets a port of its own
                copied = []
                for ts, data in records:
                    offset, original = client_port_offset(data, LINK_OFFSETS[1])
                    if original not in ports:
                        ports[original] = 1024 + next_port % 60_000
                        next_port += 1
                    copied.append((base + ts, offset, ports[original], data))
                batch.append(copied)
            clock = max(b[-1][0] for b in batch) + 1_000_000
            for ts, offset, port, data in heapq.merge(*batch, key=lambda item: item[0]):
                record = with_port(data, offset, port)
                f.write(struct.pack("<IIII", ts // 10**9, ts % 10**9, len(record), len(record)) + record)
                written += 16 + len(record)
                packets += 1
    return written, packets


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--mb", type=float, default=150.0, help="size of the output, in MB")
    args = parser.parse_args(argv)
    size, packets = synthesise(args.out, args.mb)
    print(f"wrote {args.out}: {size / 1e6:.1f} MB, {packets} packets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
