"""What our tasks set up in their worker process (amqpcap.process): Arrow built from lists without
importing pandas, pandas still working for anyone who wants it, Arrow's buffers from the system
allocator and a glibc heap that keeps big blocks for reuse. Each case runs in a fresh interpreter: pytest's own has
pandas imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.helpers.samples import SAMPLES

READ_A_SAMPLE = """
import json, os, sys
from amqpcap.capture.inputs import canonical_uri
from amqpcap.job.stages.read import read_task, read_unit
from amqpcap.job.work import ReadUnit
path, staging, probed = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
unit = ReadUnit(0, 0, canonical_uri(path), 0, None, os.path.getsize(path))
if probed:  # the task, as Spark calls it
    [read] = read_task(iter([unit]), staging, 3)
    staged = read.staged
else:  # the same work without the task's probe
    staged, facts = read_unit(unit, staging, 3)
after_read = "pandas" in sys.modules
import pandas as pd
import pyarrow as pa
pool = pa.default_memory_pool().backend_name
series = pd.Series([1, None], dtype="Int64")
print(json.dumps({"segments": sum(staged.values()), "pandas_after_read": after_read, "pool": pool,
                  "to_pandas": pa.table({"a": [1, 2]}).to_pandas()["a"].tolist(),
                  "from_pandas": pa.Array.from_pandas(series).to_pylist(),
                  "from_pandas_type": str(pa.Array.from_pandas(series).type)}))
"""


def read_in_a_fresh_interpreter(tmp_path, probed: bool) -> dict:
    staging = tmp_path / ("probed" if probed else "plain")
    staging.mkdir()
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(READ_A_SAMPLE), str(SAMPLES / "concurrent.pcap"),
                           str(staging), "1" if probed else "0"],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()}, check=True)
    return json.loads(done.stdout)


def test_the_read_task_stages_its_segments_without_importing_pandas(tmp_path):
    probed = read_in_a_fresh_interpreter(tmp_path, probed=True)
    plain = read_in_a_fresh_interpreter(tmp_path, probed=False)
    # the premise: without the probe, pyarrow imports pandas on the first list it converts
    # (if this fails, pyarrow no longer does, and answer_without_pandas can go)
    assert plain["pandas_after_read"] is True
    assert probed["pandas_after_read"] is False
    assert probed["segments"] == plain["segments"] > 0
    assert probed["pool"] == "system" and plain["pool"] != "system"
    # and pandas, imported afterwards, still converts both ways
    for result in (probed, plain):
        assert result["to_pandas"] == [1, 2]
        assert result["from_pandas"] == [1, None] and result["from_pandas_type"] == "int64"


DECODE_A_SAMPLE = """
import json, os, sys
from amqpcap.settings import Settings
from amqpcap.capture.inputs import canonical_uri
from amqpcap.job.stages.decode import decode_bucket
from amqpcap.job.stages.flows import flows_task
from amqpcap.job.stages.numbering import number_units
from amqpcap.job.stages.read import read_unit
from amqpcap.process import prepare_worker
path, staging, lake = sys.argv[1], sys.argv[2], sys.argv[3]
prepare_worker()
from amqpcap.job.work import BucketFile, BucketWork, ReadResult, ReadUnit
unit = ReadUnit(0, 0, canonical_uri(path), 0, None, os.path.getsize(path))
staged = {0: ReadResult(0, *read_unit(unit, staging, 2))}
bases = number_units([unit], staged, staging)
files = [decode_bucket(BucketWork(bucket, [BucketFile(0, [0])]), staging, [unit.uri], Settings(), "r", lake,
                       bases=bases, flow_parts=2) for bucket in staged[0].staged]
flows = list(flows_task(iter([0, 1]), staging, lake, "r", 1000))
print(json.dumps({"tables": sorted({f.table for each in files + [flows] for f in each}),
                  "pandas": "pandas" in sys.modules}))
"""


def test_the_decode_and_flows_tasks_make_their_tables_without_importing_pandas(tmp_path):
    """Every conversion to Arrow in a decode and a flows task names its type: one that infers a
    Python value's type (a list or scalar given no type) imports pandas whatever the probe said."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(DECODE_A_SAMPLE), str(SAMPLES / "concurrent.pcap"),
                           str(tmp_path / "staging"), str(tmp_path / "lake")],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()}, check=True)
    result = json.loads(done.stdout.splitlines()[-1])
    assert {"frames", "messages", "publishes", "deliveries", "message_flows"} <= set(result["tables"])
    assert result["pandas"] is False


_FAULTS = """
import resource
if {steady}:
    from amqpcap.process import steady_heap
    assert steady_heap()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(50):  # a task's big blocks come and go: 4 MB, written, freed
    block = b"x" * (4 << 20)
    del block
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def test_big_blocks_that_come_and_go_reuse_the_heap_rather_than_fault_in_pages():
    """With the steady heap, the second and later 4 MB blocks reuse the first's memory: a few page
    faults in all, not 1,024 for every block (each a fresh mapping, with glibc's thresholds fixed low)."""
    import platform
    import subprocess
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("glibc's allocator")

    def faults(steady: bool) -> int:
        code = _FAULTS.format(steady=steady)
        low = "import ctypes; ctypes.CDLL(None).mallopt(-1, 1 << 20)\n"  # the trim threshold this replaced
        return int(subprocess.run([sys.executable, "-c", code if steady else low + code], check=True,
                                  capture_output=True, text=True,
                                  env={**os.environ, "PYTHONPATH": os.getcwd()}).stdout)
    assert faults(steady=True) < 2_500 < 40 * 1024 < faults(steady=False)
