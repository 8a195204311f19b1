"""The README's layout and docs/architecture.md's wings and walls are written from the tree
(tools/layout.py): a module, a wing or a wall changed without them fails here."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers.samples import ROOT


def test_the_layout_docs_follow_the_tree():
    result = subprocess.run([sys.executable, "-m", "tools.layout", "--check"], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_every_wing_is_in_the_layout():
    from tools.layout import ORDER
    folders = {p.parent.name for p in (ROOT / "amqpcap").glob("*/__init__.py")}
    assert folders == set(ORDER)
