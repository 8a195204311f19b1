"""channels: lifetimes of a reused channel number, consumers and counts (hand-built frames)."""

from __future__ import annotations

import json

from pipelines.analytics.channels import channels
from tests.pipelines.test_errors import frames

S, C = "S>C", "C>S"


def test_lifetimes_consumers_and_counts(spark):
    given = frames(spark, [
        {"method": "basic.publish", "direction": C},                  # opened before the capture
        {"method": "channel.close", "direction": S, "reply_code": 404, "reply_text": "NOT_FOUND"},
        {"method": "channel.close-ok", "direction": C},
        {"method": "channel.open", "direction": C},                   # the number reused
        {"method": "basic.qos", "direction": C, "args_json": '{"prefetch_count": 5, "global": true}'},
        {"method": "basic.consume", "direction": C, "queue": "q", "consumer_tag": "", "no_ack": False},
        {"method": "basic.consume-ok", "direction": S, "consumer_tag": "ct"},
        {"method": "basic.deliver", "direction": S}, {"method": "basic.ack", "direction": C},
        {"method": "basic.cancel", "direction": S, "consumer_tag": "ct"},  # queue deleted under it
    ])
    first, second = sorted(channels(given).collect(), key=lambda r: r.channel_instance)
    assert (first.channel_instance, first.opened_at, first.close_code, first.close_initiator, first.publishes) == \
        (0, None, 404, "server", 1)
    assert (second.channel_instance, second.prefetch_count, second.prefetch_scope, second.deliveries,
            second.acks, second.closed_at) == (1, 5, "per-channel", 1, 1, None)
    (consumer,) = json.loads(second.consumers_json)
    assert (consumer["tag"], consumer["queue"], consumer["cancelled_by"]) == ("ct", "q", "server")
