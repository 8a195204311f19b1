"""The documented cluster route: build the wheel, install it into a fresh virtualenv outside the
checkout, and run the product from there: --version, decode, and the nightly job through
spark-submit with the installed interpreter, as the README tells a cluster user to."""

from __future__ import annotations

import os
import sys
import zipfile

import pytest

from amqpcap.tables.registry import TABLES
from tests.helpers.lakes import lake_rows
from tests.helpers.samples import ROOT
from tests.helpers.wheel import built_wheel, installed_venv, sh

pytestmark = pytest.mark.slow
SAMPLES = ROOT / "data" / "samples"


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv python, wheel, a folder of this module's own outside the checkout) with the project
    installed from its wheel into a virtualenv outside the checkout (both made once per session,
    tests.helpers.wheel: the standalone cluster's test ships the same ones)."""
    venv = installed_venv(tmp_path_factory)
    return venv / "bin" / "python", built_wheel(tmp_path_factory), tmp_path_factory.mktemp("wheel")


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
    amqpcap = python.parent / "amqpcap"
    where = sh(python, "-c", "import amqpcap.submit as s; print(s.__file__)", cwd=base).stdout.strip()
    assert str(ROOT) not in where and "site-packages" in where
    version = sh(amqpcap, "--version", cwd=base).stdout
    assert version.startswith("amqpcap ")
    decoded = sh(amqpcap, "decode", "--jsonl", SAMPLES / "heartbeats.pcap", cwd=base).stdout
    assert decoded.count("\n") > 20
    assert sh(amqpcap, "run", "--help", cwd=base).stdout.count("--input") >= 1


def test_the_nightly_job_through_spark_submit(installed):
    python, _, base = installed
    bindir = python.parent
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
