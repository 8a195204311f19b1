"""`amqpcap analyze`: rebuild the analytics tables from the raw ones (amqpcap.job.analyze)."""

from __future__ import annotations

import argparse
import uuid

from amqpcap.cli import OK, load_settings

NAME = "analyze"
HELP = "rebuild the analytics tables from the raw ones"
DESCRIPTION = ("Replay every connection's frames in the lake through the analytics state machines (the same "
               "code the nightly job runs) and rewrite the analytics tables: after a rule was fixed, say.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lake", help="lake location (default: lake.path of the settings)")
    parser.add_argument("--master", help="Spark master (default: spark.master of the settings)")


def main(args: argparse.Namespace) -> int:
    settings = load_settings(args)
    from amqpcap.job.analyze import analyze
    from amqpcap.job.session import build_session
    spark = build_session(settings, args.master, verbose=args.verbose)
    try:
        versions = analyze(spark, args.lake or settings.lake.path, settings, f"analyze-{uuid.uuid4()}")
    finally:
        spark.stop()
    print("amqpcap analyze: " + ", ".join(f"{name} v{version}" for name, version in versions.items()))
    return OK
