"""The findings rules: what an operator should look at, diagnosed from the rows the other rules
emit, one file per rule set: `consumers` (consumer-ack-timeout, redelivery-loop,
unbounded-prefetch, slow-consumer), `publishers` (unroutable, publish-nacked, large-message),
`flow` (publisher-blocked, flow-stopped), `liveness` (heartbeat-timeout, missed-heartbeats),
`closes` (channel-error, connection-error), `churn` (channel-churn; connection-churn, the one
finding across connections), `rpc` (slow-rpc), `deprecations` (deprecated-feature),
`visibility` (capture-loss, tls-not-decoded); `connection` routes one connection's frames and rows
to them, `finding` is what they build (docs/findings.md).

A finding's numbers are those of the rows it was made from (a test recomputes them from the
tables); its thresholds are the settings' [findings] section (amqpcap.settings.FindingsSection).
"""

KINDS = ("consumer-ack-timeout", "redelivery-loop", "unroutable", "publish-nacked", "heartbeat-timeout",
         "missed-heartbeats", "publisher-blocked", "flow-stopped", "connection-churn", "channel-churn",
         "unbounded-prefetch", "slow-consumer", "slow-rpc", "channel-error", "connection-error", "large-message",
         "deprecated-feature", "capture-loss", "tls-not-decoded")
