"""A class-data-sharing archive of Spark's JVM classes: the embedded session starts in ~5 s instead
of ~9 (JDK AppCDS: the classes a run loads, parsed and verified once, then mapped at every start).

    python -m amqpcap.job.class_archive      # `make setup` does it; a wheel user may run it once

The archive is only valid for the JVM and the Spark jars it was made with, so its name carries a
key of both (the java binary's identity, the jar list) and a different JDK or Spark simply finds
none. It is written under a temporary name and renamed when the JVM that wrote it has exited: the
JVM crashes on a truncated archive, so a half-written one must never carry the final name.
Sessions launched by spark-submit (a cluster) are not touched.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

MIN_BYTES = 1 << 20  # a real archive is ~100 MB; anything tiny is not one


def _java() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "java" if home else None
    if found is None or not found.exists():
        which = shutil.which("java")
        found = Path(which) if which else None
    return found.resolve() if found is not None else None


def archive_path() -> Path | None:
    """Where this interpreter's archive for this JVM and these Spark jars lives (None: no java)."""
    java = _java()
    if java is None:
        return None
    try:
        import pyspark
        jars = sorted(os.listdir(Path(pyspark.__file__).parent / "jars"))
        stat = java.stat()
    except OSError:
        return None
    key = hashlib.sha256(f"{java}|{stat.st_size}|{stat.st_mtime_ns}|{'|'.join(jars)}".encode()).hexdigest()[:16]
    return Path(sys.prefix) / "share" / "amqpcap" / f"spark-classes-{key}.jsa"


def java_options() -> str:
    """The driver JVM's option that maps the archive, when there is a whole one ('' otherwise)."""
    path = archive_path()
    if path is None or not path.is_file() or path.stat().st_size < MIN_BYTES:
        return ""
    return f"-XX:SharedArchiveFile={path}"


def build() -> Path | None:
    """Run a small representative session (RDD tasks, a DataFrame through Parquet) in a child
    process whose JVM dumps the classes it loaded at exit; install the archive atomically."""
    path = archive_path()
    if path is None:
        print("amqpcap: no java found: no class archive made", file=sys.stderr)
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.partial")
    # the session (amqpcap.job.session, which maps the archive this makes) runs the training
    result = subprocess.run([sys.executable, "-m", "amqpcap.job.session", "--train-class-archive", str(partial)],
                            capture_output=True, text=True, timeout=600)
    if result.returncode != 0 or not partial.is_file() or partial.stat().st_size < MIN_BYTES:
        partial.unlink(missing_ok=True)
        print(f"amqpcap: the class archive could not be made (Spark starts without it): "
              f"{result.stderr.strip().splitlines()[-1:] or result.returncode}", file=sys.stderr)
        return None
    os.replace(partial, path)
    for stale in path.parent.glob("spark-classes-*.jsa"):  # archives of an earlier JDK or Spark
        if stale != path:
            stale.unlink(missing_ok=True)
    return path


if __name__ == "__main__":
    made = build()
    print(f"amqpcap: class archive {made}" if made else "amqpcap: no class archive", file=sys.stderr)
