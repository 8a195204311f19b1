"""The fuzz suite runs against the build in use (issue 12: the reliability fuzzing runs against the
compiled build). A compiled module older than its .py source is the code of some earlier checkout:
fuzzing it would test what no longer exists, so that fails here (rebuild: pip install -e .)."""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest

import amqpcap

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(bool(os.environ.get("AMQPCAP_INTERPRETED")), reason="AMQPCAP_INTERPRETED=1: the .py files run")
def test_no_compiled_module_is_older_than_its_source():
    if amqpcap.build() == "interpreted":
        pytest.skip("no compiled build installed (no C compiler at install time): the interpreted decoder is fuzzed")
    stale = []
    for name in amqpcap.HOT_MODULES:
        compiled = Path(importlib.import_module(f"amqpcap.{name}").__file__)
        source = Path(amqpcap.__file__).parent.joinpath(*name.split(".")).with_suffix(".py")
        built_here = compiled.is_relative_to(ROOT)  # an editable install (make setup), not a wheel's copy
        if built_here and compiled.suffix in (".so", ".pyd") and compiled.stat().st_mtime < source.stat().st_mtime:
            stale.append(f"amqpcap.{name}")
    assert not stale, f"compiled modules older than their source (rebuild with pip install -e .): {stale}"
