"""The documented cluster route: build the wheel, install it into a fresh virtualenv outside the
checkout, and run the product from there: --version, decode, and the nightly job through
spark-submit with the installed interpreter, as the README tells a cluster user to."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile

import pytest

from amqpcap.tables.registry import TABLES
from tests.helpers.lakes import lake_rows
from tests.helpers.samples import ROOT

pytestmark = pytest.mark.slow
SAMPLES = ROOT / "data" / "samples"


def sh(*argv, cwd, env=None, timeout=900):
    result = subprocess.run([str(a) for a in argv], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)
    assert result.returncode == 0, (argv, result.stdout[-2000:], result.stderr[-4000:])
    return result


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv python, wheel) with the project installed from its wheel, outside the checkout."""
    base = tmp_path_factory.mktemp("wheel")
    sh(sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", base / "dist", ROOT, cwd=base)
    (wheel,) = (base / "dist").glob("amqpcap-*.whl")
    sh(sys.executable, "-m", "venv", base / "venv", cwd=base)
    python = base / "venv" / "bin" / "python"
    sh(python, "-m", "pip", "install", "--quiet", wheel, cwd=base)
    return python, wheel, base


def test_the_wheel_holds_every_package_and_the_specs(installed):
    _, wheel, _ = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    packages = {str(p.parent.relative_to(ROOT)) for p in ROOT.glob("**/__init__.py")
                if p.parts[len(ROOT.parts)] == "amqpcap"}
    for package in packages:
        assert f"{package}/__init__.py" in names, package
    assert {"amqpcap/protocol/specs/amqp0-9-1.xml", "amqpcap/protocol/specs/amqp0-9.xml",
            "amqpcap/job/log4j2.properties", "amqpcap/py.typed"} <= names


def test_installed_commands_run_outside_the_checkout(installed):
    python, _, base = installed
    amqpcap = base / "venv" / "bin" / "amqpcap"
    where = sh(python, "-c", "import amqpcap.submit as s; print(s.__file__)", cwd=base).stdout.strip()
    assert str(ROOT) not in where and "site-packages" in where
    version = sh(amqpcap, "--version", cwd=base).stdout
    assert version.startswith("amqpcap ")
    decoded = sh(amqpcap, "decode", "--jsonl", SAMPLES / "heartbeats.pcap", cwd=base).stdout
    assert decoded.count("\n") > 20
    assert sh(amqpcap, "run", "--help", cwd=base).stdout.count("--input") >= 1


def test_the_nightly_job_through_spark_submit(installed):
    python, _, base = installed
    bindir = base / "venv" / "bin"
    env = {**os.environ, "PYSPARK_PYTHON": str(python), "PYSPARK_DRIVER_PYTHON": str(python)}
    job = sh(python, "-c", "import amqpcap.submit as s; print(s.__file__)", cwd=base).stdout.strip()
    lake = base / "lake"
    result = sh(bindir / "spark-submit", "--master", "local[2]", "--conf", f"spark.pyspark.python={python}", job,
                "--input", SAMPLES / "heartbeats.pcap", SAMPLES / "confirms.pcap", "--lake", lake,
                cwd=base, env=env)
    assert "2 ok, 0 partial, 0 failed" in result.stdout
    assert (lake / "frames" / "_delta_log").is_dir() and (lake / "runs" / "_delta_log").is_dir()
    # the wheel's tables are the checkout's (its compiled build, the same inputs), row for row
    here = base / "lake-here"
    sh(sys.executable, "-m", "amqpcap", "run", "--input", SAMPLES / "heartbeats.pcap", SAMPLES / "confirms.pcap",
       "--lake", here, cwd=ROOT)
    for table in TABLES:
        if table != "runs":
            assert lake_rows(lake, table) == lake_rows(here, table), table
