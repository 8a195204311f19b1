"""A Spark standalone cluster on loopback for the tests: a master and its workers, each a JVM of its
own started with `<spark_home>/bin/spark-class` (the pip package has no sbin/start-*.sh), on free
ports, in process groups of their own that are killed whatever happens (the workers' executors and
their Python workers are in the workers' groups)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

LOOPBACK = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def spark_home() -> Path:
    """The Spark of this interpreter's pyspark package (it holds bin/spark-class and jars/)."""
    import pyspark
    return Path(pyspark.__file__).parent


@dataclass
class Cluster:
    master: str  # spark://127.0.0.1:P
    ui: str  # http://127.0.0.1:W
    base: Path
    worker_dirs: list[Path] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)

    def state(self) -> dict:
        with urllib.request.urlopen(f"{self.ui}/json", timeout=5) as answer:
            return json.load(answer)

    def alive_workers(self) -> int:
        return sum(1 for worker in self.state().get("workers", []) if worker.get("state") == "ALIVE")

    def log_text(self, tail: int = 4000) -> str:
        return "\n".join(f"--- {log.name}:\n{log.read_text(errors='replace')[-tail:]}" for log in self.logs
                         if log.exists())


def clean_environment(extra: dict[str, str]) -> dict[str, str]:
    """os.environ without anything that would point a JVM or a Python at other code or settings
    (PYTHONPATH, Spark's and PySpark's variables, AWS settings), plus `extra`."""
    dropped = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "SPARK_", "PYSPARK_", "AWS_")
    return {**{k: v for k, v in os.environ.items() if not k.startswith(dropped)}, **extra}


def _kill(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)  # the group: a worker's executors and Python workers too
    except ProcessLookupError:
        pass
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass


@contextlib.contextmanager
def standalone_cluster(base: Path, workers: int = 2, cores: int = 1, memory: str = "1g",
                       home: Path | None = None, worker_env: dict[str, str] | None = None,
                       daemon_java_opts: str = "", timeout: float = 120) -> Iterator[Cluster]:
    """A master and `workers` workers on 127.0.0.1, each worker with `cores` cores, `memory` and a
    work dir of its own under `base` (where the logs go too); running once the master's UI reports
    every worker ALIVE. `worker_env`: what the workers (so their executors and Python workers)
    have in their environment beside the machine's, as an operator's nodes would (an instance
    role's credentials, say); the master gets none of it. `daemon_java_opts`: SPARK_DAEMON_JAVA_OPTS
    of the master and the workers. Every process group is killed on the way out."""
    home = Path(home or spark_home())
    base = Path(base)
    base.mkdir(parents=True, exist_ok=True)
    port, ui_port = free_port(), free_port()
    cluster = Cluster(f"spark://{LOOPBACK}:{port}", f"http://{LOOPBACK}:{ui_port}", base)
    common = {"SPARK_HOME": str(home), "SPARK_LOCAL_IP": LOOPBACK, "SPARK_LOG_DIR": str(base / "logs"),
              **({"SPARK_DAEMON_JAVA_OPTS": daemon_java_opts} if daemon_java_opts else {})}
    processes: list[subprocess.Popen] = []

    def start(name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen:
        log = base / f"{name}.log"
        cluster.logs.append(log)
        with open(log, "wb") as out:
            process = subprocess.Popen([str(home / "bin" / "spark-class"), *argv], stdout=out,
                                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=base, env=env,
                                       start_new_session=True)
        processes.append(process)
        return process

    def wait(what: str, ready) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if ready():
                    return
            except (OSError, ValueError):  # (not listening yet, or an answer cut short)
                pass
            for process in processes:
                if process.poll() is not None:
                    raise RuntimeError(f"a cluster process exited ({process.returncode}) before {what}:\n"
                                       f"{cluster.log_text()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {what} after {timeout:.0f} s:\n{cluster.log_text()}")
            time.sleep(0.2)

    try:
        start("master", ["org.apache.spark.deploy.master.Master", "--host", LOOPBACK, "--port", str(port),
                         "--webui-port", str(ui_port)], clean_environment(common))
        # the workers once the master answers: a worker that finds no master retries only 5-15 s later
        wait("master", lambda: cluster.state() is not None)
        for n in range(workers):
            folder = base / f"worker-{n}"
            (folder / "work").mkdir(parents=True, exist_ok=True)
            (folder / "local").mkdir(parents=True, exist_ok=True)
            cluster.worker_dirs.append(folder / "work")
            env = clean_environment({**common, "SPARK_WORKER_DIR": str(folder / "work"),
                                      "SPARK_LOCAL_DIRS": str(folder / "local"), **(worker_env or {})})
            start(f"worker-{n}", ["org.apache.spark.deploy.worker.Worker", "--host", LOOPBACK, "--cores", str(cores),
                                  "--memory", memory, "--webui-port", str(free_port()),
                                  "--work-dir", str(folder / "work"), cluster.master], env)
        wait(f"{workers} workers ALIVE", lambda: cluster.alive_workers() == workers)
        yield cluster
    finally:
        for process in reversed(processes):
            _kill(process)


@dataclass
class PythonProcess:
    """A Python worker of an executor, as /proc showed it."""
    pid: int
    argv: list[str]
    cwd: Path  # its executor's work dir: <worker dir>/<app id>/<executor id>
    mapped: set[Path]  # the files of amqpcap it had mapped: its compiled modules (.so)


@contextlib.contextmanager
def watching_python_workers(cluster: Cluster, every: float = 0.2) -> Iterator[dict[int, PythonProcess]]:
    """The Python processes (PySpark's daemon and the workers it forks) running in the cluster's
    executors' work dirs while the block runs, seen in /proc (Linux): each one's command line, its
    working directory and the amqpcap files mapped into it (the compiled modules of the amqpcap it
    imported), polled every `every` s. A Python worker lives as long as its executor, which is
    the whole application: the job's own workers, with nothing added to the job to see them."""
    seen: dict[int, PythonProcess] = {}
    done = threading.Event()
    roots = [work.resolve() for work in cluster.worker_dirs]

    def look() -> None:
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                argv = [a.decode(errors="replace") for a in Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
                        if a]
                if "pyspark.daemon" not in argv:
                    continue
                cwd = Path(os.readlink(f"/proc/{entry}/cwd"))
                if not any(cwd.is_relative_to(root) for root in roots):
                    continue
                mapped = {Path(line.split(None, 5)[5]) for line in Path(f"/proc/{entry}/maps").read_text().splitlines()
                          if len(line.split(None, 5)) == 6 and "/amqpcap/" in line}
            except (OSError, IndexError):
                continue  # (gone meanwhile)
            process = seen.setdefault(int(entry), PythonProcess(int(entry), argv, cwd, set()))
            process.mapped |= mapped

    def watch() -> None:
        while not done.wait(every):
            look()

    thread = threading.Thread(target=watch, name="python-worker-watch", daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        done.set()
        thread.join(timeout=30)
