"""The project's wheel and a virtualenv with it installed, each made once per test session and
shared by the tests that need them (tests/packaging/test_wheel.py, tests/job/test_standalone_cluster.py):
the build takes a minute, the install (with PySpark, from pip's cache) some twenty seconds.

Made under the session's temporary base, which pytest-xdist's workers share (each has its own
folder beneath it), behind a file lock: the first test to ask builds, the others wait for it and
take what it made. Built as a user would: `pip wheel --no-deps` of the checkout, then a fresh
virtualenv outside it and `pip install <wheel>`, which brings the dependencies from PyPI (or pip's
cache)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

from tests.helpers.samples import ROOT

# seconds each step took in this session, where this process made it (the cluster test reports them)
TIMES: dict[str, float] = {}


def sh(*argv, cwd, env=None, timeout=900) -> subprocess.CompletedProcess:
    result = subprocess.run([str(a) for a in argv], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)
    assert result.returncode == 0, (argv, result.stdout[-2000:], result.stderr[-4000:])
    return result


def shared_dir(tmp_path_factory) -> Path:
    """A folder every worker of this session sees: the session's base under xdist, else this
    process's own base."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "amqpcap-wheel"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def built_wheel(tmp_path_factory) -> Path:
    """The wheel of the checkout, built once per session (`pip wheel --no-deps`)."""
    folder = shared_dir(tmp_path_factory)
    with _locked(folder):
        found = sorted((folder / "dist").glob("amqpcap-*.whl"))
        if not found:
            start = time.monotonic()
            sh(sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", folder / "building", ROOT, cwd=folder)
            (folder / "building").rename(folder / "dist")  # complete, or not there at all
            TIMES["wheel build"] = time.monotonic() - start
            found = sorted((folder / "dist").glob("amqpcap-*.whl"))
    (wheel,) = found
    return wheel


def installed_venv(tmp_path_factory) -> Path:
    """A virtualenv outside the checkout with the wheel (and its dependencies) installed, made once
    per session; its folder (python: `venv / "bin" / "python"`). The tests that share it only run
    it: what they write goes to folders of their own."""
    wheel = built_wheel(tmp_path_factory)
    folder = shared_dir(tmp_path_factory)
    venv = folder / "venv"
    with _locked(folder):
        if not (folder / "venv.done").exists():
            start = time.monotonic()
            if venv.exists():  # (an earlier attempt that died half-way)
                sh("rm", "-rf", venv, cwd=folder)
            sh(sys.executable, "-m", "venv", venv, cwd=folder)
            sh(venv / "bin" / "python", "-m", "pip", "install", "--quiet", wheel, cwd=folder)
            (folder / "venv.done").touch()
            TIMES["venv install"] = time.monotonic() - start
    return venv
