"""Cython is a build tool, not a run-time dependency (pyproject.toml lists it only for development):
a machine that installed amqpcap without a C compiler runs the interpreted modules, and nothing
there may import `cython`."""

from __future__ import annotations

import os
import subprocess
import sys

from amqpcap import HOT_MODULES, build
from amqpcap.columnar import arrow_layout
from tests.helpers.samples import ROOT

WITHOUT_CYTHON = """
import importlib, sys
sys.modules["cython"] = None  # an import of it fails, as where Cython is not installed
import amqpcap
assert amqpcap.build() == "interpreted", amqpcap.build()
for name in amqpcap.HOT_MODULES:
    importlib.import_module("amqpcap." + name)
import amqpcap.decodeview, amqpcap.lake.tablefiles, amqpcap.cli
from amqpcap.columnar import arrow_layout
assert arrow_layout.COMPILED is False
print("ok", len(amqpcap.HOT_MODULES))
"""


def test_the_interpreted_modules_import_without_cython():
    result = subprocess.run([sys.executable, "-c", WITHOUT_CYTHON], cwd=ROOT, capture_output=True, text=True,
                            env={**os.environ, "AMQPCAP_INTERPRETED": "1"}, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["ok", str(len(HOT_MODULES))]


def test_the_layout_knows_which_build_it_is():
    # the table writer asks it whether to lay columns out itself (compiled) or leave them to pyarrow
    assert arrow_layout.COMPILED == (build() == "compiled")
