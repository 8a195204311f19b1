"""Job benchmark: the nightly `amqpcap run` against tshark, on realistic captures of growing size.

    .venv/bin/python bench/job_bench.py [--sizes 0.5,1,2,4] [--big 10] [--keep DIR] [--json FILE] [--repeat N]
    .venv/bin/python bench/job_bench.py --report FILE...      # the table of earlier runs, merged
    .venv/bin/python bench/job_bench.py --sizes 2 --layouts rotated \
        --engines delta-rs,delta-spark --stores local,s3 --masters local[2],standalone   # where users run it

For each size (GB; --big adds one more, e.g. 10), bench/synth.py builds a capture of one sensor
rotated into --files files (tcpdump -C style, connections spanning files); the same traffic as one
file is those files joined record-wise. Both layouts are measured, one after the other on the same
bytes (run nothing else heavy meanwhile):

    amqpcap run --input PATH --lake <fresh dir> --master local[2] --summary-json F   (default settings)
    tshark -r FILE -Y amqp -T fields -e amqp.method.method > /dev/null  (rotated: each file in turn, times summed)

Per size and layout: wall time and MB/s; the job's phases from its summary JSON (read, decode,
message_flows, commit; start-up = until the job logs its "run ...: N files" line, which it does once
the Spark session is up, and shutdown = the rest of the wall time after the phases: stopping Spark
and the process); peak RSS (VmHWM, sampled from /proc every 0.5 s) of the Python driver, the JVM and
the largest Python worker; tshark's time and peak RSS; tshark time / job time; and the share of the
CPUs other processes used meanwhile (a shared machine is noisy: each measurement first waits, up to
--wait-quiet seconds, for the others to use at most 20% of the CPUs). Then a markdown
table and a scaling check: the job's seconds per GB at each size against the 2 GB run's (linear
within 15%?), on the wall time and on the phases alone (without the fixed start-up); and a line
fitted over all sizes (seconds = fixed + rate x GB), with each size's distance from it.

Where it runs (each combination is a row, against the same tshark measurement): --engines
(lake.engine: delta-rs, delta-spark), --stores (local: captures and lake on disk; s3: both on an
S3 server on loopback, moto's, the captures uploaded once: its speed, a Python server's, is part of
what is measured) and --masters (any Spark master; "standalone" starts a master and two one-core
workers on loopback, as tests/helpers/cluster.py does; their executors' memory and CPU are not in
the job's columns, which sample the job's own process tree).

Before each measurement the input files are read once (`warm`), so that the job and tshark start from
the same page cache: on a VM that gives the cache back within a minute (this one does), whichever
ran second would otherwise find the other's reads cached.

A measurement during which other processes took more than 20% of the CPUs is repeated (--retries),
and the quietest kept. A VM's speed also drifts by 20-30% over minutes with what its neighbours do,
which no share of this machine's CPUs shows: --repeat N measures the job and tshark alternately N
times and keeps the fastest of each (as decode_bench does), listing every pair's ratio too. A job that fails (out of memory...) is reported with the end of its output, and the other sizes
still run. Inputs are kept (and reused) under --keep DIR; without it they are deleted after each
size. Lakes are deleted after each run. Free disk is checked before a capture is generated: both
layouts (2x the size) plus the job's staging (about the size) and lake.
"""

from __future__ import annotations

import argparse
import contextlib
import json
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
from spawn import measured  # noqa: E402

# tshark time / job time to reach, per night: the small-frame night's is issue 55's (twice tshark per
# core on local[2]); the mixed night's the last wave's
JOB_TARGETS = {"mixed": 2.0, "small": 4.0}
PHASES = ("read", "decode", "message_flows", "commit")
RUN_LINE = re.compile(rb"amqpcap: run \S+: \d+ files")
TICKS = os.sysconf("SC_CLK_TCK")
CPUS = os.cpu_count() or 1


def machine_cpu() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, all cores."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:9]]
    return (sum(values) - values[3] - values[4]) / TICKS, sum(values) / TICKS


def _cpu_seconds(pid: int) -> float:
    """A process's CPU time, its reaped children's included (a PySpark daemon reaps its workers)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return sum(int(v) for v in fields[11:15]) / TICKS
    except (OSError, IndexError, ValueError):
        return 0.0


def others_share(before: tuple[float, float], after: tuple[float, float], ours: float) -> float:
    """The share of the machine's CPU (all cores) that other processes used meanwhile."""
    busy, total = after[0] - before[0], after[1] - before[1]
    return max(busy - ours, 0.0) / total if total > 0 else 0.0


def wait_quiet(limit: float, threshold: float = 0.2, window: float = 5.0) -> float:
    """Wait (up to `limit` s) until other processes use at most `threshold` of the CPUs; -> their share."""
    began = time.monotonic()
    told = False
    while True:
        before = machine_cpu()
        time.sleep(window)
        share = others_share(before, machine_cpu(), 0.0)
        if share <= threshold or time.monotonic() - began >= limit:
            return share
        if not told:
            print(f"  (waiting up to {limit:.0f} s for a quiet machine: other processes use {share:.0%} of the "
                  f"CPUs)", flush=True)
            told = True


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


def run_job(command: list[str], env: dict | None = None) -> dict:
    """Run the job, sampling memory; -> wall, peaks per role, the time its run line appeared,
    exit code and output."""
    peaks = {"driver": 0, "jvm": 0, "worker": 0}
    cpu: dict[int, float] = {}  # pid -> CPU seconds, last sample
    machine = machine_cpu()
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    stop = threading.Event()
    lines: list[bytes] = []
    run_line: list[float] = []

    def sample():
        while not stop.is_set():
            peaks["driver"] = max(peaks["driver"], _hwm_mb(process.pid))
            cpu[process.pid] = max(cpu.get(process.pid, 0.0), _cpu_seconds(process.pid))
            for pid in _descendants(process.pid):
                cpu[pid] = max(cpu.get(pid, 0.0), _cpu_seconds(pid))
                role = _kind(pid)
                if role != "other":
                    peaks[role] = max(peaks[role], _hwm_mb(pid))
            stop.wait(0.5)

    def read():  # stderr is line-buffered: the run line arrives when it is logged
        for line in process.stdout:
            if not run_line and RUN_LINE.search(line):
                run_line.append(time.perf_counter() - start)
            lines.append(line)

    threads = [threading.Thread(target=sample, daemon=True), threading.Thread(target=read, daemon=True)]
    for thread in threads:
        thread.start()
    code = process.wait()
    wall = time.perf_counter() - start
    stop.set()
    for thread in threads:
        thread.join()
    ours = sum(cpu.values())
    return {"wall": wall, "peaks": peaks, "run_line": run_line[0] if run_line else None, "code": code,
            "cpu": ours, "others": others_share(machine, machine_cpu(), ours),
            "output": b"".join(lines).decode(errors="replace")}


def failure_lines(output: str, keep: int = 25) -> str:
    """The lines that say why a job failed: errors and exceptions, else its last lines."""
    picked = [line for line in output.splitlines()
              if re.search(r"Error|Exception|error:|Killed|OutOfMemory|Traceback|FAILED|amqpcap:", line)]
    return "\n".join((picked or output.splitlines())[-keep:])


def measure_job(amqpcap: str, inputs, master: str, work: Path, engine: str = "delta-rs", store=None) -> dict:
    """One run; `store` (an S3 server: `ObjectStore`) holds the inputs and the lake when given."""
    lake = Path(tempfile.mkdtemp(prefix="lake-", dir=work))
    summary_file = work / "summary.json"
    summary_file.unlink(missing_ok=True)
    where = str(lake) if store is None else store.fresh_lake()
    options = ["--set", f'lake.engine="{engine}"'] + ([] if store is None else store.options())
    try:
        job = run_job([amqpcap, "run", "--input", str(inputs), "--lake", where, "--master", master,
                       "--summary-json", str(summary_file), *options], env=None if store is None else store.env)
        result = {key: job[key] for key in ("wall", "peaks", "code", "cpu", "others")}
        if job["code"] or not summary_file.exists():
            result["error"] = failure_lines(job["output"])
            return result
        summary = json.loads(summary_file.read_text())
        phases = {name: summary["phases"].get(name, 0.0) for name in PHASES}
        work_s = sum(phases.values())
        startup = job["run_line"] if job["run_line"] is not None else summary["wall_seconds"] - work_s
        result.update(phases=phases, startup=startup, shutdown=job["wall"] - startup - work_s,
                      summary_wall=summary["wall_seconds"], rows=summary["rows"], status=summary["status"])
        return result
    finally:
        shutil.rmtree(lake, ignore_errors=True)
        summary_file.unlink(missing_ok=True)
        if store is not None:
            store.drop(where)


class ObjectStore:
    """moto's S3 server on loopback (tests/helpers/s3.py), a bucket for the captures, one for lakes."""

    def __init__(self, stack) -> None:
        sys.path.insert(0, str(HERE.parent))
        from tests.helpers import s3
        self.endpoint = stack.enter_context(s3.moto_server())
        self.client = s3.client(self.endpoint)
        for bucket in ("caps", "lakes"):
            self.client.create_bucket(Bucket=bucket)
        self.env = s3.environment()
        self.uploaded: dict[str, str] = {}

    def inputs(self, key: str, files: list[Path]) -> str:
        if key not in self.uploaded:
            for path in files:
                self.client.upload_file(str(path), "caps", f"{key}/{path.name}")
            self.uploaded[key] = f"s3://caps/{key}/" if len(files) > 1 else f"s3://caps/{key}/{files[0].name}"
        return self.uploaded[key]

    def options(self) -> list[str]:
        return ["--set", f'storage.s3_endpoint="{self.endpoint}"']

    def fresh_lake(self) -> str:
        return f"s3://lakes/{os.urandom(6).hex()}"

    def drop(self, lake: str) -> None:
        prefix = lake.removeprefix("s3://lakes/") + "/"
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket="lakes", Prefix=prefix):
            keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
            if keys:
                self.client.delete_objects(Bucket="lakes", Delete={"Objects": keys})


def warm(files: list[Path]) -> bool:
    """Read every file once (into the page cache, as far as it keeps them)."""
    for path in files:
        with open(path, "rb", buffering=0) as source:
            while source.read(8 << 20):
                pass
    return True


def measure_tshark(tshark: str, files: list[Path]) -> dict:
    """tshark over each file in turn: summed wall time, the largest peak RSS (its own rusage)."""
    seconds = rss = cpu = 0.0
    machine = machine_cpu()
    for path in files:
        took, peak, used, code = measured([tshark, "-r", str(path), "-Y", "amqp", "-T", "fields", "-e",
                                           "amqp.method.method"])
        seconds += took
        rss, cpu = max(rss, peak), cpu + used
        if code:
            raise SystemExit(f"tshark failed on {path} with status {code}")
    return {"seconds": seconds, "rss": int(rss), "cpu": cpu, "others": others_share(machine, machine_cpu(), cpu)}


def quietest(measure, args, name: str) -> dict:
    """Measure after waiting for a quiet machine; again (up to --retries times) while other processes
    took more than 20% of the CPUs meanwhile; the quietest measurement."""
    best = None
    for attempt in range(1 + args.retries):
        if args.wait_quiet:
            wait_quiet(args.wait_quiet)
        result = measure()
        if best is None or ("error" in best) > ("error" in result) or result["others"] < best["others"]:
            best = result
        if best["others"] <= 0.2 or "error" in result:
            break
        print(f"  ({name}: other processes used {result['others']:.0%} of the CPUs meanwhile"
              f"{', measuring again' if attempt < args.retries else ''})", flush=True)
    best["attempts"] = attempt + 1
    return best


def free_bytes(path: Path) -> int:
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize


def prepare(folder: Path, gigabytes: float, files: int, seed: int, shape: str = "mixed") -> dict | None:
    """Build (or reuse) the rotated capture and the single file of one night (synth.py --shape);
    -> its manifest, None if no room."""
    manifest_file = folder / "manifest.json"
    if manifest_file.exists():
        manifest = json.loads(manifest_file.read_text())
        if (manifest.get("files"), manifest.get("seed"), manifest.get("synth"), manifest.get("shape", "mixed"),
                "frames" in manifest) == (files, seed, synth.VERSION, shape, True) and (folder / "single.pcap").exists():
            return manifest
    size = gigabytes * 1e9
    needed = 3.3 * size + 2e9  # both layouts, the job's staging, its lake
    if free_bytes(folder.parent) < needed:
        print(f"  skipped: {free_bytes(folder.parent) / 1e9:.1f} GB free, a {gigabytes:g} GB run needs about "
              f"{needed / 1e9:.0f} GB", flush=True)
        return None
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    made = synth.synthesise(folder / "rotated", gigabytes * 1000, files, seed, shape=shape)
    began = time.perf_counter()
    synth.join(made.paths, folder / "single.pcap")
    manifest = {"gigabytes": gigabytes, "files": files, "seed": seed, "synth": synth.VERSION, "shape": shape,
                "bytes": made.bytes, "packets": made.packets, "frames": made.frames, "copies": made.copies, "connections": made.connections,
                "capture_minutes": made.span_s / 60, "mean_concurrent": made.mean_concurrent,
                "max_concurrent": made.max_concurrent, "synth_seconds": made.seconds,
                "join_seconds": time.perf_counter() - began}
    manifest_file.write_text(json.dumps(manifest, indent=2))
    return manifest


def bench_size(gigabytes: float, args, amqpcap: str, tshark: str, root: Path, shape: str = "mixed") -> list[dict]:
    folder = root / (f"{gigabytes:g}GB" if shape == "mixed" else f"{gigabytes:g}GB-{shape}")
    print(f"\n== {gigabytes:g} GB, the {shape} night", flush=True)
    manifest = prepare(folder, gigabytes, args.files, args.seed, shape)
    if manifest is None:
        return []
    megabytes = manifest["bytes"] / 1e6
    print(f"  input: {megabytes:.0f} MB, {manifest['packets']:,} packets, {manifest['frames']:,} frames, "
          f"{manifest['connections']:,} connections "
          f"over {manifest['capture_minutes']:.0f} min of capture, {manifest['mean_concurrent']:.0f} open on average "
          f"(max {manifest['max_concurrent']})", flush=True)
    results = []
    layouts = {"rotated": (folder / "rotated", sorted((folder / "rotated").glob("part-*.pcap"))),
               "single": (folder / "single.pcap", [folder / "single.pcap"])}
    for layout in args.layouts:
        inputs, files = layouts[layout]
        for engine, place, master in args.variants:
            store = args.stores_open.get(place)
            where = inputs if store is None else store.inputs(f"{gigabytes:g}GB-{layout}", files)
            label = f"{len(files)} files" if len(files) > 1 else "1 file"
            if len(args.variants) > 1:
                label += f" · {engine} · {place} · {master.split('//')[0].rstrip(':') if '//' in master else master}"
            pairs = []
            for _ in range(args.repeat):  # alternately, so that both see the machine's slow and fast spells
                job = quietest(lambda: warm(files) and measure_job(amqpcap, where, args.masters_open[master], folder,
                                                                    engine, store), args, "amqpcap run")
                theirs = quietest(lambda: warm(files) and measure_tshark(tshark, files), args, "tshark")
                pairs.append((job, theirs))
                if "error" in job:
                    break
            job = min((j for j, _ in pairs), key=lambda j: ("error" not in j, j["wall"]))  # a failure is kept
            theirs = min((t for _, t in pairs), key=lambda t: t["seconds"])
            row = {"gigabytes": gigabytes, "shape": shape, "layout": label, "engine": engine, "store": place,
                   "master": master, "cores": cores_of(master), "megabytes": megabytes, "packets": manifest["packets"],
                   "frames": manifest["frames"], "job": job, "tshark": theirs,
                   "pairs": [[j["wall"], t["seconds"]] for j, t in pairs]}
            results.append(row)
            print(describe(row), flush=True)
    if not args.keep:
        shutil.rmtree(folder)
    return results


def cores_of(master: str) -> int:
    """The cores a Spark master runs the job's tasks on (local[N]: N; local[*], a cluster: this machine's)."""
    found = re.fullmatch(r"local\[(\d+)(?:,\d+)?\]", master)
    return int(found.group(1)) if found else (1 if master == "local" else os.cpu_count() or 1)


def per_core(row: dict, seconds: float, cores: int) -> str:
    """Packets and frames per second, and per core."""
    packets, frames = row["packets"] / seconds, row.get("frames", 0) / seconds
    return (f"{packets:,.0f} packets/s, {frames:,.0f} frames/s ({packets / cores:,.0f} packets/s and "
            f"{frames / cores:,.0f} frames/s per core of {cores})")


def describe(row: dict) -> str:
    job, theirs, megabytes = row["job"], row["tshark"], row["megabytes"]
    peaks = job["peaks"]
    head = f"  {row['layout']:8}"
    if "error" in job:
        text = (f"{head} amqpcap run FAILED (exit {job['code']}) after {job['wall']:.1f} s; peak RSS driver "
                f"{peaks['driver']} MB, JVM {peaks['jvm']} MB, worker {peaks['worker']} MB:\n"
                + "\n".join("      " + line for line in job["error"].splitlines()))
    else:
        phases = ", ".join(f"{name} {job['phases'][name]:.1f}" for name in PHASES)
        text = (f"{head} amqpcap run {job['wall']:7.1f} s {megabytes / job['wall']:6.1f} MB/s  (start-up "
                f"{job['startup']:.1f}, {phases}, shutdown {job['shutdown']:.1f} s)  peak RSS driver "
                f"{peaks['driver']} MB, JVM {peaks['jvm']} MB, largest worker {peaks['worker']} MB; "
                f"CPU {job['cpu']:.0f} s, other processes {job['others']:.0%} of the CPUs"
                f"\n{' ' * 11}{per_core(row, job['wall'], row.get('cores', 2))}")
    text += (f"\n{' ' * 11}tshark      {theirs['seconds']:7.1f} s {megabytes / theirs['seconds']:6.1f} MB/s  "
             f"peak RSS {theirs['rss']} MB; other processes {theirs['others']:.0%} of the CPUs"
             f"\n{' ' * 11}{per_core(row, theirs['seconds'], 1)}")
    if "error" not in job:
        target = JOB_TARGETS.get(row.get("shape", "mixed"))
        text += (f"\n{' ' * 11}tshark time / job time: {theirs['seconds'] / job['wall']:.2f}x"
                 + (f" (target >= {target:g}x)" if target else ""))
        pairs = row.get("pairs", [])
        if len(pairs) > 1:
            text += (f" (the fastest of {len(pairs)} alternating runs of each; run by run: "
                     + ", ".join(f"{t:.1f} / {j:.1f} s = {t / j:.2f}x" for j, t in pairs) + ")")
    return text


def table(rows: list[dict]) -> str:
    lines = ["| size | layout | MB | job s | job MB/s | job CPU s | start-up | read | decode | message_flows | commit "
             "| shutdown | driver MB | JVM MB | worker MB | tshark s | tshark MB/s | tshark MB | tshark/job "
             "| others' CPU |",
             "|" + "---|" * 20]
    for row in rows:
        job, theirs, mb = row["job"], row["tshark"], row["megabytes"]
        p = job["peaks"]
        if "error" in job:
            cells = [f"FAILED after {job['wall']:.0f} s", "", "", "", "", "", "", "", ""]
        else:
            cells = [f"{job['wall']:.1f}", f"{mb / job['wall']:.1f}", f"{job['cpu']:.0f}", f"{job['startup']:.1f}",
                     *(f"{job['phases'][n]:.1f}" for n in PHASES), f"{job['shutdown']:.1f}"]
        ratio = f"{theirs['seconds'] / job['wall']:.2f}x" if "error" not in job else "-"
        lines.append("| " + " | ".join([f"{row['gigabytes']:g} GB {row.get('shape', 'mixed')}", row["layout"], f"{mb:.0f}", *cells,
                                         str(p["driver"]), str(p["jvm"]), str(p["worker"]),
                                         f"{theirs['seconds']:.1f}", f"{mb / theirs['seconds']:.1f}",
                                         str(theirs["rss"]), ratio,
                                         f"{job['others']:.0%} / {theirs['others']:.0%}"]) + " |")
    return "\n".join(lines)


def _series(row: dict) -> str:
    """The rows one scaling line compares: one night's, one layout's."""
    return f"{row.get('shape', 'mixed')} night, {row['layout']}"


def scaling(rows: list[dict], reference: float = 2.0, tolerance: float = 0.15) -> str:
    lines = [f"Scaling: the job's seconds per GB relative to the {reference:g} GB run's (linear within "
             f"{tolerance:.0%}?) on the wall time / on the phases alone (no start-up, shutdown) / on its CPU time "
             "(the least disturbed by other processes)"]
    measures = {"wall": lambda j: j["wall"], "phases": lambda j: sum(j["phases"].values()), "cpu": lambda j: j["cpu"]}
    for layout in dict.fromkeys(_series(r) for r in rows):  # (each night's layouts on their own)
        ok = [r for r in rows if _series(r) == layout and "error" not in r["job"]]
        ref = next((r for r in ok if r["gigabytes"] == reference), None)
        if ref is None:
            lines.append(f"  {layout}: no successful {reference:g} GB run to compare with")
            continue

        def per_gb(r, measure):
            return measures[measure](r["job"]) / (r["megabytes"] / 1000)
        for r in ok:
            ratios = {m: per_gb(r, m) / per_gb(ref, m) for m in measures}
            verdict = "linear" if abs(ratios["phases"] - 1) <= tolerance else "NOT linear"
            lines.append(f"  {layout} {r['gigabytes']:4g} GB: {per_gb(r, 'wall'):5.1f} s/GB, "
                         + " / ".join(f"{ratios[m]:.2f}" for m in measures) + f"  {verdict} (phases)")
    lines.append(affine(rows, measures, tolerance))
    return "\n".join(lines)


def affine(rows: list[dict], measures: dict, tolerance: float) -> str:
    """Seconds per GB against one size mix a fixed cost (the JVM's start, each worker's first
    task) into the rate, and so always call the small sizes slower. Here each measure gets the least
    squares line seconds = fixed + rate x GB over every size, and each size's distance from it."""
    lines = ["Fit: seconds = fixed + rate x GB over all sizes (least squares); each size's measured value "
             "against the line's (linear within " + f"{tolerance:.0%}?)"]
    for layout in dict.fromkeys(_series(r) for r in rows):  # (each night's layouts on their own)
        ok = [r for r in rows if _series(r) == layout and "error" not in r["job"]]
        if len({r["gigabytes"] for r in ok}) < 3:
            lines.append(f"  {layout}: fewer than 3 sizes to fit")
            continue
        xs = [r["megabytes"] / 1000 for r in ok]
        for name, measure in measures.items():
            ys = [measure(r["job"]) for r in ok]
            mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
            rate = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / sum((x - mean_x) ** 2 for x in xs)
            fixed = mean_y - rate * mean_x
            off = [y / (fixed + rate * x) - 1 for x, y in zip(xs, ys)]
            verdict = "linear" if max(map(abs, off)) <= tolerance else "NOT linear"
            lines.append(f"  {layout:8} {name:6}: {fixed:5.1f} s + {rate:5.2f} s/GB; "
                         + ", ".join(f"{r['gigabytes']:g} GB {o:+.0%}" for r, o in zip(ok, off)) + f"  {verdict}")
    return "\n".join(lines)


def standalone_master(stack, root: Path) -> str:
    """A standalone cluster on loopback for the run: a master and two one-core workers."""
    sys.path.insert(0, str(HERE.parent))
    from tests.helpers import s3
    from tests.helpers.cluster import standalone_cluster
    # the workers' nodes hold the store's credentials, as an instance role would give them
    return stack.enter_context(standalone_cluster(root / "cluster", worker_env=s3.credentials())).master


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="0.5,1,2,4", help="capture sizes in GB, comma-separated")
    parser.add_argument("--shapes", default=",".join(synth.SHAPES),
                        help="the nights (synth.py --shape), comma-separated: mixed (mostly large bodies), small "
                             "(mostly small frames)")
    parser.add_argument("--big", type=float, help="one more, larger size in GB (e.g. 10)")
    parser.add_argument("--files", type=int, default=16, help="files of the rotated layout")
    parser.add_argument("--layouts", default="rotated,single", help="rotated, single or both")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--master", default="local[2]", help="(one master; --masters for several)")
    parser.add_argument("--masters", help="Spark masters, comma-separated; \"standalone\": a cluster on loopback")
    parser.add_argument("--engines", default="delta-rs", help="lake.engine values, comma-separated")
    parser.add_argument("--stores", default="local", help="local, s3 or both")
    parser.add_argument("--keep", type=Path, help="folder to keep (and reuse) the captures in")
    parser.add_argument("--json", type=Path, help="also write every measurement to this file")
    parser.add_argument("--repeat", type=int, default=1,
                        help="measure the job and tshark alternately this many times; keep the fastest of each")
    parser.add_argument("--retries", type=int, default=2,
                        help="measure again while other processes took more than 20%% of the CPUs meanwhile")
    parser.add_argument("--report", type=Path, nargs="+", metavar="JSON",
                        help="only print the table and scaling check of earlier runs' --json files, merged")
    parser.add_argument("--wait-quiet", type=float, default=600.0,
                        help="before each measurement, wait up to this many seconds until other processes use at "
                             "most 20%% of the CPUs (0: do not wait); their share is reported either way")
    args = parser.parse_args(argv)
    args.layouts = [x.strip() for x in args.layouts.split(",") if x.strip()]
    if args.report:
        rows = [row for path in args.report for row in json.loads(path.read_text())]
        print(table(rows) + "\n\n" + scaling(rows))
        return 0
    tshark = shutil.which("tshark")
    if tshark is None:
        print("tshark is not installed (apt-get install tshark)", file=sys.stderr)
        return 2
    amqpcap = str(Path(sys.executable).with_name("amqpcap"))
    sizes = [float(s) for s in args.sizes.split(",") if s.strip()] + ([args.big] if args.big else [])
    root = args.keep or Path(tempfile.mkdtemp(prefix="amqpcap-jobbench-", dir=os.environ.get("TMPDIR")))
    root.mkdir(parents=True, exist_ok=True)
    version = subprocess.run([tshark, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, "
          f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB RAM, Python "
          f"{platform.python_version()}, Spark master {args.master}; {version}")
    rows: list[dict] = []
    masters = [m.strip() for m in (args.masters or args.master).split(",") if m.strip()]
    args.variants = [(e.strip(), p.strip(), m) for e in args.engines.split(",") for p in args.stores.split(",")
                     for m in masters]
    with contextlib.ExitStack() as stack:
        args.stores_open = {"s3": ObjectStore(stack)} if any(p == "s3" for _, p, _ in args.variants) else {}
        args.masters_open = {m: standalone_master(stack, root) if m == "standalone" else m for m in masters}
        try:
            for size in sizes:
                for shape in (x.strip() for x in args.shapes.split(",") if x.strip()):
                    rows += bench_size(size, args, amqpcap, tshark, root, shape)
                if args.json:
                    args.json.write_text(json.dumps(rows, indent=2))
        finally:
            if not args.keep:
                shutil.rmtree(root, ignore_errors=True)
    print("\n" + table(rows) + "\n\n" + scaling(rows))
    return 1 if any("error" in r["job"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
