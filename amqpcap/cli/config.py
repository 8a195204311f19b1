"""`amqpcap config`: the effective settings (defaults, --config, --set) as TOML."""

from __future__ import annotations

import argparse
import sys

from amqpcap.cli import OK, load_settings

NAME = "config"
HELP = "print the effective settings as TOML"
DESCRIPTION = "Print the settings in effect (the defaults, overridden by --config and --set) as TOML."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--comments", action="store_true", help="explain every key (as conf/default.toml does)")


def main(args: argparse.Namespace) -> int:
    from amqpcap.settings import to_toml
    sys.stdout.write(to_toml(load_settings(args), comments=args.comments))
    return OK
