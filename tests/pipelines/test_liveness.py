"""heartbeats and flow_control on hand-built frames."""

from __future__ import annotations

import datetime

from chispa import assert_df_equality

from pipelines.analytics.liveness import flow_control
from tests.pipelines.test_errors import frames

UTC = datetime.timezone.utc


def at(ms, **fields):
    return {"ts": datetime.datetime(2026, 11, 21, 0, 0, 0, ms * 1000, tzinfo=UTC), **fields}


def test_flow_control_intervals(spark):
    given = frames(spark, [
        at(0, method="channel.flow", direction="S>C", args_json='{"active": false}', channel=1),
        at(250, method="channel.flow", direction="S>C", args_json='{"active": true}', channel=1),
        at(300, method="connection.blocked", direction="S>C", args_json='{"reason": "low on memory"}', channel=0),
        at(900, method="connection.unblocked", direction="S>C", args_json="{}", channel=0),
        at(950, method="channel.flow", direction="C>S", args_json='{"active": false}', channel=2),
    ])
    got = flow_control(given).select("channel", "mechanism", "initiator", "reason", "duration_ms")
    expected = spark.createDataFrame([
        (1, "channel.flow", "server", None, 250.0), (0, "connection.blocked", "server", "low on memory", 600.0),
        (2, "channel.flow", "client", None, None),
    ], "channel int, mechanism string, initiator string, reason string, duration_ms double")
    assert_df_equality(got, expected, ignore_row_order=True, ignore_nullable=True, ignore_metadata=True)
