"""`amqpcap repair`: finish (or undo) runs that were interrupted while committing (amqpcap.lake.runlog)."""

from __future__ import annotations

import argparse

from amqpcap.cli import OK, load_settings

NAME = "repair"
HELP = "finish or undo runs interrupted while committing (no Spark, unless delta-spark began them)"
DESCRIPTION = ("A run killed while committing stays invisible to readers; this rolls it forward (or back, when its "
               "files are gone). The next amqpcap run does the same first.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lake", help="lake location (default: lake.path of the settings)")


def main(args: argparse.Namespace) -> int:
    settings = load_settings(args)
    from amqpcap.lake.runlog import engines_pending, repair
    lake = args.lake or settings.lake.path
    appliers = {}
    if "delta-spark" in engines_pending(lake):  # its files are staged: Spark writes them
        from amqpcap.job.session import build_session
        from amqpcap.job.spark_sink import appliers as spark_appliers
        appliers = spark_appliers(build_session(settings))
    done = repair(lake, appliers)
    for run_id, outcome in done:
        print(f"run {run_id}: {outcome}")
    if not done:
        print("nothing to repair")
    return OK
