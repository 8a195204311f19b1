"""Analytics tables: pure DataFrame -> DataFrame transforms over the raw `frames` and `messages`.

No session creation, config or I/O here: the job reads the raw tables, applies these, and writes
the results (`pipelines.jobs.nightly`, `amqpcap analyze`).
"""
