"""`amqpcap maintain`: compaction and vacuum of every table (amqpcap.lake.maintain)."""

from __future__ import annotations

import argparse

from amqpcap.cli import OK, load_settings

NAME = "maintain"
HELP = "compact small files and vacuum old ones (no Spark, unless lake.engine is delta-spark)"
DESCRIPTION = ("Compact each table's small files (many small captures make many small files) and delete files no "
               "current version needs once older than maintain.retention_hours; interrupted runs are repaired "
               "first and old staging folders removed.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lake", help="lake location (default: lake.path of the settings)")
    parser.add_argument("--dry-run", action="store_true", help="say what would be vacuumed, change nothing")


def main(args: argparse.Namespace) -> int:
    settings = load_settings(args)
    from amqpcap.lake.maintain import maintain
    upkeep = None
    if settings.lake.engine == "delta-spark":
        from amqpcap.job.session import build_session
        from amqpcap.job.spark_upkeep import SparkUpkeep
        upkeep = SparkUpkeep(build_session(settings))
    for line in maintain(args.lake or settings.lake.path, settings, args.dry_run, upkeep):
        print("  ".join(f"{k}={v}" for k, v in line.items()))
    return OK
