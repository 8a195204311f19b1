"""Memory of one reused Spark Python worker: the nightly job's tasks for one input, run one after
another in this process, as a worker that Spark reuses runs its share of them.

    .venv/bin/python bench/worker_memory.py CAPTURES [--buckets 4] [--cores 2]

CAPTURES: a capture file or a folder of them (job_bench.py --keep leaves its inputs in
DIR/<size>GB/{rotated,single.pcap}). Every read task, then every decode task, then every
message_flows task, with the job's settings (unit size, buckets, flow parts for --cores); after
each phase: the resident memory now and its peak so far (MB), glibc's heap (in use / free), the
Python objects the cyclic collector tracks, and the phase's time (wall, user, system) and minor
page faults. Nothing of Spark runs, so the job's other processes
are not measured here (bench/job_bench.py measures the driver, the JVM and the workers).

Target (issue 10): the peaks do not grow with the input. Compare two sizes, e.g. 0.5 and 10 GB.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from amqpcap.capture.inputs import InputFile, canonical_uri  # noqa: E402
from amqpcap.job.plan import plan_buckets, plan_units  # noqa: E402
from amqpcap.job.stages.decode import decode_bucket  # noqa: E402
from amqpcap.job.stages.flows import flow_parts, flows_task  # noqa: E402
from amqpcap.job.stages.numbering import number_units  # noqa: E402
from amqpcap.job.stages.read import read_unit  # noqa: E402
from amqpcap.job.work import ReadResult  # noqa: E402
from amqpcap.process import (
    fewer_collections,  # noqa: E402
    prepare_worker,  # noqa: E402
)
from amqpcap.settings import Settings  # noqa: E402


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                     "fsmblks", "uordblks", "fordblks", "keepcost")]


def _heap() -> str:
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _MallInfo2
    except (OSError, AttributeError):  # not glibc
        return ""
    info = libc.mallinfo2()
    return f"glibc heap {info.uordblks >> 20} MB in use, {info.fordblks >> 20} MB free; "


_last = [time.perf_counter(), 0.0, 0.0, 0]  # wall, user, system seconds and minor page faults at the last mark


def mark(what: str) -> None:
    with open("/proc/self/statm") as statm:
        now = int(statm.read().split()[1]) * resource.getpagesize() >> 20
    usage = resource.getrusage(resource.RUSAGE_SELF)
    peak = usage.ru_maxrss >> 10
    times = [time.perf_counter(), usage.ru_utime, usage.ru_stime, usage.ru_minflt]
    wall, user, system, faults = (a - b for a, b in zip(times, _last))
    _last[:] = times
    print(f"{what:22s} RSS {now:4d} MB, peak {peak:4d} MB; {_heap()}{len(gc.get_objects()):,} tracked objects; "
          f"{wall:.2f} s ({user:.2f} user, {system:.2f} system, {faults:,} page faults)", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("captures", type=Path)
    parser.add_argument("--buckets", type=int, default=4, help="decode tasks (the job: 2 per core)")
    parser.add_argument("--cores", type=int, default=2, help="for the number of message_flows parts")
    args = parser.parse_args(argv)
    paths = sorted(p for p in args.captures.glob("*.pcap*")) if args.captures.is_dir() else [args.captures]
    if not paths:
        parser.error(f"no captures in {args.captures}")
    prepare_worker()  # as the job's tasks do first in a worker
    settings = Settings()
    inputs = [InputFile(canonical_uri(str(p)), p.stat().st_size) for p in paths]
    units = plan_units(inputs, settings.job.split_bytes)
    parts = flow_parts(sum(f.size for f in inputs), args.cores)
    staging = tempfile.mkdtemp(prefix="amqpcap-worker-memory-")
    print(f"{len(paths)} files, {sum(f.size for f in inputs) >> 20} MB: {len(units)} read tasks, "
          f"{args.buckets} decode tasks, {parts} message_flows tasks")
    try:
        mark("start")
        staged = {}
        for unit in units:
            with fewer_collections():  # as amqpcap.job.stages.read.read_task
                staged[unit.unit] = ReadResult(unit.unit, *read_unit(unit, staging, args.buckets))
        mark("read tasks")
        bases = number_units(units, staged, staging)
        work = plan_buckets(units, staged)
        for n, bucket in enumerate(work):
            with fewer_collections():  # as amqpcap.job.stages.decode.decode_task
                decode_bucket(bucket, staging, [f.uri for f in inputs], settings, "bench", f"{staging}/lake",
                              bases=bases, flow_parts=parts)
            mark(f"decode task {n + 1}/{len(work)}")
        for part in range(parts):
            list(flows_task(iter([part]), staging, f"{staging}/lake", "bench", settings.spark.arrow_batch_rows))
        mark("message_flows tasks")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
