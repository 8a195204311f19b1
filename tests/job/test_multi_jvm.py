"""The nightly job with executors in JVMs of their own (`local-cluster[2,1,1024]`: a master and two
executor processes on this machine, as a cluster runs them): every table the same as the embedded
local run's, so nothing a task needs lives only in the driver's process."""

from __future__ import annotations

import subprocess
import sys

import pytest

from amqpcap.tables.registry import TABLES
from tests.helpers.lakes import lake_rows
from tests.helpers.samples import ROOT, SAMPLES

pytestmark = pytest.mark.slow


def test_executors_in_their_own_jvms_give_the_tables_of_the_embedded_run(lake, tmp_path):
    embedded, _ = lake
    separate = str(tmp_path / "lake")
    result = subprocess.run([sys.executable, "-m", "amqpcap", "run", "--master", "local-cluster[2,1,1024]",
                             "--input", str(SAMPLES), "--tls-keylog", str(SAMPLES / "tls"), "--lake", separate], capture_output=True, text=True, cwd=ROOT,
                            timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    for table in TABLES:
        if table != "runs":
            assert lake_rows(separate, table) == lake_rows(embedded, table), table
    assert len(lake_rows(separate, "frames")) > 1000
