"""The `amqpcap` command: one tree of subcommands, a module each (`decode`, `run`, `analyze`,
`findings`, `report`, `repair`, `maintain`, `config`), and what it shows on the console (`console`).

    amqpcap decode CAPTURE...               decoded traffic without Spark (readable, --jsonl, --stats)
    amqpcap run --input PATH... --lake DIR  the nightly Spark job: captures into the Delta lake
    amqpcap analyze --lake DIR              rebuild the analytics tables from the raw ones
    amqpcap findings --lake DIR             what needs attention, by severity
    amqpcap report --lake DIR -o FILE       one self-contained HTML page of plots about the traffic
    amqpcap repair --lake DIR               finish runs interrupted while committing
    amqpcap maintain --lake DIR             compact and vacuum the tables
    amqpcap config                          the effective settings, as TOML

Spark is imported only by the subcommands that run it.
"""

from __future__ import annotations

import argparse
import functools
import gc
import os
import sys
from typing import NoReturn

from amqpcap import __version__

# Exit codes, the same for every subcommand (also in each --help).
OK, CAPTURE_FAILED, USAGE, INTERNAL = 0, 1, 2, 70
EXIT_CODES = (f"exit codes: {OK} all good; {CAPTURE_FAILED} some capture failed (or was partial, with "
              f"--fail-on partial); {USAGE} usage or settings error (nothing was done); {INTERNAL} internal "
              "error (a bug: please report it with the traceback)")


class UsageError(Exception):
    """Bad arguments or settings: exit 2 with one line, before any work starts."""


def settings_options() -> argparse.ArgumentParser:
    """--config and --set, shared by the subcommands that take settings."""
    parent = argparse.ArgumentParser(add_help=False, formatter_class=_Formatter)
    group = parent.add_argument_group("settings (conf/default.toml documents every key)")
    group.add_argument("--config", metavar="FILE", help="a TOML file overriding the defaults")
    group.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                       help="override one setting, e.g. --set decode.amqp_ports=[5672,5673] (repeatable)")
    return parent


def add_tls_arguments(group) -> None:
    """--tls-port and --tls-keylog: shorthands for decode.tls_ports and decode.tls_keylogs, the same
    in every subcommand that decodes (see tls_overrides)."""
    group.add_argument("--tls-port", type=int, action="append", metavar="N",
                       help="a TLS (AMQPS) port (repeatable; decode.tls_ports, default 5671): decrypted "
                       "with --tls-keylog, else accounted, not decoded")
    group.add_argument("--tls-keylog", action="append", metavar="PATH",
                       help="a TLS key log (SSLKEYLOGFILE format; repeatable; a directory or glob: the key "
                       "logs in it; a URI such as s3://; decode.tls_keylogs) to decrypt TLS connections with")


def tls_overrides(args: argparse.Namespace) -> list[str]:
    import json
    out = []
    if args.tls_port:
        out.append(f"decode.tls_ports={sorted(set(args.tls_port))}")
    if args.tls_keylog:
        out.append(f"decode.tls_keylogs={json.dumps(args.tls_keylog)}")
    return out


def console_options() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False, formatter_class=_Formatter)
    group = parent.add_argument_group("console")
    group.add_argument("--log-level", default="INFO", type=str.upper,
                       choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="what amqpcap logs on stderr (default: INFO)")
    group.add_argument("--verbose", action="store_true",
                       help="also Spark's and the JVM's own logs and progress bars (quiet by default)")
    return parent


# The subcommands, in the order --help lists them: each module's NAME, HELP, DESCRIPTION,
# add_arguments and main make it
COMMANDS = ("decode", "run", "analyze", "findings", "report", "repair", "maintain", "config")


class _Version(argparse.Action):
    """--version: the build in use is looked up only when asked (finding it costs every start)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                 help="show the version and the build in use, and exit"):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_text())  # (on stdout, as argparse's own version action prints)
        parser.exit()


@functools.cache
def _help_width() -> int:
    """What argparse sizes help to (the terminal's columns, less 2), found as shutil would find it:
    argparse asks shutil for every argument added (it formats each one's metavar to check it),
    and importing shutil, with the compression modules it imports, cost every start ~2 ms."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return (columns or 80) - 2


class _Formatter(argparse.HelpFormatter):
    def __init__(self, prog, indent_increment=2, max_help_position=24, width=None):
        super().__init__(prog, indent_increment, max_help_position, _help_width() if width is None else width)


class _DefaultsFormatter(argparse.ArgumentDefaultsHelpFormatter, _Formatter):
    pass


def parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The command line's parser. Given the arguments, only the subcommand they name is built in
    full (its module imported: each imports what it runs, and `decode` starts sooner without the
    others'); the others are there by name."""
    import importlib
    named = next((arg for arg in argv if not arg.startswith("-")), None) if argv else None
    built = (named,) if named in COMMANDS else COMMANDS
    top = argparse.ArgumentParser(prog="amqpcap", description="Captured AMQP 0-9-1 / 0-9 traffic to tables.",
                                  epilog=EXIT_CODES, formatter_class=_Formatter)
    top.add_argument("--version", action=_Version)
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = [settings_options(), console_options()]
    for name in COMMANDS:
        if name not in built:
            commands.add_parser(name, formatter_class=_Formatter)
            continue
        module = importlib.import_module(f"amqpcap.cli.{name}")
        sub = commands.add_parser(module.NAME, help=module.HELP, description=module.DESCRIPTION,
                                  parents=common, epilog=EXIT_CODES,
                                  formatter_class=_DefaultsFormatter)
        module.add_arguments(sub)
        sub.set_defaults(handler=module.main, ends_at_once=getattr(module, "ENDS_AT_ONCE", False))
    return top


def version_text() -> str:
    import amqpcap
    return f"amqpcap {__version__} ({amqpcap.build()}; Python {sys.version.split()[0]})"


def program() -> None:
    """The `amqpcap` command (and `python -m amqpcap`): main, its exit code the process's."""
    sys.exit(main(as_program=True))


def main(argv: list[str] | None = None, as_program: bool = False) -> int:
    """`as_program`: this is the whole process (not a caller in Python), so that a command whose
    module says ENDS_AT_ONCE ends the process as soon as its output is flushed (_end_at_once)."""
    from amqpcap.process import one_blas_thread
    one_blas_thread()  # before anything imports numpy (pyarrow does): amqpcap.process says why
    if argv is None:
        argv = sys.argv[1:]
    if as_program:  # what the command's modules make at import lives as long as the process: the
        gc.disable()  # collector's passes over it while they are imported cost every start ~3 ms
    try:
        args = parser(argv).parse_args(argv)
    finally:
        if as_program:
            gc.enable()
    from amqpcap.cli.console import setup_logging
    setup_logging(args.log_level, args.verbose)
    try:
        code = args.handler(args)
        if as_program and args.ends_at_once:
            _end_at_once(code)
        return code
    except UsageError as error:
        print(f"amqpcap: {error}", file=sys.stderr)
        return USAGE
    except KeyboardInterrupt:
        print("amqpcap: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `| head` closed the pipe: not an error
        sys.stderr.close()
        return OK
    except Exception:  # a bug: say so, distinctly from a capture that failed
        from amqpcap.cli.console import log
        log.exception("internal error (please report it with this traceback)")
        return INTERNAL


def _end_at_once(code: int) -> NoReturn:
    """Ends the process with its output flushed, without Python's teardown: for `decode`, which
    holds nothing but its output, the teardown only freed one by one what decoding had made
    (35-45 ms measured after a 150 MB capture, a fifth of the start-up again). Not for a command
    that holds more (Spark's JVM, files, the lake): their cleanup runs at exit."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`| head`), a closed stream: nothing to keep
            pass
    from amqpcap.cli.console import end_logging
    end_logging()
    os._exit(code)


def load_settings(args: argparse.Namespace, extra: list[str] = ()):
    """The settings from --config and --set (and a subcommand's named options, as overrides)."""
    from amqpcap.settings import SettingsError
    from amqpcap.settings import load_settings as load
    try:
        settings = load(args.config, [*args.overrides, *extra])
    except SettingsError as error:
        raise UsageError(str(error)) from None
    from amqpcap.process import use_storage
    use_storage(settings.storage)
    return settings

