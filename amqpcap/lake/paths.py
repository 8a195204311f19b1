"""Where things are in a lake: one home for its paths (the run log, the sinks, upkeep and the
readers all ask here). A lake is a local folder or any URI pyarrow and delta-rs open."""

from __future__ import annotations

import os

from amqpcap.tables.registry import Table


def absolute(lake: str) -> str:
    """A local lake as an absolute path (file:// URIs too); any other URI as it is."""
    return lake if "://" in lake and not lake.startswith("file://") else os.path.abspath(lake.removeprefix("file://"))


def table_uri(lake: str, table: Table | str) -> str:
    return f"{absolute(lake).rstrip('/')}/{table if isinstance(table, str) else table.name}"


def pending_dir(lake: str) -> str:
    """Where the run log keeps the manifests of runs still committing (amqpcap.lake.runlog)."""
    return f"{absolute(lake)}/_amqpcap/pending"


def staging_in(lake: str, run_id: str) -> str:
    """A run's staging area inside the lake (a cluster's executors all reach it)."""
    return f"{absolute(lake)}/_staging/{run_id}"
