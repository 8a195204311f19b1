"""The lake from a notebook or a script, in one call: every table as of the last complete run (a run
still committing, or interrupted, is never seen: amqpcap.lake.runlog), with its `date` partition.

    from amqpcap.lake import arrow, duckdb_views, polars_frames, spark_views
    con = duckdb_views("lake")                 # DuckDB views named like the tables
    con.sql("SELECT queue, quantile_cont(settle_latency_ms, 0.99) FROM deliveries GROUP BY ALL")
    frames = polars_frames("lake")            # {name: polars.LazyFrame}
    spark_views(spark, "lake")                # Spark temp views named like the tables
    table = arrow("lake", "errors")           # a pyarrow Table

These read the Parquet files of each table's snapshot version directly (no delta-rs scan, which
can abort the interpreter at exit: delta-rs #2184), so any Parquet reader works the same way.
"""

from __future__ import annotations

import pyarrow as pa

from amqpcap.lake import runlog
from amqpcap.lake.paths import table_uri
from amqpcap.lake.tablefiles import filesystem_of
from amqpcap.tables.registry import TABLES, Table

DATE = pa.schema([("date", pa.date32())])


def files(lake: str) -> dict[str, list[str]]:
    """Each table's Parquet files (local paths or URIs) at the lake's snapshot."""
    versions = runlog.snapshot(lake)
    return {name: [_local(u) for u in runlog.table_files(lake, name, v)] if v is not None else []
            for name, v in versions.items()}


def dataset(lake: str, table: str | Table):
    """One table's snapshot as a pyarrow Dataset (None when it has no file), on whatever filesystem
    the lake is (local, s3://, gs://, ...): what the other helpers read a remote lake with."""
    import pyarrow.dataset as ds
    table = TABLES[table] if isinstance(table, str) else table
    paths = files(lake)[table.name]
    if not paths:
        return None
    filesystem, base = filesystem_of(table_uri(lake, table))
    located = [filesystem_of(p)[1] for p in paths]
    return ds.dataset(located, schema=table.arrow(), format="parquet", filesystem=filesystem,
                      partitioning=ds.partitioning(DATE, flavor="hive"), partition_base_dir=base)


def arrow(lake: str, table: str | Table, columns: list[str] | None = None, filter=None) -> pa.Table:
    """One table as a pyarrow Table (`filter`: a pyarrow.compute expression, pushed down)."""
    table = TABLES[table] if isinstance(table, str) else table
    data = dataset(lake, table)
    if data is None:
        schema = table.arrow()
        return schema.empty_table().select(columns or schema.names)
    return data.to_table(columns=columns, filter=filter)


def duckdb_views(lake: str, connection=None):
    """A DuckDB connection (new, or the one given) with one view per table."""
    import duckdb
    con = connection or duckdb.connect()
    for name, paths in files(lake).items():
        if paths and all("://" not in p for p in paths):
            listing = ", ".join("'" + p.replace("'", "''") + "'" for p in paths)
            con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM read_parquet([{listing}], "
                        "hive_partitioning = true, union_by_name = true)")
        elif paths:  # a remote lake: read through pyarrow's filesystems (DuckDB's own, httpfs, would
            # download an extension at run time, and takes no credentials from the AWS chain)
            con.register(f"{name}_files", dataset(lake, name))
            con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM {name}_files")
        else:
            con.register(f"{name}_empty", TABLES[name].arrow().empty_table())
            con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM {name}_empty")
    return con


def polars_frames(lake: str) -> dict:
    """{table: polars.LazyFrame}."""
    import polars as pl
    frames = {}
    for name, paths in files(lake).items():
        schema = TABLES[name].arrow()
        if paths and all("://" not in p for p in paths):
            frames[name] = pl.scan_parquet(paths, hive_partitioning=True,
                                           hive_schema={"date": pl.Date}).select(schema.names)
        elif paths:  # a remote lake: through pyarrow's filesystems, as duckdb_views
            frames[name] = pl.scan_pyarrow_dataset(dataset(lake, name)).select(schema.names)
        else:
            frames[name] = pl.from_arrow(schema.empty_table()).lazy()
    return frames


def spark_views(spark, lake: str, prefix: str = "") -> list[str]:
    """Spark temp views named like the tables (with `prefix`); their names."""
    from amqpcap.lake.spark_read import read_table
    names = []
    for name in TABLES:
        read_table(spark, lake, name).createOrReplaceTempView(prefix + name)
        names.append(prefix + name)
    return names


def _local(uri: str) -> str:
    return uri.removeprefix("file://") if uri.startswith("file://") else uri
