"""Delta interop, both ways, with the Delta jars amqpcap.job.jars fetched at set-up: a lake delta-rs
wrote reads in Spark SQL (`format("delta")`, ``delta.`path` ``, DESCRIBE HISTORY, VERSION AS OF, a
date predicate) with the rows the lake helpers read; and a lake written through the delta-spark
engine reads in delta-rs, DuckDB and Polars with the rows of the same night written by delta-rs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from amqpcap.job.jars import installed
from tests.helpers.lakes import canonical, lake_rows
from tests.helpers.samples import ROOT, SAMPLES

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not installed(), reason="the Delta jars were not fetched (python -m amqpcap.job.jars)")]

NIGHT = [SAMPLES / name for name in ("heartbeats.pcap", "confirms.pcap", "concurrent.pcap", "returns_nack_reject.pcap")]
TABLES = ("frames", "messages", "deliveries", "publishes", "connections", "channels", "captures", "message_flows")


def amqpcap(*args: str) -> None:
    result = subprocess.run([sys.executable, "-m", "amqpcap", *args], capture_output=True, text=True, cwd=ROOT,
                            timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.fixture(scope="module")
def lakes(tmp_path_factory):
    """The same night written by each engine: (delta-rs lake, delta-spark lake)."""
    base = tmp_path_factory.mktemp("interop")
    rs, spark = str(base / "rs"), str(base / "spark")
    amqpcap("run", "--input", *map(str, NIGHT), "--lake", rs)
    amqpcap("run", "--input", *map(str, NIGHT), "--lake", spark, "--set", 'lake.engine="delta-spark"')
    return rs, spark


SPARK_READS = """
import json, sys
from amqpcap.job.session import build_session
from amqpcap.settings import load_settings
lake = sys.argv[1]
spark = build_session(load_settings(None, ['lake.engine="delta-spark"', 'spark.master="local[2]"']))
out = {}
for table in %r:
    rows = spark.read.format("delta").load(f"{lake}/{table}").collect()
    out[table] = [{k: v.isoformat() if hasattr(v, "isoformat") and hasattr(v, "hour") else v
                   for k, v in r.asDict().items()} for r in rows]
history = spark.sql(f"DESCRIBE HISTORY delta.`{lake}/frames`").collect()
out["history"] = [r["version"] for r in history]
out["as_of"] = spark.sql(f"SELECT count(*) AS n FROM delta.`{lake}/frames` VERSION AS OF 0 "
                         "WHERE date >= DATE'2000-01-01'").collect()[0]["n"]
print("RESULT" + json.dumps(out, default=str))
""" % (TABLES,)


def test_a_lake_delta_rs_wrote_reads_in_spark_sql_with_the_same_rows(lakes):
    from amqpcap.lake import arrow
    rs, _ = lakes
    result = subprocess.run([sys.executable, "-c", SPARK_READS, rs], capture_output=True, text=True, cwd=ROOT,
                            timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(result.stdout.split("RESULT", 1)[1])
    for table in TABLES:
        assert canonical(seen[table]) == lake_rows(rs, table), table
    assert seen["history"] == [0] and seen["as_of"] == arrow(rs, "frames").num_rows > 100


def test_a_lake_the_delta_spark_engine_wrote_reads_in_delta_rs_duckdb_and_polars(lakes):
    import polars as pl
    from deltalake import DeltaTable

    from amqpcap.lake import duckdb_views
    rs, spark = lakes
    for table in TABLES:
        expected = lake_rows(rs, table)
        assert lake_rows(spark, table) == expected, table
        assert DeltaTable(f"{spark}/{table}").to_pyarrow_dataset().count_rows() == len(expected), table
        assert pl.read_delta(f"{spark}/{table}").height == len(expected), table
        assert duckdb_views(spark).sql(f"SELECT count(*) FROM {table}").fetchall() == [(len(expected),)], table
