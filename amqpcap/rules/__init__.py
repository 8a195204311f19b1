"""The analytics rules as streaming state machines, Spark-free: a module per table (`channels`,
`connections`, `deliveries`, `publishes`, `rpc_calls`, `heartbeats`, `errors`, `flow_control`),
the `findings` rules (`findings/`: what needs attention, diagnosed from those tables' rows, a file
per rule set), one connection's rule sets together (`connection`), `message_flows` across
connections, and what they share (`common`, `naming`, `table_rows`, `stats`).

One connection's `frames` rows (with the `messages` row of each content-carrying method) go in,
in decoding order; rows of the analytics tables come out as soon as they are final (a delivery
when it is settled, a publish when it is confirmed or its channel ends, an RPC when it is answered,
a channel when its lifetime ends, the connection when it ends). State is held per channel and only
for what is still open, so memory follows what is in flight, not the traffic.

    analytics = Analytics(emit, Settings().analytics)    # amqpcap.settings.AnalyticsSection
    analytics.frame(frames_row, messages_row_or_None)   # in decoding order, any connections
    analytics.end(streams_row)                          # after a connection's last frame

The same objects serve the decode task (amqpcap.job), `amqpcap decode --stats`, and the rebuild of
the analytics tables from the raw layer (`amqpcap analyze`): one implementation of every rule.
`message_flows`, the one table across connections, is `message_flows.flows` run per key.
"""

__all__ = ["Analytics", "ConnectionAnalyzer"]


def __getattr__(name: str):
    """The rule sets (and, through the tables they emit to, pyarrow) are loaded on first use:
    what needs only `naming` (the readable view of `amqpcap decode`) starts ~0.25 s sooner."""
    if name in ("Analytics", "ConnectionAnalyzer"):
        from amqpcap.rules import connection
        return getattr(connection, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
