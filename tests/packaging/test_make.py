"""`make setup` notices a moved checkout: a .venv made for another checkout is rebuilt, not used."""

from __future__ import annotations

import shutil
import subprocess
import textwrap

from tests.helpers.samples import ROOT

STUB = textwrap.dedent("""\
    #!/bin/sh
    # a stand-in interpreter: logs what make asks of it; `-m venv DIR` makes DIR/bin/python a copy of it
    echo "$0 $*" >> "$LOG"
    if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then mkdir -p "$3/bin" && cp "$0" "$3/bin/python"; fi
    """)


def make(folder, log):
    return subprocess.run(["make", "setup", f"PYTHON={folder}/stub-python"], cwd=folder, capture_output=True,
                          text=True, env={"LOG": str(log), "PATH": "/usr/bin:/bin"})


def test_a_venv_of_another_checkout_is_rebuilt(tmp_path):
    folder = tmp_path / "moved"
    folder.mkdir()
    for name in ("Makefile", "pyproject.toml", "setup.py"):
        shutil.copy(ROOT / name, folder / name)
    stub = folder / "stub-python"
    stub.write_text(STUB)
    stub.chmod(0o755)
    log = tmp_path / "log"
    venv = folder / ".venv"
    (venv / "bin").mkdir(parents=True)
    shutil.copy(stub, venv / "bin" / "python")
    (venv / ".checkout").write_text("/somewhere/else")  # copied from another checkout, set up there
    (venv / ".installed-123").touch()
    result = make(folder, log)
    assert result.returncode == 0, result.stderr
    assert "was made for another checkout: rebuilding it" in result.stdout
    assert "-m venv .venv" in log.read_text() and "pip install --quiet -e .[dev]" in log.read_text()
    assert (venv / ".checkout").read_text() == str(folder)
    log.unlink()
    again = make(folder, log)  # the same checkout: nothing to do
    assert again.returncode == 0 and not log.exists()
