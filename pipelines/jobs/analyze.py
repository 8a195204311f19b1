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

from pipelines.config import ConfigError, load_config


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
    from pipelines.schemas import (CHANNELS, CONNECTIONS, DELIVERIES, ERRORS, FLOW_CONTROL, HEARTBEATS,
                                   MESSAGE_FLOWS, PUBLISHES, RPC_CALLS)

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
    built = {ERRORS: errors(frames, reference.reply_codes(spark), reference.method_names(spark)),
             DELIVERIES: deliveries(frames, streams), PUBLISHES: publishes(frames, messages),
             RPC_CALLS: rpc_calls(frames),
             CONNECTIONS: connections(streams, frames, reference.method_names(spark)),
             CHANNELS: channels(frames),
             HEARTBEATS: heartbeats(frames, streams), FLOW_CONTROL: flow_control(frames)}
    built[DELIVERIES] = built[DELIVERIES].persist(StorageLevel.MEMORY_AND_DISK)
    built[MESSAGE_FLOWS] = message_flows(messages, built[DELIVERIES])
    built = {table: frame.withColumn("run_id", F.lit(run_id)) for table, frame in built.items()}
    versions = {}
    try:
        for table, frame in built.items():
            started = time.monotonic()
            files = [row.asDict() for row in delta.write_dataframe(frame, table, lake, run_id).collect()]
            versions[table.name] = delta.commit(lake, table, files, captures, run_id)
            print(f"amqpcap: {table.name}: {sum(f['rows'] for f in files)} rows, "
                  f"{time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
    finally:
        for frame in (frames, messages, streams, built[DELIVERIES]):
            frame.unpersist()
    return versions


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
