"""Rebuild the analytics tables from the raw ones.

    amqpcap analyze --lake DIR [--config FILE] [--master URL]

The nightly job calls `analyze` for the captures it just decoded; this command rebuilds every
analytics table from the whole raw layer (after a fix to a transform, for instance).
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from pipelines.config import ConfigError, load_config

CONCURRENT_TABLES = 4  # analytics tables written at the same time


def analyze(spark, lake: str, run_id: str, captures: set[str] | None = None) -> dict[str, int]:
    """Write every analytics table for `captures` (None: all of them). Returns table versions."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from pipelines import lake as delta
    from pipelines.analytics import reference
    from pipelines.analytics.channels import channels
    from pipelines.analytics.connections import connections
    from pipelines.analytics.deliveries import deliveries
    from pipelines.analytics.errors import errors
    from pipelines.analytics.liveness import flow_control, heartbeats
    from pipelines.analytics.message_flows import message_flows
    from pipelines.analytics.publishes import publishes
    from pipelines.analytics.rpc_calls import rpc_calls
    from pipelines.schemas import (ANALYTICS_TABLES, CHANNELS, CONNECTIONS, DELIVERIES, ERRORS,
                                   FLOW_CONTROL, HEARTBEATS, MESSAGE_FLOWS, PUBLISHES, RPC_CALLS)

    frames = delta.read_table(spark, lake, "frames")
    messages = delta.read_table(spark, lake, "messages")
    streams = delta.read_table(spark, lake, "streams")
    if captures is not None:
        frames = frames.where(F.col("capture").isin(*sorted(captures)))
        messages = messages.where(F.col("capture").isin(*sorted(captures)))
        streams = streams.where(F.col("capture").isin(*sorted(captures)))
    # every table reads these: read the raw layer once (and deliveries feeds message_flows too)
    frames, messages, streams = (frame.persist(StorageLevel.MEMORY_AND_DISK)
                                 for frame in (frames, messages, streams))
    settled = deliveries(frames, streams).persist(StorageLevel.MEMORY_AND_DISK)
    builders = {
        ERRORS: lambda: errors(frames, reference.reply_codes(spark), reference.method_names(spark)),
        DELIVERIES: lambda: settled, PUBLISHES: lambda: publishes(frames, messages),
        RPC_CALLS: lambda: rpc_calls(frames),
        CONNECTIONS: lambda: connections(streams, frames, reference.method_names(spark)),
        CHANNELS: lambda: channels(frames), HEARTBEATS: lambda: heartbeats(frames, streams),
        FLOW_CONTROL: lambda: flow_control(frames),
        MESSAGE_FLOWS: lambda: message_flows(messages, settled)}
    versions: dict[str, int] = {}

    def write(*tables) -> None:  # in order: message_flows reads the deliveries just written
        for table in tables:
            started = time.monotonic()
            frame = builders[table]().withColumn("run_id", F.lit(run_id))
            files = [row.asDict() for row in delta.write_dataframe(frame, table, lake, run_id).collect()]
            versions[table.name] = delta.commit(lake, table, files, captures, run_id)
            print(f"amqpcap: {table.name}: {sum(f['rows'] for f in files)} rows, "
                  f"{time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)

    chains = [(DELIVERIES, MESSAGE_FLOWS), (RPC_CALLS,), (CONNECTIONS,), (PUBLISHES,), (ERRORS,),
              (CHANNELS,), (HEARTBEATS,), (FLOW_CONTROL,)]
    try:
        # Several tables at once: each is small next to its fixed cost (job scheduling, a commit),
        # which concurrent Spark jobs overlap; tables are independent but for the chain above.
        with ThreadPoolExecutor(max_workers=CONCURRENT_TABLES) as pool:
            failures = [f.exception() for f in [pool.submit(write, *chain) for chain in chains]]
    finally:
        for frame in (frames, messages, streams, settled):
            frame.unpersist()
    failure = next((f for f in failures if f is not None), None)
    if failure is not None:
        raise failure
    return {table.name: versions[table.name] for table in ANALYTICS_TABLES}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="amqpcap analyze", description=__doc__.splitlines()[0])
    parser.add_argument("--lake", help="lake location (default: lake.path of the config)")
    parser.add_argument("--config", help="a TOML file overriding conf/default.toml's settings")
    parser.add_argument("--master", help="Spark master (default: spark.master of the config)")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
    except ConfigError as error:
        print(f"amqpcap: {error}", file=sys.stderr)
        return 2
    from pipelines.session import build_session
    spark = build_session(config, args.master)
    try:
        versions = analyze(spark, args.lake or config.lake.path, f"analyze-{uuid.uuid4()}")
    finally:
        spark.stop()
    print("amqpcap analyze: " + ", ".join(f"{name} v{version}" for name, version in versions.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
