"""`amqpcap run`: the nightly Spark job (amqpcap.job.nightly)."""

from __future__ import annotations

import argparse
import json
import logging
import time
import uuid

from amqpcap.cli import CAPTURE_FAILED, OK, UsageError, add_tls_arguments, load_settings, tls_overrides

NAME = "run"
HELP = "decode captures into the Delta lake with Spark"
DESCRIPTION = ("Decode capture files into every table of the Delta lake (raw frames, messages, issues, streams, "
               "and the analytics), in one pass per connection. A rerun over the same captures replaces their "
               "rows.")
log = logging.getLogger("amqpcap")
STARTED = time.time()  # the process's start: the wall time the summary reports


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input", nargs="+", required=True, metavar="PATH",
                        help="capture files, directories or globs; local paths or URIs (s3://, hdfs://...)")
    parser.add_argument("--lake", help="lake location (default: lake.path of the settings)")
    parser.add_argument("--master", help="Spark master (default: spark.master of the settings)")
    parser.add_argument("--run-id", help="an id for this run (default: a new UUID)")
    parser.add_argument("--summary-json", metavar="FILE", help="also write the run's summary as JSON (for schedulers)")
    parser.add_argument("--fail-on", choices=["failed", "partial"], default="failed",
                        help="exit 1 when a capture failed, or also when one was only partly readable")
    add_tls_arguments(parser.add_argument_group("shorthands for settings"))


def main(args: argparse.Namespace) -> int:
    settings = load_settings(args, tls_overrides(args))
    from amqpcap.capture.inputs import list_inputs
    files = list_inputs(args.input)
    if not files:
        raise UsageError(f"no capture files in {' '.join(args.input)}")
    lake = args.lake or settings.lake.path
    _check_lake(lake)
    from amqpcap.tls.keylog import KeyLogError, read_key_logs
    try:  # before Spark starts: a key log that cannot be read is one line, exit 2
        keys = read_key_logs(settings.decode.tls_keylogs)
    except KeyLogError as error:
        raise UsageError(str(error)) from None
    from amqpcap.cli.console import JobDisplay
    from amqpcap.job.nightly import run
    from amqpcap.job.session import build_session
    from amqpcap.lake.sinks import EngineError
    display = JobDisplay(sum(max(f.size, 0) for f in files), len(files))
    spark = build_session(settings, args.master, verbose=args.verbose, sql_on_demand=True)
    try:
        summary = run(spark, files, settings, lake, args.run_id or str(uuid.uuid4()), started=STARTED,
                      display=display, keys=keys)
    except EngineError as error:
        raise UsageError(str(error)) from None
    finally:
        spark.stop()
    print(summary.text())
    if args.summary_json:
        with open(args.summary_json, "w") as f:
            json.dump(summary.as_json(), f, indent=2)
    failing = summary.failed + (summary.partial if args.fail_on == "partial" else [])
    return CAPTURE_FAILED if failing else OK


def _check_lake(lake: str) -> None:
    """A lake that cannot be written is a usage error found before Spark starts."""
    import os
    if "://" in lake and not lake.startswith("file://"):
        return
    path = os.path.abspath(lake.removeprefix("file://"))
    parent = path
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f"--lake {lake}: not a directory")
    if not os.access(parent, os.W_OK):
        raise UsageError(f"--lake {lake}: {parent} is not writable")
