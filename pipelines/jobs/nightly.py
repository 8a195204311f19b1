"""The nightly job: capture files in, the raw Delta tables out.

Local (embedded Spark, delta-rs):

    amqpcap run --input /captures/2026-11-21 --lake /data/lake [--config conf/local.toml]

The same job through spark-submit. Executors need the project and its dependencies in the Python
they run: install the wheel on every node (`pip wheel --no-deps -w dist .` then
`pip install dist/amqpcap-0.1.0-py3-none-any.whl` there; it carries spec/ as package data), and
point Spark at that interpreter:

    PYSPARK_PYTHON=/opt/amqpcap/bin/python PYSPARK_DRIVER_PYTHON=/opt/amqpcap/bin/python \
    spark-submit --master yarn --conf spark.pyspark.python=/opt/amqpcap/bin/python \
        pipelines/jobs/nightly.py --input s3://captures/2026-11-21/ --lake s3://analytics/lake \
        --config conf/cluster.toml

(On this machine, `.venv/bin/spark-submit --master 'local[2]' pipelines/jobs/nightly.py ...` with
PYSPARK_PYTHON and PYSPARK_DRIVER_PYTHON set to `.venv/bin/python` runs it the same way.)
spark-submit's --master wins over the config's spark.master.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
import uuid
from collections import Counter

from pipelines.config import ConfigError, load_config
from pipelines.inputs import list_inputs
from pipelines.lake import EngineError
from pipelines.schemas import RAW_TABLES


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="amqpcap run", description="Decode capture files into the Delta lake.")
    p.add_argument("--input", nargs="+", required=True, metavar="PATH",
                   help="capture files, directories or globs; local paths or URIs (s3://, hdfs://...)")
    p.add_argument("--lake", help="lake location (default: lake.path of the config)")
    p.add_argument("--config", help="a TOML file overriding conf/default.toml's settings")
    p.add_argument("--master", help="Spark master (default: spark.master of the config, local[*])")
    p.add_argument("--run-id", help="an id for this run (default: a new UUID)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        config = load_config(args.config)
    except (ConfigError, EngineError) as error:
        print(f"amqpcap: {error}", file=sys.stderr)
        return 2
    files = list_inputs(args.input)
    if not files:
        print(f"amqpcap: no capture files in {' '.join(args.input)}", file=sys.stderr)
        return 2
    from pipelines.session import build_session
    spark = build_session(config, args.master)
    try:
        summary = run(spark, files, config, args.lake or config.lake.path, args.run_id or str(uuid.uuid4()))
    except EngineError as error:
        print(f"amqpcap: {error}", file=sys.stderr)
        return 2
    finally:
        spark.stop()
    print(summary["text"])
    return 1 if summary["failed"] else 0


def run(spark, files, config, lake: str, run_id: str) -> dict:
    """Decode `files` (pipelines.inputs.InputFile) into the lake; one commit per table."""
    from pyspark import StorageLevel

    from pipelines import lake as delta
    from pipelines.stages import by_connection, decode_connections, read_segments

    started = time.time()
    uris = [f.uri for f in files]
    total_bytes = sum(max(f.size, 0) for f in files)
    _progress(f"run {run_id}: {len(files)} files, {total_bytes / 1e6:.1f} MB")
    context = spark.sparkContext
    counters = (context.accumulator(0), context.accumulator(0), context.accumulator(0))
    listing = spark.createDataFrame([(i, f.uri, f.size) for i, f in enumerate(files)],
                                    "file_index int, uri string, size bigint")
    parallelism = max(1, min(len(files), context.defaultParallelism))
    segments = read_segments(listing.repartition(parallelism), config.spark.arrow_batch_rows,
                             progress=counters[:2])
    grouped = by_connection(segments, int(config.spark.conf.get("spark.sql.shuffle.partitions", "8")))
    engine = delta.choose_engine(config.lake.engine, delta.delta_spark_loaded(spark))
    captures = set(uris)
    versions, counts = {}, Counter()
    reporter = Progress(context, counters, len(files), total_bytes)
    reporter.start()
    try:
        if engine == "delta-spark":  # Spark writes each table from the decoded rows, kept once
            tagged = decode_connections(grouped, config.decode_settings(), uris, run_id,
                                        config.spark.arrow_batch_rows, frames_counter=counters[2])
            tagged.persist(StorageLevel.MEMORY_AND_DISK)
            try:
                for table in RAW_TABLES:
                    versions[table.name] = delta.write_with_delta_spark(tagged, lake, table, captures)
                    counts[table.name] = delta.untag_rows(tagged, table).count()
            finally:
                tagged.unpersist()
        else:  # one pass: tasks decode and write Parquet; the driver gets file metadata only
            written = delta.decode_and_write(grouped, config.decode_settings(), uris, run_id,
                                             config.spark.arrow_batch_rows, lake, counters[2])
            files_written = [row.asDict() for row in written.collect()]
            versions = delta.commit_all(lake, files_written, captures, run_id)
            for f in files_written:
                counts[f["table"]] += f["rows"]
    finally:
        reporter.stop()
    _progress(f"raw tables committed after {time.time() - started:.1f} s; building the analytics tables")
    from pipelines.jobs.analyze import analyze
    versions.update(analyze(spark, lake, run_id, captures))
    status = Counter()
    failed = []
    for row in delta.run_captures(spark, lake, run_id):
        status[row["status"]] += 1
        if row["status"] == "failed":
            failed.append(f"{row['path']}: {row['error']}")
    text = "\n".join([
        f"amqpcap run {run_id} finished in {time.time() - started:.1f} s",
        f"  captures: {status.get('ok', 0)} ok, {status.get('partial', 0)} partial, {status.get('failed', 0)} failed",
        *[f"    failed: {line}" for line in failed],
        f"  rows: {counts['frames']} frames, {counts['messages']} messages, "
        f"{counts['decode_issues']} issues",
        f"  tables ({engine}): " + ", ".join(f"{name} v{version}" for name, version in versions.items()),
    ])
    return {"text": text, "failed": failed, "versions": versions, "rows": dict(counts), "status": dict(status)}


def _progress(message: str) -> None:
    print(f"amqpcap: {message}", file=sys.stderr, flush=True)


class Progress(threading.Thread):
    """Prints files and bytes read, frames decoded and Spark's task counts every few seconds.
    (Task counters reach the driver as tasks finish.)"""

    def __init__(self, context, counters, files: int, total_bytes: int, every: float = 5.0) -> None:
        super().__init__(daemon=True)
        self.context, self.counters, self.files, self.total = context, counters, files, total_bytes
        self.every = every
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.every):
            self.report()

    def report(self) -> None:
        tracker = self.context.statusTracker()
        stages = [tracker.getStageInfo(s) for s in tracker.getActiveStageIds()]
        tasks = ", ".join(f"stage {s.stageId}: {s.numCompletedTasks}/{s.numTasks} tasks"
                          for s in stages if s is not None)
        files, read, frames = (c.value for c in self.counters)
        _progress(f"{files}/{self.files} files, {read / 1e6:.1f}/{self.total / 1e6:.1f} MB read, "
                  f"{frames} frames decoded" + (f"; {tasks}" if tasks else ""))

    def stop(self) -> None:
        self.done.set()
        self.report()


if __name__ == "__main__":
    sys.exit(main())
