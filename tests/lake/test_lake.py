"""The lake helpers (amqpcap.lake): every table in one call for DuckDB, Polars, Spark and Arrow, all
reading the same snapshot; and readers that never abort the interpreter (delta-rs #2184)."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from amqpcap import lake as helpers
from amqpcap.lake.spark_read import read_table
from amqpcap.tables.registry import TABLES
from tests.helpers.samples import ROOT


def test_every_helper_sees_every_table_with_the_same_rows(spark, lake):
    path, summary = lake
    con = helpers.duckdb_views(path)
    frames = helpers.polars_frames(path)
    views = helpers.spark_views(spark, path, prefix="t_")
    assert len(views) == len(TABLES)
    for name in TABLES:
        arrow = helpers.arrow(path, name)
        counts = {arrow.num_rows, con.sql(f"SELECT count(*) FROM {name}").fetchall()[0][0],
                  frames[name].select("run_id").collect().height, spark.table(f"t_{name}").count(),
                  read_table(spark, path, name).count()}
        assert len(counts) == 1, (name, counts)
        assert arrow.schema.names == TABLES[name].names
    assert helpers.arrow(path, "frames").num_rows == summary.rows["frames"]
    dated = con.sql("SELECT DISTINCT typeof(date) FROM frames").fetchall()
    assert dated == [("DATE",)]


READER = """
import sys
from amqpcap.lake import arrow, files
lake = sys.argv[1]
total = sum(arrow(lake, name).num_rows for name in files(lake))
print(total)
"""


@pytest.mark.slow
def test_a_reader_script_never_aborts(lake, tmp_path):
    """50 runs of a script reading every table through the helpers: no abort at exit (exit 134)."""
    path, _ = lake
    script = tmp_path / "reader.py"
    script.write_text(READER)

    def once(_):
        return subprocess.run([sys.executable, str(script), path], capture_output=True, text=True, cwd=ROOT)
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(once, range(50)))
    assert [r.returncode for r in results] == [0] * 50, [r.stderr[-300:] for r in results if r.returncode]
    assert len({r.stdout for r in results}) == 1
