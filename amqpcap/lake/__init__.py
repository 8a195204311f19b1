"""The lake: table rows to Parquet files (`tablefiles`), files to Delta versions (`sinks`), every run
all or nothing (`runlog`), connections carried between runs (`carryover`), where things are
(`paths`), upkeep (`maintain`), and reading it back: from a notebook or a script (`helpers`, also
importable from here) or into a Spark session (`spark_read`). Never imports the job.

    from amqpcap.lake import arrow, duckdb_views, polars_frames, spark_views
"""

_HELPERS = ("arrow", "duckdb_views", "files", "polars_frames", "spark_views")


def __getattr__(name: str):
    """The notebook helpers, loaded on first use (the lake's own modules need not load pyarrow's
    dataset layer to import)."""
    if name in _HELPERS:
        from amqpcap.lake import helpers
        return getattr(helpers, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = list(_HELPERS)
