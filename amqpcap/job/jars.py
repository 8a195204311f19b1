"""The jars Spark lacks for a lake as users keep it, fetched once, from Maven Central through
Spark's own resolver, into the environment (`python -m amqpcap.job.jars`, which `make setup` runs);
never at run time: a session this process starts adds them from there (`spark.jars`).

- Delta: delta-spark for this Spark's major.minor and Scala 2.13, at the version of the delta-spark
  Python package installed (one pin: pyproject.toml), with the rest of its closure.
- S3 through Hadoop (`s3a://`): hadoop-aws at the version of Spark's own Hadoop client, and of the
  AWS SDK v2 only the modules S3A uses (s3, s3-transfer-manager, sts, at the SDK version hadoop-aws
  declares) rather than the SDK's all-services `bundle` it names: 19 MB instead of about 600.

Jars Spark already has (Hadoop's client, Parquet, Jackson, log4j...) are left out, whatever version
the closure names: Spark's must win.

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


def spark_home() -> Path:
    import pyspark
    return Path(pyspark.__file__).parent


def hadoop_aws_coordinate() -> str:
    """hadoop-aws must be the version of the Hadoop client Spark ships (its classes call into it)."""
    (client,) = (spark_home() / "jars").glob("hadoop-client-api-*.jar")
    return f"org.apache.hadoop:hadoop-aws:{client.name.removeprefix('hadoop-client-api-').removesuffix('.jar')}"


SDK_MODULES = ("s3", "s3-transfer-manager", "sts")  # what S3A loads of the SDK's bundle


def wanted() -> list[str]:
    return [delta_coordinate(), hadoop_aws_coordinate()]


def installed() -> list[str]:
    """The jars fetched for this environment (none if they were not, or for another Spark or delta-spark)."""
    try:
        fetched = (JARS_DIR / MARKER).read_text().split()
    except OSError:
        return []
    if not set(wanted()) <= set(fetched):
        return []
    return sorted(str(p) for p in JARS_DIR.glob("*.jar"))


def artifact(jar_name: str, grouped: bool = False) -> str:
    """'zstd-jni' of 'zstd-jni-1.5.7-3.jar', or with `grouped` of Ivy's 'com.github.luben_zstd-jni-1.5.7-3.jar'
    (its names are group_artifact-version: a group has no underscore)."""
    name = jar_name.split("_", 1)[1] if grouped else jar_name
    return re.sub(r"-\d[\w.\-]*\.jar$", "", name)


def _resolve(coordinates: list[str], work: str) -> None:
    """spark-submit --packages into a private Ivy home (`work`/ivy), the SDK's bundle excluded."""
    noop = Path(work) / "noop.py"
    noop.write_text("pass\n")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    result = subprocess.run([str(spark_home() / "bin" / "spark-submit"), "--master", "local[1]",
                             "--conf", f"spark.jars.ivy={work}/ivy", "--conf", f"spark.pyspark.python={sys.executable}",
                             "--packages", ",".join(coordinates), "--exclude-packages", "software.amazon.awssdk:bundle",
                             str(noop)], capture_output=True, text=True, env=env, timeout=1800)
    if result.returncode != 0:
        raise RuntimeError(f"could not fetch {', '.join(coordinates)}: {result.stderr.strip().splitlines()[-1:]}")


def sdk_version(work: str, hadoop_aws: str) -> str:
    """The AWS SDK version hadoop-aws was built with (its Ivy descriptor names the bundle's)."""
    version = hadoop_aws.rsplit(":", 1)[1]
    descriptor = Path(work, "ivy", "cache", "org.apache.hadoop", "hadoop-aws", f"ivy-{version}.xml").read_text()
    return re.search(r'org="software\.amazon\.awssdk" name="bundle" rev="([^"]+)"', descriptor).group(1)


def fetch(quiet: bool = True) -> list[str]:
    """Resolve the closures (a private Ivy home), keep what Spark lacks."""
    provided = {artifact(p.name) for p in (spark_home() / "jars").glob("*.jar")}
    coordinates = wanted()
    with tempfile.TemporaryDirectory() as work:
        _resolve(coordinates, work)
        sdk = [f"software.amazon.awssdk:{module}:{sdk_version(work, coordinates[1])}" for module in SDK_MODULES]
        _resolve(coordinates + sdk, work)
        fetched = sorted(Path(work, "ivy", "jars").glob("*.jar"))
        if JARS_DIR.exists():
            shutil.rmtree(JARS_DIR)
        JARS_DIR.mkdir(parents=True)
        kept = [jar for jar in fetched if artifact(jar.name, grouped=True) not in provided]
        for jar in kept:
            shutil.copy2(jar, JARS_DIR / jar.name)
        (JARS_DIR / MARKER).write_text("\n".join(coordinates + sdk) + "\n")
    if not quiet:
        print(f"amqpcap: {', '.join(coordinates)}: {len(kept)} jars kept of {len(fetched)} fetched (the others are "
              f"Spark's own), in {JARS_DIR}", file=sys.stderr)
    return installed()


def main(argv: list[str]) -> int:
    jars = installed()
    if not jars and "--list" not in argv:
        try:
            jars = fetch(quiet=False)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as error:
            # set-up goes on: delta-rs needs none of this; delta-spark will say what is missing
            print(f"amqpcap: the Delta and S3A jars were not fetched ({error}); lake.engine = \"delta-spark\", "
                  "spark.read.format(\"delta\") and s3a:// will not work until `python -m amqpcap.job.jars` succeeds",
                  file=sys.stderr)
            return 0
    print("\n".join(jars))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
