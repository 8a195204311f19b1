"""setup.py's fallback to the interpreted modules is real: when a build does not remake a hot module's
extension (Cython cannot translate, the C compiler fails, compiling is switched off), the extension an
earlier in-place build (pip install -e) left beside the .py goes, so the .py runs rather than old code.

Each test builds a small package laid out as ours (the HOT_MODULES declaration setup.py reads)
with setup.py itself, in place, as `pip install -e` does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig

from tests.helpers.samples import ROOT

# (setup.py runs with the test's interpreter: Cython is a dev dependency for that, see pyproject.toml)

SUFFIX = sysconfig.get_config_var("EXT_SUFFIX")  # .cpython-311-x86_64-linux-gnu.so


def package(tmp_path, pxd: str = "cpdef int twice(int x)\n"):
    """A checkout with one hot module, `amqpcap/hot.py`, an extension of it from an earlier
    build, and an extension of a module that is not hot (someone else's: left alone)."""
    shutil.copy(ROOT / "setup.py", tmp_path / "setup.py")
    (tmp_path / "amqpcap").mkdir()
    (tmp_path / "amqpcap" / "__init__.py").write_text('HOT_MODULES = ("hot",)\n')
    (tmp_path / "amqpcap" / "hot.py").write_text("def twice(x):\n    return 2 * x\n")
    (tmp_path / "amqpcap" / "hot.pxd").write_text(pxd)
    stale = tmp_path / "amqpcap" / f"hot{SUFFIX}"
    stale.write_bytes(b"an extension built from an older hot.py")
    other = tmp_path / "amqpcap" / f"other{SUFFIX}"
    other.write_bytes(b"not a hot module's")
    return stale, other


def build(tmp_path, **env):
    return subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=tmp_path, capture_output=True,
                          text=True, env={**os.environ, **env}, timeout=300)


def test_a_module_cython_cannot_translate_leaves_no_old_extension(tmp_path):
    stale, other = package(tmp_path, pxd="cpdef int twice(int x\n")  # a syntax error
    result = build(tmp_path)
    assert result.returncode == 0, result.stderr
    assert "could not be translated by Cython" in result.stderr
    assert "removed 1 compiled module(s) an earlier build left" in result.stderr
    assert not stale.exists() and other.exists()


def test_a_module_the_compiler_fails_on_leaves_no_old_extension(tmp_path):
    stale, other = package(tmp_path)
    result = build(tmp_path, CC="false", LDSHARED="false")
    assert result.returncode == 0, result.stderr
    assert "amqpcap.hot could not be compiled" in result.stderr
    assert not stale.exists() and other.exists()


def test_compiling_switched_off_leaves_no_old_extension(tmp_path):
    stale, other = package(tmp_path)
    result = build(tmp_path, AMQPCAP_NO_COMPILE="1")
    assert result.returncode == 0, result.stderr
    assert "removed 1 compiled module(s)" in result.stderr
    assert not stale.exists() and other.exists()


def test_a_good_build_replaces_the_old_extension(tmp_path):
    stale, other = package(tmp_path)
    result = build(tmp_path)
    assert result.returncode == 0, result.stderr
    assert "removed" not in result.stderr
    check = subprocess.run([sys.executable, "-c", "import amqpcap.hot as h; print(h.__file__, h.twice(21))"],
                           cwd=tmp_path, capture_output=True, text=True)
    assert check.stdout.split() == [str(stale), "42"], check.stderr
