"""Spark's Python daemon (the process Spark forks its Python workers from), importing PySpark
from the installed package rather than from the copy zipped inside it.

Spark puts `<SPARK_HOME>/python/lib/pyspark.zip` (and py4j's zip) first on its workers' path. When
Spark is the pip-installed `pyspark` (the embedded local mode), that zip holds the very files of
the installed package, but a zip holds no compiled bytecode: the daemon and every new worker then
compiled PySpark's modules from source, ~1 s each, before the first task of a run could start
(measured: `import pyspark.worker` 1.1-1.3 s from the zip, 0.3 s installed). Only zips inside an
installed pyspark package are dropped; a cluster's own SPARK_HOME keeps its zips.

Chosen by amqpcap.job.session (`spark.python.daemon.module`) when this process launched the JVM.
"""

from __future__ import annotations

import os
import sys


def installed_package_zips(path: list[str]) -> list[str]:
    """The entries of `path` that are zips inside an installed pyspark package
    (`<site>/pyspark/python/lib/*.zip`, next to the package's own `__init__.py`)."""
    zips = []
    for entry in path:
        if not entry.endswith(".zip"):
            continue
        package = os.path.dirname(os.path.dirname(os.path.dirname(entry)))
        if os.path.basename(package) == "pyspark" and os.path.isfile(os.path.join(package, "__init__.py")):
            zips.append(entry)
    return zips


def main() -> None:
    dropped = set(installed_package_zips(sys.path))
    sys.path[:] = [entry for entry in sys.path if entry not in dropped]
    from pyspark import daemon
    daemon.manager()


if __name__ == "__main__":
    main()
