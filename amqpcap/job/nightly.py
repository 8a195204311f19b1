"""The nightly job: capture files in, every table of the lake out, in one pass per connection.

    extract:            list the inputs; plan read units (big files in byte ranges)
    decode + analyse:   stage 1 reads units and stages TCP segments per connection bucket;
                        the connections earlier runs left open are routed to their buckets;
                        stage 2 decodes each bucket and writes every per-connection table, raw and
                        analytics, from the same records, resuming those connections and saving
                        the ones still open at the end, and stages the match sides of its
                        publishes and deliveries by key; stage 3 pairs each key's sides into
                        message_flows
    load:               the sink commits every table (captures a rerun replaces, never duplicates;
                        provisional rows of the connections it resumed superseded)

Run it with `amqpcap run --input PATH... --lake DIR` (embedded Spark), or through spark-submit on a
cluster whose nodes have the wheel installed (see the README), with the same arguments: the file
spark-submit runs is amqpcap/submit.py (its docstring has the line).
"""

from __future__ import annotations

import functools
import logging
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from amqpcap.capture.inputs import InputFile
from amqpcap.job.plan import plan_buckets, plan_units
from amqpcap.job.work import ReadUnit, RunContext
from amqpcap.settings import Settings
from amqpcap.tables.registry import ANALYTICS_TABLES, CAPTURES, DELIVERIES, PUBLISHES, RAW_TABLES, STATE_TABLES

if TYPE_CHECKING:  # (the lake's modules load pyarrow: imported where the driver needs them)
    from amqpcap.lake.tablefiles import TableFile

log = logging.getLogger("amqpcap")
TABLES = RAW_TABLES + ANALYTICS_TABLES + STATE_TABLES


@dataclass
class RunSummary:
    run_id: str
    started: float  # process start (time.time())
    files: int = 0
    status: Counter = field(default_factory=Counter)  # ok / partial / failed -> files
    problems: list[tuple[str, str, str]] = field(default_factory=list)  # (status, path, reason)
    same_bytes: list[tuple[str, str]] = field(default_factory=list)  # (path now, path before)
    rows: Counter = field(default_factory=Counter)  # table -> rows written
    carried_in: int = 0  # saved connections this run could resume
    resumed: int = 0  # ... and resumed
    carried_out: int = 0  # connections it saved for the next run
    versions: dict[str, int] = field(default_factory=dict)
    phases: dict[str, float] = field(default_factory=dict)  # phase -> seconds
    engine: str = ""
    manifest: dict | None = None  # with run(commit=False): what the commit would apply

    @property
    def failed(self) -> list[str]:
        return [f"{path}: {reason}" for status, path, reason in self.problems if status == "failed"]

    @property
    def partial(self) -> list[str]:
        return [f"{path}: {reason}" for status, path, reason in self.problems if status == "partial"]

    def text(self) -> str:
        wall = time.time() - self.started
        lines = [f"amqpcap run {self.run_id} finished in {wall:.1f} s",
                 f"  captures: {self.status.get('ok', 0)} ok, {self.status.get('partial', 0)} partial, "
                 f"{self.status.get('failed', 0)} failed"]
        lines += [f"    {status}: {path}: {reason}" for status, path, reason in self.problems]
        lines += [f"    same bytes as before: {now} replaces {before}" for now, before in self.same_bytes]
        lines.append(f"  rows: {self.rows['frames']} frames, {self.rows['messages']} messages, "
                     f"{self.rows['decode_issues']} issues, {self.rows['deliveries']} deliveries, "
                     f"{self.rows['publishes']} publishes")
        if self.carried_in or self.carried_out:
            lines.append(f"  connections carried: {self.resumed} of {self.carried_in} saved resumed, "
                         f"{self.carried_out} saved for the next run")
        lines.append("  time: " + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in self.phases.items()))
        lines.append(f"  tables ({self.engine}): " + ", ".join(f"{n} v{v}" for n, v in self.versions.items()))
        return "\n".join(lines)

    def as_json(self) -> dict:
        return {"run_id": self.run_id, "wall_seconds": round(time.time() - self.started, 3), "files": self.files,
                "status": dict(self.status), "failed": self.failed, "partial": self.partial,
                "same_bytes": [{"path": now, "replaces": before} for now, before in self.same_bytes],
                "rows": dict(self.rows), "versions": self.versions, "phases": self.phases, "engine": self.engine,
                "carried": {"saved_before": self.carried_in, "resumed": self.resumed, "saved": self.carried_out}}


def run(spark, files: list[InputFile], settings: Settings, lake: str, run_id: str,
        started: float | None = None, display=None, commit: bool = True, keys=None) -> RunSummary:
    """Decode `files` into the lake: every table, one commit each (all or nothing for readers:
    amqpcap.lake.runlog). `display`: a live view of the run (amqpcap.cli.console.JobDisplay), told of each
    phase. `commit=False` stops before the commit, with the manifest it would apply in
    `summary.manifest` (tests of the commit sequence). `keys`: the TLS key log (default: read from
    settings.decode.tls_keylogs here, on the driver)."""
    from amqpcap.job.spark_sink import appliers, choose_sink
    from amqpcap.job.stages.decode import remove_staging
    from amqpcap.job.stages.findings import churn_files
    from amqpcap.job.stages.flows import flow_parts
    from amqpcap.lake import carryover
    from amqpcap.lake.runlog import repair
    from amqpcap.tls.keylog import read_key_logs

    summary = RunSummary(run_id, started or time.time(), files=len(files))
    clock = time.monotonic()
    keys = keys if keys is not None else read_key_logs(settings.decode.tls_keylogs)

    def phase(name: str, following: str | None = None, **info) -> None:
        nonlocal clock
        now = time.monotonic()
        summary.phases[name] = round(now - clock, 3)
        clock = now
        if display is not None and following:
            display.phase(following, **info)

    for interrupted, outcome in repair(lake, appliers(spark)):  # an earlier run killed while committing
        log.warning("run %s had not finished committing: %s", interrupted, outcome)
    staging = staging_dir(spark, settings, lake, run_id)
    sink = choose_sink(settings.lake.engine, spark, lake, staging)
    summary.engine = sink.name
    log.info("run %s: %d files, %.1f MB", run_id, len(files), sum(max(f.size, 0) for f in files) / 1e6)
    if display is not None:
        display.start(staging)
        display.phase("reading")
    try:
        units = read_stage(spark, files, settings, staging)
        written, replaced, span = capture_rows(files, units, lake, sink.table_root(), run_id, summary)
        states = carryover.resumable_states(lake, settings, replaced, span.first_ts_ns)
        carryover.stage_states(staging, states, buckets_of(spark, settings))
        summary.carried_in = len(states)
        stale = [(connection, span.closing_source)  # a later run already resumed them (this is a rerun)
                 for connection in carryover.settled_later(lake, {f.uri for f in files}, replaced)]
        context = RunContext(span.last_ts_ns, span.closing_source)
        phase("read", "decoding", segments=sum(n for read in units[1].values() for n in read.staged.values()))
        parts = flow_parts(sum(max(f.size, 0) for f in files), spark.sparkContext.defaultParallelism)
        written += decode_stage(spark, files, units, settings, staging, sink.table_root(), run_id, parts, context,
                                keys)
        phase("decode", "message flows")
        written += churn_files(written, settings, sink.table_root(), run_id)
        if any(f.table in (PUBLISHES.name, DELIVERIES.name) for f in written):
            written += flows_stage(spark, parts, settings, staging, sink.table_root(), run_id)
        phase("message_flows", "committing")
        written = carryover.drop_superseded(sink.table_root(), written, stale)
        superseded = carryover.superseded(sink.table_root(), written)
        for f in written:
            summary.rows[f.table] += f.rows
        summary.resumed = summary.rows["resumptions"]
        summary.carried_out = summary.rows["connection_state"]
        if not commit:
            from amqpcap.lake.runlog import manifest_of
            summary.manifest = manifest_of(run_id, "run", written, replaced, TABLES, [f.uri for f in files],
                                           summary.as_json(), summary.started, superseded)
            return summary
        summary.versions = sink.commit(written, replaced, run_id, TABLES, "run", [f.uri for f in files],
                                       summary.as_json(), summary.started, superseded)
        phase("commit")
    finally:
        if display is not None:
            display.stop()
        remove_staging(staging)
    return summary


def staging_dir(spark, settings: Settings, lake: str, run_id: str) -> str:
    if settings.job.staging:
        return f"{settings.job.staging.rstrip('/')}/{run_id}"
    if spark.sparkContext.master.startswith("local"):
        return tempfile.mkdtemp(prefix=f"amqpcap-{run_id[:8]}-")
    from amqpcap.lake.paths import staging_in
    return staging_in(lake, run_id)


# -- stage 1 -------------------------------------------------------------------------------------

def read_stage(spark, files: list[InputFile], settings: Settings, staging: str):
    """-> (units, {unit: ReadResult})"""
    from amqpcap.job.stages.read import read_task
    units = plan_units(files, settings.job.split_bytes)
    context = spark.sparkContext
    slices = _balanced(units, min(len(units), 4 * context.defaultParallelism))
    # payloads left in the captures: only where the decode tasks run on this machine, which reads them
    place = settings.job.place_payloads and context.master.startswith("local")
    task = functools.partial(read_task, staging=staging, buckets=buckets_of(spark, settings), place_payloads=place)
    # RDDs of plain tuples: these stages need no SQL planning nor Arrow conversion, only tasks
    results = context.parallelize(slices, len(slices)).flatMap(lambda s: s).mapPartitions(task).collect()
    return units, {read.unit: read for read in results}


def _balanced(units: list[ReadUnit], slices: int) -> list[list[ReadUnit]]:
    """Units in `slices` groups of about equal bytes (biggest first, each to the lightest group)."""
    groups: list[list[ReadUnit]] = [[] for _ in range(max(slices, 1))]
    weights = [0] * len(groups)
    for unit in sorted(units, key=lambda u: -u.length):
        lightest = weights.index(min(weights))
        groups[lightest].append(unit)
        weights[lightest] += max(unit.length, 1)
    return [g for g in groups if g]


def buckets_of(spark, settings: Settings) -> int:
    return settings.job.buckets or 2 * spark.sparkContext.defaultParallelism


# -- stage 2 -------------------------------------------------------------------------------------

def decode_stage(spark, files, units, settings: Settings, staging: str, root: str, run_id: str, flow_parts: int,
                 context: RunContext | None = None, keys=None) -> list[TableFile]:
    """Every bucket with segments -> one task each; the table files they wrote. They also stage
    message_flows' sides (amqpcap.job.stages.flows) in `flow_parts` parts. `keys`: the TLS key
    log, to the tasks in a broadcast (in the executors' memory, never in a file of the job's or
    the lake's; destroyed when the stage is done)."""
    from amqpcap.job.stages.decode import decode_task
    from amqpcap.job.stages.numbering import number_units
    plans, staged = units
    work = plan_buckets(plans, staged)
    if not work:
        return []
    bases = number_units(plans, staged, staging)  # Wireshark's frame.number, tcp.stream
    shipped = spark.sparkContext.broadcast(keys) if keys else None
    task = functools.partial(decode_task, staging=staging, uris=[f.uri for f in files],
                             settings_json=settings.to_json(), run_id=run_id, root=root,
                             context=context or RunContext(), bases=bases, flow_parts=flow_parts, keys=shipped)
    try:
        return spark.sparkContext.parallelize(work, len(work)).mapPartitions(task).collect()
    finally:
        if shipped is not None:
            shipped.destroy()


# -- stage 3 -------------------------------------------------------------------------------------

def flows_stage(spark, parts: int, settings: Settings, staging: str, root: str, run_id: str) -> list[TableFile]:
    """message_flows from the sides the decode tasks staged: each task pairs several parts of the
    key space, one after another (a part bounds a task's memory, not its duration), two tasks per
    core: a task per part spent a sixth of the stage starting tasks and writing small files."""
    from amqpcap.job.stages.flows import flows_task
    task = functools.partial(flows_task, staging=staging, root=root, run_id=run_id,
                             batch_rows=settings.spark.arrow_batch_rows)
    tasks = min(parts, 2 * spark.sparkContext.defaultParallelism)
    return spark.sparkContext.parallelize(range(parts), tasks).mapPartitions(task).collect()


# -- the captures table --------------------------------------------------------------------------

@dataclass
class Span:
    """When the run's captures begin and end, and the file that ends them (the `source` of what
    ending the connections still open makes)."""
    first_ts_ns: int | None = None
    last_ts_ns: int | None = None
    closing_source: str | None = None


def capture_rows(files: list[InputFile], units, lake: str, root: str, run_id: str, summary: RunSummary):
    """One captures row per input file (its ranges' infos merged), plus a decode_issues row per
    damage to the file itself, written by the driver; the captures this run replaces (its own,
    and earlier names of the same bytes); and the run's Span."""
    from amqpcap.capture.readers import CaptureInfo
    from amqpcap.connection.decoder import capture_issues
    from amqpcap.lake.tablefiles import TableFiles
    from amqpcap.rules.common import day
    from amqpcap.rules.findings.visibility import CaptureDamage
    from amqpcap.tables.registry import DECODE_ISSUES, FINDINGS
    from amqpcap.tables.rows import RawRows
    plans, staged = units
    infos = {i: CaptureInfo(f.uri, f.size) for i, f in enumerate(files)}
    failures: dict[int, list[str]] = {}
    printed: dict[int, str] = {}
    for unit in plans:  # in file order, each file's ranges in byte order
        facts = staged[unit.unit].facts
        if facts.status == "failed":
            failures.setdefault(unit.file_index, []).append(facts.error)
        else:
            infos[unit.file_index].merge(facts.info)
        if facts.fingerprint:
            printed[unit.file_index] = facts.fingerprint
    writer = TableFiles(root, run_id, tag="captures-")
    raw_rows = RawRows(run_id)
    damage = CaptureDamage()  # (the findings of the files themselves)
    now_ns = time.time_ns()
    span = Span()
    for index, f in enumerate(files):
        info = infos[index]
        if info.first_ts_ns is not None:
            span.first_ts_ns = min(info.first_ts_ns, span.first_ts_ns or info.first_ts_ns)
            if span.last_ts_ns is None or info.last_ts_ns >= span.last_ts_ns:
                span.last_ts_ns, span.closing_source = info.last_ts_ns, f.uri
        status = "failed" if index in failures else "partial" if info.issues else "ok"
        error = "; ".join(failures[index]) if index in failures else info.damage()
        summary.status[status] += 1
        if status != "ok":
            summary.problems.append((status, f.uri, error))
        if status == "failed":
            damage.failed(f.uri, error, day(now_ns))
        elif info.dropped:
            damage.dropped(f.uri, info.dropped, info.records, day(info.first_ts_ns or now_ns))
        first, last = info.first_ts_ns, info.last_ts_ns
        when = day(first if first is not None else now_ns)
        writer.add(CAPTURES, {
            "date": when, "path": f.uri, "size_bytes": f.size, "format": info.format,
            "link_types": info.link_type_names, "packets": info.records, "captured_bytes": info.bytes,
            "dropped_packets": info.dropped,
            "first_ts": first // 1000 if first is not None else None,
            "last_ts": last // 1000 if last is not None else None, "fingerprint": printed.get(index),
            "status": status, "error": error})
        info.time_issues(info.last_ts_ns)  # damage at the file's end (its ranges timed the rest)
        for record in capture_issues(info):  # made as `amqpcap decode` makes them
            row = raw_rows.issue_row(record)
            row.update(source=f.uri, provisional=False)
            if record.ts_ns is None:  # a file with no readable record: the day it was read
                row["date"] = when
            writer.add(DECODE_ISSUES, row)
            damage.add(row)
    for row in damage.rows():
        writer.add(FINDINGS, row)
    replaced = {f.uri for f in files}
    by_print = {h: files[i].uri for i, h in printed.items()}
    for path, known in _known_fingerprints(lake):
        if known in by_print and path not in replaced:
            replaced.add(path)
            summary.same_bytes.append((by_print[known], path))
    return writer.close(), replaced, span


def _known_fingerprints(lake: str) -> list[tuple[str, str]]:
    """(path, fingerprint) of the captures already in the lake."""
    import pyarrow.parquet as pq

    from amqpcap.lake.runlog import table_files
    pairs = []
    for path in table_files(lake, CAPTURES):
        data = pq.read_table(path.removeprefix("file://"), columns=["path", "fingerprint"])
        pairs += [(p, h) for p, h in zip(data.column("path").to_pylist(), data.column("fingerprint").to_pylist()) if h]
    return pairs

