"""The Delta jars: delta-spark for this Spark's major.minor and Scala 2.13, at the version of the
delta-spark Python package installed (one pin: pyproject.toml), with the rest of its closure that
Spark does not ship itself. Fetched once, from Maven Central through Spark's own resolver, into the
environment (`python -m amqpcap.job.jars`, which `make setup` runs); never at run time: a session
this process starts adds them from there (`spark.jars`). Jars Spark already has (Hadoop's client,
Parquet, Jackson, log4j...) are left out, whatever version the closure names: Spark's must win.

    python -m amqpcap.job.jars          # fetch (once) and list them
    python -m amqpcap.job.jars --list   # list what is there, fetch nothing
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

JARS_DIR = Path(sys.prefix) / "share" / "amqpcap" / "jars"
MARKER = "COORDINATE"  # the coordinate the jars in JARS_DIR were fetched for


def delta_coordinate() -> str:
    import importlib.metadata

    import pyspark
    spark = ".".join(pyspark.__version__.split(".")[:2])
    return f"io.delta:delta-spark_{spark}_2.13:{importlib.metadata.version('delta-spark')}"


def installed() -> list[str]:
    """The jars fetched for the installed delta-spark (none if they were not, or for another one)."""
    marker = JARS_DIR / MARKER
    try:
        if marker.read_text().strip() != delta_coordinate():
            return []
    except OSError:
        return []
    return sorted(str(p) for p in JARS_DIR.glob("*.jar"))


def artifact(jar_name: str, grouped: bool = False) -> str:
    """'zstd-jni' of 'zstd-jni-1.5.7-3.jar', or with `grouped` of Ivy's 'com.github.luben_zstd-jni-1.5.7-3.jar'
    (its names are group_artifact-version: a group has no underscore)."""
    name = jar_name.split("_", 1)[1] if grouped else jar_name
    return re.sub(r"-\d[\w.\-]*\.jar$", "", name)


def fetch(quiet: bool = True) -> list[str]:
    """Resolve the closure with spark-submit --packages (a private Ivy home), keep what Spark lacks."""
    import pyspark
    spark_home = Path(pyspark.__file__).parent
    provided = {artifact(p.name) for p in (spark_home / "jars").glob("*.jar")}
    coordinate = delta_coordinate()
    with tempfile.TemporaryDirectory() as work:
        noop = Path(work) / "noop.py"
        noop.write_text("pass\n")
        env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
        result = subprocess.run([str(spark_home / "bin" / "spark-submit"), "--master", "local[1]",
                                 "--conf", f"spark.jars.ivy={work}/ivy", "--conf", f"spark.pyspark.python={sys.executable}",
                                 "--packages", coordinate, str(noop)], capture_output=True, text=True, env=env,
                                timeout=1800)
        if result.returncode != 0:
            raise RuntimeError(f"could not fetch {coordinate}: {result.stderr.strip().splitlines()[-1:]}")
        fetched = sorted(Path(work, "ivy", "jars").glob("*.jar"))
        if JARS_DIR.exists():
            shutil.rmtree(JARS_DIR)
        JARS_DIR.mkdir(parents=True)
        kept = [jar for jar in fetched if artifact(jar.name, grouped=True) not in provided]
        for jar in kept:
            shutil.copy2(jar, JARS_DIR / jar.name)
        (JARS_DIR / MARKER).write_text(coordinate + "\n")
    if not quiet:
        print(f"amqpcap: {coordinate}: {len(kept)} jars kept of {len(fetched)} fetched (the others are Spark's own), "
              f"in {JARS_DIR}", file=sys.stderr)
    return installed()


def main(argv: list[str]) -> int:
    jars = installed()
    if not jars and "--list" not in argv:
        try:
            jars = fetch(quiet=False)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as error:
            # set-up goes on: delta-rs needs none of this; delta-spark will say what is missing
            print(f"amqpcap: the Delta jars were not fetched ({error}); lake.engine = \"delta-spark\" and "
                  "spark.read.format(\"delta\") will not work until `python -m amqpcap.job.jars` succeeds",
                  file=sys.stderr)
            return 0
    print("\n".join(jars))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
