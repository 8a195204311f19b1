"""No source file of the package is ignored by git: an ignored one exists in the checkout where it
was written and nowhere else (a `lake/` pattern once left out amqpcap/lake/__init__.py, and a
clean clone's amqpcap.lake had no notebook helpers)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.helpers.samples import ROOT


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout")
def test_no_source_of_the_package_or_its_tests_is_ignored():
    sources = [str(p.relative_to(ROOT)) for folder in ("amqpcap", "tests", "tools", "spec")
               for p in (ROOT / folder).rglob("*") if p.suffix in (".py", ".pxd", ".xml", ".toml", ".properties")
               and "__pycache__" not in p.parts]
    result = subprocess.run(["git", "check-ignore", "--no-index", "--stdin"], input="\n".join(sources), cwd=ROOT,
                            capture_output=True, text=True)
    assert result.stdout.split() == []
