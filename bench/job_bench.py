"""Job benchmark: `amqpcap run` (decode and Delta writes) against tshark on the same large capture.

    .venv/bin/python bench/job_bench.py [--mb 500] [--small-mb 100] [--master local[2]] [--keep DIR]

For each size (built by bench/synth.py, reused with --keep), in the same run, one after the other:

    tshark -r FILE -Y amqp -T fields -e amqp.method.method > /dev/null
    amqpcap run --input FILE --lake <fresh dir> --master local[2]

Reports wall time, MB/s, packets/s, tshark's peak RSS, and for the job the peak RSS of the Python
driver, the JVM and the largest Python worker (each process's own high-water mark, VmHWM, sampled
from /proc while the job runs). Target (issue 4): the whole job at least 1.5x tshark's throughput
on this 2-core machine, with worker memory that does not grow with capture size.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import synth  # noqa: E402
from decode_bench import run as run_measured  # noqa: E402


def _hwm_mb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024
    except OSError:
        pass
    return 0


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, stack = [], [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def _kind(pid: int) -> str:
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "other"
    if "java" in command.split(" ", 1)[0]:
        return "jvm"
    if "pyspark.daemon" in command or "pyspark.worker" in command:
        return "worker"
    return "other"


def run_job(command: list[str]) -> tuple[float, dict[str, int], str]:
    """(wall seconds, peak RSS in MB per role: driver, jvm, worker, the job's progress lines)."""
    peaks = {"driver": 0, "jvm": 0, "worker": 0}
    start = time.perf_counter()
    log = tempfile.TemporaryFile()
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peaks["driver"] = max(peaks["driver"], _hwm_mb(process.pid))
            for pid in _descendants(process.pid):
                role = _kind(pid)
                if role != "other":
                    peaks[role] = max(peaks[role], _hwm_mb(pid))
            stop.wait(0.5)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    code = process.wait()
    stop.set()
    sampler.join()
    log.seek(0)
    output = log.read().decode(errors="replace")
    if code:
        raise SystemExit(f"{' '.join(command)} failed with status {code}:\n{output[-3000:]}")
    return time.perf_counter() - start, peaks, output


def phases(wall: float, output: str) -> str:
    """Where the job's time went, from its own progress lines."""
    raw = re.search(r"raw tables committed after ([0-9.]+) s", output)
    finished = re.search(r"finished in ([0-9.]+) s", output)
    tables = re.findall(r"amqpcap: (\w+): \d+ rows, ([0-9.]+) s", output)
    if not (raw and finished):
        return "phases: not found in the job's output"
    raw_s, job_s = float(raw.group(1)), float(finished.group(1))
    return (f"phases: start-up and shutdown {wall - job_s:.1f} s, decode + raw tables {raw_s:.1f} s, "
            f"analytics {job_s - raw_s:.1f} s (" + ", ".join(f"{t} {s} s" for t, s in tables) + ")")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=500.0)
    parser.add_argument("--small-mb", type=float, default=100.0)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--keep", type=Path, help="folder to keep (and reuse) the synthetic captures in")
    args = parser.parse_args(argv)
    tshark = shutil.which("tshark")
    if tshark is None:
        print("tshark is not installed (apt-get install tshark)", file=sys.stderr)
        return 2
    amqpcap = str(Path(sys.executable).with_name("amqpcap"))
    folder = args.keep or Path(tempfile.mkdtemp(prefix="amqpcap-jobbench-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"Spark master {args.master}")
    for size in (args.small_mb, args.mb):
        path = folder / f"synthetic-{size:g}MB.pcap"
        if not path.exists():
            synth.synthesise(path, size)
        megabytes = path.stat().st_size / 1e6
        from amqp_decode.capture import read_records
        packets = sum(1 for _ in read_records(str(path)))
        theirs, tshark_rss = run_measured([tshark, "-r", str(path), "-Y", "amqp", "-T", "fields",
                                           "-e", "amqp.method.method"])
        lake = Path(tempfile.mkdtemp(prefix="amqpcap-lake-", dir=folder))
        ours, peaks, output = run_job([amqpcap, "run", "--input", str(path), "--lake", str(lake),
                               "--master", args.master])
        shutil.rmtree(lake)
        print(f"\n{path.name}: {megabytes:.1f} MB, {packets} packets")
        print(f"  amqpcap run  {ours:7.1f} s  {megabytes / ours:6.1f} MB/s  {packets / ours:9,.0f} packets/s  "
              f"peak RSS: driver {peaks['driver']} MB, JVM {peaks['jvm']} MB, largest Python worker "
              f"{peaks['worker']} MB")
        print(f"    {phases(ours, output)}")
        print(f"  tshark       {theirs:7.1f} s  {megabytes / theirs:6.1f} MB/s  {packets / theirs:9,.0f} packets/s  "
              f"peak RSS {tshark_rss} MB")
        print(f"  ratio (tshark time / amqpcap run time): {theirs / ours:.2f}x  (target >= 1.5x)")
    if not args.keep:
        shutil.rmtree(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
