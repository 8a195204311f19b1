"""amqpcap's own log lines (amqpcap.cli.console)."""

from __future__ import annotations

import io
import logging
import subprocess
import sys

from amqpcap.cli.console import setup_logging
from tests.helpers.samples import ROOT


def test_log_lines_go_to_stderr_as_it_is_when_they_are_written(monkeypatch):
    """A harness that swaps stderr and closes the old one (pytest, notebooks) must not get
    'I/O operation on closed file' from a handler holding the stream of set-up time."""
    log = logging.getLogger("amqpcap")
    monkeypatch.setattr(log, "handlers", list(log.handlers))
    setup_logging("INFO")
    first = io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    log.info("one")
    first.close()
    second = io.StringIO()
    monkeypatch.setattr(sys, "stderr", second)
    log.info("two")
    assert second.getvalue() == "amqpcap: two\n"


def test_logging_is_set_up_when_the_first_line_is_logged():
    """`decode --quiet` on a sound capture imports neither logging nor shutil (argparse's help
    formatter asked it per argument); a capture that fails still logs its line, as set up."""
    code = ("import sys; from amqpcap import cli; code = cli.main(sys.argv[1:]); "
            "print(code, 'logging' in sys.modules, 'shutil' in sys.modules)")
    sound = subprocess.run([sys.executable, "-c", code, "decode", "--jsonl", "--quiet",
                            str(ROOT / "data" / "samples" / "heartbeats.pcap")], capture_output=True, text=True)
    assert sound.stdout.splitlines()[-1] == "0 False False" and sound.stderr == ""
    missing = subprocess.run([sys.executable, "-c", code, "decode", "--jsonl", "--quiet", "--log-level", "warning",
                              str(ROOT / "no-such.pcap")], capture_output=True, text=True)
    assert missing.stdout.splitlines()[-1] == "1 True False"
    assert missing.stderr.startswith("amqpcap: ") and "no-such.pcap" in missing.stderr


def test_set_up_at_once_when_logging_is_imported_already(monkeypatch):
    """A command whose modules import logging (Spark's) logs through its own loggers from the start."""
    from amqpcap.cli import console
    log = logging.getLogger("amqpcap")
    monkeypatch.setattr(log, "handlers", [])
    console.setup_logging("ERROR")
    assert log.level == logging.ERROR and len(log.handlers) == 1 and not log.propagate
