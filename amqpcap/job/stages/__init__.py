"""The nightly job's stages, each a module-level task Spark runs on executors (everything a task
needs comes in its arguments or its input rows, nothing from driver state):

1. `read`: a read unit (a whole capture file, or a byte range of a big one) -> its TCP segments,
   handed over per connection bucket as Arrow IPC files in the staging area, and what reading found.
2. `decode`: one connection bucket -> every per-connection table, raw and analytics, in one pass
   (amqpcap.onepass.tabulate), written as Parquet by the task itself.
3. `flows`: the run's publishes and deliveries -> message_flows (the one table across connections).
"""
