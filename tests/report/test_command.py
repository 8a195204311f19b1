"""amqpcap report without a Spark lake: its usage errors, and a page from empty tables."""

from __future__ import annotations

import re

import pytest

from amqpcap.cli import USAGE, main
from amqpcap.report import Period, render_views
from amqpcap.report.model import NOTHING
from amqpcap.tables.registry import TABLES

SECTION_KEYS = ["attention", "acks", "confirms", "rpc", "rates", "errors", "timeline", "heartbeats", "flow", "talkers", "decode"]


def run(capsys, *argv):
    code = main(["report", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("setup, argv, message", [
    (None, ["--lake", "{tmp}/nowhere"], "no lake at {tmp}/nowhere"),
    ("mkdir", ["--lake", "{tmp}/lake"], "{tmp}/lake holds no amqpcap table"),
    ("mkdir", ["--lake", "{tmp}/lake", "--since", "noon"], "--since 'noon' is not an ISO date"),
    ("mkdir", ["--lake", "{tmp}/lake", "-o", "{tmp}/no/such/folder/r.html"], "no folder {tmp}/no/such/folder"),
])
def test_usage_errors_are_one_line_and_exit_2(capsys, tmp_path, setup, argv, message):
    if setup == "mkdir":
        (tmp_path / "lake").mkdir()
    code, out, err = run(capsys, *[a.format(tmp=tmp_path) for a in argv], *(["-o", tmp_path / "r.html"]
                                                                             if "-o" not in argv else []))
    assert code == USAGE
    assert err.startswith(f"amqpcap: {message.format(tmp=tmp_path)}") and err.count("\n") == 1
    assert out == "" and not (tmp_path / "r.html").exists()


def empty_views(extra_column: bool):
    """Every table empty, as a lake without rows reads (with, maybe, a column added by a newer job)."""
    import duckdb
    con = duckdb.connect()
    for name, table in TABLES.items():
        con.register(f"{name}_rows", table.arrow().empty_table())
        extra = ", 42 AS a_column_from_a_newer_job" if extra_column else ""
        con.execute(f"CREATE VIEW {name} AS SELECT *{extra} FROM {name}_rows")
    return con


@pytest.mark.parametrize("extra_column", [False, True])
def test_empty_tables_give_a_page_that_says_so_in_every_section(extra_column):
    page = render_views(empty_views(extra_column), Period.parse("2026-11-21", None), "somewhere")
    sections = re.findall(r'<section id="(\w+)" data-empty="(\w+)">(.*?)</section>', page, re.S)
    assert [s[0] for s in sections] == SECTION_KEYS
    for key, empty, body in sections:
        assert empty == "true" and NOTHING in body, key
    assert "plotly-graph-div" not in page
    assert "from 2026-11-21 00:00:00 to the end (UTC)" in page and "no traffic in this period" in page
