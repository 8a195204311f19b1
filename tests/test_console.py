"""amqpcap's own log lines (amqpcap.console)."""

from __future__ import annotations

import io
import logging
import sys

from amqpcap.console import setup_logging


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
