"""Capture decode benchmark: `amqpcap decode` against tshark on the same large capture.

    .venv/bin/python bench/decode_bench.py [--mb 150] [--small-mb 50] [--keep DIR]

Builds (or reuses, with --keep) captures of --small-mb and --mb megabytes with bench/synth.py,
then on each, in the same run and one after the other on an otherwise idle machine:

    amqpcap decode --jsonl --quiet FILE > /dev/null
    tshark -r FILE -Y amqp -T fields -e amqp.method.method > /dev/null

and reports the fastest of --repeat runs (alternating), MB/s, packets/s and peak memory (RSS) of
each. Both are single-threaded.
Targets (issue 12, raised from issue 3's 2x): amqpcap at least 3x tshark's throughput on the large
file, and a peak memory that does not grow with capture size (compare the two sizes).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import synth  # noqa: E402

MEASURE = ("import resource, subprocess, sys; "
           "subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True); "
           "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


def run(command: list[str]) -> tuple[float, int]:
    """(wall seconds, peak RSS in MB) of one command, measured from a fresh parent process."""
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", MEASURE, *command], capture_output=True, text=True,
                            check=True)
    return time.perf_counter() - start, int(result.stdout) // 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=150.0)
    parser.add_argument("--small-mb", type=float, default=50.0)
    parser.add_argument("--keep", type=Path, help="folder to keep (and reuse) the synthetic captures in")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of each tool, alternating; the fastest counts (a shared VM is noisy)")
    args = parser.parse_args(argv)
    tshark = shutil.which("tshark")
    amqpcap = str(Path(sys.executable).with_name("amqpcap"))
    if tshark is None:
        print("tshark is not installed (apt-get install tshark)", file=sys.stderr)
        return 2
    folder = args.keep or Path(tempfile.mkdtemp(prefix="amqpcap-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"{subprocess.run([tshark, '--version'], capture_output=True, text=True).stdout.splitlines()[0]}")
    results = {}
    for size in (args.small_mb, args.mb):
        path = folder / f"synth-{size:g}MB.pcap"  # one file (synth.py --files 1)
        if not path.exists():
            synth.synthesise(path, size)
        megabytes = path.stat().st_size / 1e6
        packets = sum(1 for _ in _records(path))
        runs = [(run([amqpcap, "decode", "--jsonl", "--quiet", str(path)]),
                 run([tshark, "-r", str(path), "-Y", "amqp", "-T", "fields", "-e", "amqp.method.method"]))
                for _ in range(max(1, args.repeat))]
        ours = (min(r[0][0] for r in runs), max(r[0][1] for r in runs))
        theirs = (min(r[1][0] for r in runs), max(r[1][1] for r in runs))
        results[size] = (ours, theirs)
        print(f"\n{path.name}: {megabytes:.1f} MB, {packets} packets (fastest of {len(runs)} runs each)")
        for name, (seconds, rss) in (("amqpcap decode", ours), ("tshark", theirs)):
            print(f"  {name:15} {seconds:6.2f} s  {megabytes / seconds:6.1f} MB/s  "
                  f"{packets / seconds:9,.0f} packets/s  peak RSS {rss} MB")
        print(f"  ratio (tshark time / amqpcap time): {theirs[0] / ours[0]:.2f}x  (target >= 3x)")
    small, large = results[args.small_mb][0][1], results[args.mb][0][1]
    print(f"\namqpcap peak RSS: {small} MB at {args.small_mb:g} MB, {large} MB at {args.mb:g} MB")
    if not args.keep:
        shutil.rmtree(folder)
    return 0


def _records(path: Path):
    from amqp_decode.capture import read_records
    return read_records(str(path))


if __name__ == "__main__":
    sys.exit(main())
