"""The atheris harnesses (atheris_codec.py, atheris_reader.py), run for a few seconds each with a
fixed libFuzzer seed (CI), or for their share of AMQPCAP_FUZZ_SECONDS. Run them by hand for longer:
`python tests/fuzz/atheris_codec.py -max_total_time=600`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fuzz import harness

HERE = Path(__file__).resolve().parent
CI_SECONDS = 5


def _atheris_missing() -> str | None:
    try:
        import atheris  # noqa: F401
    except ImportError:
        return ("atheris is not installed (pip install -e '.[dev]' installs it: it has wheels for "
                "CPython 3.11 on x86_64 Linux; elsewhere it needs clang and libFuzzer to build)")
    return None


@pytest.mark.slow
@pytest.mark.skipif(_atheris_missing() is not None, reason=_atheris_missing() or "")
@pytest.mark.parametrize("harness_name", ["atheris_codec.py", "atheris_reader.py"])
def test_atheris(harness_name, tmp_path):
    seconds = CI_SECONDS if harness.SECONDS is None else max(CI_SECONDS, int(harness.SECONDS * 0.075))
    command = [sys.executable, str(HERE / harness_name), f"-max_total_time={seconds}",
               f"-timeout={int(harness.EXAMPLE_SECONDS)}", "-rss_limit_mb=2048",
               f"-artifact_prefix={tmp_path}/", "-print_final_stats=1"]
    if harness.SECONDS is None:
        command.append("-seed=1")
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True,
                            timeout=seconds + 120, env={**os.environ, "PYTHONHASHSEED": "0", "TMPDIR": str(tmp_path)})
    artifacts = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(("crash-", "timeout-", "oom-", "leak-")))
    if result.returncode != 0 or artifacts:
        saved = []
        for name in artifacts:
            data = (tmp_path / name).read_bytes()
            saved.append(str(harness.save(f"atheris-{harness_name.removesuffix('.py')}", data)))
        pytest.fail(f"{harness_name} failed (exit {result.returncode}); inputs saved at {saved}; replay with "
                    f"`python tests/fuzz/{harness_name} <input>`\n{result.stderr[-4000:]}")
    assert "Done" in result.stderr, result.stderr[-2000:]
