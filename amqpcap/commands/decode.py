"""`amqpcap decode`: capture files to AMQP frames without Spark, as readable lines or JSON Lines
(the contract is docs/decode.md), or as per-connection statistics (--stats)."""

from __future__ import annotations

import argparse
import base64
import datetime
import json
import logging
import sys
from decimal import Decimal

import orjson

from amqp_decode.decoder import CaptureDecoder, expand_inputs
from amqpcap.cli import CAPTURE_FAILED, OK, UsageError, load_settings

NAME = "decode"
HELP = "print the AMQP frames in capture files (no Spark)"
DESCRIPTION = ("Decode AMQP 0-9-1 / 0-9 traffic in pcap, pcapng or gzip-compressed captures without Spark. "
               "Several files are merged by time, so rotated captures stitch together. '-' reads a capture "
               "from standard input (tcpdump -w - | amqpcap decode -).")
log = logging.getLogger("amqpcap")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("captures", nargs="+", metavar="CAPTURE",
                        help="capture files, directories (searched for captures), globs, or - for stdin")
    view = parser.add_argument_group("output")
    view.add_argument("--jsonl", action="store_true", help="one JSON object per line (docs/decode.md)")
    view.add_argument("--stats", action="store_true",
                      help="per-connection summaries, errors by reply code, and deliver->ack, publish->confirm "
                      "and RPC latency percentiles, instead of the frames")
    view.add_argument("--json", action="store_true", help="with --stats: the statistics as one JSON object")
    view.add_argument("--quiet", action="store_true", help="no summary on stderr")
    shorthands = parser.add_argument_group("shorthands for settings")
    shorthands.add_argument("--port", type=int, action="append", metavar="N",
                            help="an AMQP port (repeatable; decode.amqp_ports, default 5672). AMQP on other "
                            "ports is still found by its protocol header")
    shorthands.add_argument("--tls-port", type=int, action="append", metavar="N",
                            help="a TLS port whose traffic is counted but not decoded (decode.tls_ports, "
                            "default 5671)")
    shorthands.add_argument("--default-version", choices=["0-9-1", "0-9"],
                            help="version for connections whose protocol header was not captured "
                            "(decode.default_version)")
    shorthands.add_argument("--spec", action="append", default=[], metavar="VERSION=FILE",
                            help="use another spec file (official AMQP XML format) for a version (decode.specs)")
    shorthands.add_argument("--bodies", action="store_true",
                            help="include message bodies (base64, capped by --body-cap) in the output "
                            "(bodies.capture)")
    shorthands.add_argument("--body-cap", type=int, metavar="BYTES", help="bodies.cap_bytes")


def overrides(args: argparse.Namespace) -> list[str]:
    """The named options as settings overrides (they are shorthands for keys)."""
    out = []
    if args.port:
        out.append(f"decode.amqp_ports={sorted(set(args.port))}")
    if args.tls_port:
        out.append(f"decode.tls_ports={sorted(set(args.tls_port))}")
    if args.default_version:
        out.append(f'decode.default_version="{args.default_version}"')
    for item in args.spec:
        version, sep, path = item.partition("=")
        if not sep or not version or not path:
            raise UsageError("--spec takes VERSION=FILE, e.g. --spec 0-9-1=my-amqp.xml")
        out.append("decode.specs={" + json.dumps(version) + " = " + json.dumps(path) + "}")
    if args.bodies:
        out.append("bodies.capture=true")
    if args.body_cap is not None:
        out.append(f"bodies.cap_bytes={args.body_cap}")
    return out


def main(args: argparse.Namespace) -> int:
    settings = load_settings(args, overrides(args))
    if not expand_inputs(args.captures):
        raise UsageError(f"no capture files in {' '.join(args.captures)}")
    decoder = CaptureDecoder(settings)
    out = sys.stdout.buffer
    if args.stats:
        _stats(decoder, args, settings, out)
    else:
        render = _json_line if args.jsonl else _text_line
        for record in decoder.decode(args.captures):
            out.write(render(record))
    out.flush()
    stats = decoder.stats
    for path, reason in stats.failed.items():
        log.error("%s: %s", path, reason)
    for info in stats.captures:
        if info.issues:  # one line per damaged file: what, where, how much was skipped
            log.warning("%s: damaged: %s", info.path, info.damage())
    if not args.quiet:
        _summary(stats)
    return CAPTURE_FAILED if stats.failed else OK


def _stats(decoder: CaptureDecoder, args: argparse.Namespace, settings, out) -> None:
    """The same state machines as the lake's analytics tables, summarised."""
    from amqp_decode.analytics.stats import Stats, render_text
    from amqp_decode.tabulate import Tabulator
    stats = Stats()
    tabulator = Tabulator.for_settings(stats.emit, settings)
    for record in decoder.decode(args.captures, ends=True):
        tabulator.record(record)
    summary = stats.summary()
    out.write(orjson.dumps(summary, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE) if args.json
              else render_text(summary).encode())


def _json_default(value):
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode()
    raise TypeError(f"cannot render {type(value).__name__}")


def _json_line(record: dict) -> bytes:
    # OPT_NON_STR_KEYS: a field table may carry any key; OPT_PASSTHROUGH... is not needed: Decimal and
    # bytes go through _json_default; integers beyond 64 bits do not occur (longlong is unsigned 64).
    return orjson.dumps(record, default=_json_default, option=orjson.OPT_APPEND_NEWLINE)


def _text_line(record: dict) -> str:
    if record["connection"] is None:  # damage to the capture file itself
        return (f"capture {record['capture']} at byte {record.get('file_offset')}: ISSUE {record['issue_kind']}: "
                f"{record['detail']}\n").encode()
    ts = datetime.datetime.fromtimestamp(record["ts_ns"] / 1e9, datetime.timezone.utc)
    arrow = "->" if record["dir"] == "C>S" else "<-"
    head = f"{ts:%Y-%m-%d %H:%M:%S.%f} {record['connection'][:8]} {record['client']} {arrow} " \
           f"{record['server']} ch{record['channel'] if record['channel'] is not None else '-'} "
    kind = record["kind"]
    if kind == "method":
        text = record["method"] + " " + _args(record["args"])
        if "message" in record:
            message = record["message"]
            text += f" [{message['body_received']}/{message['body_size']} bytes in " \
                    f"{message['body_frames']} frames" + \
                    (f", sha256 {message['body_sha256'][:12]}]" if message["complete"] else ", incomplete]")
    elif kind == "header":
        text = f"header {record['class']} body_size={record['body_size']} {_args(record['properties'])}"
    elif kind == "body":
        text = f"body {record['body_frame_size']} bytes"
    elif kind == "protocol-header":
        text = f"protocol header {record['protocol_header']}"
    elif kind == "issue":
        text = f"ISSUE {record['issue_kind']}: {record['detail']}" + \
               (f" ({record['bytes_skipped']} bytes skipped)" if record["bytes_skipped"] else "")
    else:
        text = kind
    return (head + text + "\n").encode()


def _args(values: dict) -> str:
    parts = []
    for key, value in values.items():
        shown = json.dumps(value, default=_json_default, ensure_ascii=False)
        parts.append(f"{key}={shown if len(shown) <= 80 else shown[:77] + '...'}")
    return " ".join(parts)


def _summary(stats) -> None:
    frames = sum(n for kind, n in stats.records.items() if kind not in ("issue", "protocol-header"))
    print(f"amqpcap: {len(stats.captures)} captures read, {len(stats.failed)} failed; "
          f"{stats.packets} packets, {stats.tcp_segments} TCP segments; connections: "
          f"{dict(stats.connections) or 0}; {frames} frames; "
          f"{sum(stats.issues.values())} issues ({stats.bytes_skipped} bytes skipped)"
          + (f" {dict(stats.issues)}" if stats.issues else ""), file=sys.stderr)
