"""`amqpcap report`: the lake's traffic as one self-contained HTML page (amqpcap.report)."""

from __future__ import annotations

import argparse
import os

from amqpcap.cli import OK, UsageError, load_settings

NAME = "report"
HELP = "one self-contained HTML page of plots about the lake's traffic (no Spark)"
DESCRIPTION = ("Latencies (deliver->ack, publish->confirm, RPC), message rates, errors, a connection timeline, "
               "heartbeat silences, flow control, top talkers and decode issues, from the lake's tables as of the "
               "last complete run. The page needs no network to be viewed.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lake", help="lake location (default: lake.path of the settings)")
    parser.add_argument("--since", metavar="ISO", help="only traffic at or after this UTC date or date-time "
                        "(2026-11-21, 2026-11-21T20:30:00Z)")
    parser.add_argument("--until", metavar="ISO", help="only traffic before this UTC date or date-time")
    parser.add_argument("-o", "--output", default="report.html", metavar="FILE", help="where to write the page")


def main(args: argparse.Namespace) -> int:
    settings = load_settings(args)
    from amqpcap.report import LakeError, PeriodError, build_report
    folder = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(folder):
        raise UsageError(f"no folder {folder} for {args.output}")
    try:
        page = build_report(args.lake or settings.lake.path, args.since, args.until)
    except (LakeError, PeriodError) as error:
        raise UsageError(str(error)) from None
    with open(args.output, "w", encoding="utf-8") as out:
        out.write(page)
    print(f"amqpcap report: {args.output} ({len(page.encode()) / 1e6:.1f} MB)")
    return OK
