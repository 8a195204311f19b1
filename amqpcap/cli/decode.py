"""`amqpcap decode`: capture files to AMQP frames without Spark, as readable lines or JSON Lines
(the contract is docs/decode.md), or as per-connection statistics (--stats)."""

from __future__ import annotations

import argparse
import functools
import os
import sys

import orjson

from amqpcap.capture.inputs import expand_inputs
from amqpcap.cli import CAPTURE_FAILED, OK, UsageError, add_tls_arguments, load_settings, tls_overrides
from amqpcap.cli.console import log
from amqpcap.connection.decoder import CaptureDecoder
from amqpcap.decodeview.ends import ConnectionEnds
from amqpcap.decodeview.filters import Selection, predicates
from amqpcap.decodeview.jsonl import json_line, json_line_into
from amqpcap.decodeview.order import DEFAULT_CAP, TimeOrder
from amqpcap.decodeview.where import WhereError
from amqpcap.process import fewer_collections
from amqpcap.tls.keylog import KeyLogError

NAME = "decode"
HELP = "print the AMQP frames in capture files (no Spark)"
# Run as the program, the process ends as soon as the output is flushed (amqpcap.cli._end_at_once):
# decoding holds nothing else (no Spark, no lake, no file but stdout).
ENDS_AT_ONCE = True
DESCRIPTION = ("Decode AMQP 0-9-1 / 0-9 traffic in pcap, pcapng or gzip-compressed captures without Spark. "
               "Several files are merged by time, so rotated captures stitch together. '-' reads a capture "
               "from standard input (tcpdump -w - | amqpcap decode -).")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("captures", nargs="+", metavar="CAPTURE",
                        help="capture files, directories (searched for captures), globs, or - for stdin")
    view = parser.add_argument_group("output")
    view.add_argument("--jsonl", action="store_true", help="one JSON object per line (docs/decode.md)")
    view.add_argument("--stats", action="store_true",
                      help="per-connection summaries, errors by reply code, and deliver->ack, publish->confirm "
                      "and RPC latency percentiles, instead of the frames")
    view.add_argument("--findings", action="store_true",
                      help="what needs attention (the lake's findings table: ack timeouts, redelivery loops, "
                      "returns, nacks, blocked publishers, churn, errors...), by severity, instead of the frames")
    view.add_argument("--json", action="store_true",
                      help="with --stats or --findings: the statistics (findings) as one JSON object")
    view.add_argument("--quiet", action="store_true", help="no summary on stderr")
    view.add_argument("--frames", action="store_true",
                      help="readable view: a line per frame (content header and body frames too), not per message")
    view.add_argument("--width", type=int, default=80, metavar="N",
                      help="readable view: cut each argument or property value to N characters")
    view.add_argument("--full", action="store_true", help="readable view: never cut values")
    view.add_argument("--no-sort", action="store_true",
                      help="records in decoding order (per connection, as each completes) instead of time order")
    view.add_argument("--sort-buffer", type=int, default=DEFAULT_CAP, metavar="RECORDS",
                      help="most records held to put them in time order; past it the oldest is written (and "
                      "a record that comes later than that is counted as out of order)")
    select = parser.add_argument_group("filters (all must match; docs/decode.md)")
    select.add_argument("--connection", metavar="ID", help="one connection: its id or a prefix of it (the "
                        "readable view shows 8 characters)")
    select.add_argument("--channel", type=int, action="append", metavar="N", help="channel N (repeatable: any)")
    select.add_argument("--method", action="append", metavar="GLOB",
                        help="methods whose name matches, e.g. 'basic.*', queue.declare (repeatable: any); a "
                        "content method brings its header and body frames")
    select.add_argument("--queue", metavar="NAME", help="methods whose queue argument matches NAME (a glob)")
    select.add_argument("--exchange", metavar="NAME",
                        help="methods whose exchange argument (source or destination for exchange.bind) "
                        "matches NAME (a glob; '' is the default exchange)")
    select.add_argument("--errors", action="store_true",
                        help="error closes, basic.return, broker basic.nack, decode issues and abnormal "
                        "connection ends")
    select.add_argument("--where", metavar="EXPR",
                        help='an expression over the JSON fields, e.g. \'args.reply_code >= 400 and '
                        'method == "channel.close"\' (grammar in docs/decode.md)')
    shorthands = parser.add_argument_group("shorthands for settings")
    shorthands.add_argument("--port", type=int, action="append", metavar="N",
                            help="an AMQP port (repeatable; decode.amqp_ports, default 5672). AMQP on other "
                            "ports is still found by its protocol header")
    add_tls_arguments(shorthands)
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
    out += tls_overrides(args)
    if args.default_version:
        out.append(f'decode.default_version="{args.default_version}"')
    for item in args.spec:
        version, sep, path = item.partition("=")
        if not sep or not version or not path:
            raise UsageError("--spec takes VERSION=FILE, e.g. --spec 0-9-1=my-amqp.xml")
        import json
        out.append("decode.specs={" + json.dumps(version) + " = " + json.dumps(path) + "}")
    if args.bodies:
        out.append("bodies.capture=true")
    if args.body_cap is not None:
        out.append(f"bodies.cap_bytes={args.body_cap}")
    return out


FILTERS = ("connection", "channel", "method", "queue", "exchange", "errors", "where")
READABLE_ONLY = ("frames", "full")


def _check(args: argparse.Namespace) -> None:
    """Options that do not go together: one line, exit 2, before any work."""
    if args.json and not (args.stats or args.findings):
        raise UsageError("--json goes with --stats or --findings (for JSON Lines of the frames: --jsonl)")
    if args.stats and args.findings:
        raise UsageError("--stats shows the findings too: choose one")
    if args.findings:
        args.stats = True  # (the same pass, the same checks: only the output differs)
        args.findings_only = True
    if args.stats:
        given = [f"--{name}" for name in FILTERS if getattr(args, name) not in (None, False, [])]
        if given:
            raise UsageError(f"{' '.join(given)}: --stats summarises every connection of the capture; the "
                             "filters select what the readable and --jsonl views print")
        if args.jsonl:
            raise UsageError("--stats and --jsonl are two different outputs: choose one (--stats --json "
                             "for the statistics as JSON)")
    if args.stats or args.jsonl:
        given = [f"--{name}" for name in READABLE_ONLY if getattr(args, name)]
        if args.width != 80:
            given.append("--width")
        if given:
            raise UsageError(f"{' '.join(given)}: only for the readable view")
    if args.width < 4:
        raise UsageError("--width takes at least 4 (characters per value); --full for no cut")
    if args.sort_buffer < 1:
        raise UsageError("--sort-buffer takes a positive number of records")


def main(args: argparse.Namespace) -> int:
    _check(args)
    settings = load_settings(args, overrides(args))
    try:
        tests = predicates(connection=args.connection, channels=args.channel, methods=args.method,
                           queue=args.queue, exchange=args.exchange, errors=args.errors, where=args.where)
    except WhereError as error:
        raise UsageError(f"--where: {error}") from None
    if not expand_inputs(args.captures):
        raise UsageError(f"no capture files in {' '.join(args.captures)}")
    # the one-line-per-message view: a message's content frames are part of its line, not records
    folded = not (args.stats or args.jsonl or args.frames)
    try:
        decoder = CaptureDecoder(settings, fold_content=folded)  # (reads the key logs)
    except KeyLogError as error:
        raise UsageError(str(error)) from None
    out = sys.stdout.buffer
    order = None
    with fewer_collections(collect=False):  # amqpcap.process: a tenth of the time otherwise
        if args.stats:
            _stats(decoder, args, settings, out)
        else:
            ends = ConnectionEnds()
            if args.jsonl:
                render, write = json_line, _line_writer(out)
            else:
                from amqpcap.decodeview.readable import Readable  # (only here: --jsonl starts sooner)
                readable = Readable(frames=args.frames, width=None if args.full else args.width, versions=ends.version)
                render, write = readable.line, _text_writer(out)
            selection = Selection(tests, folded=folded)
            order = None if args.no_sort else TimeOrder(decoder, args.sort_buffer,
                                                        into=json_line_into if args.jsonl else None)
            for batch in decoder.batches(args.captures, ends=True):
                records = selection.select(ends.apply(batch, decoder.now_ns))
                if not records:
                    continue
                if order is not None:
                    rendered = order.feed(records, render)
                else:
                    rendered = [text for text in map(render, records) if text is not None]
                if rendered:
                    write(rendered)
            if order is not None:
                rendered = order.finish()
                if rendered:
                    write(rendered)
    out.flush()
    stats = decoder.stats
    for path, reason in stats.failed.items():
        log.error("%s: %s", path, reason)
    for info in stats.captures:
        if info.issues:  # one line per damaged file: what, where, how much was skipped
            log.warning("%s: damaged: %s", info.path, info.damage())
    if not args.quiet:
        _summary(stats, order)
    return CAPTURE_FAILED if stats.failed else OK


def _stats(decoder: CaptureDecoder, args: argparse.Namespace, settings, out) -> None:
    """The same state machines as the lake's analytics tables, summarised."""
    from amqpcap.onepass.tabulate import Tabulator
    from amqpcap.rules.stats import Stats, render_text
    stats = Stats(settings.findings)
    tabulator = Tabulator.for_settings(stats.emit, settings)
    for record in decoder.decode(args.captures, ends=True):
        tabulator.record(record)
    # (a file that failed is on stderr, as in every view; the job's findings name it)
    for info in decoder.stats.captures:
        if info.dropped:
            stats.damage.dropped(info.path, info.dropped, info.records, None)
    if getattr(args, "findings_only", False):
        from amqpcap.rules.findings.listing import render_text as render_findings
        from amqpcap.rules.findings.listing import shown
        rows = stats.all_findings()
        out.write(orjson.dumps(shown(rows), option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)
                  if args.json else render_findings(rows).encode())
        return
    summary = stats.summary()
    out.write(orjson.dumps(summary, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE) if args.json
              else render_text(summary).encode())


@functools.cache
def _frames_view():
    from amqpcap.decodeview.readable import Readable
    return Readable(frames=True)


def _text_line(record: dict) -> bytes:
    """One record as the readable view writes it with --frames (for callers that render records
    one by one, e.g. the fuzz suite; the command itself renders through Readable)."""
    return (_frames_view().line(record) or "").encode()


def _text_writer(out):
    """What writes lines of text to `out`: joined, as UTF-8."""
    return lambda lines: out.write("".join(lines).encode())


def _line_writer(out):
    """What writes lines of bytes to `out`: os.writev on its file descriptor, the lines as they are
    (joining each batch first made a new buffer per write, its pages faulted in: a fifth of the
    process's page faults, and a copy of the whole output); joined, for an output without one (a
    caller's buffer)."""
    try:
        fd = out.fileno()
    except (AttributeError, OSError, ValueError):  # (io.UnsupportedOperation is both)
        fd = -1
    if fd < 0 or not hasattr(os, "writev"):
        return lambda lines: out.write(b"".join(lines))
    out.flush()  # (what was written to it before goes first)
    most = min(os.sysconf("SC_IOV_MAX"), 1024) if hasattr(os, "sysconf") else 16

    def write(lines: list) -> None:
        for start in range(0, len(lines), most):
            _write_all(fd, lines[start:start + most])
    return write


def _write_all(fd: int, parts: list) -> None:
    """Every byte of `parts`, in order, however many writev takes (a pipe may take part of them)."""
    left = sum(map(len, parts))
    while True:
        written = os.writev(fd, parts)
        left -= written
        if left <= 0:
            return
        whole = 0
        while written >= len(parts[whole]):
            written -= len(parts[whole])
            whole += 1
        parts = [parts[whole][written:], *parts[whole + 1:]]


def _summary(stats, order: TimeOrder | None) -> None:
    frames = stats.frames()
    print(f"amqpcap: {len(stats.captures)} captures read, {len(stats.failed)} failed; "
          f"{stats.packets} packets, {stats.tcp_segments} TCP segments; connections: "
          f"{dict(stats.connections) or 0}; {frames} frames; "
          f"{sum(stats.issues.values())} issues ({stats.bytes_skipped} bytes skipped)"
          + (f" {dict(stats.issues)}" if stats.issues else ""), file=sys.stderr)
    if order is not None and order.late:
        print(f"amqpcap: {order.late} records written out of time order (" +
              (f"the --sort-buffer of {order.cap} records was full {order.forced} times; "
               if order.forced else "") + "docs/decode.md: ordering)", file=sys.stderr)
