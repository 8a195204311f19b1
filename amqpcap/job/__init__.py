"""The Spark jobs: the nightly job (`nightly`: captures in, every table out) and the rebuild of the
analytics tables (`analyze`), their stages (`stages`), the session they run in (`session`,
`class_archive`, `spark_daemon`), the plan and typed work items that cross to the executors (`plan`,
`work`), live progress (`progress`), the delta-spark engine (`spark_sink`) and its jars (`jars`).
The only wing that imports pyspark."""
