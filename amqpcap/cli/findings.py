"""`amqpcap findings`: what needs attention in a lake (its `findings` table), by severity."""

from __future__ import annotations

import argparse
import sys

import orjson

from amqpcap.cli import OK, UsageError, load_settings

NAME = "findings"
HELP = "what needs attention in the lake: ack timeouts, redelivery loops, returns, nacks, churn, errors... (no Spark)"
DESCRIPTION = ("The lake's findings table as of its last complete run, errors first, then warnings, then notes; "
               "the same finding on many connections is one line with how many. Each names what it is about and "
               "the evidence to open (Wireshark frame numbers of its capture, delivery tags, message keys).")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lake", help="lake location (default: lake.path of the settings)")
    parser.add_argument("--since", metavar="ISO", help="only findings at or after this UTC date or date-time")
    parser.add_argument("--until", metavar="ISO", help="only findings before this UTC date or date-time")
    parser.add_argument("--severity", choices=("info", "warning", "error"), default="info",
                        help="the least severe to list (default: every finding)")
    parser.add_argument("--json", action="store_true", help="the findings as one JSON array (every column)")


def main(args: argparse.Namespace) -> int:
    settings = load_settings(args)
    from amqpcap.report import LakeError, PeriodError
    from amqpcap.report.period import Period
    from amqpcap.report.source import lake_findings, open_lake
    from amqpcap.rules.findings.finding import SEVERITIES
    from amqpcap.rules.findings.listing import grouped, render_text
    try:
        period = Period.parse(args.since, args.until)
        con = open_lake(args.lake or settings.lake.path)
    except (LakeError, PeriodError) as error:
        raise UsageError(str(error)) from None
    wanted = SEVERITIES[:SEVERITIES.index(args.severity) + 1]
    rows = lake_findings(con, period, wanted) or []  # (a lake written before the findings table has none)
    if args.json:
        sys.stdout.buffer.write(orjson.dumps(grouped(rows), option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE
                                             | orjson.OPT_NAIVE_UTC, default=str))
    else:
        sys.stdout.write(render_text(rows))
    return OK
