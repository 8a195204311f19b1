"""The file spark-submit runs on a cluster: the nightly job, with the same arguments as
`amqpcap run` (the job itself, amqpcap.job.nightly, knows no command line):

    spark-submit --master yarn --conf spark.pyspark.python=/opt/amqpcap/bin/python \\
        "$(/opt/amqpcap/bin/python -c 'import amqpcap.submit as s; print(s.__file__)')" \\
        --input s3://captures/2026-11-21/ --lake s3://analytics/lake --config cluster.toml
"""

from __future__ import annotations

import sys

if __name__ == "__main__":
    from amqpcap.cli import main
    sys.exit(main(["run", *sys.argv[1:]]))
