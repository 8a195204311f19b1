"""The analytics rules as streaming state machines, Spark-free.

One connection's `frames` rows (with the `messages` row of each content-carrying method) go in,
in decoding order; rows of the analytics tables come out as soon as they are final (a delivery
when it is settled, a publish when it is confirmed or its channel ends, an RPC when it is answered,
a channel when its lifetime ends, the connection when it ends). State is held per channel and only
for what is still open, so memory follows what is in flight, not the traffic.

    analytics = Analytics(emit, AnalyticsSettings())
    analytics.frame(frames_row, messages_row_or_None)   # in decoding order, any connections
    analytics.end(streams_row)                          # after a connection's last frame

The same objects serve the decode task (pipelines), `amqpcap decode --stats`, and the rebuild of
the analytics tables from the raw layer (`amqpcap analyze`): one implementation of every rule.
`message_flows`, the one table across connections, is `message_flows.flows` run per key.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class AnalyticsSettings:
    # A mandatory publish not returned by then is taken as routed: publishes waiting for a possible
    # basic.return are bounded by count and by capture time (RabbitMQ returns at once).
    return_window: int = 10_000
    return_wait_seconds: float = 60.0


__all__ = ["Analytics", "AnalyticsSettings", "ConnectionAnalyzer"]


def __getattr__(name: str):
    """The rule sets (and, through the tables they emit to, pyarrow) are loaded on first use:
    what needs only `naming` (the readable view of `amqpcap decode`) starts ~0.25 s sooner."""
    if name in ("Analytics", "ConnectionAnalyzer"):
        from amqp_decode.analytics import connection
        return getattr(connection, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
