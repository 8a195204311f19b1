"""Every SQL block of docs/queries.md runs on the samples' lake, and returns rows unless the page
says the samples have none."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "queries.md"
# A block, and the "may be empty" mark that may precede it.
BLOCK = re.compile(r"(<!-- may be empty[^>]*-->\n)?```sql\n(.*?)```", re.S)
BLOCKS = [(m.group(2), bool(m.group(1))) for m in BLOCK.finditer(PAGE.read_text())]


def test_the_page_has_recipes():
    assert len(BLOCKS) >= 20
    assert "never on `(connection, date)`" in PAGE.read_text()


@pytest.fixture(scope="module")
def con(lake):
    from amqpcap.lake import duckdb_views
    con = duckdb_views(lake[0])
    con.execute("SET TimeZone = 'UTC'")
    return con


@pytest.mark.slow
@pytest.mark.parametrize("sql, may_be_empty", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_recipe_runs(con, sql, may_be_empty):
    rows = con.execute(sql).fetchall()
    assert rows or may_be_empty, sql
