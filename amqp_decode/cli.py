"""The `amqpcap` command.

    amqpcap decode [options] CAPTURE...     decoded traffic, one line per frame (or --jsonl)
    amqpcap run --input PATH... --lake DIR  the Spark job: captures into the Delta lake
"""

from __future__ import annotations

import argparse
import base64
import datetime
import json
import sys
from decimal import Decimal

import orjson

from amqp_decode.decoder import CaptureDecoder, DecodeSettings, expand_inputs
from amqp_decode.errors import SpecError
from amqp_decode.stream import StreamSettings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="amqpcap", description="AMQP capture analytics")
    commands = parser.add_subparsers(dest="command", required=True)
    decode = commands.add_parser("decode", help="print the AMQP frames in capture files",
                                 description="Decode AMQP 0-9-1 / 0-9 traffic in pcap, pcapng or "
                                 "gzip-compressed captures without Spark. Several files are merged "
                                 "by time, so rotated captures stitch together.")
    decode.add_argument("captures", nargs="+", metavar="CAPTURE",
                        help="capture files, directories (searched for captures) or globs")
    decode.add_argument("--jsonl", action="store_true", help="one JSON object per line")
    decode.add_argument("--port", type=int, action="append", metavar="N",
                        help="an AMQP port (repeatable; default 5672). AMQP on other ports is "
                        "still found by its protocol header")
    decode.add_argument("--tls-port", type=int, action="append", metavar="N",
                        help="a TLS port whose traffic is counted but not decoded (default 5671)")
    decode.add_argument("--default-version", choices=["0-9-1", "0-9"], default="0-9-1",
                        help="version for connections whose protocol header was not captured")
    decode.add_argument("--spec", action="append", default=[], metavar="VERSION=FILE",
                        help="use another spec file (official AMQP XML format) for a version")
    decode.add_argument("--bodies", action="store_true",
                        help="include message bodies (base64, capped by --body-cap) in the output")
    decode.add_argument("--body-cap", type=int, default=4096, metavar="BYTES")
    decode.add_argument("--quiet", action="store_true", help="no summary on stderr")
    commands.add_parser("run", help="decode captures into the Delta lake with Spark", add_help=False)
    commands.add_parser("analyze", help="rebuild the analytics tables from the raw ones", add_help=False)
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["run"]:  # the Spark jobs have their own options (pipelines.jobs)
        from pipelines.jobs.nightly import main as run_main
        return run_main(argv[1:])
    if argv[:1] == ["analyze"]:
        from pipelines.jobs.analyze import main as analyze_main
        return analyze_main(argv[1:])
    args = parser.parse_args(argv)
    return _decode(args)


def _decode(args: argparse.Namespace) -> int:
    try:
        specs = tuple(tuple(item.split("=", 1)) for item in args.spec)
        if any(len(pair) != 2 for pair in specs):
            raise SpecError("--spec takes VERSION=FILE, e.g. --spec 0-9-1=my-amqp.xml")
        stream = StreamSettings(
            amqp_ports=frozenset(args.port or [5672]), tls_ports=frozenset(args.tls_port or [5671]),
            default_version=args.default_version, capture_bodies=args.bodies, body_cap=args.body_cap)
        decoder = CaptureDecoder(DecodeSettings(stream=stream, specs=specs))
    except SpecError as error:
        print(f"amqpcap: {error}", file=sys.stderr)
        return 2
    if not expand_inputs(args.captures):
        print(f"amqpcap: no capture files in {' '.join(args.captures)}", file=sys.stderr)
        return 2
    out = sys.stdout.buffer
    render = _json_line if args.jsonl else _text_line
    try:
        for record in decoder.decode(args.captures):
            out.write(render(record))
        out.flush()
    except BrokenPipeError:  # `| head` closed the pipe: not an error
        sys.stderr.close()
        return 0
    stats = decoder.stats
    for path, reason in stats.failed.items():
        print(f"amqpcap: {path}: {reason}", file=sys.stderr)
    if not args.quiet:
        _summary(stats)
    return 1 if stats.failed else 0


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


if __name__ == "__main__":
    sys.exit(main())
