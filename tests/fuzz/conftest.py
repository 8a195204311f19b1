"""The fuzz suite names the decoder build it fuzzes in pytest's header (compiled or interpreted)."""

from __future__ import annotations

import os

import amqpcap


def pytest_report_header(config):
    mode = " (AMQPCAP_INTERPRETED=1)" if os.environ.get("AMQPCAP_INTERPRETED") else ""
    return [f"amqpcap build fuzzed: {amqpcap.build()}{mode}"]
