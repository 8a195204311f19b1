"""Cython is a build tool, not a run-time dependency (pyproject.toml lists it only for development):
a machine that installed amqpcap without a C compiler runs the interpreted modules, and nothing
there may import `cython`."""

from __future__ import annotations

import os
import subprocess
import sys

from amqp_decode import HOT_MODULES, arrow_layout, build
from tests.conftest import ROOT

WITHOUT_CYTHON = """
import importlib, sys
sys.modules["cython"] = None  # an import of it fails, as where Cython is not installed
import amqp_decode
assert amqp_decode.build() == "interpreted", amqp_decode.build()
for name in amqp_decode.HOT_MODULES:
    importlib.import_module("amqp_decode." + name)
import amqpcap.decodeview, pipelines.tablefiles, amqpcap.cli
from amqp_decode import arrow_layout
assert arrow_layout.COMPILED is False
print("ok", len(amqp_decode.HOT_MODULES))
"""


def test_the_interpreted_modules_import_without_cython():
    result = subprocess.run([sys.executable, "-c", WITHOUT_CYTHON], cwd=ROOT, capture_output=True, text=True,
                            env={**os.environ, "AMQPCAP_INTERPRETED": "1"}, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["ok", str(len(HOT_MODULES))]


def test_the_layout_knows_which_build_it_is():
    # the table writer asks it whether to lay columns out itself (compiled) or leave them to pyarrow
    assert arrow_layout.COMPILED == (build() == "compiled")
